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

/// Drops `status`, server-populated metadata and tool annotations, and the
/// empty metadata maps the API server never returns.
pub fn normalize(object: &Value) -> Value {
    let mut out = object.clone();
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
            let named = |items: &[Value]| {
                items
                    .iter()
                    .all(|item| item.get("name").is_some_and(Value::is_string))
            };
            if named(live) && named(desired) {
                let projected = desired
                    .iter()
                    .map(|wanted| {
                        live.iter()
                            .find(|actual| actual.get("name") == wanted.get("name"))
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
}
