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

/// What a review may read of the destination cluster (the host's
/// `cluster` interface in the component; nothing natively and in tests).
pub trait Destination {
    /// The Namespace `name`: `Ok(None)` when the destination has none, an
    /// error when that is unknown (no cluster, not read yet).
    fn namespace(&self, name: &str) -> Result<Option<Value>, String>;
    /// The ConfigMap `namespace/name`, as [`Destination::namespace`].
    fn config_map(&self, namespace: &str, name: &str) -> Result<Option<Value>, String>;
    /// Whether `object` exists on the destination (no cluster: no); an
    /// error when that cannot be told.
    fn exists(&self, object: &Value) -> Result<bool, String>;
}

/// No destination: a local review, a test suite (as `kyverno test`, which
/// sees no cluster).
pub struct NoCluster;

impl Destination for NoCluster {
    fn namespace(&self, _: &str) -> Result<Option<Value>, String> {
        Err("it is not in the rendered set (there is no cluster)".into())
    }
    fn config_map(&self, _: &str, _: &str) -> Result<Option<Value>, String> {
        Err("not in the rendered set (there is no cluster)".into())
    }
    fn exists(&self, _: &Value) -> Result<bool, String> {
        Ok(false)
    }
}

/// Reviews `objects` (the rendered set, as the host placed them) with every
/// policy of `set`. The namespaces and ConfigMaps the set renders are read
/// first, then `destination`'s; an object `destination` holds is reviewed
/// as an `UPDATE`, others as a `CREATE`. An error when whether an object
/// exists cannot be told (its rules could not be matched).
pub fn review(
    set: &PolicySet,
    objects: &[Value],
    destination: &dyn Destination,
) -> Result<Vec<Outcome>, String> {
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
    // A namespace in the set without labels has none; one outside it has
    // the destination's (none when it has no such namespace: it would be
    // created without them).
    let labels = |name: &str| match namespaces.get(name) {
        Some(labels) => Ok(labels.as_object().cloned().unwrap_or_default()),
        None => destination.namespace(name).map(|namespace| {
            namespace
                .and_then(|n| n["metadata"]["labels"].as_object().cloned())
                .unwrap_or_default()
        }),
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
    let config_map = |namespace: &str, name: &str| match config_maps.get(&(namespace, name)) {
        Some(found) => Ok((*found).clone()),
        None => destination
            .config_map(namespace, name)?
            .ok_or_else(|| "neither the rendered set nor the destination has it".to_owned()),
    };
    let operations = objects
        .iter()
        .map(|o| match destination.exists(o) {
            Ok(true) => Ok("UPDATE"),
            Ok(false) => Ok("CREATE"),
            Err(why) => Err(format!(
                "cannot tell whether {} {} exists on the destination: {why}",
                o["kind"].as_str().unwrap_or("object"),
                o["metadata"]["name"].as_str().unwrap_or_default()
            )),
        })
        .collect::<Result<Vec<&str>, String>>()?;
    let request = |index: usize| Request {
        operation: operations[index],
        namespace_labels: &labels,
        config_maps: &config_map,
    };
    let mut out = Vec::new();
    if !set.validating.is_empty() {
        let kinds = SetKinds::of(objects);
        // The labels of every namespace the set's objects are in (those a
        // namespace nobody knows are left out: a selector on it fails).
        let namespace_labels: BTreeMap<String, BTreeMap<String, String>> = objects
            .iter()
            .filter_map(|o| o["metadata"]["namespace"].as_str())
            .chain(namespaces.keys().map(String::as_str))
            .collect::<std::collections::BTreeSet<&str>>()
            .into_iter()
            .filter_map(|name| {
                let labels = labels(name).ok()?;
                Some((name.to_owned(), string_labels(&Value::Object(labels))))
            })
            .collect();
        for policy in &set.validating {
            for (index, object) in objects.iter().enumerate() {
                if let Some(result) = policy.evaluate(
                    object,
                    &namespace_labels,
                    &kinds,
                    operations[index],
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
            for result in engine::evaluate(policy, object, &request(index)) {
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
    Ok(out)
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model;

    /// A destination holding one labelled namespace, one ConfigMap and
    /// one existing Pod.
    struct Fake;

    impl Destination for Fake {
        fn namespace(&self, name: &str) -> Result<Option<Value>, String> {
            match name {
                "shop" => Ok(Some(
                    json!({"metadata": {"name": "shop", "labels": {"tier": "critical"}}}),
                )),
                "pending" => Err("not read yet".into()),
                _ => Ok(None),
            }
        }
        fn config_map(&self, namespace: &str, name: &str) -> Result<Option<Value>, String> {
            Ok((namespace == "kyverno" && name == "registries")
                .then(|| json!({"metadata": {"name": name}, "data": {"allowed": "ghcr.io"}})))
        }
        fn exists(&self, object: &Value) -> Result<bool, String> {
            match object["metadata"]["name"].as_str() {
                Some("unreadable") => Err("it could not be read".into()),
                name => Ok(name == Some("old")),
            }
        }
    }

    const POLICIES: &str = "
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  validationFailureAction: Enforce
  rules:
  - name: critical-namespaces
    match: {any: [{resources: {kinds: [Pod], namespaceSelector: {matchLabels: {tier: critical}}}}]}
    validate:
      message: no latest
      pattern: {spec: {containers: [{image: '!*:latest'}]}}
  - name: registries
    match: {any: [{resources: {kinds: [Pod]}}]}
    context:
    - name: registries
      configMap: {name: registries, namespace: kyverno}
    validate:
      deny: {conditions: {any: [{key: '{{ images.containers.*.registry }}', operator: AnyNotIn, value: '{{ registries.data.allowed }}'}]}}
  - name: creations
    match: {any: [{resources: {kinds: [Pod], operations: [CREATE]}}]}
    validate:
      message: created
      pattern: {metadata: {name: 'old'}}
";

    fn pod(namespace: &str, name: &str, image: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": image}]}})
    }

    fn statuses(objects: &[Value], destination: &dyn Destination) -> Vec<(String, usize, Status)> {
        let set = PolicySet::of(model::documents("p.yaml", POLICIES).unwrap());
        review(&set, objects, destination)
            .unwrap()
            .into_iter()
            .map(|o| (o.rule, o.object, o.status))
            .collect()
    }

    #[test]
    fn the_destination_gives_namespace_labels_config_maps_and_updates() {
        let objects = [
            pod("shop", "new", "ghcr.io/app:latest"),
            pod("other", "old", "docker.io/app:1"),
        ];
        let found = statuses(&objects, &Fake);
        let of = |rule: &str, object: usize| {
            found
                .iter()
                .find(|(r, o, _)| r == rule && *o == object)
                .map(|(_, _, s)| *s)
        };
        // The namespace's labels come from the destination.
        assert_eq!(of("critical-namespaces", 0), Some(Status::Fail));
        // A namespace the destination lacks has no labels.
        assert!(matches!(
            of("critical-namespaces", 1),
            None | Some(Status::Skip)
        ));
        // The ConfigMap too.
        assert_eq!(of("registries", 0), Some(Status::Pass));
        assert_eq!(of("registries", 1), Some(Status::Fail));
        // An object the destination holds is an update: a CREATE rule
        // skips it.
        assert_eq!(of("creations", 0), Some(Status::Fail));
        assert!(matches!(of("creations", 1), None | Some(Status::Skip)));
    }

    #[test]
    fn without_a_cluster_or_an_answer_a_lookup_fails_closed_naming_why() {
        let set = PolicySet::of(model::documents("p.yaml", POLICIES).unwrap());
        for (destination, namespace, why) in [
            (
                &NoCluster as &dyn Destination,
                "shop",
                "there is no cluster",
            ),
            (&Fake as &dyn Destination, "pending", "not read yet"),
        ] {
            let outcomes =
                review(&set, &[pod(namespace, "new", "ghcr.io/a:1")], destination).unwrap();
            let selector = outcomes
                .iter()
                .find(|o| o.rule == "critical-namespaces")
                .unwrap();
            assert_eq!(selector.status, Status::Error, "{}", selector.message);
            assert!(selector.message.contains(why), "{}", selector.message);
        }
        // Whether an object exists, unknown: the review fails closed.
        let error = review(&set, &[pod("shop", "unreadable", "ghcr.io/a:1")], &Fake).unwrap_err();
        assert!(
            error.contains(
                "cannot tell whether Pod unreadable exists on the destination: it could not be read"
            ),
            "{error}"
        );
    }
}
