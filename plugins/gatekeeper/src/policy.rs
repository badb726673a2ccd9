//! Loads what the settings name: templates (compiled), constraints (each
//! tied to the template of its kind) and inventory objects.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::constraint::{Constraint, ConstraintError};
use crate::files::{self, Files};
use crate::settings::Settings;
use crate::template::{Template, TemplateError};
use crate::yaml::{self, YamlError};

/// The API group of ConstraintTemplates.
pub const TEMPLATES_GROUP: &str = "templates.gatekeeper.sh";

/// Why the policy's files cannot be used. Every variant names the file
/// (and the line where it is known).
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadError {
    /// A file or directory could not be read.
    #[error("{0}")]
    Read(String),
    /// A file is not valid YAML.
    #[error(transparent)]
    Yaml(#[from] YamlError),
    /// A template is wrong (its Rego does not parse, ...).
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// A constraint is wrong.
    #[error(transparent)]
    Constraint(#[from] ConstraintError),
    /// A document of a template file is not a ConstraintTemplate.
    #[error(
        "{file}:{line}: `{kind}` is not a ConstraintTemplate ({TEMPLATES_GROUP}); template files hold only ConstraintTemplates"
    )]
    NotATemplate {
        /// The file.
        file: String,
        /// 1-based line of the document.
        line: usize,
        /// Its apiVersion and kind.
        kind: String,
    },
    /// Two templates define the same constraint kind.
    #[error(
        "{file}: ConstraintTemplate `{name}` defines kind `{kind}`, already defined by {first}"
    )]
    DuplicateKind {
        /// The second template's file.
        file: String,
        /// The second template.
        name: String,
        /// The kind.
        kind: String,
        /// File of the first.
        first: String,
    },
    /// A constraint whose kind no template defines.
    #[error(
        "{file}:{line}: constraint `{name}` is of kind `{kind}`, which no template defines (templates define: {known})"
    )]
    NoTemplate {
        /// The constraint's file.
        file: String,
        /// 1-based line.
        line: usize,
        /// The constraint.
        name: String,
        /// Its kind.
        kind: String,
        /// The kinds the templates define.
        known: String,
    },
}

/// Everything the settings name, loaded.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Templates, in the order of their files.
    pub templates: Vec<Template>,
    /// Constraints, with the index of their template.
    pub constraints: Vec<(Constraint, usize)>,
    /// Objects of the inventory files (added to the rendered set in
    /// `data.inventory`).
    pub inventory: Vec<Value>,
}

/// Every document of the files `paths` names (relative to `base`).
fn documents(
    files: &dyn Files,
    base: &str,
    paths: &[String],
) -> Result<Vec<(String, String, Vec<yaml::Document>)>, LoadError> {
    let mut out = Vec::new();
    for path in paths {
        for file in files::expand(files, &files::join(base, path)).map_err(LoadError::Read)? {
            let text = files.read(&file).map_err(LoadError::Read)?;
            let docs = yaml::documents(&text, &file)?;
            out.push((file, text, docs));
        }
    }
    Ok(out)
}

impl Policy {
    /// Loads the files of `settings`; paths are relative to `base` (the
    /// Application's path).
    pub fn load(settings: &Settings, files: &dyn Files, base: &str) -> Result<Policy, LoadError> {
        let mut templates: Vec<Template> = Vec::new();
        let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
        for (file, text, docs) in documents(files, base, &settings.templates)? {
            for doc in docs {
                let api_version = doc
                    .value
                    .get("apiVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let kind = doc.value.get("kind").and_then(Value::as_str).unwrap_or("");
                if kind != "ConstraintTemplate"
                    || api_version.split('/').next() != Some(TEMPLATES_GROUP)
                {
                    return Err(LoadError::NotATemplate {
                        file,
                        line: doc.line,
                        kind: format!("{api_version} {kind}"),
                    });
                }
                let template = Template::compile(&doc, &file, &text, settings.engine)?;
                if let Some(&first) = by_kind.get(&template.kind) {
                    return Err(LoadError::DuplicateKind {
                        file,
                        name: template.name,
                        kind: template.kind,
                        first: templates[first].file.clone(),
                    });
                }
                by_kind.insert(template.kind.clone(), templates.len());
                templates.push(template);
            }
        }
        let mut constraints = Vec::new();
        for (file, _, docs) in documents(files, base, &settings.constraints)? {
            for doc in docs {
                let constraint = Constraint::parse(&doc, &file)?;
                let Some(&index) = by_kind.get(&constraint.kind) else {
                    return Err(LoadError::NoTemplate {
                        file,
                        line: doc.line,
                        name: constraint.name,
                        kind: constraint.kind,
                        known: by_kind.keys().cloned().collect::<Vec<_>>().join(", "),
                    });
                };
                constraints.push((constraint, index));
            }
        }
        let mut inventory = Vec::new();
        for (_, _, docs) in documents(files, base, &settings.inventory)? {
            for doc in docs {
                match doc.value {
                    Value::Object(ref o)
                        if o.get("kind").and_then(Value::as_str) == Some("List") =>
                    {
                        inventory.extend(
                            o.get("items")
                                .and_then(Value::as_array)
                                .cloned()
                                .unwrap_or_default(),
                        );
                    }
                    value => inventory.push(value),
                }
            }
        }
        Ok(Policy {
            templates,
            constraints,
            inventory,
        })
    }
}
