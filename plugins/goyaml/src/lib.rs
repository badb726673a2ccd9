//! YAML printed the way go-yaml v2 prints it, byte for byte.
//!
//! `kustomize build`, `kubectl` and every tool built on `sigs.k8s.io/yaml`
//! turn objects into JSON and that into YAML with go-yaml v2's encoder: map
//! keys in go-yaml's "natural" order, literal blocks for multi-line
//! strings, sequences not indented under their key, long scalars folded at
//! spaces past column 80, and — what keeps the meaning — a string is
//! written plain only when a YAML 1.1 reader (go-yaml v2's `resolve`) reads
//! the plain text back as that same string. Otherwise it is double-quoted:
//!
//! - the YAML 1.1 booleans `y Y yes Yes YES n N no No NO true True TRUE
//!   false False FALSE on On ON off Off OFF`;
//! - the nulls `~ null Null NULL` and the empty string;
//! - integers as Go's `strconv.ParseInt(_, 0, 64)`/`ParseUint` read them
//!   once `_` is removed: decimal, `0x`, `0o`, `0b` (also `-0b`), and a
//!   leading `0` for octal (`017`); out of range of 64 bits they are not
//!   integers;
//! - floats `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?` (after
//!   removing `_`) that Go parses without overflowing (`1e3`, `1.`, `+.5`,
//!   `1e-400`; not `1e400`), `.inf`, `.nan` in their three spellings and
//!   signs;
//! - sexagesimal numbers, which go-yaml no longer reads but still quotes:
//!   `190:20:30`, `-1:20.5`;
//! - timestamps in go-yaml's formats: `2006-1-2`, `2006-1-2 15:4:5.9`,
//!   `2006-1-2T15:4:5.9Z07:00` (valid dates only: not `2023-02-29`).
//!
//! Strings the emitter cannot write plain (indicators, leading or trailing
//! spaces, `: `, ` #`, control characters) fall back to single or double
//! quotes as go-yaml's `analyze_scalar` decides. Documents of a stream are
//! separated by `---`.
//!
//! The emitter walks any [`Tree`] (a `serde_json::Value`, or a caller's
//! own values), so that nobody has to build a JSON tree only to print it.

#[cfg(test)]
mod differential_tests;
mod emit;
mod number;
mod order;
#[cfg(any(test, feature = "reference"))]
pub mod reference;
mod resolve;
#[cfg(any(test, feature = "reference"))]
pub mod samples;
mod style;
mod tree;

use serde_json::Value;

pub use resolve::{go_int_parts, timestamp_rfc3339};
pub use tree::{Node, Tree};

/// Lines are folded at a space once they are longer than this (go-yaml's
/// `best_width`).
const WIDTH: usize = 80;
/// Indentation step (go-yaml's `best_indent`).
const INDENT: usize = 2;

/// The objects as one YAML stream, as `kustomize build` prints them.
pub fn stream(objects: &[Value]) -> String {
    let mut out = String::new();
    for (index, object) in objects.iter().enumerate() {
        if index > 0 {
            out.push_str("---\n");
        }
        out.push_str(&document(object));
    }
    out
}

/// One value as a YAML document (ending with a newline).
pub fn document(value: &Value) -> String {
    match document_of(value) {
        Ok(text) => text,
        Err(never) => match never {},
    }
}

