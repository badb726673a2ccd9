//! Template values serialized in place as `toJson` writes them: what
//! [`crate::convert`]'s JSON conversion builds (Go's `encoding/json` view:
//! integral floats as integers, a time as RFC 3339, bytes as base64, `.Files`
//! as a map of base64, strings as they are), given to `serde_json` through
//! [`Serialize`] without building a `serde_json::Value` first. The text
//! is the same, call for call, as serializing that value: a map's entries in
//! its order, integers, floats and strings through the same serializer
//! calls.

use serde::ser::{Error as _, Serialize, SerializeMap, SerializeSeq, Serializer};

use crate::value::{MAX_NESTING, Value};

/// A value `depth` levels below the root, to be serialized as JSON.
pub struct JsonView<'a> {
    value: &'a Value,
    depth: usize,
}

impl<'a> JsonView<'a> {
    /// The root value.
    pub fn new(value: &'a Value) -> JsonView<'a> {
        JsonView { value, depth: 0 }
    }

    fn child(&self, value: &'a Value) -> JsonView<'a> {
        JsonView {
            value,
            depth: self.depth + 1,
        }
    }
}

impl Serialize for JsonView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Deeper than the limit (a map that contains itself): Go refuses
        // it, and so does the JSON conversion.
        if self.depth > MAX_NESTING {
            return Err(S::Error::custom(
                "json: unsupported value: encountered a cycle via map[string]interface {}",
            ));
        }
        match self.value {
            Value::Nil => serializer.serialize_unit(),
            Value::Bool(b) => serializer.serialize_bool(*b),
            Value::Int(i) | Value::Int64(i) => serializer.serialize_i64(*i),
            // Every float as Go writes a float64 (`GoFloats`: integral
            // ones in positional digits, a negative zero as `-0`); Go's
            // encoder refuses NaN and the infinities.
            Value::Float(f) if f.is_finite() => serializer.serialize_f64(*f),
            Value::Float(f) => Err(S::Error::custom(format!(
                "json: unsupported value: {}",
                if f.is_nan() {
                    "NaN"
                } else if *f > 0.0 {
                    "+Inf"
                } else {
                    "-Inf"
                }
            ))),
            Value::Str(s) => serializer.serialize_str(s),
            Value::Time(t) => serializer.serialize_str(&t.rfc3339_nano().map_err(|e| {
                S::Error::custom(format!(
                    "json: error calling MarshalJSON for type time.Time: {e}"
                ))
            })?),
            Value::Go(o) => o.json().serialize(serializer),
            Value::Bytes(b) => serializer.serialize_str(&crate::convert::base64_std(b)),
            v if v.is_nil_slice() => serializer.serialize_none(),
            Value::List(l) | Value::Strings(l) => {
                let mut seq = serializer.serialize_seq(Some(l.len()))?;
                for item in l.iter() {
                    seq.serialize_element(&self.child(item))?;
                }
                seq.end()
            }
            Value::Map(m) => {
                let map = m.borrow();
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for (key, item) in map.iter() {
                    out.serialize_entry(key, &self.child(item))?;
                }
                out.end()
            }
            Value::Files(f) => {
                let entries = f.entries();
                let mut out = serializer.serialize_map(Some(entries.len()))?;
                for (key, bytes) in entries {
                    out.serialize_entry(key, &crate::convert::base64_std(bytes))?;
                }
                out.end()
            }
            Value::ApiVersions(l) => {
                let mut seq = serializer.serialize_seq(Some(l.len()))?;
                for item in l.iter() {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use crate::convert::{JsonStyle, json_at, to_json_styled, write_json};
    use crate::gostr;
    use crate::samples::{corpus_values, generated, nested, string_values};
    use crate::value::{MAX_NESTING, Map, Value};

    /// `toJson` as it was: the value as a `serde_json::Value`, written,
    /// then every rune as Go's encoder writes it.
    fn reference(v: &Value, style: JsonStyle) -> String {
        let Some(json) = json_at(v, 0, false) else {
            return String::new();
        };
        let text = write_json(&json, style).unwrap_or_default();
        let escape_html = style != JsonStyle::Raw;
        let mut out = String::with_capacity(text.len());
        gostr::for_each_rune(&text, |rune| {
            let Ok(c) = rune else {
                out.push_str("\\ufffd");
                return;
            };
            match c {
                '<' if escape_html => out.push_str("\\u003c"),
                '>' if escape_html => out.push_str("\\u003e"),
                '&' if escape_html => out.push_str("\\u0026"),
                '\u{2028}' => out.push_str("\\u2028"),
                '\u{2029}' => out.push_str("\\u2029"),
                c => out.push(c),
            }
        });
        gostr::from_bytes(out.as_bytes()).into_owned()
    }

    fn assert_same(v: &Value, what: &str) {
        for style in [JsonStyle::Compact, JsonStyle::Indented, JsonStyle::Raw] {
            assert_eq!(
                to_json_styled(v, style),
                reference(v, style),
                "{style:?} differs for {what}: {v:?}"
            );
        }
    }

    #[test]
    fn corpus_values_write_as_before() {
        for (what, value) in corpus_values() {
            assert_same(&value, &what);
        }
    }

    #[test]
    fn hostile_strings_write_as_before() {
        for s in string_values() {
            let key = s.as_str().unwrap_or_default().to_owned();
            assert_same(&s, "a string");
            let map = Value::map(Map::from([(key, s.clone())]));
            assert_same(&Value::list(vec![s, map]), "a list");
        }
    }

    #[test]
    fn generated_values_write_as_before() {
        for case in 0..4000u64 {
            assert_same(&generated(case), &format!("generated case {case}"));
        }
    }

    #[test]
    fn nesting_limits_write_as_before() {
        for levels in [
            MAX_NESTING - 1,
            MAX_NESTING,
            MAX_NESTING + 1,
            MAX_NESTING + 5,
        ] {
            for value in nested(levels) {
                assert_same(&value, &format!("{levels} levels"));
            }
        }
        let cycle = Rc::new(crate::value::MapCell::new(Map::new()));
        cycle
            .borrow_mut()
            .insert("self".to_owned(), Value::Map(cycle.clone()));
        assert_same(&Value::Map(cycle.clone()), "a cycle");
        cycle.borrow_mut().clear();
    }
}
