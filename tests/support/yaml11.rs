//! A YAML 1.1 reader for comparing printed manifests by what they mean to
//! `kubectl` and Go tools (go-yaml v2), not by their bytes.
//!
//! The text is parsed into events by `granit-parser` (which reports each
//! scalar's style); quoted and block scalars are strings, and plain scalars
//! are resolved by the YAML 1.1 type repository (<https://yaml.org/type/>)
//! together with the forms go-yaml v2 adds, written here from those
//! specifications and independent of the emitter under test:
//!
//! - null: `~`, `null`, `Null`, `NULL`, empty;
//! - bool: `y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF`;
//! - int: binary `0b`, octal `0…` and `0o…`, decimal, hex `0x`, base 60
//!   (`190:20:30`), all with `_` allowed and a sign;
//! - float: `1.5`, `.5`, `1.`, `1e3`, `08` (go-yaml's `[0-9]+` mantissa
//!   without a dot), base 60 with a fraction, `.inf`, `.nan`;
//! - timestamp: `2001-12-14` (and go-yaml's `2001-1-2`),
//!   `2001-12-14t21:59:43.10-05:00`, …: read as
//!   `{"!!timestamp": text}`, so that a timestamp never equals a string.
//!
//! Numbers too large for 64 bits become `{"!!int": text}`, infinities and
//! NaN `{"!!float": text}`. A mapping key that resolves to something other
//! than a string is kept as `!!` followed by its text, so that a plain `on:`
//! and a quoted `"on":` differ.

use std::sync::LazyLock;

use granit_parser::{Event, Parser, ScalarStyle};
use regex::Regex;
use serde_json::{Map, Value, json};

/// The documents of a YAML stream, read as YAML 1.1 (null documents left
/// out). Panics on invalid YAML and on aliases (printed manifests have
/// none).
pub fn read(text: &str) -> Vec<Value> {
    let mut events = Parser::new_from_str(text).map(|e| e.expect("valid YAML").0);
    let mut documents = Vec::new();
    while let Some(event) = events.next() {
        if let Event::DocumentStart(..) = event {
            let value = node(&mut events, None);
            if !value.is_null() {
                documents.push(value);
            }
        }
    }
    documents
}

/// The node that starts with `first` (or the next event).
fn node<'a>(events: &mut impl Iterator<Item = Event<'a>>, first: Option<Event<'a>>) -> Value {
    let event = first.or_else(|| events.next()).expect("a node");
    match event {
        Event::Scalar(text, ScalarStyle::Plain, _, None) => resolve(&text),
        Event::Scalar(text, ..) => Value::String(text.into_owned()),
        Event::SequenceStart(..) => {
            let mut items = Vec::new();
            loop {
                match events.next().expect("a sequence item or its end") {
                    Event::SequenceEnd => break,
                    event => items.push(node(events, Some(event))),
                }
            }
            Value::Array(items)
        }
        Event::MappingStart(..) => {
            let mut map = Map::new();
            loop {
                let key = match events.next().expect("a mapping key or its end") {
                    Event::MappingEnd => break,
                    Event::Scalar(text, ScalarStyle::Plain, _, None) => match resolve(&text) {
                        Value::String(s) => s,
                        _ => format!("!!{text}"),
                    },
                    Event::Scalar(text, ..) => text.into_owned(),
                    other => panic!("a complex mapping key: {other:?}"),
                };
                map.insert(key, node(events, None));
            }
            Value::Object(map)
        }
        Event::DocumentEnd => Value::Null,
        other => panic!("unexpected YAML event {other:?}"),
    }
}

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap()
}

