//! What a plain (unquoted) scalar is to go-yaml v2, resolved by YAML 1.1
//! (`yes`, `on`, `y` are booleans, `017` is octal) and bound for JSON
//! (every number a float64).
//!
//! [`scalar`] classifies the text without allocating; [`resolve`] turns it
//! into a [`Value`] and [`key_text`] into a mapping key as JSON names it.

use std::borrow::Cow;

use crate::value::Value;

/// What a plain scalar resolves to, borrowing nothing but its text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    /// `~`, `null`, the empty scalar.
    Null,
    /// A YAML 1.1 boolean (`y`, `yes`, `on`, `true`, ... in three casings).
    Bool(bool),
    /// An integer or a float, as float64.
    Float(f64),
    /// Anything else: the text itself.
    Str,
}

/// How go-yaml v2 resolves the plain scalar `text`.
pub fn scalar(text: &str) -> Scalar {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Scalar::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Scalar::Bool(true);
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Scalar::Bool(false);
        }
        _ => {}
    }
    if let Some(name) = non_finite(text) {
        return Scalar::Float(match name {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            _ => f64::NAN,
        });
    }
    // Every other number has a decimal digit (`0x`, `0b` and `0o` start
    // with one).
    if !text.bytes().any(|b| b.is_ascii_digit()) {
        return Scalar::Str;
    }
    let clean: Cow<'_, str> = if text.contains('_') {
        Cow::Owned(text.replace('_', ""))
    } else {
        Cow::Borrowed(text)
    };
    let (neg, body) = match clean.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, clean.strip_prefix('+').unwrap_or(&clean)),
    };
    if let Some(i) = integer(body) {
        let i = if neg { -i } else { i };
        // `strconv.ParseInt(plain, 0, 64)`, then `ParseUint` (no sign):
        // a wider integer is not one (an all-digit one may still be a
        // float below).
        let signed = neg || clean.starts_with('+');
        if i64::try_from(i).is_ok() || (!signed && u64::try_from(i).is_ok()) {
            return Scalar::Float(i as f64);
        }
    }
    if is_float_syntax(text)
        && let Ok(f) = clean.parse::<f64>()
        && f.is_finite()
    {
        return Scalar::Float(f);
    }
    Scalar::Str
}

/// What go-yaml v2 reads as an infinity or NaN, by the name Go's JSON
/// encoder gives it when it refuses it (sigs.k8s.io/yaml then fails: "json:
/// unsupported value: +Inf").
pub fn non_finite(text: &str) -> Option<&'static str> {
    match text {
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => Some("+Inf"),
        "-.inf" | "-.Inf" | "-.INF" => Some("-Inf"),
        ".nan" | ".NaN" | ".NAN" => Some("NaN"),
        _ => None,
    }
}

/// The integer `body` (sign and `_` already removed) spells: hexadecimal
/// `0x`, binary `0b`, octal `0o` or a leading `0`, or decimal.
fn integer(body: &str) -> Option<i128> {
    if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        i128::from_str_radix(h, 16).ok()
    } else if let Some(b) = body.strip_prefix("0b").or_else(|| body.strip_prefix("0B")) {
        i128::from_str_radix(b, 2).ok()
    } else if let Some(o) = body.strip_prefix("0o").or_else(|| body.strip_prefix("0O")) {
        i128::from_str_radix(o, 8).ok()
    } else if body.len() > 1 && body.starts_with('0') && body.bytes().all(|c| c.is_ascii_digit()) {
        i128::from_str_radix(&body[1..], 8).ok()
    } else if !body.is_empty() && body.bytes().all(|c| c.is_ascii_digit()) {
        body.parse::<i128>().ok()
    } else {
        None
    }
}

/// Whether `text` is spelled as go-yaml v2's float:
/// `^[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?$`
/// (matched by hand: the pattern is deterministic, no backtracking).
pub fn is_float_syntax(text: &str) -> bool {
    let b = text.as_bytes();
    let digits = |mut i: usize, underscore: bool| {
        while b
            .get(i)
            .is_some_and(|c| c.is_ascii_digit() || (underscore && *c == b'_'))
        {
            i += 1;
        }
        i
    };
    let mut i = usize::from(matches!(b.first(), Some(b'-' | b'+')));
    match b.get(i) {
        Some(b'.') => {
            let end = digits(i + 1, false);
            if end == i + 1 {
                return false;
            }
            i = end;
        }
        Some(c) if c.is_ascii_digit() => {
            i = digits(i + 1, true);
            if b.get(i) == Some(&b'.') {
                i = digits(i + 1, true);
            }
        }
        _ => return false,
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        let end = digits(i, false);
        if end == i {
            return false;
        }
        i = end;
    }
    i == b.len()
}

/// The plain scalar `text` as a template value.
pub fn resolve(text: &str) -> Value {
    match scalar(text) {
        Scalar::Null => Value::Nil,
        Scalar::Bool(b) => Value::Bool(b),
        Scalar::Float(f) => Value::Float(f),
        Scalar::Str => Value::str(text),
    }
}

