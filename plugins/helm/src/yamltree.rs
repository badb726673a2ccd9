//! Template values as the tree `toYaml` prints ([`kiln_goyaml::Tree`]),
//! walked in place: what Helm's `sigs.k8s.io/yaml` sees after its JSON
//! round trip, without building that JSON. Each node is converted as
//! [`crate::convert::to_json_value`] converts it: integral floats as
//! integers, a time as RFC 3339, bytes as base64, every string as Go's
//! UTF-8 consumers see it ([`gostr::natural`]).
//!
//! Values whose conversion is not a node-for-node mapping are declined
//! ([`Declined`]), and the caller prints them through JSON, the general
//! path: a map with a key holding raw bytes (two such keys may become the
//! same key), `.Files` and `.Capabilities.APIVersions` (their children are
//! not values), a time outside years 0..=9999 and nesting deeper than
//! [`MAX_NESTING`] (both make the general path give no text).

use kiln_goyaml::{Node, Tree};

use crate::gostr;
use crate::value::{MAX_NESTING, Value};

/// A value the walk does not print: the caller takes the general path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Declined;

impl Tree for Value {
    type Error = Declined;

    fn with_node<R>(
        &self,
        depth: usize,
        f: impl FnOnce(Node<'_, Self>) -> R,
    ) -> Result<R, Declined> {
        if depth > MAX_NESTING {
            return Err(Declined);
        }
        Ok(match self {
            Value::Nil => f(Node::Null),
            Value::Bool(b) => f(Node::Bool(*b)),
            Value::Int(i) | Value::Int64(i) => f(Node::Int(*i)),
            // Go's JSON encoder refuses it: the JSON path decides.
            Value::Float(x) if !x.is_finite() => return Err(Declined),
            Value::Float(x) => f(float(*x)),
            Value::Str(s) => f(Node::Str(&gostr::natural(s))),
            Value::Time(t) => f(Node::Str(&t.rfc3339_nano().map_err(|_| Declined)?)),
            Value::Bytes(b) => f(Node::Str(&crate::convert::base64_std(b))),
            // Rare: the JSON path decides.
            Value::Go(_) => return Err(Declined),
            v if v.is_nil_slice() => f(Node::Null),
            Value::List(l) | Value::Strings(l) => f(Node::List(l)),
            Value::Map(m) => {
                let map = m.borrow();
                if map.keys().any(|key| gostr::has_raw(key)) {
                    return Err(Declined);
                }
                f(Node::Map(
                    &mut map.iter().map(|(key, value)| (key.as_str(), value)),
                ))
            }
            Value::Files(_) | Value::ApiVersions(_) => return Err(Declined),
        })
    }
}

/// A finite float64 after the JSON round trip: an integer when Go reads
/// its digits back as one ([`crate::convert::integral`]).
fn float<T>(x: f64) -> Node<'static, T> {
    match crate::convert::integral(x) {
        Some(crate::convert::Integral::Signed(i)) => Node::Int(i),
        Some(crate::convert::Integral::Unsigned(u)) => Node::Uint(u),
        None => Node::Float(x),
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use crate::convert::{to_json_value, to_yaml};
    use crate::gostr;
    use crate::samples::{corpus_values, generated, nested, string_values};
    use crate::value::{MAX_NESTING, Map, Value};

    /// `toYaml` as it was: the value as JSON, printed by the frozen
    /// reference emitter.
    fn reference(v: &Value) -> String {
        to_json_value(v).map_or_else(String::new, |j| {
            gostr::from_bytes(kiln_goyaml::reference::document(&j).as_bytes()).into_owned()
        })
    }

    fn assert_same(v: &Value, what: &str) {
        assert_eq!(to_yaml(v), reference(v), "toYaml differs for {what}: {v:?}");
    }

    /// Every values file of the corpus, and each of its top-level values:
    /// all walked in place, all printed as before.
    #[test]
    fn corpus_values_print_as_before() {
        let values = corpus_values();
        assert!(values.len() > 100, "corpus values: {}", values.len());
        for (what, value) in values {
            assert!(
                kiln_goyaml::document_of(&value).is_ok(),
                "values are walked in place: {what}"
            );
            assert_same(&value, &what);
        }
    }

    #[test]
    fn hostile_strings_print_as_before() {
        for s in string_values() {
            let key = s.as_str().unwrap_or_default().to_owned();
            assert_same(&s, "a string");
            let map = Value::map(Map::from([(key, s.clone())]));
            assert_same(&map, "a map");
            assert_same(&Value::list(vec![s.clone(), map.clone()]), "a list");
            let nested = Value::map(Map::from([(
                "outer".to_owned(),
                Value::map(Map::from([("mid".to_owned(), Value::list(vec![map]))])),
            )]));
            assert_same(&nested, "nested");
        }
    }

    /// Two keys that differ only in raw bytes are one key after the JSON
    /// round trip (the general path decides which value stays).
    #[test]
    fn raw_byte_keys_print_as_before() {
        let a = gostr::from_bytes(b"k\xff").into_owned();
        let b = gostr::from_bytes(b"k\xfe").into_owned();
        let map = Value::map(Map::from([
            (a, Value::str("first")),
            (b, Value::str("second")),
            ("k\u{fffd}".to_owned(), Value::str("third")),
            ("a".to_owned(), Value::Int(1)),
        ]));
        assert_same(&map, "raw keys");
    }

    #[test]
    fn generated_values_print_as_before() {
        let mut walked = 0;
        for case in 0..4000u64 {
            let v = generated(case);
            assert_same(&v, &format!("generated case {case}"));
            walked += usize::from(kiln_goyaml::document_of(&v).is_ok());
        }
        // Most cases take the walk, not the general path.
        assert!(walked > 2000, "walked in place: {walked} of 4000");
    }

    /// Nesting up to the limit prints; one level more prints nothing, as
    /// a map that contains itself does.
    #[test]
    fn nesting_limits_print_as_before() {
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
        let cyclic = Value::Map(cycle.clone());
        assert_eq!(to_yaml(&cyclic), "");
        assert_same(&cyclic, "a cycle");
        // Break the cycle, so that the map is freed.
        cycle.borrow_mut().clear();
    }
}
