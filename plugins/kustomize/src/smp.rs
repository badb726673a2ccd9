//! Strategic merge patches, as kustomize (kyaml's merge) applies them: maps
//! merge, `null` deletes, lists of the built-in types merge by their patch
//! merge key (containers by `name`, ports by `containerPort` and
//! `protocol`, ...), every other list — custom resources' included — is
//! replaced; `$patch: delete|replace` directives. Like kustomize, other
//! directives (`$retainKeys`, `$setElementOrder/…`) are kept as fields.

use serde_json::{Map, Value};

use crate::scalars::Step;

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
    /// Elements are matched by this key and merged; the patch's elements
    /// come first, in its order, then the object's others.
    Key(&'static str),
    /// Like `Key` by the first key; where every element has both keys,
    /// elements are matched by the pair, keep their places, and the
    /// patch's new elements come first.
    Keys(&'static str, &'static str),
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
    // Admission webhook configurations merge their webhooks by name.
    if group == "admissionregistration.k8s.io" {
        match kind {
            "ValidatingWebhookConfiguration" => {
                return Ty::Object("ValidatingWebhookConfiguration");
            }
            "MutatingWebhookConfiguration" => return Ty::Object("MutatingWebhookConfiguration"),
            _ => {}
        }
    }
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
    use ListMerge::{Key, Keys, Set};
    match (parent, field) {
        // No schema: every list of a custom resource is replaced, its
        // metadata's included.
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
        (
            Ty::Object("ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration"),
            "webhooks",
        ) => (Ty::Opaque, Some(Key("name"))),
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
        (Ty::Container, "ports") => (Ty::Opaque, Some(Keys("containerPort", "protocol"))),
        (Ty::Container, "volumeMounts") => (Ty::Opaque, Some(Key("mountPath"))),
        (Ty::Container, "volumeDevices") => (Ty::Opaque, Some(Key("devicePath"))),
        (Ty::ServiceSpec, "ports") => (Ty::Opaque, Some(Keys("port", "protocol"))),
        (Ty::Unknown, _) => (Ty::Unknown, None),
        _ => (Ty::Opaque, None),
    }
}

fn is_directive_only(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|m| m.len() == 1 && m.contains_key("$patch"))
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

/// Drops the fields written without a value (`key:`, at `paths`) that
/// kustomize's strategic merge drops: kyaml walks the whole object it
/// merges into — every map, and the elements of lists merged by key — and
/// clears such a null wherever it passes, whatever the patch says. Nulls in
/// lists it replaces whole (custom resources' lists, atomic lists) stay.
pub fn drop_blank_nulls(object: &mut Value, paths: &[Vec<Step>]) {
    let ty = root(
        object["kind"].as_str().unwrap_or_default(),
        object["apiVersion"].as_str().unwrap_or_default(),
    );
    for path in paths {
        let Some((Step::Key(last), parents)) = path.split_last() else {
            continue;
        };
        if let Some(map) = walked(object, ty, None, parents)
            && map.get(last).is_some_and(Value::is_null)
        {
            map.remove(last);
        }
    }
}

/// The map at `path` below `value` (of type `ty`; `list`: how `value`
/// merges, if it is a list), if kyaml's merge walks there.
fn walked<'a>(
    value: &'a mut Value,
    ty: Ty,
    list: Option<ListMerge>,
    path: &[Step],
) -> Option<&'a mut Map<String, Value>> {
    let Some((step, rest)) = path.split_first() else {
        return value.as_object_mut();
    };
    match (step, value) {
        (Step::Key(key), Value::Object(map)) => {
            let (child, list) = field(ty, key);
            walked(map.get_mut(key)?, child, list, rest)
        }
        // Only the elements of a list merged by key are walked.
        (Step::Index(i), Value::Array(items))
            if matches!(list, Some(ListMerge::Key(_) | ListMerge::Keys(..))) =>
        {
            walked(items.get_mut(*i)?, ty, None, rest)
        }
        _ => None,
    }
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
                    .filter(|(k, v)| *k != "$patch" && !v.is_null())
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
        // Only `$patch` is a directive for kustomize; `$retainKeys`,
        // `$setElementOrder/…` and the like are copied as they are.
        if key == "$patch" {
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
}

fn merge_list(dest: &mut Vec<Value>, patch: &[Value], ty: Ty, strategy: Option<ListMerge>) {
    let strategy = strategy.unwrap_or(ListMerge::Replace);
    // A list the schema does not merge is the patch's, as written.
    let (key, pair) = match strategy {
        ListMerge::Replace => {
            *dest = patch.to_vec();
            return;
        }
        ListMerge::Set => {
            let mut out: Vec<Value> = patch.to_vec();
            out.extend(dest.iter().filter(|v| !patch.contains(v)).cloned());
            *dest = out;
            return;
        }
        ListMerge::Key(key) => (key, None),
        ListMerge::Keys(key, second) => (key, Some(second)),
    };
    // `- $patch: replace` in a merged list: the list is the patch's,
    // without it.
    if patch
        .iter()
        .any(|e| is_directive_only(e) && e.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *dest = patch
            .iter()
            .filter(|e| !is_directive_only(e))
            .map(clean)
            .collect();
        return;
    }
    let composite = pair.filter(|second| {
        dest.iter()
            .chain(patch)
            .all(|e| e.get(key).is_some() && e.get(*second).is_some())
    });
    let same = |a: &Value, b: &Value| {
        a.get(key) == b.get(key) && composite.is_none_or(|second| a.get(second) == b.get(second))
    };
    let delete = |e: &Value| e.get("$patch").and_then(Value::as_str) == Some("delete");
    if composite.is_some() {
        let mut out: Vec<Value> = patch
            .iter()
            .filter(|p| !delete(p) && !dest.iter().any(|d| same(d, p)))
            .map(clean)
            .collect();
        for d in dest.iter() {
            match patch.iter().find(|p| same(d, p)) {
                Some(p) if delete(p) => {}
                Some(p) => {
                    let mut merged = d.clone();
                    merge_value(&mut merged, p, ty, None);
                    out.push(merged);
                }
                None => out.push(d.clone()),
            }
        }
        *dest = out;
        return;
    }
    let mut used = vec![false; dest.len()];
    let mut out = Vec::new();
    for element in patch {
        if element.get(key).is_none() {
            // Without its key, an element matches nothing (a `$patch`
            // directive in it deletes nothing).
            if !is_directive_only(element) && !delete(element) {
                out.push(clean(element));
            }
            continue;
        }
        let position = (0..dest.len()).find(|&i| !used[i] && same(&dest[i], element));
        if let Some(i) = position {
            used[i] = true;
        }
        match (position, delete(element)) {
            (_, true) => {}
            (Some(i), false) => {
                let mut merged = dest[i].clone();
                merge_value(&mut merged, element, ty, None);
                out.push(merged);
            }
            (None, false) => out.push(clean(element)),
        }
    }
    out.extend(
        dest.iter()
            .enumerate()
            .filter(|(i, _)| !used[*i])
            .map(|(_, d)| d.clone()),
    );
    *dest = out;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containers_merge_by_name_in_the_patch_order() {
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
            json!([{"name": "side", "image": "busybox"},
                {"name": "app", "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]}])
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
        assert_eq!(
            apply(&mut object, &json!({"$patch": "delete"})),
            Outcome::Deleted
        );
    }
}
