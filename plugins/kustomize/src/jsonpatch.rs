//! JSON 6902 patches (`op`, `path`, `value`, `from`), written in YAML or
//! JSON, applied to one object.

use serde::Deserialize;
use serde::de::DeserializeSeed as _;
use serde_json::Value;

use crate::scalars;

/// One operation.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Op {
    /// `add`, `remove`, `replace`, `move`, `copy` or `test`.
    pub op: String,
    /// A JSON pointer.
    pub path: String,
    /// The value of `add`, `replace` and `test`.
    #[serde(default)]
    pub value: Option<Value>,
    /// The source of `move` and `copy`.
    #[serde(default)]
    pub from: Option<String>,
}

/// Parses a list of operations (YAML or JSON).
pub fn parse(text: &str) -> Result<Vec<Op>, String> {
    crate::check_yaml_text(text)?;
    let mut ops: Vec<Op> = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
    // kustomize reads a JSON 6902 patch with go-yaml v2 (YAML 1.1): a plain
    // `yes` is `true` there, `017` is 15.
    read_values_as_go_yaml_v2(text, &mut ops);
    for op in &ops {
        match op.op.as_str() {
            "add" | "replace" | "test" if op.value.is_none() => {
                return Err(format!("operation {} {:?} has no value", op.op, op.path));
            }
            "move" | "copy" if op.from.is_none() => {
                return Err(format!("operation {} {:?} has no from", op.op, op.path));
            }
            "add" | "remove" | "replace" | "move" | "copy" | "test" => {}
            other => return Err(format!("unknown operation {other:?}")),
        }
    }
    Ok(ops)
}

/// Replaces each operation's `value` with the value go-yaml v2 reads.
fn read_values_as_go_yaml_v2(text: &str, ops: &mut [Op]) {
    let Some(document) = serde_yaml::Deserializer::from_str(text).next() else {
        return;
    };
    let read = scalars::Read::new(text, scalars::Reader::GoYamlV2);
    // The text parsed once already: this second read cannot fail.
    if let Ok(Value::Array(items)) = read.deserialize(document) {
        for (op, mut item) in ops.iter_mut().zip(items) {
            if let Some(value) = item.get_mut("value").map(Value::take)
                && op.value.is_some()
            {
                op.value = Some(value);
            }
        }
    }
}

/// The reference tokens of a JSON pointer (`~1` is `/`, `~0` is `~`).
fn tokens(pointer: &str) -> Result<Vec<String>, String> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(format!("path {pointer:?} does not start with /"));
    };
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn index(token: &str, len: usize, adding: bool, pointer: &str) -> Result<usize, String> {
    if adding && token == "-" {
        return Ok(len);
    }
    let i: usize = token
        .parse()
        .map_err(|_| format!("{pointer:?}: {token:?} is not an array index"))?;
    let limit = if adding { len } else { len.saturating_sub(1) };
    if i > limit || (!adding && len == 0) {
        return Err(format!("{pointer:?}: index {i} is out of range"));
    }
    Ok(i)
}

/// The parent container of `pointer` and the last token.
fn parent<'a>(doc: &'a mut Value, pointer: &str) -> Result<(&'a mut Value, String), String> {
    let mut tokens = tokens(pointer)?;
    let Some(last) = tokens.pop() else {
        return Err("the whole document cannot be the target".into());
    };
    let mut current = doc;
    for token in &tokens {
        current = match current {
            Value::Object(map) => map
                .get_mut(token)
                .ok_or_else(|| format!("{pointer:?}: no {token:?} in the object"))?,
            Value::Array(list) => {
                let i = index(token, list.len(), false, pointer)?;
                &mut list[i]
            }
            _ => {
                return Err(format!(
                    "{pointer:?}: {token:?} is not in an object or array"
                ));
            }
        };
    }
    Ok((current, last))
}

fn get<'a>(doc: &'a Value, pointer: &str) -> Result<&'a Value, String> {
    let mut current = doc;
    for token in tokens(pointer)? {
        current = match current {
            Value::Object(map) => map
                .get(&token)
                .ok_or_else(|| format!("{pointer:?}: no {token:?} in the object"))?,
            Value::Array(list) => {
                let i = index(&token, list.len(), false, pointer)?;
                &list[i]
            }
            _ => {
                return Err(format!(
                    "{pointer:?}: {token:?} is not in an object or array"
                ));
            }
        };
    }
    Ok(current)
}

