//! A whole review: every policy of a source (ClusterPolicies, Policies and
//! ValidatingPolicies, with their exceptions) on every object of a rendered
//! set, each rule's result as `kyverno apply` reports it. Plain Rust: the
//! component's glue maps it onto the contract, and the benchmark runs the
//! same code natively.

use std::collections::BTreeMap;

use kiln_vap::matching::SetKinds;
use serde_json::{Map, Value};

use crate::engine::{self, Status};
use crate::matching::Request;
use crate::model::PolicySet;

/// One rule's result on one object of the set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The policy, as its author named it.
    pub policy: String,
    /// The rule (empty for a ValidatingPolicy).
    pub rule: String,
    /// The object's index in the set.
    pub object: usize,
    /// How the rule ended.
    pub status: Status,
    /// Whether a failure blocks (Enforce, Deny).
    pub enforce: bool,
    /// Why, for a person.
    pub message: String,
}

/// Reviews `objects` (the rendered set, as the host placed them) with every
/// policy of `set`. The namespaces the set renders give their labels to
/// namespace selectors; a namespace outside it is unknown.
pub fn review(set: &PolicySet, objects: &[Value]) -> Vec<Outcome> {
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
    // The rendered set's ConfigMaps, for `configMap` context entries.
    let config_maps: BTreeMap<(&str, &str), &Value> = objects
        .iter()
        .filter(|o| o["kind"] == "ConfigMap" && o["apiVersion"] == "v1")
        .filter_map(|o| {
            let namespace = o["metadata"]["namespace"].as_str().unwrap_or("default");
            Some(((namespace, o["metadata"]["name"].as_str()?), o))
        })
        .collect();
    let config_map =
        |namespace: &str, name: &str| config_maps.get(&(namespace, name)).map(|o| (*o).clone());
    let request = Request {
        operation: "CREATE",
        namespace_labels: &labels,
        config_maps: &config_map,
    };
    let mut out = Vec::new();
    if !set.validating.is_empty() {
        let kinds = SetKinds::of(objects);
        let namespace_labels: BTreeMap<String, BTreeMap<String, String>> = namespaces
            .iter()
            .map(|(name, labels)| (name.clone(), string_labels(labels)))
            .collect();
        for policy in &set.validating {
            for (index, object) in objects.iter().enumerate() {
                if let Some(result) = policy.evaluate(
                    object,
                    &namespace_labels,
                    &kinds,
                    request.operation,
                    &set.cel_exceptions,
                ) {
                    out.push(Outcome {
                        policy: policy.name.clone(),
                        rule: result.rule,
                        object: index,
                        status: result.status,
                        enforce: result.enforce,
                        message: result.message,
                    });
                }
            }
        }
    }
    for policy in &set.prepared() {
        for (index, object) in objects.iter().enumerate() {
            for result in engine::evaluate(policy, object, &request) {
                out.push(Outcome {
                    policy: policy.policy.metadata.name.clone(),
                    rule: result.rule,
                    object: index,
                    status: result.status,
                    enforce: result.enforce,
                    message: result.message,
                });
            }
        }
    }
    out
}

/// A Namespace's `metadata.labels` as strings (others ignored).
fn string_labels(labels: &Value) -> BTreeMap<String, String> {
    labels
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect()
}
