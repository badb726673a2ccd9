//! Strategic merge patches, as kustomize applies them: maps merge, `null`
//! deletes, lists of the built-in types merge by their patch merge key
//! (containers by `name`, ports by `containerPort`, ...), other lists are
//! replaced unless their elements carry one of kustomize's associative keys;
//! `$patch: delete|replace|merge`, `$retainKeys`, `$setElementOrder/…` and
//! `$deleteFromPrimitiveList/…` directives.

use serde_json::{Map, Value};

/// A type of the built-in Kubernetes schema, as far as merging needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// Not in the schema (custom resources, free-form maps).
    Unknown,
    /// A top-level object of a kind.
    Object(&'static str),
    ObjectMeta,
    PodTemplateSpec,
    PodSpec,
    Container,
    WorkloadSpec,
    JobTemplateSpec,
    JobSpec,
    CronJobSpec,
    ServiceSpec,
    /// A list element or map value of a known type with nothing to merge
    /// by key below it.
    Opaque,
}

/// How a list field merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListMerge {
    /// Elements are matched by this key, merged, and new ones appended.
    Key(&'static str),
    /// A set of scalars: union.
    Set,
    /// The patch's list replaces the object's.
    Replace,
}

const KINDS: &[&str] = &[
    "Pod",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "Job",
    "CronJob",
    "ReplicationController",
    "PodTemplate",
    "Service",
];

/// The type of a top-level object of `kind` with `api_version`.
pub fn root(kind: &str, api_version: &str) -> Ty {
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let builtin = matches!(group, "" | "apps" | "batch" | "extensions");
    match KINDS.iter().find(|k| **k == kind) {
        Some(k) if builtin => Ty::Object(k),
        // Every object has ObjectMeta.
        _ if builtin || is_builtin_group(group) => Ty::Object("Other"),
        _ => Ty::Object("Custom"),
    }
}

fn is_builtin_group(group: &str) -> bool {
    !group.contains('.') || group.ends_with(".k8s.io")
}

/// The type of field `field` of a `parent`, and how it merges if it is a
/// list.
pub fn field(parent: Ty, field: &str) -> (Ty, Option<ListMerge>) {
    use ListMerge::{Key, Set};
    match (parent, field) {
        (Ty::Object("Custom"), "metadata") => (Ty::ObjectMeta, None),
        (Ty::Object("Custom"), _) => (Ty::Unknown, None),
        (Ty::Object(_), "metadata") => (Ty::ObjectMeta, None),
        (Ty::Object("Pod"), "spec") => (Ty::PodSpec, None),
        (Ty::Object("PodTemplate"), "template") => (Ty::PodTemplateSpec, None),
        (Ty::Object("CronJob"), "spec") => (Ty::CronJobSpec, None),
        (Ty::Object("Job"), "spec") => (Ty::JobSpec, None),
        (Ty::Object("Service"), "spec") => (Ty::ServiceSpec, None),
        (
            Ty::Object(
                "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet" | "ReplicationController",
            ),
            "spec",
        ) => (Ty::WorkloadSpec, None),
        (Ty::Object(_), _) => (Ty::Opaque, None),
        (Ty::ObjectMeta, "finalizers") => (Ty::Opaque, Some(Set)),
        (Ty::ObjectMeta, "ownerReferences") => (Ty::Opaque, Some(Key("uid"))),
        (Ty::ObjectMeta, _) => (Ty::Opaque, None),
        (Ty::WorkloadSpec | Ty::JobSpec, "template") => (Ty::PodTemplateSpec, None),
        (Ty::CronJobSpec, "jobTemplate") => (Ty::JobTemplateSpec, None),
        (Ty::JobTemplateSpec, "metadata") => (Ty::ObjectMeta, None),
        (Ty::JobTemplateSpec, "spec") => (Ty::JobSpec, None),
        (Ty::PodTemplateSpec, "metadata") => (Ty::ObjectMeta, None),
        (Ty::PodTemplateSpec, "spec") => (Ty::PodSpec, None),
        (Ty::PodSpec, "containers" | "initContainers" | "ephemeralContainers") => {
            (Ty::Container, Some(Key("name")))
        }
        (Ty::PodSpec, "volumes" | "imagePullSecrets" | "resourceClaims" | "schedulingGates") => {
            (Ty::Opaque, Some(Key("name")))
        }
        (Ty::PodSpec, "hostAliases") => (Ty::Opaque, Some(Key("ip"))),
        (Ty::PodSpec, "topologySpreadConstraints") => (Ty::Opaque, Some(Key("topologyKey"))),
        (Ty::Container, "env") => (Ty::Opaque, Some(Key("name"))),
        (Ty::Container, "ports") => (Ty::Opaque, Some(Key("containerPort"))),
        (Ty::Container, "volumeMounts") => (Ty::Opaque, Some(Key("mountPath"))),
        (Ty::Container, "volumeDevices") => (Ty::Opaque, Some(Key("devicePath"))),
        (Ty::ServiceSpec, "ports") => (Ty::Opaque, Some(Key("port"))),
        (Ty::Unknown, _) => (Ty::Unknown, None),
        _ => (Ty::Opaque, None),
    }
}

