//! A scalar of a `pattern` against a value of the resource: Kyverno's value
//! operators (`*`/`?` wildcards, `!`, `>`, `<`, `>=`, `<=`, ranges `a-b` and
//! `a!-b`, `|` and `&`), with durations and quantities compared as such.

use std::cmp::Ordering;

use serde_json::Value;

use crate::wildcard;
use kiln_gotime::time::parse_duration;

/// Whether `value` satisfies the scalar (or map) `pattern`.
pub fn matches(value: &Value, pattern: &Value) -> bool {
    match pattern {
        Value::Bool(p) => value.as_bool() == Some(*p),
        Value::Number(p) => match p.as_f64() {
            Some(p) => number_matches(value, p),
            None => false,
        },
        Value::Null => match value {
            Value::Null => true,
            Value::Number(n) => n.as_f64() == Some(0.0),
            Value::String(s) => s.is_empty(),
            Value::Bool(b) => !b,
            Value::Array(_) | Value::Object(_) => false,
        },
        // A map pattern here only asks for a map (its contents are walked
        // by the caller).
        Value::Object(_) => value.is_object(),
        Value::String(p) => string_matches(value, p),
        Value::Array(_) => false,
    }
}

/// A number of the policy (Kyverno reads them as float64) against a value.
fn number_matches(value: &Value, pattern: f64) -> bool {
    match value {
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => pattern.fract() == 0.0 && pattern == i as f64,
            (None, Some(f)) => f == pattern,
            _ => false,
        },
        Value::String(s) => s.trim().parse::<f64>().is_ok_and(|f| f == pattern),
        _ => false,
    }
}

/// A string pattern: `a | b` (any), each `x & y` (all).
fn string_matches(value: &Value, pattern: &str) -> bool {
    if value.as_str() == Some(pattern) {
        return true;
    }
    pattern.split('|').any(|alternative| {
        alternative
            .trim_matches(' ')
            .split('&')
            .all(|condition| condition_matches(value, condition.trim_matches(' ')))
    })
}

/// The operators of a string pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    Equal,
    NotEqual,
    More,
    Less,
    MoreEqual,
    LessEqual,
}

fn condition_matches(value: &Value, condition: &str) -> bool {
    if condition.len() >= 2 {
        for (prefix, operator) in [
            (">=", Operator::MoreEqual),
            ("<=", Operator::LessEqual),
            (">", Operator::More),
            ("<", Operator::Less),
            ("!", Operator::NotEqual),
        ] {
            if let Some(rest) = condition.strip_prefix(prefix) {
                // `!5-10` is not a negation but a range outside 5..10 only
                // when written `5!-10`; a leading `!` is always negation.
                return compare(value, rest.trim(), operator);
            }
        }
        if let Some((low, high)) = range(condition, "!-") {
            return compare(value, low, Operator::Less) || compare(value, high, Operator::More);
        }
        if let Some((low, high)) = range(condition, "-") {
            return compare(value, low, Operator::MoreEqual)
                && compare(value, high, Operator::LessEqual);
        }
    }
    compare(value, condition, Operator::Equal)
}

/// `LOW SEP HIGH` where both ends are numbers with an optional unit
/// (`10-20`, `1Gi-2Gi`, `-5-+5`).
fn range<'a>(condition: &'a str, separator: &str) -> Option<(&'a str, &'a str)> {
    // Each end: an optional sign, digits, an optional fraction, letters.
    fn end(text: &str) -> Option<usize> {
        let bytes = text.as_bytes();
        let mut i = 0;
        if i < bytes.len() && matches!(bytes[i], b'-' | b'+' | b'|') {
            i += 1;
        }
        let digits = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if i == digits {
            return None;
        }
        if i < bytes.len() && bytes[i] == b'.' {
            let fraction = i + 1;
            let mut j = fraction;
            while j < bytes.len() && bytes[j].is_ascii_digit() {
                j += 1;
            }
            if j > fraction {
                i = j;
            }
        }
        while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
            i += 1;
        }
        Some(i)
    }
    let low_len = end(condition)?;
    let rest = condition[low_len..].strip_prefix(separator)?;
    let high_len = end(rest)?;
    (high_len == rest.len()).then(|| (&condition[..low_len], rest))
}

