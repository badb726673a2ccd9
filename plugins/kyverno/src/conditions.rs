//! The operators of `preconditions` and `deny.conditions`: a key and a value
//! (both after variable substitution) compared as Kyverno compares them.

use std::cmp::Ordering;

use serde_json::Value;

use crate::value;
use crate::wildcard;
use kiln_gotime::time::parse_duration;

/// A condition operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    Equals,
    NotEquals,
    In,
    NotIn,
    AnyIn,
    AllIn,
    AnyNotIn,
    AllNotIn,
    GreaterThan,
    GreaterThanOrEquals,
    LessThan,
    LessThanOrEquals,
    DurationGreaterThan,
    DurationGreaterThanOrEquals,
    DurationLessThan,
    DurationLessThanOrEquals,
}

impl Operator {
    /// The operator a policy names (Kyverno accepts any case, and the
    /// deprecated `Equal`/`NotEqual` spellings).
    pub fn parse(name: &str) -> Option<Operator> {
        Some(match name.to_ascii_lowercase().as_str() {
            "equals" | "equal" => Operator::Equals,
            "notequals" | "notequal" => Operator::NotEquals,
            "in" => Operator::In,
            "notin" => Operator::NotIn,
            "anyin" => Operator::AnyIn,
            "allin" => Operator::AllIn,
            "anynotin" => Operator::AnyNotIn,
            "allnotin" => Operator::AllNotIn,
            "greaterthan" => Operator::GreaterThan,
            "greaterthanorequals" => Operator::GreaterThanOrEquals,
            "lessthan" => Operator::LessThan,
            "lessthanorequals" => Operator::LessThanOrEquals,
            "durationgreaterthan" => Operator::DurationGreaterThan,
            "durationgreaterthanorequals" => Operator::DurationGreaterThanOrEquals,
            "durationlessthan" => Operator::DurationLessThan,
            "durationlessthanorequals" => Operator::DurationLessThanOrEquals,
            _ => return None,
        })
    }
}

/// Whether `key OPERATOR value` holds.
pub fn holds(key: &Value, operator: Operator, value: &Value) -> bool {
    match operator {
        Operator::Equals => equals(key, value),
        Operator::NotEquals => !equals(key, value),
        Operator::In => membership(key, value, Set::All, false),
        Operator::NotIn => membership(key, value, Set::All, true),
        Operator::AnyIn => membership(key, value, Set::Any, false),
        Operator::AllIn => membership(key, value, Set::All, false),
        Operator::AnyNotIn => membership(key, value, Set::Any, true),
        Operator::AllNotIn => membership(key, value, Set::All, true),
        Operator::GreaterThan => numeric(key, value).is_some_and(|o| o == Ordering::Greater),
        Operator::GreaterThanOrEquals => numeric(key, value).is_some_and(|o| o != Ordering::Less),
        Operator::LessThan => numeric(key, value).is_some_and(|o| o == Ordering::Less),
        Operator::LessThanOrEquals => numeric(key, value).is_some_and(|o| o != Ordering::Greater),
        Operator::DurationGreaterThan => {
            durations(key, value).is_some_and(|o| o == Ordering::Greater)
        }
        Operator::DurationGreaterThanOrEquals => {
            durations(key, value).is_some_and(|o| o != Ordering::Less)
        }
        Operator::DurationLessThan => durations(key, value).is_some_and(|o| o == Ordering::Less),
        Operator::DurationLessThanOrEquals => {
            durations(key, value).is_some_and(|o| o != Ordering::Greater)
        }
    }
}