/// The plain scalar `text` of a rendered manifest, as Helm's install (and
/// kubectl) read it: go-yaml v2's resolution, as for values, but an
/// integer stays the exact integer (`0755` is 493, `1_000` is 1000, `0x1F`
/// is 31), as sigs.k8s.io/yaml keeps it. An infinity or NaN (go-yaml v2
/// reads one, Go's JSON encoder refuses it) is null, as Kiln has always
/// read it.
pub fn resolve_output(text: &str) -> Value {
    match scalar(text) {
        Scalar::Float(f) if !f.is_finite() => Value::Nil,
        Scalar::Float(f) => match exact_integer(text) {
            Some(i) => Value::Int64(i),
            None => Value::Float(f),
        },
        _ => resolve(text),
    }
}

/// The integer go-yaml v2 reads the plain scalar `text` as, when it is one
/// that fits an int64.
fn exact_integer(text: &str) -> Option<i64> {
    let clean = text.replace('_', "");
    let (neg, body) = match clean.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, clean.strip_prefix('+').unwrap_or(&clean)),
    };
    let i = integer(body)?;
    i64::try_from(if neg { -i } else { i }).ok()
}

/// A mapping key as JSON names it (nil is `null`, others as Go prints them).
pub fn key_text(v: &Value) -> String {
    match v {
        Value::Nil => "null".to_owned(),
        other => other.to_go_string(),
    }
}

/// The plain scalar `text` as a mapping key: [`key_text`] of
/// [`resolve`], without the detour through a [`Value`] for strings.
pub fn plain_key(text: &str) -> String {
    match scalar(text) {
        Scalar::Null => "null".to_owned(),
        Scalar::Bool(b) => if b { "true" } else { "false" }.to_owned(),
        Scalar::Float(f) => Value::Float(f).to_go_string(),
        Scalar::Str => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex_lite::Regex;

    /// The pattern the hand-written matcher replaces.
    fn float_regex() -> Regex {
        Regex::new(r"^[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?$")
            .expect("a valid pattern")
    }

    /// Every string of up to 5 characters over an alphabet of the
    /// pattern's pieces (and a stranger) is matched as the regex matches it.
    #[test]
    fn float_syntax_is_the_regex() {
        let re = float_regex();
        let alphabet = ['0', '7', '_', '.', 'e', 'E', '-', '+', 'x'];
        let mut checked = 0;
        let mut word = Vec::new();
        fn walk(word: &mut Vec<char>, alphabet: &[char], re: &Regex, checked: &mut usize) {
            let s: String = word.iter().collect();
            assert_eq!(is_float_syntax(&s), re.is_match(&s), "{s:?}");
            *checked += 1;
            if word.len() == 5 {
                return;
            }
            for c in alphabet {
                word.push(*c);
                walk(word, alphabet, re, checked);
                word.pop();
            }
        }
        walk(&mut word, &alphabet, &re, &mut checked);
        assert!(checked > 60_000);
        for s in [
            "1e400",
            "12.5e-3",
            ".5",
            "+.5e+2",
            "1_000.0_1",
            "1.",
            "0.e1",
            "\n1",
            "1\n",
        ] {
            assert_eq!(is_float_syntax(s), re.is_match(s), "{s:?}");
        }
    }

    #[test]
    fn plain_keys_are_the_keys_of_resolved_values() {
        for s in [
            "", "~", "null", "yes", "Off", "017", "1.0", "1e21", "-0", "_1", "a", "0x1F",
        ] {
            assert_eq!(plain_key(s), key_text(&resolve(s)), "{s:?}");
        }
    }

    #[test]
    fn quirks_of_go_yaml_v2_are_kept() {
        let f = |s: &str| match scalar(s) {
            Scalar::Float(f) => Some(f),
            _ => None,
        };
        assert_eq!(f("_1"), Some(1.0));
        assert_eq!(f("0x-5"), Some(-5.0));
        assert_eq!(f("-0x1F"), Some(-31.0));
        assert_eq!(f("08"), Some(8.0));
        assert_eq!(f("017"), Some(15.0));
        assert_eq!(f("1e400"), None);
        assert_eq!(scalar("190:20:30"), Scalar::Str);
    }

    /// go-yaml v2 reads integers with
    /// `strconv.ParseInt(plain, 0, 64)`/`ParseUint`, so a hex, binary or
    /// octal integer beyond 64 bits is not a number: hex and binary stay
    /// strings, and an all-digit octal falls to the float pattern and is read
    /// as a decimal float. Helm v4.2.3 (values.yaml, `kindOf`):
    /// `0x1FFFFFFFFFFFFFFFFF` string, `0777777777777777777777777`
    /// float64 7.777777777777778e+23 (Kiln read them through i128:
    /// 5.902958103587057e+20 and 4.722366482869645e+21).
    #[test]
    fn radix_integers_beyond_64_bits_are_read_as_go_yaml_reads_them() {
        assert_eq!(scalar("0x1FFFFFFFFFFFFFFFFF"), Scalar::Str);
        assert_eq!(scalar(&format!("0b{}", "1".repeat(70))), Scalar::Str);
        assert_eq!(scalar("-0x8000000000000001"), Scalar::Str);
        assert_eq!(
            scalar("0777777777777777777777777"),
            Scalar::Float(7.777777777777778e23)
        );
    }
}