/// Any [`Tree`] as one YAML document (ending with a newline), exactly as
/// [`document`] prints the same tree as JSON; the tree's error when one
/// of its nodes cannot be printed.
pub fn document_of<T: Tree>(tree: &T) -> Result<String, T::Error> {
    emit::document(tree)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::number::go_format_g;
    use serde_json::json;

    /// A string as the root scalar of a document, without the final line
    /// break.
    fn emitted(s: &str) -> String {
        let mut text = document(&Value::String(s.to_owned()));
        text.pop();
        text
    }

    #[test]
    fn strings_are_quoted_like_go_yaml() {
        let cases = [
            ("plain", "plain"),
            ("yes", "\"yes\""),
            ("on", "\"on\""),
            ("0123", "\"0123\""),
            ("1e3", "\"1e3\""),
            ("12:30", "\"12:30\""),
            ("2024-01-01", "\"2024-01-01\""),
            ("1.5", "\"1.5\""),
            ("", "\"\""),
            ("a: b", "'a: b'"),
            ("- x", "'- x'"),
            (" lead", "' lead'"),
            ("#hash", "'#hash'"),
            ("it's", "it's"),
            ("*star", "'*star'"),
            ("tab\there", "\"tab\\there\""),
            ("unicodé ✓", "unicodé ✓"),
            ("😀", "\"\\U0001F600\""),
            ("v1.2.3", "v1.2.3"),
            ("-", "'-'"),
            ("a #b", "'a #b'"),
            ("a#b", "a#b"),
        ];
        for (input, want) in cases {
            assert_eq!(emitted(input), want, "{input:?}");
        }
    }

    /// Every YAML 1.1 special form (and near misses that stay plain), with
    /// what `kubectl kustomize` (kustomize v5.5) prints for it as a
    /// ConfigMap value: the table was recorded from the oracle, one env
    /// file entry per form.
    #[test]
    fn yaml_1_1_special_forms_are_quoted_exactly_as_kustomize_quotes_them() {
        let cases = [
            ("y", "\"y\""),
            ("Y", "\"Y\""),
            ("yes", "\"yes\""),
            ("Yes", "\"Yes\""),
            ("YES", "\"YES\""),
            ("n", "\"n\""),
            ("N", "\"N\""),
            ("no", "\"no\""),
            ("No", "\"No\""),
            ("NO", "\"NO\""),
            ("true", "\"true\""),
            ("True", "\"True\""),
            ("TRUE", "\"TRUE\""),
            ("false", "\"false\""),
            ("False", "\"False\""),
            ("FALSE", "\"FALSE\""),
            ("on", "\"on\""),
            ("On", "\"On\""),
            ("ON", "\"ON\""),
            ("off", "\"off\""),
            ("Off", "\"Off\""),
            ("OFF", "\"OFF\""),
            ("yES", "yES"),
            ("oN", "oN"),
            ("tRUE", "tRUE"),
            ("~", "\"~\""),
            ("null", "\"null\""),
            ("Null", "\"Null\""),
            ("NULL", "\"NULL\""),
            ("nULL", "nULL"),
            ("0", "\"0\""),
            ("1", "\"1\""),
            ("-1", "\"-1\""),
            ("+1", "\"+1\""),
            ("017", "\"017\""),
            ("08", "\"08\""),
            ("0o17", "\"0o17\""),
            ("0O17", "\"0O17\""),
            ("0x1F", "\"0x1F\""),
            ("0X1F", "\"0X1F\""),
            ("-0x1F", "\"-0x1F\""),
            ("0b101", "\"0b101\""),
            ("-0b101", "\"-0b101\""),
            ("+0b101", "\"+0b101\""),
            ("0B101", "\"0B101\""),
            ("1_000", "\"1_000\""),
            ("1__0", "\"1__0\""),
            ("_1", "_1"),
            ("1_", "\"1_\""),
            ("0x_1F", "\"0x_1F\""),
            ("190:20:30", "\"190:20:30\""),
            ("-190:20:30", "\"-190:20:30\""),
            ("1:2", "\"1:2\""),
            ("1:60", "1:60"),
            ("190:20:30.15", "\"190:20:30.15\""),
            ("1:20.5", "\"1:20.5\""),
            ("1e3", "\"1e3\""),
            ("1E3", "\"1E3\""),
            ("1e+3", "\"1e+3\""),
            ("1.5e-3", "\"1.5e-3\""),
            (".5", "\".5\""),
            ("-.5", "\"-.5\""),
            ("+.5", "\"+.5\""),
            ("1.", "\"1.\""),
            ("1.0", "\"1.0\""),
            ("1.5", "\"1.5\""),
            ("3.14_15", "\"3.14_15\""),
            (".inf", "\".inf\""),
            (".Inf", "\".Inf\""),
            (".INF", "\".INF\""),
            ("+.inf", "\"+.inf\""),
            ("-.inf", "\"-.inf\""),
            (".nan", "\".nan\""),
            (".NaN", "\".NaN\""),
            (".NAN", "\".NAN\""),
            (".Nan", ".Nan"),
            ("1e", "1e"),
            ("1.e3", "\"1.e3\""),
            ("e3", "e3"),
            (".e3", ".e3"),
            ("0.1.2", "0.1.2"),
            ("1.2.3", "1.2.3"),
            ("2024-01-01", "\"2024-01-01\""),
            ("2024-1-1", "\"2024-1-1\""),
            ("2024-01-01T10:00:00Z", "\"2024-01-01T10:00:00Z\""),
            ("2024-01-01t10:00:00Z", "\"2024-01-01t10:00:00Z\""),
            ("2024-01-01T10:00:00+02:00", "\"2024-01-01T10:00:00+02:00\""),
            ("2024-01-01T10:00:00.5Z", "\"2024-01-01T10:00:00.5Z\""),
            ("10:00:00", "\"10:00:00\""),
            ("2024-13-01", "2024-13-01"),
            ("2023-02-29", "2023-02-29"),
            ("2024-02-29", "\"2024-02-29\""),
            ("2001-12-14", "\"2001-12-14\""),
            ("21:59:43.10", "\"21:59:43.10\""),
            ("-5", "\"-5\""),
            ("20240101", "\"20240101\""),
            ("9223372036854775807", "\"9223372036854775807\""),
            ("9223372036854775808", "\"9223372036854775808\""),
            ("18446744073709551615", "\"18446744073709551615\""),
            ("18446744073709551616", "\"18446744073709551616\""),
            ("0x10000000000000000", "0x10000000000000000"),
            ("1e400", "1e400"),
            ("-1e400", "-1e400"),
            ("<<", "<<"),
            ("=", "="),
            ("!", "'!'"),
            ("&", "'&'"),
            ("*", "'*'"),
            ("-", "'-'"),
            ("--", "--"),
            ("---", "'---'"),
            ("...", "'...'"),
            ("?", "'?'"),
            (":", "':'"),
            ("a:b", "a:b"),
            ("a:", "'a:'"),
            ("yes-no", "yes-no"),
            ("0x", "0x"),
            ("0b", "0b"),
            ("0o", "0o"),
            ("Infinity", "Infinity"),
            ("inf", "inf"),
            ("NaN", "NaN"),
            ("12:30", "\"12:30\""),
            ("12:60", "12:60"),
            ("0:0", "\"0:0\""),
            ("2024-01-01 10:00:00", "\"2024-01-01 10:00:00\""),
            ("2001-12-14 21:59:43.10 -5", "2001-12-14 21:59:43.10 -5"),
            ("1 2", "1 2"),
            ("yes no", "yes no"),
            ("1e-400", "\"1e-400\""),
            (".5e400", ".5e400"),
            ("0x1p3", "0x1p3"),
            (".5e-400", "\".5e-400\""),
            ("1_e3", "\"1_e3\""),
            ("+.5e400", "+.5e400"),
            ("._5", "._5"),
            ("0_17", "\"0_17\""),
            ("00", "\"00\""),
            ("-0", "\"-0\""),
            ("0.", "\"0.\""),
            ("-0o17", "\"-0o17\""),
            ("+0o17", "\"+0o17\""),
            ("0o", "0o"),
            ("1:2:3:4", "\"1:2:3:4\""),
            ("_", "_"),
            ("1_2:30", "\"1_2:30\""),
        ];
        let mut wrong = Vec::new();
        for (input, want) in cases {
            let here = emitted(input);
            if here != want {
                wrong.push(format!("{input:?}: kustomize {want}, here {here}"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn keys_are_quoted_like_values() {
        let value = json!({"y": "n", "on": 1, "a": "yes", "b": "1e400"});
        assert_eq!(
            document(&value),
            "a: \"yes\"\nb: 1e400\n\"on\": 1\n\"y\": \"n\"\n"
        );
    }

    #[test]
    fn documents_look_like_kustomize_output() {
        let value = json!({
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "metadata": {"name": "x", "labels": {"n": "y"}},
            "data": {"script": "echo hi\nexit 0\n", "k10": "a", "k9": "b", "empty": {}},
            "list": [{"b": 1, "a": [1, 2]}, [], "s"],
            "f": 1.5,
        });
        assert_eq!(
            document(&value),
            "apiVersion: v1\ndata:\n  empty: {}\n  k9: b\n  k10: a\n  script: |\n    echo hi\n    exit 0\nf: 1.5\nkind: ConfigMap\nlist:\n- a:\n  - 1\n  - 2\n  b: 1\n- []\n- s\nmetadata:\n  labels:\n    \"n\": \"y\"\n  name: x\n"
        );
    }

    #[test]
    fn long_scalars_fold_past_column_80() {
        let long = format!("{} {} {}", "a".repeat(87), "b".repeat(36), "c".repeat(26));
        let value = json!({"metadata": {"annotations": {"long": long}}});
        assert_eq!(
            document(&value),
            format!(
                "metadata:\n  annotations:\n    long: {}\n      {} {}\n",
                "a".repeat(87),
                "b".repeat(36),
                "c".repeat(26)
            )
        );
    }

    #[test]
    fn floats_print_like_go() {
        assert_eq!(go_format_g(1.5), "1.5");
        assert_eq!(go_format_g(0.0001), "0.0001");
        assert_eq!(go_format_g(0.00001), "1e-05");
        assert_eq!(go_format_g(1234567.5), "1.2345675e+06");
        assert_eq!(go_format_g(-2.25), "-2.25");
    }
}
