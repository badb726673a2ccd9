//! The component glue: settings and manifests from the host, policy files
//! through the `source` interface, findings back.

use kiln_plugin_sdk::source;
use kiln_plugin_sdk::{Finding, ObjectRef, Param, Policy, ReviewRequest, Severity};
use serde_json::{Map, Value};

use crate::engine::{self, Status};
use crate::matching::Request;
use crate::model;

struct Kyverno;

/// The `policy` settings: files or directories of Kyverno policies.
fn policy_paths(params: &[Param]) -> Result<Vec<String>, String> {
    let mut paths = Vec::new();
    for param in params {
        match param.key.as_str() {
            "policy" if !param.value.is_empty() => paths.push(param.value.clone()),
            "policy" => {
                return Err(
                    "setting `policy` is empty: name a file or directory of Kyverno policies"
                        .into(),
                );
            }
            other => {
                return Err(format!(
                    "unknown setting `{other}` (known: policy, a file or directory of Kyverno ClusterPolicies and Policies)"
                ));
            }
        }
    }
    if paths.is_empty() {
        return Err("setting `policy` is required: a file or directory of Kyverno ClusterPolicies and Policies".into());
    }
    Ok(paths)
}

fn load(path: &str) -> Result<Vec<model::Policy>, String> {
    let describe =
        |e: &source::SourceError| format!("setting `policy`: {path}: {}", source::describe(e));
    let Some(files) = source::manifest_files(path).map_err(|e| describe(&e))? else {
        return Err(format!(
            "setting `policy`: {path}: no such file or directory"
        ));
    };
    let mut out = Vec::new();
    for file in files {
        let text = source::read_to_string(&file).map_err(|e| describe(&e))?;
        out.extend(model::policies(&file, &text)?);
    }
    if out.is_empty() {
        // A typo in `kind`, or a policy kind not run yet: never a review
        // that checks nothing and passes.
        return Err(format!(
            "setting `policy`: {path}: no kyverno.io ClusterPolicy or Policy found (ValidatingPolicy is not supported yet)"
        ));
    }
    Ok(out)
}

impl Policy for Kyverno {
    fn validate_settings(params: Vec<Param>) -> Result<(), String> {
        policy_paths(&params).map(|_| ())
    }

    fn review(request: ReviewRequest) -> Result<Vec<Finding>, String> {
        let mut policies = Vec::new();
        for path in policy_paths(&request.settings)? {
            policies.extend(load(&path)?.into_iter().map(engine::prepare));
        }
        let objects = request
            .manifests
            .iter()
            .map(|m| {
                serde_json::from_str::<Value>(&m.content)
                    .map_err(|e| format!("{}: {e}", m.source.as_deref().unwrap_or("manifest")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        // Namespace labels from the rendered set's Namespaces.
        let namespaces: Map<String, Value> = objects
            .iter()
            .filter(|o| o["kind"] == "Namespace")
            .filter_map(|o| {
                Some((
                    o["metadata"]["name"].as_str()?.to_owned(),
                    o["metadata"]["labels"].clone(),
                ))
            })
            .collect();
        // A namespace in the set without labels has none; one outside it is
        // unknown (a namespaceSelector on it is an error).
        let labels = |name: &str| {
            namespaces
                .get(name)
                .map(|labels| labels.as_object().cloned().unwrap_or_default())
        };
        let review = Request {
            operation: "CREATE",
            namespace_labels: &labels,
        };
        let mut findings = Vec::new();
        for policy in &policies {
            for object in &objects {
                for result in engine::evaluate(policy, object, &review) {
                    let severity = match result.status {
                        Status::Pass | Status::Skip => continue,
                        Status::Error => {
                            return Err(format!(
                                "{} {} rule {} on {} {}/{}: {}",
                                policy.policy.kind,
                                policy.policy.metadata.name,
                                result.rule,
                                object["kind"].as_str().unwrap_or("?"),
                                object["metadata"]["namespace"].as_str().unwrap_or(""),
                                object["metadata"]["name"].as_str().unwrap_or("?"),
                                result.message
                            ));
                        }
                        Status::Fail if result.enforce => Severity::Error,
                        Status::Fail => Severity::Warning,
                    };
                    findings.push(Finding {
                        object: Some(ObjectRef {
                            api_version: object["apiVersion"].as_str().unwrap_or("").to_owned(),
                            kind: object["kind"].as_str().unwrap_or("").to_owned(),
                            namespace: object["metadata"]["namespace"].as_str().map(str::to_owned),
                            name: object["metadata"]["name"].as_str().unwrap_or("").to_owned(),
                        }),
                        field_path: None,
                        message: format!(
                            "[{}/{}] {}",
                            policy.policy.metadata.name, result.rule, result.message
                        ),
                        severity,
                    });
                }
            }
        }
        Ok(findings)
    }
}

kiln_plugin_sdk::export_policy!(Kyverno);
