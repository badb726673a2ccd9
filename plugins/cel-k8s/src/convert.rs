//! JSON documents to CEL values and back.

use std::collections::HashMap;
use std::sync::Arc;

use cel::Value;
use cel::objects::{Key, Map};

/// A JSON document nested deeper than the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the document is nested deeper than {0} levels")]
pub struct TooDeep(pub usize);

/// Converts a JSON value into a CEL value (numbers: integers stay `int`,
/// others become `double`); refuses documents nested deeper than `max_depth`.
pub fn from_json(json: &serde_json::Value, max_depth: usize) -> Result<Value, TooDeep> {
    convert(json, 0, max_depth)
}

fn convert(json: &serde_json::Value, depth: usize, max: usize) -> Result<Value, TooDeep> {
    if depth > max {
        return Err(TooDeep(max));
    }
    Ok(match json {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::Int(i),
            (None, Some(u)) => Value::UInt(u),
            _ => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => Value::String(Arc::new(s.clone())),
        serde_json::Value::Array(items) => Value::List(Arc::new(
            items
                .iter()
                .map(|v| convert(v, depth + 1, max))
                .collect::<Result<_, _>>()?,
        )),
        serde_json::Value::Object(fields) => {
            let mut map = HashMap::with_capacity(fields.len());
            for (k, v) in fields {
                map.insert(
                    Key::String(Arc::new(k.clone())),
                    convert(v, depth + 1, max)?,
                );
            }
            Value::Map(Map { map: Arc::new(map) })
        }
    })
}

/// Converts a CEL value into JSON for messages and annotations (durations,
/// timestamps and opaque values as their display strings).
pub fn to_json(value: &Value) -> serde_json::Value {
    match value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => (*b).into(),
        Value::Int(i) => (*i).into(),
        Value::UInt(u) => (*u).into(),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(serde_json::Value::Number)
            .unwrap_or(serde_json::Value::Null),
        Value::String(s) => s.as_str().into(),
        Value::List(items) => items.iter().map(to_json).collect(),
        Value::Map(map) => map
            .map
            .iter()
            .map(|(k, v)| (key_string(k), to_json(v)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
        other => format!("{other:?}").into(),
    }
}

fn key_string(key: &Key) -> String {
    match key {
        Key::Int(i) => i.to_string(),
        Key::Uint(u) => u.to_string(),
        Key::Bool(b) => b.to_string(),
        Key::String(s) => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_depth() {
        let json = serde_json::json!({"a": [1, 2.5, "x", null, true], "b": {"c": 18446744073709551615u64}});
        assert_eq!(to_json(&from_json(&json, 8).unwrap()), json);
        let mut deep = serde_json::json!(1);
        for _ in 0..10 {
            deep = serde_json::json!([deep]);
        }
        assert_eq!(from_json(&deep, 5), Err(TooDeep(5)));
    }
}