/// kustomize's associative keys, tried in this order on lists the schema
/// does not know.
const ASSOCIATIVE_KEYS: &[&str] = &[
    "mountPath",
    "devicePath",
    "ip",
    "type",
    "topologyKey",
    "name",
    "containerPort",
];

/// The associative key every map element of the lists has.
fn infer_key(lists: &[&Vec<Value>]) -> Option<&'static str> {
    let elements: Vec<&Value> = lists
        .iter()
        .flat_map(|l| l.iter())
        .filter(|e| !is_directive_only(e))
        .collect();
    if elements.is_empty() || !elements.iter().all(|e| e.is_object()) {
        return None;
    }
    ASSOCIATIVE_KEYS
        .iter()
        .copied()
        .find(|key| elements.iter().all(|e| e.get(*key).is_some()))
}

fn is_directive_only(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|m| !m.is_empty() && m.keys().all(|k| k.starts_with('$')))
}

/// What a patch does to an object at the top: merged, or deleted
/// (`$patch: delete`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The object was merged.
    Merged,
    /// The patch deletes the object.
    Deleted,
}

/// Applies `patch` to `object` (both whole objects).
pub fn apply(object: &mut Value, patch: &Value) -> Outcome {
    let ty = root(
        object["kind"].as_str().unwrap_or_default(),
        object["apiVersion"].as_str().unwrap_or_default(),
    );
    if patch.get("$patch").and_then(Value::as_str) == Some("delete") {
        return Outcome::Deleted;
    }
    merge_value(object, patch, ty, None);
    Outcome::Merged
}

/// A patch value without its directives (what is written when the object
/// has nothing to merge it with).
fn clean(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            if map.get("$patch").and_then(Value::as_str) == Some("delete") {
                return Value::Null;
            }
            Value::Object(
                map.iter()
                    .filter(|(k, v)| !k.starts_with('$') && !v.is_null())
                    .map(|(k, v)| (k.clone(), clean(v)))
                    .collect(),
            )
        }
        Value::Array(list) => Value::Array(
            list.iter()
                .filter(|e| !is_directive_only(e))
                .map(clean)
                .collect(),
        ),
        other => other.clone(),
    }
}

fn merge_value(dest: &mut Value, patch: &Value, ty: Ty, list: Option<ListMerge>) {
    match (dest, patch) {
        (Value::Object(d), Value::Object(p)) => merge_map(d, p, ty),
        (Value::Array(d), Value::Array(p)) => merge_list(d, p, ty, list),
        (dest, patch) => *dest = clean(patch),
    }
}

fn merge_map(dest: &mut Map<String, Value>, patch: &Map<String, Value>, ty: Ty) {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            *dest = match clean(&Value::Object(patch.clone())) {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            return;
        }
        Some("delete") => {
            dest.clear();
            return;
        }
        _ => {}
    }
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(remove)) = (dest.get_mut(field), value.as_array())
            {
                list.retain(|v| !remove.contains(v));
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        if value.is_null() {
            dest.remove(key);
            continue;
        }
        let (child, list) = field(ty, key);
        match dest.get_mut(key) {
            Some(existing) if !existing.is_null() => merge_value(existing, value, child, list),
            _ => {
                let cleaned = clean(value);
                dest.insert(key.clone(), cleaned);
            }
        }
    }
    if let Some(retain) = patch.get("$retainKeys").and_then(Value::as_array) {
        dest.retain(|k, _| retain.iter().any(|r| r.as_str() == Some(k)));
    }
    for (key, order) in patch {
        if let Some(field) = key.strip_prefix("$setElementOrder/")
            && let (Some(Value::Array(list)), Some(order)) = (dest.get_mut(field), order.as_array())
        {
            set_order(list, order, ty_key(ty, field));
        }
    }
}

