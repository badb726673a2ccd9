//! The component glue: settings and manifests from the host, findings back.

use kiln_plugin_sdk::{Finding, ObjectRef, Param, Policy, ReviewRequest, Severity};

use crate::review::{self, Manifest};
use crate::settings::Settings;

struct PodSecurity;

fn settings(params: &[Param]) -> Result<Settings, String> {
    Settings::parse(params.iter().map(|p| (p.key.as_str(), p.value.as_str())))
        .map_err(|e| e.to_string())
}

impl Policy for PodSecurity {
    fn validate_settings(params: Vec<Param>) -> Result<(), String> {
        settings(&params).map(|_| ())
    }

    fn review(request: ReviewRequest) -> Result<Vec<Finding>, String> {
        let settings = settings(&request.settings)?;
        let manifests: Vec<Manifest<'_>> = request
            .manifests
            .iter()
            .map(|m| Manifest {
                content: &m.content,
                source: m.source.as_deref(),
            })
            .collect();
        let findings = review::review(&settings, &request.context.namespace, &manifests)
            .map_err(|e| e.to_string())?;
        Ok(findings
            .into_iter()
            .map(|f| Finding {
                object: Some(ObjectRef {
                    api_version: f.object.api_version,
                    kind: f.object.kind,
                    namespace: f.object.namespace,
                    name: f.object.name,
                }),
                field_path: f.field_path,
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

kiln_plugin_sdk::export_policy!(PodSecurity);
