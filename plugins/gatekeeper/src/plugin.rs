//! The component glue: settings and manifests from the host, files through
//! the host's `source` interface, findings back.

use kiln_plugin_sdk::source::{self, EntryKind};
use kiln_plugin_sdk::{Finding, ObjectRef, Param, Policy, ReviewRequest, Severity};

use crate::files::Files;
use crate::review::{self, Manifest};
use crate::settings::Settings;

struct Gatekeeper;

/// The Application's source tree, through the host.
struct SourceTree;

impl Files for SourceTree {
    fn read(&self, path: &str) -> Result<String, String> {
        source::read_to_string(path).map_err(|e| source::describe(&e))
    }

    fn list(&self, path: &str) -> Result<Option<Vec<String>>, String> {
        match source::stat(path).map_err(|e| source::describe(&e))? {
            None => Err(format!("{path}: no such file or directory")),
            Some(meta) if meta.kind == EntryKind::File => Ok(None),
            Some(_) => Ok(Some(
                source::read_dir(path)
                    .map_err(|e| source::describe(&e))?
                    .into_iter()
                    .filter(|e| e.kind == EntryKind::File)
                    .map(|e| e.name)
                    .collect(),
            )),
        }
    }
}

fn settings(params: &[Param]) -> Result<Settings, String> {
    Settings::parse(params.iter().map(|p| (p.key.as_str(), p.value.as_str())))
        .map_err(|e| e.to_string())
}

impl Policy for Gatekeeper {
    fn validate_settings(params: Vec<Param>) -> Result<(), String> {
        settings(&params).map(|_| ())
    }

    fn review(request: ReviewRequest) -> Result<Vec<Finding>, String> {
        let settings = settings(&request.settings)?;
        let policy = crate::Policy::load(&settings, &SourceTree, &request.context.path)
            .map_err(|e| e.to_string())?;
        let manifests: Vec<Manifest<'_>> = request
            .manifests
            .iter()
            .map(|m| Manifest {
                content: &m.content,
                source: m.source.as_deref(),
            })
            .collect();
        let findings = review::review(&policy, &manifests).map_err(|e| e.to_string())?;
        Ok(findings
            .into_iter()
            .map(|f| Finding {
                object: f.object.map(|o| ObjectRef {
                    api_version: o.api_version,
                    kind: o.kind,
                    namespace: o.namespace,
                    name: o.name,
                }),
                field_path: None,
                message: f.message,
                severity: match f.severity {
                    review::Severity::Info => Severity::Info,
                    review::Severity::Warning => Severity::Warning,
                    review::Severity::Error => Severity::Error,
                },
            })
            .collect())
    }
}

kiln_plugin_sdk::export_policy!(Gatekeeper);