fn add(doc: &mut Value, pointer: &str, value: Value) -> Result<(), String> {
    if pointer.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, last) = parent(doc, pointer)?;
    match parent {
        Value::Object(map) => {
            map.insert(last, value);
        }
        Value::Array(list) => {
            let i = index(&last, list.len(), true, pointer)?;
            list.insert(i, value);
        }
        _ => return Err(format!("{pointer:?}: the parent is not an object or array")),
    }
    Ok(())
}

fn remove(doc: &mut Value, pointer: &str) -> Result<Value, String> {
    let (parent, last) = parent(doc, pointer)?;
    match parent {
        Value::Object(map) => map
            .remove(&last)
            .ok_or_else(|| format!("{pointer:?}: nothing to remove")),
        Value::Array(list) => {
            let i = index(&last, list.len(), false, pointer)?;
            Ok(list.remove(i))
        }
        _ => Err(format!("{pointer:?}: the parent is not an object or array")),
    }
}

/// `replace`, as kustomize's JSON patch library (evanphx/json-patch v4)
/// does it: the parent must exist; an array element must exist, while a
/// key an object lacks is set.
fn replace(doc: &mut Value, pointer: &str, value: Value) -> Result<(), String> {
    let (parent, last) = parent(doc, pointer)?;
    match parent {
        Value::Object(map) => {
            map.insert(last, value);
        }
        Value::Array(list) => {
            let i = index(&last, list.len(), false, pointer)?;
            list[i] = value;
        }
        _ => return Err(format!("{pointer:?}: the parent is not an object or array")),
    }
    Ok(())
}

/// Applies the operations in order; the object is unchanged on error.
pub fn apply(doc: &mut Value, ops: &[Op]) -> Result<(), String> {
    let mut work = doc.clone();
    for op in ops {
        let path = op.path.as_str();
        let fail = |e: String| format!("{} {path:?}: {e}", op.op);
        match op.op.as_str() {
            "add" => add(&mut work, path, op.value.clone().unwrap_or_default()).map_err(fail)?,
            "remove" => {
                remove(&mut work, path).map_err(fail)?;
            }
            "replace" => {
                let value = op.value.clone().unwrap_or_default();
                if path.is_empty() {
                    work = value;
                } else {
                    replace(&mut work, path, value).map_err(fail)?;
                }
            }
            "move" => {
                let from = op.from.as_deref().unwrap_or_default();
                let value = remove(&mut work, from).map_err(fail)?;
                add(&mut work, path, value).map_err(fail)?;
            }
            "copy" => {
                let from = op.from.as_deref().unwrap_or_default();
                let value = get(&work, from).map_err(fail)?.clone();
                add(&mut work, path, value).map_err(fail)?;
            }
            "test" => {
                let found = get(&work, path).map_err(fail)?;
                if Some(found) != op.value.as_ref() {
                    return Err(fail(format!(
                        "the value is {found}, not {}",
                        op.value.clone().unwrap_or_default()
                    )));
                }
            }
            _ => unreachable!("checked by parse"),
        }
    }
    *doc = work;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn operations_follow_rfc_6902() {
        let mut doc = json!({"metadata": {"name": "x"}, "spec": {"list": [1, 2]}});
        let ops = parse(
            "- {op: add, path: /metadata/labels, value: {a: b}}\n\
             - {op: add, path: /metadata/labels/app.kubernetes.io~1name, value: web}\n\
             - {op: add, path: /spec/list/-, value: 3}\n\
             - {op: add, path: /spec/list/0, value: 0}\n\
             - {op: remove, path: /spec/list/1}\n\
             - {op: replace, path: /metadata/name, value: z}\n\
             - {op: copy, from: /metadata/name, path: /spec/copied}\n\
             - {op: move, from: /spec/copied, path: /spec/moved}\n\
             - {op: test, path: /spec/moved, value: z}\n",
        )
        .unwrap();
        apply(&mut doc, &ops).unwrap();
        assert_eq!(
            doc,
            json!({"metadata": {"name": "z", "labels": {"a": "b", "app.kubernetes.io/name": "web"}},
                "spec": {"list": [0, 2, 3], "moved": "z"}})
        );
        // Values are read as kustomize reads them, by go-yaml v2 (YAML 1.1).
        let ops = parse("- {op: add, path: /a, value: y}\n- {op: add, path: /b, value: \"y\"}\n")
            .unwrap();
        assert_eq!(ops[0].value, Some(json!(true)));
        assert_eq!(ops[1].value, Some(json!("y")));
        let bad = parse("- {op: remove, path: /spec/nothing}").unwrap();
        let before = doc.clone();
        assert!(apply(&mut doc, &bad).unwrap_err().contains("nothing"));
        assert_eq!(doc, before);
    }
}