/// `Equals`: maps and lists deeply; numbers by value; text as a wildcard
/// pattern written in the value, durations and quantities by what they
/// measure.
fn equals(key: &Value, value: &Value) -> bool {
    match key {
        Value::Bool(k) => value.as_bool() == Some(*k),
        Value::Number(k) => match (k.as_f64(), value) {
            (Some(k), Value::Number(v)) => v.as_f64() == Some(k),
            (Some(k), Value::String(v)) => v.parse::<f64>().is_ok_and(|v| v == k),
            _ => false,
        },
        Value::String(k) => {
            if let (Ok(a), Some(Ok(b))) = (parse_duration(k), value.as_str().map(parse_duration)) {
                return a == b;
            }
            if let (Ok(a), Some(v)) = (kiln_quantity::Quantity::parse(k), value.as_str()) {
                if let Ok(b) = kiln_quantity::Quantity::parse(v) {
                    return a.cmp_value(&b) == Ordering::Equal;
                }
                return false;
            }
            value.as_str().is_some_and(|v| wildcard::matches(v, k))
        }
        Value::Null => value.is_null(),
        Value::Array(_) | Value::Object(_) => key == value,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Set {
    Any,
    All,
}

/// Go's `fmt.Sprint` of a scalar.
fn sprint(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".into(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => {
                let f = n.as_f64().unwrap_or_default();
                if f.fract() == 0.0 && f.abs() < 1e21 {
                    format!("{f:.0}")
                } else {
                    f.to_string()
                }
            }
        },
        other => other.to_string(),
    }
}

fn either_matches(a: &str, b: &str) -> bool {
    wildcard::matches(a, b) || wildcard::matches(b, a)
}

/// The `In` family: the key (one value or a list) against the value (a
/// list, or text: a wildcard, a range `1-10`, or a JSON list of strings).
fn membership(key: &Value, value: &Value, set: Set, negated: bool) -> bool {
    let keys: Vec<String> = match key {
        Value::Array(items) => items.iter().map(sprint).collect(),
        Value::Object(_) | Value::Null => return false,
        scalar => vec![sprint(scalar)],
    };
    let single = !key.is_array();
    let values: Vec<String> = match value {
        Value::Array(items) => items.iter().map(sprint).collect(),
        Value::String(text) => {
            if single && wildcard::matches(text, &keys[0]) {
                return !negated;
            }
            if !single && keys.len() == 1 && keys[0] == *text {
                return !negated;
            }
            if is_range(text) {
                let in_range = |k: &String| value::matches(&Value::String(k.clone()), value);
                return match (set, negated) {
                    (Set::Any, false) => keys.iter().any(in_range),
                    (Set::All, false) => keys.iter().all(in_range),
                    (Set::Any, true) => keys.iter().any(|k| !in_range(k)),
                    (Set::All, true) => !keys.iter().any(in_range),
                };
            }
            match serde_json::from_str::<Value>(text) {
                Ok(Value::Array(items)) => items.iter().map(sprint).collect(),
                Ok(_) => return false,
                Err(_) => vec![text.clone()],
            }
        }
        Value::Object(_) | Value::Null => return false,
        scalar if !single => vec![sprint(scalar)],
        _ => return false,
    };
    let found = |k: &String| values.iter().any(|v| either_matches(k, v));
    match (set, negated) {
        (Set::Any, false) => keys.iter().any(found),
        (Set::All, false) => keys.iter().all(found),
        (Set::Any, true) => keys.iter().any(|k| !found(k)),
        (Set::All, true) => !keys.iter().any(found),
    }
}

fn is_range(text: &str) -> bool {
    let digits = |s: &str| {
        let s = s.strip_prefix(['-', '+']).unwrap_or(s);
        let number = s.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        !number.is_empty()
            && number.split_once('.').map_or(
                number.bytes().all(|b| b.is_ascii_digit()),
                |(w, f)| {
                    !w.is_empty()
                        && !f.is_empty()
                        && w.bytes().chain(f.bytes()).all(|b| b.is_ascii_digit())
                },
            )
    };
    text.char_indices()
        .skip(1)
        .any(|(i, c)| c == '-' && digits(&text[..i]) && digits(&text[i + 1..]))
}

