//! The component glue: reads the source tree through the host and calls the
//! engine.

use kiln_plugin_sdk::{AppContext, Manifest, Param, Params, RenderError, Renderer, source, yaml};
use serde_yaml::Value;

use crate::engine::{self, Failure, Scope, Template};

const TEMPLATE_EXTENSIONS: &[&str] = &[".yaml", ".yml", ".json"];
const DEFAULT_VALUES_FILE: &str = "values.yaml";

struct Values;

impl Renderer for Values {
    fn render(
        ctx: AppContext,
        params: Vec<Param>,
        input: Vec<Manifest>,
    ) -> Result<Vec<Manifest>, RenderError> {
        let params = Params(&params);

        // Values files: explicit ones must exist; the default one may not.
        let explicit: Vec<String> = params.get_all("values-file").map(|f| ctx.join(f)).collect();
        let values_files = if explicit.is_empty() {
            let default = ctx.join(DEFAULT_VALUES_FILE);
            match source::stat(&default)? {
                Some(_) => vec![default],
                None => Vec::new(),
            }
        } else {
            explicit
        };

        let mut values = Value::Mapping(Default::default());
        for file in &values_files {
            let text = source::read_to_string(file)?;
            for doc in engine::parse_documents(file, &text).map_err(failure)? {
                engine::merge(&mut values, doc);
            }
        }
        for (key, value) in params.iter().filter(|(k, _)| *k != "values-file") {
            engine::set_path(&mut values, key, value).map_err(RenderError::InvalidParameters)?;
        }

        let mut templates: Vec<Template> = input
            .into_iter()
            .enumerate()
            .map(|(i, m)| Template {
                source: m.source.unwrap_or_else(|| format!("input #{i}")),
                text: m.content,
            })
            .collect();
        for file in source::files(&ctx.path, TEMPLATE_EXTENSIONS, true)? {
            if values_files.contains(&file) {
                continue;
            }
            let text = source::read_to_string(&file)?;
            templates.push(Template { source: file, text });
        }
        kiln_plugin_sdk::log::debug(&format!("rendering {} template files", templates.len()));

        let scope = Scope::new(
            values,
            &[
                ("Name", &ctx.name),
                ("Namespace", &ctx.namespace),
                ("Project", &ctx.project),
                ("RepoURL", &ctx.repo_url),
                ("Revision", &ctx.revision),
                ("Path", &ctx.path),
            ],
        );
        let docs = engine::render(&scope, &templates).map_err(failure)?;
        Ok(docs
            .into_iter()
            .map(|(source, doc)| yaml::to_manifest(&doc, Some(source)))
            .collect())
    }
}

fn failure(f: Failure) -> RenderError {
    RenderError::input(f.file, f.line, f.message)
}

kiln_plugin_sdk::export_renderer!(Values);
