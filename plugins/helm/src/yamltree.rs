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
            Value::Float(x) => f(float(*x)),
            Value::Str(s) => f(Node::Str(&gostr::natural(s))),
            Value::Time(t) => f(Node::Str(&t.rfc3339_nano().map_err(|_| Declined)?)),
            Value::Bytes(b) => f(Node::Str(&crate::convert::base64_std(b))),
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

/// A float64 after the JSON round trip: integral and within 64 bits, an
/// integer; not finite, null (JSON has no such number).
fn float<T>(x: f64) -> Node<'static, T> {
    if x.fract() == 0.0 && x.abs() < 9.2e18 {
        Node::Int(x as i64)
    } else if x.is_finite() {
        Node::Float(x)
    } else {
        Node::Null
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::rc::Rc;

    use kiln_goyaml::samples::{Generator, hostile_strings};

    use crate::convert::{from_json, from_yaml, to_json_value, to_yaml};
    use crate::files::Files;
    use crate::gostr;
    use crate::gotime::Time;
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

    /// Every values file of the corpus, and each of its top-level values.
    #[test]
    fn corpus_values_print_as_before() {
        fn walk(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, found);
                } else if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    n.starts_with("values") && (n.ends_with(".yaml") || n.ends_with(".yml"))
                }) {
                    found.push(path);
                }
            }
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/helm");
        let mut files = Vec::new();
        walk(&root, &mut files);
        assert!(files.len() > 50, "corpus values files: {}", files.len());
        let mut printed = 0;
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let Ok(value) = from_yaml(&text) else {
                continue;
            };
            let what = file.display().to_string();
            assert!(
                kiln_goyaml::document_of(&value).is_ok(),
                "values are walked in place: {what}"
            );
            assert_same(&value, &what);
            if let Value::Map(map) = &value {
                for (key, child) in map.borrow().iter() {
                    assert_same(child, &format!("{what} .{key}"));
                }
            }
            printed += 1;
        }
        assert!(printed > 50, "corpus values files read: {printed}");
    }

    fn strings() -> Vec<Value> {
        let mut out: Vec<Value> = hostile_strings().iter().map(Value::str).collect();
        // Raw bytes (a chart file that is not UTF-8), and a character of
        // the raw range that was really in the text.
        for bytes in [
            &b"\xff"[..],
            b"a\xffb",
            b"\xc3",
            b"key\x82: \xfe",
            b"\xf4\x8f\xbc\x82",
            b"\xef\xbb\xbfbom",
        ] {
            out.push(Value::str(gostr::from_bytes(bytes)));
        }
        out
    }

    #[test]
    fn hostile_strings_print_as_before() {
        for s in strings() {
            let key = s.as_str().unwrap_or_default().to_owned();
            assert_same(&s, "a string");
            let map = Value::map(Map::from([(key.clone(), s.clone())]));
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

    fn scalar(g: &mut Generator, pool: &[String]) -> Value {
        match g.below(12) {
            0 => Value::Nil,
            1 => Value::Bool(g.below(2) == 1),
            2 => Value::Int(g.next() as i64 >> g.below(64)),
            3 => Value::Int64(-(g.next() as i64 >> g.below(64))),
            4 => Value::Float(
                [
                    0.0,
                    -0.0,
                    1.5,
                    1e6,
                    1e21,
                    9.2e18,
                    -9.3e18,
                    f64::NAN,
                    f64::INFINITY,
                    f64::NEG_INFINITY,
                    0.1,
                    123456789.0,
                    1e-7,
                ][g.below(13)],
            ),
            5 => Value::Float(f64::from_bits(g.next())),
            6 => Value::Bytes(Rc::from(g.string(pool).as_bytes())),
            7 => Value::Time(Rc::new(Time::unix(
                [0, 1_700_000_000, -62_135_596_800, -70_000_000_000, 300_000_000_000][g.below(5)],
                (g.below(3) as i64) * 123_456_789,
            ))),
            8 => {
                let mut bytes = g.string(pool).into_bytes();
                bytes.push(0xff);
                Value::str(gostr::from_bytes(&bytes))
            }
            _ => Value::str(g.string(pool)),
        }
    }

    fn value(g: &mut Generator, pool: &[String], depth: usize) -> Value {
        if depth == 0 {
            return scalar(g, pool);
        }
        match g.below(12) {
            0..=3 => scalar(g, pool),
            4 => Value::Strings(Rc::new(
                (0..g.below(4)).map(|_| Value::str(g.string(pool))).collect(),
            )),
            5 | 6 => Value::list((0..g.below(5)).map(|_| value(g, pool, depth - 1)).collect()),
            7 => Value::ApiVersions(Rc::new(
                (0..g.below(3)).map(|_| g.string(pool)).collect(),
            )),
            8 => Value::Files(Rc::new(Files::new(BTreeMap::from_iter(
                (0..g.below(3)).map(|_| (g.string(pool), g.string(pool).into_bytes())),
            )))),
            9 => from_json(&g.value(pool, depth)),
            _ => {
                let mut map = Map::new();
                for _ in 0..g.below(6) {
                    let key = if g.below(20) == 0 {
                        gostr::from_bytes(&[b'k', 0x80 + g.below(3) as u8]).into_owned()
                    } else {
                        g.string(pool)
                    };
                    map.insert(key, value(g, pool, depth - 1));
                }
                Value::map(map)
            }
        }
    }

    #[test]
    fn generated_values_print_as_before() {
        let pool = hostile_strings();
        let mut walked = 0;
        for case in 0..4000u64 {
            let mut g = Generator::new(case);
            let v = value(&mut g, &pool, 1 + case as usize % 5);
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
        for levels in [MAX_NESTING - 1, MAX_NESTING, MAX_NESTING + 1, MAX_NESTING + 5] {
            let mut list = Value::str("leaf");
            let mut map = Value::Int(1);
            for _ in 0..levels {
                list = Value::list(vec![list]);
                map = Value::map(Map::from([("k".to_owned(), map)]));
            }
            assert_same(&list, &format!("{levels} lists"));
            assert_same(&map, &format!("{levels} maps"));
        }
        let cycle = Rc::new(RefCell::new(Map::new()));
        cycle.borrow_mut().insert("self".to_owned(), Value::Map(cycle.clone()));
        let cyclic = Value::Map(cycle.clone());
        assert_eq!(to_yaml(&cyclic), "");
        assert_same(&cyclic, "a cycle");
        // Break the cycle, so that the map is freed.
        cycle.borrow_mut().clear();
    }
}
