//! Normalization: what both sides go through before they are compared, so
//! that only real drift remains.

use serde_json::{Map, Value};

/// Metadata the API server writes; never part of what Git declares.
const SERVER_METADATA: [&str; 9] = [
    "managedFields",
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generateName",
];

/// Annotations tools write on live objects.
const TOOL_ANNOTATIONS: [&str; 2] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    "deployment.kubernetes.io/revision",
];

/// Drops `status`, server-populated metadata and tool annotations, the
/// empty metadata maps the API server never returns and explicit `null`s
/// ([`drop_nulls`]); writes the resource quantities of built-in kinds in
/// canonical form ([`canonical_quantities`]).
pub fn normalize(object: &Value) -> Value {
    let mut out = object.clone();
    drop_nulls(&mut out);
    if is_builtin(object) {
        canonical_quantities(&mut out, None);
    }
    let Some(map) = out.as_object_mut() else {
        return out;
    };
    map.remove("status");
    if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
        for field in SERVER_METADATA {
            metadata.remove(field);
        }
        if let Some(Value::Object(annotations)) = metadata.get_mut("annotations") {
            for annotation in TOOL_ANNOTATIONS {
                annotations.remove(annotation);
            }
        }
        metadata.retain(|_, value| !is_empty(value));
    }
    out
}

/// Removes every field whose value is `null`.
///
/// The API server decodes a built-in object into its Go type before
/// storing it: a JSON `null` leaves a pointer, slice or map nil, and a nil
/// field with `omitempty` is not encoded again (apimachinery
/// `pkg/runtime/serializer/json`, through `sigs.k8s.io/json`; Go's
/// `encoding/json` "The JSON null value unmarshals into an interface, map,
/// pointer, or slice by setting that Go value to nil"). A custom resource's
/// `null`s are pruned unless its schema says `nullable: true`
/// (apiextensions-apiserver `pkg/apiserver/schema/pruning`, and the CRD
/// documentation on defaulting and nullable). So `httpHeaders: null` in Git
/// is the field left unset, never drift.
pub fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// True for the kinds of Kubernetes' own API groups (the core group, the
/// groups without a dot, and `*.k8s.io`), whose quantities the API server
/// stores canonically; custom resources are stored as given.
fn is_builtin(object: &Value) -> bool {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    // A CRD's schema names fields (`limits`) that are no quantities.
    let kind = object.get("kind").and_then(Value::as_str);
    match api_version.rsplit_once('/') {
        None => true,
        Some(("apiextensions.k8s.io", _)) => kind != Some("CustomResourceDefinition"),
        Some((group, _)) => !group.contains('.') || group.ends_with(".k8s.io"),
    }
}

/// Writes every resource quantity (`resources.limits.cpu`, `sizeLimit`, …)
/// in its canonical form, as the API server stores it: `cpu: 0.5` and
/// `cpu: 500m` are the same request (apimachinery
/// `pkg/api/resource/quantity.go`: `Quantity.UnmarshalJSON` parses, and
/// `MarshalJSON` prints `CanonicalizeBytes`). Values that are not valid
/// quantities are left alone (the server refuses them).
pub fn canonical_quantities(value: &mut Value, parent: Option<&str>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if kiln_quantity::held_at(parent, key) {
                    let text = match &*child {
                        Value::String(text) => Some(text.clone()),
                        Value::Number(number) => Some(number.to_string()),
                        _ => None,
                    };
                    // Resource lists are rounded up to milli units.
                    let resource_list = !kiln_quantity::single_quantity(parent, key);
                    let canonical = text.map(|t| {
                        if resource_list {
                            kiln_quantity::canonical_resource(&t)
                        } else {
                            kiln_quantity::canonical(&t)
                        }
                    });
                    if let Some(Ok(canonical)) = canonical {
                        *child = Value::String(canonical);
                    }
                } else {
                    canonical_quantities(child, Some(key));
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                canonical_quantities(item, None);
            }
        }
        _ => {}
    }
}

/// Removes from `desired` the fields set to a zero value (`""`, `0`,
/// `false`, `{}`, `[]`) that `live` does not have.
///
/// Go's `omitempty` drops a zero string, number, boolean, empty slice or
/// map when the API server encodes the object it stored, so `hostNetwork:
/// false` or `args: []` in Git reads back as no field at all; since `live`
/// is what the server made of `desired`, a zero value it left out is the
/// field unset, not drift. A zero value the server kept (a pointer field)
/// is still compared.
pub fn prune_unset(desired: &mut Value, live: &Value) {
    match (desired, live) {
        (Value::Object(desired), Value::Object(live)) => {
            desired.retain(|key, wanted| live.contains_key(key) || !is_zero(wanted));
            for (key, wanted) in desired.iter_mut() {
                if let Some(actual) = live.get(key) {
                    prune_unset(wanted, actual);
                }
            }
        }
        (Value::Array(desired), Value::Array(live)) => {
            if let Some(key) = item_key(desired, live) {
                for wanted in desired.iter_mut() {
                    if let Some(actual) = live
                        .iter()
                        .find(|actual| actual.get(key) == wanted.get(key))
                    {
                        prune_unset(wanted, actual);
                    }
                }
            } else if desired.len() == live.len() {
                for (wanted, actual) in desired.iter_mut().zip(live) {
                    prune_unset(wanted, actual);
                }
            }
        }
        _ => {}
    }
}