fn ty_key(ty: Ty, field_name: &str) -> Option<&'static str> {
    match field(ty, field_name).1 {
        Some(ListMerge::Key(key)) => Some(key),
        _ => None,
    }
}

/// `$setElementOrder`: elements named in `order` come first, in that
/// order; the others keep theirs after them.
fn set_order(list: &mut Vec<Value>, order: &[Value], key: Option<&str>) {
    let key_of = |v: &Value| match key {
        Some(k) => v.get(k).cloned(),
        None => Some(v.clone()),
    };
    let mut rest: Vec<Value> = std::mem::take(list);
    for wanted in order {
        let wanted = match key {
            Some(k) => wanted.get(k).cloned(),
            None => Some(wanted.clone()),
        };
        if let Some(i) = rest.iter().position(|v| key_of(v) == wanted) {
            list.push(rest.remove(i));
        }
    }
    list.extend(rest);
}

fn merge_list(dest: &mut Vec<Value>, patch: &[Value], ty: Ty, strategy: Option<ListMerge>) {
    // `- $patch: replace` in a list: the list is the patch's, without it.
    if patch
        .iter()
        .any(|e| e.get("$patch").and_then(Value::as_str) == Some("replace") && is_directive_only(e))
    {
        *dest = patch
            .iter()
            .filter(|e| !is_directive_only(e))
            .map(clean)
            .collect();
        return;
    }
    let strategy = match strategy {
        Some(s) => s,
        None if ty == Ty::Unknown => {
            let patch_vec = patch.to_vec();
            match infer_key(&[dest, &patch_vec]) {
                Some(key) => ListMerge::Key(key),
                None => ListMerge::Replace,
            }
        }
        None => ListMerge::Replace,
    };
    match strategy {
        ListMerge::Replace => *dest = patch.iter().map(clean).collect(),
        ListMerge::Set => {
            for value in patch {
                if !dest.contains(value) {
                    dest.push(value.clone());
                }
            }
        }
        ListMerge::Key(key) => {
            for element in patch {
                let Some(wanted) = element.get(key) else {
                    if !is_directive_only(element) {
                        dest.push(clean(element));
                    }
                    continue;
                };
                let position = dest.iter().position(|d| d.get(key) == Some(wanted));
                let delete = element.get("$patch").and_then(Value::as_str) == Some("delete");
                match (position, delete) {
                    (Some(i), true) => {
                        dest.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => merge_value(&mut dest[i], element, ty, None),
                    (None, false) => dest.push(clean(element)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containers_merge_by_name_and_new_ones_are_appended() {
        let mut object = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"},
            "spec": {"template": {"spec": {"containers": [
                {"name": "app", "image": "nginx", "env": [{"name": "A", "value": "1"}]}]}}}});
        let patch = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"},
            "spec": {"template": {"spec": {"containers": [
                {"name": "side", "image": "busybox"},
                {"name": "app", "env": [{"name": "B", "value": "2"}], "image": null}]}}}});
        assert_eq!(apply(&mut object, &patch), Outcome::Merged);
        assert_eq!(
            object["spec"]["template"]["spec"]["containers"],
            json!([{"name": "app", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                {"name": "side", "image": "busybox"}])
        );
    }

    #[test]
    fn directives() {
        let mut object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeSelector": {"x": "1", "y": "2"}}});
        let patch = json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}],
            "nodeSelector": {"$patch": "replace", "z": "3"}}});
        apply(&mut object, &patch);
        assert_eq!(object["spec"]["containers"], json!([{"name": "b"}]));
        assert_eq!(object["spec"]["nodeSelector"], json!({"z": "3"}));
        assert_eq!(apply(&mut object, &json!({"$patch": "delete"})), Outcome::Deleted);
    }
}