static BOOL: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"^(y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$")
});
static NULL: LazyLock<Regex> = LazyLock::new(|| regex(r"^(~|null|Null|NULL|)$"));
static BINARY: LazyLock<Regex> = LazyLock::new(|| regex(r"^[-+]?0[bB][0-1_]+$"));
static OCTAL: LazyLock<Regex> = LazyLock::new(|| regex(r"^[-+]?0[oO]?[0-7_]+$"));
static DECIMAL: LazyLock<Regex> = LazyLock::new(|| regex(r"^[-+]?(0|[1-9][0-9_]*)$"));
static HEX: LazyLock<Regex> = LazyLock::new(|| regex(r"^[-+]?0[xX][0-9a-fA-F_]+$"));
static BASE60_INT: LazyLock<Regex> = LazyLock::new(|| regex(r"^[-+]?[1-9][0-9_]*(:[0-5]?[0-9])+$"));
static FLOAT: LazyLock<Regex> = LazyLock::new(|| {
    // YAML 1.1's float, then go-yaml's (a mantissa without a dot, `1e3`).
    regex(
        r"^([-+]?([0-9][0-9_]*)?\.[0-9.]*([eE][-+][0-9]+)?|[-+]?(\.[0-9_]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?)$",
    )
});
static BASE60_FLOAT: LazyLock<Regex> =
    LazyLock::new(|| regex(r"^[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]*$"));
static SPECIAL_FLOAT: LazyLock<Regex> =
    LazyLock::new(|| regex(r"^([-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))$"));
static TIMESTAMP: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"^([0-9]{4}-[0-9]{1,2}-[0-9]{1,2}|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(\.[0-9]*)?([ \t]*(Z|[-+][0-9]{1,2}(:[0-9]{2})?))?)$",
    )
});

/// What a plain scalar is to a YAML 1.1 reader.
pub fn resolve(text: &str) -> Value {
    if NULL.is_match(text) {
        return Value::Null;
    }
    if BOOL.is_match(text) {
        return Value::Bool(matches!(
            text,
            "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON"
        ));
    }
    if TIMESTAMP.is_match(text) {
        return json!({"!!timestamp": text});
    }
    let digits = text.replace('_', "");
    let (negative, unsigned) = match digits.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, digits.strip_prefix('+').unwrap_or(&digits)),
    };
    let radix = if BINARY.is_match(text) {
        Some((2, &unsigned[2..]))
    } else if HEX.is_match(text) {
        Some((16, &unsigned[2..]))
    } else if DECIMAL.is_match(text) {
        Some((10, unsigned))
    } else if OCTAL.is_match(text) {
        let octal = unsigned.trim_start_matches('0');
        let octal = octal
            .strip_prefix(['o', 'O'])
            .unwrap_or(octal)
            .trim_start_matches('0');
        Some((8, if octal.is_empty() { "0" } else { octal }))
    } else {
        None
    };
    if let Some((radix, digits)) = radix {
        return match i128::from_str_radix(digits, radix) {
            Ok(n) => integer(if negative { -n } else { n }, text),
            Err(_) => json!({"!!int": text}),
        };
    }
    if BASE60_INT.is_match(text) {
        let n = unsigned.split(':').fold(0i128, |total, part| {
            total * 60 + part.parse::<i128>().unwrap()
        });
        return integer(if negative { -n } else { n }, text);
    }
    if BASE60_FLOAT.is_match(text) {
        let (whole, fraction) = unsigned.split_once('.').unwrap();
        let whole = whole.split(':').fold(0i128, |total, part| {
            total * 60 + part.parse::<i128>().unwrap()
        });
        let n: f64 = format!("{whole}.{fraction}0").parse().unwrap();
        return float(if negative { -n } else { n }, text);
    }
    if SPECIAL_FLOAT.is_match(text) {
        return json!({"!!float": text.to_ascii_lowercase()});
    }
    if FLOAT.is_match(text) {
        // YAML 1.1 lets `[0-9.]*` follow the dot (`1.2.3`): not a number
        // anyone can construct, but not a string either.
        return match digits.parse::<f64>() {
            Ok(n) => float(n, text),
            Err(_) => json!({"!!float": text}),
        };
    }
    Value::String(text.to_owned())
}

fn integer(n: i128, text: &str) -> Value {
    i64::try_from(n)
        .map(Value::from)
        .or_else(|_| u64::try_from(n).map(Value::from))
        .unwrap_or_else(|_| json!({"!!int": text}))
}

fn float(n: f64, text: &str) -> Value {
    if n.is_finite() {
        json!(n)
    } else {
        json!({"!!float": text})
    }
}