/// The field that identifies the items of a list on both sides, if any:
/// `mountPath` for volume mounts (one volume may be mounted at several
/// paths), else `name` (containers, env, volumes, ports), when every item
/// has it as a string and no two desired items share it.
fn item_key(desired: &[Value], live: &[Value]) -> Option<&'static str> {
    ["mountPath", "devicePath", "name"].into_iter().find(|key| {
        let keyed = |items: &[Value]| {
            items
                .iter()
                .all(|item| item.get(*key).is_some_and(Value::is_string))
        };
        let mut seen = std::collections::BTreeSet::new();
        keyed(desired)
            && keyed(live)
            && desired
                .iter()
                .all(|item| seen.insert(item.get(*key).and_then(Value::as_str)))
    })
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}

/// The live object seen through the shape of the desired one: only the
/// fields the desired object sets, so that defaults and fields other
/// writers added are not drift. Lists are compared item by item; items with
/// a `name` are matched by name, so the order the server keeps does not
/// matter.
pub fn project(live: &Value, desired: &Value) -> Value {
    match (live, desired) {
        (Value::Object(live), Value::Object(desired)) => {
            let mut out = Map::new();
            for (key, wanted) in desired {
                if let Some(actual) = live.get(key) {
                    out.insert(key.clone(), project(actual, wanted));
                }
            }
            Value::Object(out)
        }
        (Value::Array(live), Value::Array(desired)) => {
            if let Some(key) = item_key(desired, live) {
                let projected = desired
                    .iter()
                    .map(|wanted| {
                        live.iter()
                            .find(|actual| actual.get(key) == wanted.get(key))
                            .map_or(Value::Null, |actual| project(actual, wanted))
                    })
                    .collect();
                Value::Array(projected)
            } else if live.len() == desired.len() {
                Value::Array(
                    live.iter()
                        .zip(desired)
                        .map(|(a, w)| project(a, w))
                        .collect(),
                )
            } else {
                Value::Array(live.clone())
            }
        }
        // `"80"` in Git and `80` live are the same value: the server converted it.
        (Value::Number(a), Value::String(w)) if a.to_string() == *w => Value::String(w.clone()),
        (live, _) => live.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn normalization_drops_what_the_server_writes() {
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "uid": "u", "resourceVersion": "5", "managedFields": [], "labels": {},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "data": {"a": "1"}, "status": {"x": 1}});
        assert_eq!(
            normalize(&live),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}})
        );
    }

    #[test]
    fn projection_ignores_defaults_and_reorders_named_items() {
        let live = json!({"spec": {"replicas": 1, "strategy": {"type": "RollingUpdate"}, "template": {"spec": {"containers": [
            {"name": "b", "image": "b", "imagePullPolicy": "Always"}, {"name": "a", "image": "a"}]}}}});
        let desired = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "a"}, {"name": "b", "image": "b"}]}}}});
        assert_eq!(project(&live, &desired), desired);
        let missing = json!({"spec": {"paused": true}});
        assert_eq!(project(&live, &missing), json!({"spec": {}}));
    }

    #[test]
    fn volume_mounts_match_by_path_when_a_volume_is_mounted_twice() {
        // bitnami/postgresql mounts `empty-dir` at three paths.
        let mounts = json!([{"name": "empty-dir", "mountPath": "/tmp", "subPath": "tmp-dir"},
            {"name": "empty-dir", "mountPath": "/opt/conf", "subPath": "conf-dir"}]);
        let mut live = mounts.clone();
        live.as_array_mut().unwrap().reverse();
        assert_eq!(project(&live, &mounts), mounts);
    }

    #[test]
    fn a_crd_schema_is_no_quantity() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "spec": {"limits": {"cpu": "0.5"}}});
        assert_eq!(normalize(&crd)["spec"]["limits"]["cpu"], "0.5");
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"overhead": {"cpu": "0.5"}}});
        assert_eq!(normalize(&pod)["spec"]["overhead"]["cpu"], "500m");
    }
}
