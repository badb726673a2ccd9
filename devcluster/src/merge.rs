//! Merging objects: the server-side-apply merge and prune, and the three patch
//! formats of the Kubernetes API (JSON merge patch, JSON patch, strategic
//! merge patch).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::fields::{FieldSet, Path, PathElement, canonical, key_element};
use super::schema::{ListType, Schema, SchemaPath};

/// Merges an applied configuration into the live object: maps merge by key,
/// keyed lists by item key, sets by value; everything else is replaced by the
/// configuration's value. A `null` in the configuration removes the field.
pub fn apply_merge(live: &Value, config: &Value, schema: &Schema) -> Value {
    merge_at(live, config, schema, &mut SchemaPath::default())
}

fn merge_at(live: &Value, config: &Value, schema: &Schema, spath: &mut SchemaPath) -> Value {
    match (live, config) {
        (Value::Object(live), Value::Object(config)) if !schema.atomic_map(spath) => {
            let mut out = live.clone();
            for (name, value) in config {
                if value.is_null() {
                    out.remove(name);
                    continue;
                }
                spath.push_field(name);
                let merged = match live.get(name) {
                    Some(current) => merge_at(current, value, schema, spath),
                    None => value.clone(),
                };
                spath.pop();
                out.insert(name.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(live), Value::Array(config)) => match schema.list_type(spath) {
            ListType::Map(keys) => {
                let list_path = spath.clone();
                let key = |item: &Value| key_element(item, &keys, schema, &list_path);
                let mut out: Vec<Value> = Vec::with_capacity(live.len() + config.len());
                let mut used = BTreeSet::new();
                spath.push_item();
                for item in live {
                    let k = key(item);
                    match config.iter().find(|candidate| key(candidate) == k) {
                        Some(update) => {
                            used.insert(k);
                            out.push(merge_at(item, update, schema, spath));
                        }
                        None => out.push(item.clone()),
                    }
                }
                spath.pop();
                out.extend(
                    config
                        .iter()
                        .filter(|item| !used.contains(&key(item)))
                        .cloned(),
                );
                Value::Array(out)
            }
            ListType::Set => {
                let mut out = live.clone();
                for item in config {
                    if !out.contains(item) {
                        out.push(item.clone());
                    }
                }
                Value::Array(out)
            }
            ListType::Atomic => Value::Array(config.clone()),
        },
        (_, config) => config.clone(),
    }
}

/// Removes from `object` the fields the applier owned before (`last`) and no
/// manager owns now (`owned`, which includes the applier's new set). A node
/// stays while anyone owns something below it. Identity fields are never
/// touched: they are not part of any field set.
pub fn prune(object: &mut Value, last: &FieldSet, owned: &FieldSet, schema: &Schema) {
    if let Value::Object(map) = object {
        for (name, child) in map.iter_mut() {
            if matches!(name.as_str(), "apiVersion" | "kind") {
                continue;
            }
            let mut path = vec![PathElement::Field(name.clone())];
            let mut spath = SchemaPath::default();
            spath.push_field(name);
            prune_children(child, last, owned, schema, &mut path, &mut spath);
        }
    }
}

/// Whether the node at `path` goes: the applier owned it (or something below
/// it) before, and nobody owns it or anything below it now.
fn doomed(path: &[PathElement], last: &FieldSet, owned: &FieldSet) -> bool {
    last.covers(path) && !owned.covers(path)
}

fn prune_children(
    value: &mut Value,
    last: &FieldSet,
    owned: &FieldSet,
    schema: &Schema,
    path: &mut Path,
    spath: &mut SchemaPath,
) {
    match value {
        Value::Object(map) if !schema.atomic_map(spath) => {
            map.retain(|name, _| {
                path.push(PathElement::Field(name.clone()));
                let keep = !doomed(path, last, owned);
                path.pop();
                keep
            });
            for (name, child) in map.iter_mut() {
                path.push(PathElement::Field(name.clone()));
                spath.push_field(name);
                prune_children(child, last, owned, schema, path, spath);
                spath.pop();
                path.pop();
            }
        }
        Value::Array(items) => match schema.list_type(spath) {
            ListType::Map(keys) => {
                let elements: Vec<PathElement> = items
                    .iter()
                    .map(|item| key_element(item, &keys, schema, spath))
                    .collect();
                let mut kept = Vec::with_capacity(items.len());
                spath.push_item();
                for (mut item, element) in std::mem::take(items).into_iter().zip(elements) {
                    path.push(element);
                    if !doomed(path, last, owned) {
                        prune_children(&mut item, last, owned, schema, path, spath);
                        kept.push(item);
                    }
                    path.pop();
                }
                spath.pop();
                *items = kept;
            }
            ListType::Set => items.retain(|item| {
                path.push(PathElement::Value(canonical(item)));
                let keep = !doomed(path, last, owned);
                path.pop();
                keep
            }),
            ListType::Atomic => {}
        },
        _ => {}
    }
}

/// Why a patch could not be applied.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PatchError(pub String);

/// Applies an RFC 7386 JSON merge patch.
pub fn json_merge(target: &Value, patch: &Value) -> Value {
    let mut out = target.clone();
    json_patch::merge(&mut out, patch);
    out
}

/// Applies an RFC 6902 JSON patch.
pub fn json_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    let patch: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| PatchError(format!("invalid JSON patch: {e}")))?;
    let mut out = target.clone();
    json_patch::patch(&mut out, &patch).map_err(|e| PatchError(e.to_string()))?;
    Ok(out)
}

