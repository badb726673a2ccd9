//! The component glue: settings and manifests from the host, files through
//! the `source` interface, findings back.

use kiln_plugin_sdk::source;
use kiln_plugin_sdk::{Finding, ObjectRef, Param, Policy, ReviewRequest, Severity};

use crate::documents;
use crate::engine::{self, Document, PolicySet};
use crate::settings::Settings;

struct Vap;

fn settings(params: &[Param]) -> Result<Settings, String> {
    Settings::parse(params.iter().map(|p| (p.key.as_str(), p.value.as_str())))
        .map_err(|e| e.to_string())
}

/// Reads the documents of a file, or of every manifest file under a directory.
fn load(setting: &str, path: &str) -> Result<Vec<Document>, String> {
    let describe =
        |e: &source::SourceError| format!("setting `{setting}`: {path}: {}", source::describe(e));
    let Some(files) = source::manifest_files(path).map_err(|e| describe(&e))? else {
        return Err(format!(
            "setting `{setting}`: {path}: no such file or directory"
        ));
    };
    let mut out = Vec::new();
    for file in files {
        let text = source::read_to_string(&file).map_err(|e| describe(&e))?;
        out.extend(documents::parse(&file, &text).map_err(|e| e.to_string())?);
    }
    Ok(out)
}

fn load_all(setting: &str, paths: &[String]) -> Result<Vec<Document>, String> {
    let mut out = Vec::new();
    for path in paths {
        out.extend(load(setting, path)?);
    }
    Ok(out)
}

impl Policy for Vap {
    fn validate_settings(params: Vec<Param>) -> Result<(), String> {
        settings(&params).map(|_| ())
    }

    fn review(request: ReviewRequest) -> Result<Vec<Finding>, String> {
        let settings = settings(&request.settings)?;
        let set = PolicySet::compile(
            kiln_cel_k8s::Environment::default(),
            load_all("policy", &settings.policies)?,
            load_all("binding", &settings.bindings)?,
            load_all("params", &settings.params)?,
        )
        .map_err(|e| e.to_string())?;
        let objects = request
            .manifests
            .iter()
            .map(|m| {
                serde_json::from_str::<serde_json::Value>(&m.content)
                    .map_err(|e| format!("{}: {e}", m.source.as_deref().unwrap_or("manifest")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(set
            .review(&objects)
            .into_iter()
            .map(|f| Finding {
                object: Some(ObjectRef {
                    api_version: f.api_version,
                    kind: f.kind,
                    namespace: f.namespace,
                    name: f.name,
                }),
                field_path: None,
                message: f.message,
                severity: match f.severity {
                    engine::Severity::Info => Severity::Info,
                    engine::Severity::Warning => Severity::Warning,
                    engine::Severity::Error => Severity::Error,
                },
            })
            .collect())
    }
}

kiln_plugin_sdk::export_policy!(Vap);
