//! Functions over objects and arrays: `keys`, `values` (null-tolerant, as
//! in a projection), `items`, `lookup`, `object_from_lists`.

use jmespath::Runtime;
use serde_json::{Map, Value, json};

use super::{define, string_arg};

pub(super) fn register(runtime: &mut Runtime) {
    // `a[].b.keys(@)` where some `b` is null: JMESPath's subexpression stops
    // at the null (go-jmespath, Kyverno's engine, does), the jmespath crate
    // calls the function with it. A null argument gives null here, so that
    // the projection drops it as Kyverno's does.
    define(runtime, "keys", 1, |a| match &a[0] {
        Value::Null => Ok(Value::Null),
        Value::Object(map) => Ok(json!(map.keys().collect::<Vec<_>>())),
        other => Err(format!("argument must be an object, not {other}")),
    });
    define(runtime, "values", 1, |a| match &a[0] {
        Value::Null => Ok(Value::Null),
        Value::Object(map) => Ok(json!(map.values().collect::<Vec<_>>())),
        other => Err(format!("argument must be an object, not {other}")),
    });
    define(runtime, "items", 3, |a| {
        let key_name = string_arg(&a[1], 2)?;
        let value_name = string_arg(&a[2], 3)?;
        let pair = |key: Value, value: &Value| {
            let mut item = Map::new();
            item.insert(key_name.to_owned(), key);
            item.insert(value_name.to_owned(), value.clone());
            Value::Object(item)
        };
        match &a[0] {
            // By key, as Kyverno sorts them (whatever order the map keeps).
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                Ok(Value::Array(
                    keys.into_iter().map(|k| pair(json!(k), &map[k])).collect(),
                ))
            }
            Value::Array(items) => Ok(Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| pair(json!(i), v))
                    .collect(),
            )),
            _ => Err("argument #1 is not of type Object or Array".into()),
        }
    });
    define(runtime, "lookup", 2, |a| match (&a[0], &a[1]) {
        (Value::Object(map), Value::String(key)) => {
            Ok(map.get(key).cloned().unwrap_or(Value::Null))
        }
        (Value::Object(_), _) => Err("argument #2 is not of type String".into()),
        (Value::Array(items), Value::Number(n)) => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            if !f.is_finite() || f.trunc() != f {
                return Err(format!(
                    "argument #2: expected an integer number but got: {f}"
                ));
            }
            // Out of range (negative included) is null, as in Kyverno.
            Ok(if f < 0.0 || f >= items.len() as f64 {
                Value::Null
            } else {
                items[f as usize].clone()
            })
        }
        (Value::Array(_), _) => Err("argument #2 is not of type Number".into()),
        _ => Err("argument #1 is not of type Object or Array".into()),
    });
    define(runtime, "object_from_lists", 2, |a| {
        let Value::Array(keys) = &a[0] else {
            return Err("argument #1 is not of type Array".into());
        };
        let Value::Array(values) = &a[1] else {
            return Err("argument #2 is not of type Array".into());
        };
        let mut out = Map::new();
        for (i, key) in keys.iter().enumerate() {
            let key = match key {
                Value::String(s) => s.clone(),
                // Go's FormatFloat(f, 'f', -1, 32): the shortest float32.
                Value::Number(n) => (n.as_f64().unwrap_or(0.0) as f32).to_string(),
                Value::Bool(b) => b.to_string(),
                _ => return Err("argument #1 is not of type StringArray".into()),
            };
            out.insert(key, values.get(i).cloned().unwrap_or(Value::Null));
        }
        Ok(Value::Object(out))
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::variables::query;

    // The examples of Kyverno's documentation (JMESPath, "Kyverno functions").
    #[test]
    fn items_lookup_and_object_from_lists() {
        let data = json!({"obj": {"b": 2, "a": 1}, "arr": ["x", "y"]});
        assert_eq!(
            query("items(obj, 'key', 'value')", &data).unwrap(),
            json!([{"key": "a", "value": 1}, {"key": "b", "value": 2}])
        );
        assert_eq!(
            query("items(arr, 'i', 'v')", &data).unwrap(),
            json!([{"i": 0, "v": "x"}, {"i": 1, "v": "y"}])
        );
        assert_eq!(query("lookup(obj, 'a')", &data).unwrap(), json!(1));
        assert_eq!(query("lookup(arr, `1`)", &data).unwrap(), json!("y"));
        assert_eq!(
            query("lookup(arr, `5`) || 'none'", &data).unwrap(),
            json!("none")
        );
        assert!(query("lookup(arr, `0.5`)", &data).is_err());
        assert!(query("lookup(arr, 'a')", &data).is_err());
        assert_eq!(
            query("object_from_lists(['a', 'b'], [`1`])", &data).unwrap(),
            json!({"a": 1, "b": null})
        );
        assert_eq!(
            query("object_from_lists([`1`, `true`], ['x', 'y'])", &data).unwrap(),
            json!({"1": "x", "true": "y"})
        );
    }
}
