//! The component glue: settings and manifests from the host, policy files
//! through the `source` interface, findings back.

use kiln_plugin_sdk::source;
use kiln_plugin_sdk::{Outcome, Param, ReviewRequest, RulePolicy, RuleResult};
use std::collections::BTreeMap;

use kiln_vap::matching::SetKinds;
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

fn load(path: &str) -> Result<Vec<model::Document>, String> {
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
        out.extend(model::documents(&file, &text)?);
    }
    if out.is_empty() {
        // A typo in `kind`, or a policy kind not run yet: never a review
        // that checks nothing and passes.
        return Err(format!(
            "setting `policy`: {path}: no Kyverno policy found (kyverno.io ClusterPolicy or Policy, policies.kyverno.io ValidatingPolicy)"
        ));
    }
    Ok(out)
}

impl RulePolicy for Kyverno {
    fn validate_settings(params: Vec<Param>) -> Result<(), String> {
        policy_paths(&params).map(|_| ())
    }

    fn review_rules(request: ReviewRequest) -> Result<Vec<RuleResult>, String> {
        let mut documents = Vec::new();
        for path in policy_paths(&request.settings)? {
            documents.extend(load(&path)?);
        }
        let set = model::PolicySet::of(documents);
        let policies = set.prepared();
        let (validating, cel_exceptions) = (set.validating, set.cel_exceptions);
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
        let mut results = Vec::new();
        let outcome = |status, enforce| match status {
            Status::Pass => Outcome::Pass,
            Status::Skip => Outcome::Skip,
            Status::Error => Outcome::Error,
            Status::Fail if enforce => Outcome::Fail,
            Status::Fail => Outcome::Warn,
        };
        if !validating.is_empty() {
            let kinds = SetKinds::of(&objects);
            let namespace_labels: BTreeMap<String, BTreeMap<String, String>> = namespaces
                .iter()
                .map(|(name, labels)| (name.clone(), labels_of(labels)))
                .collect();
            for policy in &validating {
                for (index, object) in objects.iter().enumerate() {
                    let Some(result) = policy.evaluate(
                        object,
                        &namespace_labels,
                        &kinds,
                        review.operation,
                        &cel_exceptions,
                    ) else {
                        continue;
                    };
                    results.push(RuleResult {
                        policy: policy.name.clone(),
                        rule: result.rule,
                        manifest: u32::try_from(index).ok(),
                        field_path: None,
                        outcome: outcome(result.status, result.enforce),
                        message: result.message,
                    });
                }
            }
        }
        for policy in &policies {
            for (index, object) in objects.iter().enumerate() {
                for result in engine::evaluate(policy, object, &review) {
                    results.push(RuleResult {
                        policy: policy.policy.metadata.name.clone(),
                        rule: result.rule,
                        manifest: u32::try_from(index).ok(),
                        field_path: None,
                        outcome: outcome(result.status, result.enforce),
                        message: result.message,
                    });
                }
            }
        }
        Ok(results)
    }
}

kiln_plugin_sdk::export_rule_policy!(Kyverno);

/// A Namespace's `metadata.labels` as strings (others ignored).
fn labels_of(labels: &Value) -> BTreeMap<String, String> {
    labels
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect()
}