/// The numeric operators: durations, then quantities, then numbers, then
/// semantic versions.
fn numeric(key: &Value, value: &Value) -> Option<Ordering> {
    let key_text = sprint(key);
    let value_text = sprint(value);
    if let (Ok(a), Ok(b)) = (parse_duration(&key_text), parse_duration(&value_text)) {
        return Some(a.cmp(&b));
    }
    if (key.is_string() || value.is_string())
        && let (Ok(a), Ok(b)) = (
            kiln_quantity::Quantity::parse(&key_text),
            kiln_quantity::Quantity::parse(&value_text),
        )
    {
        return Some(a.cmp_value(&b));
    }
    if let (Ok(a), Ok(b)) = (key_text.parse::<f64>(), value_text.parse::<f64>()) {
        return a.partial_cmp(&b);
    }
    let version = |t: &str| {
        let core = t.strip_prefix('v').unwrap_or(t);
        let parts: Vec<u64> = core
            .split('.')
            .map(|p| p.parse().ok())
            .collect::<Option<_>>()?;
        (parts.len() == 3).then_some(parts)
    };
    Some(version(&key_text)?.cmp(&version(&value_text)?))
}

fn durations(key: &Value, value: &Value) -> Option<Ordering> {
    let parse = |v: &Value| match v {
        Value::Number(n) => n.as_f64().map(|s| (s * 1e9) as i64),
        Value::String(s) => parse_duration(s).ok(),
        _ => None,
    };
    Some(parse(key)?.cmp(&parse(value)?))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn operators_hold_as_kyverno_s() {
        assert!(holds(
            &json!("CREATE"),
            Operator::AnyIn,
            &json!(["CREATE", "UPDATE"])
        ));
        assert!(!holds(
            &json!("DELETE"),
            Operator::AnyIn,
            &json!(["CREATE", "UPDATE"])
        ));
        assert!(holds(
            &json!(["a", "b"]),
            Operator::AllIn,
            &json!(["a", "b", "c"])
        ));
        assert!(!holds(
            &json!(["a", "d"]),
            Operator::AllIn,
            &json!(["a", "b", "c"])
        ));
        assert!(holds(
            &json!(["a", "d"]),
            Operator::AnyNotIn,
            &json!(["a", "b"])
        ));
        assert!(holds(
            &json!(["x", "y"]),
            Operator::AllNotIn,
            &json!(["a", "b"])
        ));
        assert!(holds(
            &json!("kube-system"),
            Operator::AnyIn,
            &json!(["kube-*"])
        ));
        assert!(holds(&json!(5), Operator::AnyIn, &json!("1-10")));
        assert!(!holds(&json!(15), Operator::AnyIn, &json!("1-10")));
        assert!(holds(&json!("abc"), Operator::Equals, &json!("a*")));
        assert!(holds(&json!("1Gi"), Operator::Equals, &json!("1024Mi")));
        assert!(holds(&json!(3), Operator::GreaterThan, &json!(2)));
        assert!(holds(&json!("2Gi"), Operator::GreaterThan, &json!("1Gi")));
        assert!(holds(
            &json!("1h"),
            Operator::GreaterThanOrEquals,
            &json!("60m")
        ));
        assert!(holds(
            &json!("1.10.0"),
            Operator::GreaterThan,
            &json!("1.9.3")
        ));
        assert!(holds(
            &json!("2h"),
            Operator::DurationGreaterThan,
            &json!("90m")
        ));
        assert!(holds(&json!({"a": 1}), Operator::Equals, &json!({"a": 1})));
        assert!(holds(&json!(""), Operator::Equals, &json!("")));
        assert!(holds(&json!(null), Operator::Equals, &json!(null)));
        assert_eq!(Operator::parse("AnyNotIn"), Some(Operator::AnyNotIn));
        assert_eq!(Operator::parse("Equal"), Some(Operator::Equals));
        assert_eq!(Operator::parse("Contains"), None);
    }
}