/// Applies a strategic merge patch (what `kubectl apply`, `kubectl edit` and
/// `kubectl patch` send for built-in kinds): like a JSON merge patch, except
/// that keyed lists merge by their key and the `$patch`, `$retainKeys`,
/// `$deleteFromPrimitiveList/…` and `$setElementOrder/…` directives are honoured.
pub fn strategic_merge(
    target: &Value,
    patch: &Value,
    schema: &Schema,
) -> Result<Value, PatchError> {
    smp_at(target, patch, schema, &mut SchemaPath::default())
}

fn smp_at(
    target: &Value,
    patch: &Value,
    schema: &Schema,
    spath: &mut SchemaPath,
) -> Result<Value, PatchError> {
    let Value::Object(patch) = patch else {
        return Ok(patch.clone());
    };
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut out = patch.clone();
            out.remove("$patch");
            return Ok(Value::Object(out));
        }
        Some("delete") => return Ok(Value::Null),
        Some("merge") | None => {}
        Some(other) => return Err(PatchError(format!("unknown patch type {other:?}"))),
    }
    let mut out = match target {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    for (name, value) in patch {
        if name == "$patch" || name == "$retainKeys" || name.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = name.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(items)), Value::Array(doomed)) = (out.get_mut(field), value) {
                items.retain(|item| !doomed.contains(item));
            }
            continue;
        }
        if value.is_null() {
            out.remove(name);
            continue;
        }
        spath.push_field(name);
        let merged = match (out.get(name), value) {
            (Some(current @ Value::Object(_)), Value::Object(_)) if !schema.atomic_map(spath) => {
                smp_at(current, value, schema, spath)?
            }
            (None, Value::Object(_)) => smp_at(&Value::Null, value, schema, spath)?,
            (current, Value::Array(items)) => smp_list(current, items, schema, spath)?,
            (_, value) => value.clone(),
        };
        spath.pop();
        if merged.is_null() {
            out.remove(name);
        } else {
            out.insert(name.clone(), merged);
        }
    }
    if let Some(Value::Array(retain)) = patch.get("$retainKeys") {
        out.retain(|name, _| retain.iter().any(|kept| kept == name));
    }
    Ok(Value::Object(out))
}

fn smp_list(
    current: Option<&Value>,
    patch: &[Value],
    schema: &Schema,
    spath: &mut SchemaPath,
) -> Result<Value, PatchError> {
    let current = match current {
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    };
    match schema.patch_list_type(spath) {
        ListType::Map(keys) => {
            // A `{"$patch": "replace"}` item replaces the whole list.
            if patch
                .iter()
                .any(|item| item.get("$patch").and_then(Value::as_str) == Some("replace"))
            {
                let kept = patch
                    .iter()
                    .filter(|item| item.get("$patch").is_none())
                    .cloned();
                return Ok(Value::Array(kept.collect()));
            }
            let mut out = current;
            spath.push_item();
            for item in patch {
                let key = key_element(item, &keys, schema, spath);
                let position = out
                    .iter()
                    .position(|existing| key_element(existing, &keys, schema, spath) == key);
                let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                match (position, delete) {
                    (Some(i), true) => {
                        out.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => out[i] = smp_at(&out[i], item, schema, spath)?,
                    (None, false) => out.push(smp_at(&Value::Null, item, schema, spath)?),
                }
            }
            spath.pop();
            Ok(Value::Array(out))
        }
        ListType::Set => {
            let mut out = current;
            for item in patch {
                if !out.contains(item) {
                    out.push(item.clone());
                }
            }
            Ok(Value::Array(out))
        }
        ListType::Atomic => Ok(Value::Array(patch.to_vec())),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::fields::field_set;
    use super::*;

    fn deployment() -> Schema {
        Schema::builtin("apps", "Deployment")
    }

    #[test]
    fn apply_merges_containers_by_name_and_replaces_atomic_lists() {
        let live = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a:1", "args": ["x"]},
            {"name": "b", "image": "b:1"}]}}}});
        let config = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "b", "image": "b:2"}, {"name": "c", "image": "c:1"},
            {"name": "a", "args": ["y", "z"]}]}}}});
        let merged = apply_merge(&live, &config, &deployment());
        assert_eq!(
            merged["spec"]["template"]["spec"]["containers"],
            json!([{"name": "a", "image": "a:1", "args": ["y", "z"]},
                   {"name": "b", "image": "b:2"}, {"name": "c", "image": "c:1"}])
        );
    }

    #[test]
    fn prune_removes_what_only_the_applier_owned() {
        let mut object =
            json!({"metadata": {"name": "x", "labels": {"a": "1", "b": "2", "c": "3"}}});
        let last = field_set(
            &json!({"metadata": {"labels": {"a": "1", "b": "2"}}}),
            &deployment(),
        );
        let mine = field_set(&json!({"metadata": {"labels": {"a": "1"}}}), &deployment());
        let mut owned = mine.clone();
        owned.union_with(&field_set(
            &json!({"metadata": {"labels": {"c": "3"}}}),
            &deployment(),
        ));
        prune(&mut object, &last, &owned, &deployment());
        assert_eq!(
            object,
            json!({"metadata": {"name": "x", "labels": {"a": "1", "c": "3"}}})
        );
    }

    #[test]
    fn strategic_merge_patch_directives() {
        let target = json!({"metadata": {"finalizers": ["a"]}, "spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}}}});
        let patch = json!({"metadata": {"finalizers": ["b"]},
            "spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "a"}],
                "containers": [{"name": "a", "image": "a:2"}, {"name": "b", "$patch": "delete"}]}}}});
        let out = strategic_merge(&target, &patch, &deployment()).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b"]));
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"],
            json!([{"name": "a", "image": "a:2"}])
        );
    }
}