fn compare(value: &Value, pattern: &str, operator: Operator) -> bool {
    if let Some(result) = compare_durations(value, pattern, operator) {
        return result;
    }
    if let Some(result) = compare_quantities(value, pattern, operator) {
        return result;
    }
    compare_strings(value, pattern, operator)
}

fn ordered(ordering: Ordering, operator: Operator) -> bool {
    match operator {
        Operator::Equal => ordering == Ordering::Equal,
        Operator::NotEqual => ordering != Ordering::Equal,
        Operator::More => ordering == Ordering::Greater,
        Operator::Less => ordering == Ordering::Less,
        Operator::MoreEqual => ordering != Ordering::Less,
        Operator::LessEqual => ordering != Ordering::Greater,
    }
}

/// A value as Kyverno turns numbers into text for durations and
/// quantities (`nil` is `0`, floats with six decimals).
fn number_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => Some("0".into()),
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(match n.as_i64() {
            Some(i) => i.to_string(),
            None => format!("{:.6}", n.as_f64()?),
        }),
        _ => None,
    }
}

fn compare_durations(value: &Value, pattern: &str, operator: Operator) -> Option<bool> {
    let pattern = parse_duration(pattern).ok()?;
    let value = parse_duration(&number_text(value)?).ok()?;
    Some(ordered(value.cmp(&pattern), operator))
}

fn compare_quantities(value: &Value, pattern: &str, operator: Operator) -> Option<bool> {
    let pattern = kiln_quantity::Quantity::parse(pattern).ok()?;
    let value = kiln_quantity::Quantity::parse(&number_text(value)?).ok()?;
    Some(ordered(value.cmp_value(&pattern), operator))
}

/// Text compared with wildcards; only `=` and `!` apply to text.
fn compare_strings(value: &Value, pattern: &str, operator: Operator) -> bool {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            // Go's strconv.FormatFloat(v, 'E', -1, 64).
            None => go_exponent(n.as_f64().unwrap_or_default()),
        },
        Value::Null | Value::Array(_) | Value::Object(_) => return false,
    };
    match operator {
        Operator::Equal => wildcard::matches(pattern, &text),
        Operator::NotEqual => !wildcard::matches(pattern, &text),
        _ => false,
    }
}

/// `1.5E+00`, as Go prints a float with the `E` verb and shortest digits.
fn go_exponent(f: f64) -> String {
    let text = format!("{f:E}");
    match text.split_once('E') {
        Some((mantissa, exponent)) => {
            let (sign, digits) = match exponent.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exponent),
            };
            format!("{mantissa}E{sign}{digits:0>2}")
        }
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn scalars_match_as_kyverno_s() {
        assert!(matches(&json!("nginx:1.27"), &json!("*:*")));
        assert!(!matches(&json!("nginx:latest"), &json!("!*:latest")));
        assert!(matches(&json!("nginx:1.27"), &json!("!*:latest")));
        assert!(matches(&json!(3), &json!(3.0)));
        assert!(!matches(&json!(3), &json!(3.5)));
        assert!(matches(&json!("3"), &json!(3)));
        assert!(matches(&json!(false), &Value::Null));
        assert!(matches(&json!(""), &Value::Null));
        assert!(!matches(&json!({}), &Value::Null));
        assert!(matches(&json!(5), &json!(">3")));
        assert!(matches(&json!(5), &json!(">=5")));
        assert!(!matches(&json!(5), &json!("<5")));
        assert!(matches(&json!("1Gi"), &json!(">512Mi")));
        assert!(matches(&json!("500m"), &json!("<=1")));
        assert!(matches(&json!("90s"), &json!(">1m")));
        assert!(matches(&json!(7), &json!("5-10")));
        assert!(!matches(&json!(11), &json!("5-10")));
        assert!(matches(&json!(11), &json!("5!-10")));
        assert!(!matches(&json!(7), &json!("5!-10")));
        assert!(matches(&json!("b"), &json!("a | b")));
        assert!(matches(&json!("abc"), &json!("a* & *c")));
        assert!(!matches(&json!("abd"), &json!("a* & *c")));
        assert!(matches(&json!(true), &json!("true")));
        assert!(!matches(&Value::Null, &json!("*")));
        assert!(matches(&json!(1.5), &json!("1.5E+00")));
        assert!(!matches(&json!("abc"), &json!(">a")));
    }
}
