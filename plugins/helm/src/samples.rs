//! Values for the differential tests of `toYaml` and `toJson` (test
//! builds only): the corpus charts' values files, hostile strings (with
//! raw bytes), and generated values of every kind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use kiln_goyaml::samples::{Generator, hostile_strings};

use crate::convert::{from_json, from_yaml};
use crate::files::Files;
use crate::gostr;
use crate::gotime::Time;
use crate::value::{Map, Value};

/// Every values file of the corpus (tests/helm) read as Helm reads it,
/// and each of its top-level values, named for messages.
pub fn corpus_values() -> Vec<(String, Value)> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
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
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let Ok(value) = from_yaml(&text) else {
            continue;
        };
        let name = file.display().to_string();
        if let Value::Map(map) = &value {
            for (key, child) in map.borrow().iter() {
                out.push((format!("{name} .{key}"), child.clone()));
            }
        }
        out.push((name, value));
    }
    out
}

/// The hostile strings, and strings holding raw bytes (a chart file that
/// is not UTF-8, a character of the raw range that was really in it).
pub fn string_values() -> Vec<Value> {
    let mut out: Vec<Value> = hostile_strings().iter().map(Value::str).collect();
    for bytes in [
        &b"\xff"[..],
        b"a\xffb",
        b"\xc3",
        b"key\x82: \xfe",
        b"\xf4\x8f\xbc\x82",
        b"\xef\xbb\xbfbom",
        b"<a href='x'>&amp;</a>\xe2\x80\xa8",
    ] {
        out.push(Value::str(gostr::from_bytes(bytes)));
    }
    out
}

/// Generated value number `case`: up to five levels of maps, lists,
/// `[]string`s, `.Files`, API versions and every scalar (integral, huge
/// and non-finite floats, bytes, times in and out of JSON's years, strings
/// with raw bytes, keys with raw bytes).
pub fn generated(case: u64) -> Value {
    let pool = hostile_strings();
    let mut g = Generator::new(case);
    value(&mut g, &pool, 1 + case as usize % 5)
}

fn scalar(g: &mut Generator, pool: &[String]) -> Value {
    match g.below(12) {
        0 => Value::Nil,
        1 => Value::Bool(g.below(2) == 1),
        2 => Value::Int(g.number() as i64 >> g.below(64)),
        3 => Value::Int64((g.number() as i64 >> g.below(64)).wrapping_neg()),
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
        5 => Value::Float(f64::from_bits(g.number())),
        6 => Value::Bytes(Rc::from(g.string(pool).as_bytes())),
        7 => Value::Time(Rc::new(Time::unix(
            [
                0,
                1_700_000_000,
                -62_135_596_800,
                -70_000_000_000,
                300_000_000_000,
            ][g.below(5)],
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
            (0..g.below(4))
                .map(|_| Value::str(g.string(pool)))
                .collect(),
        )),
        5 | 6 => Value::list((0..g.below(5)).map(|_| value(g, pool, depth - 1)).collect()),
        7 => Value::ApiVersions(Rc::new((0..g.below(3)).map(|_| g.string(pool)).collect())),
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

/// A string inside `levels` lists, and an integer inside `levels` maps.
pub fn nested(levels: usize) -> [Value; 2] {
    let mut list = Value::str("leaf");
    let mut map = Value::Int(1);
    for _ in 0..levels {
        list = Value::list(vec![list]);
        map = Value::map(Map::from([("k".to_owned(), map)]));
    }
    [list, map]
}
