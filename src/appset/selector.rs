//! Label selectors (`matchLabels`, `matchExpressions`) over a parameter
//! set's flattened parameters (a generator's `selector`) or a cluster's
//! labels (the `clusters` generator's).

use std::collections::BTreeMap;

use serde_json::Value;

/// A label selector, checked.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Selector {
    labels: BTreeMap<String, String>,
    expressions: Vec<Expression>,
}

#[derive(Debug, Clone, PartialEq)]
struct Expression {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl Selector {
    /// Reads a selector; an error says what is wrong.
    pub fn parse(value: &Value) -> Result<Selector, String> {
        let Value::Object(map) = value else {
            return Err("not an object".into());
        };
        if let Some(unknown) = map
            .keys()
            .find(|k| *k != "matchLabels" && *k != "matchExpressions")
        {
            return Err(format!(
                "unknown field {unknown:?} (matchLabels, matchExpressions)"
            ));
        }
        let mut labels = BTreeMap::new();
        match map.get("matchLabels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (k, v) in m {
                    let v = v
                        .as_str()
                        .ok_or_else(|| format!("matchLabels.{k}: not a string"))?;
                    labels.insert(k.clone(), v.to_owned());
                }
            }
            Some(_) => return Err("matchLabels: not an object".into()),
        }
        let mut expressions = Vec::new();
        match map.get("matchExpressions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    let at = format!("matchExpressions[{i}]");
                    let key = item["key"]
                        .as_str()
                        .ok_or_else(|| format!("{at}.key: required"))?;
                    let operator = match item["operator"].as_str() {
                        Some("In") => Operator::In,
                        Some("NotIn") => Operator::NotIn,
                        Some("Exists") => Operator::Exists,
                        Some("DoesNotExist") => Operator::DoesNotExist,
                        other => {
                            return Err(format!(
                                "{at}.operator: {other:?} is not In, NotIn, Exists or DoesNotExist"
                            ));
                        }
                    };
                    let values: Vec<String> = match &item["values"] {
                        Value::Null => Vec::new(),
                        Value::Array(v) => v
                            .iter()
                            .map(|s| s.as_str().map(str::to_owned))
                            .collect::<Option<_>>()
                            .ok_or_else(|| format!("{at}.values: not a list of strings"))?,
                        _ => return Err(format!("{at}.values: not a list")),
                    };
                    let needs_values = matches!(operator, Operator::In | Operator::NotIn);
                    if needs_values == values.is_empty() {
                        return Err(format!(
                            "{at}: In and NotIn need values, Exists and DoesNotExist take none"
                        ));
                    }
                    expressions.push(Expression {
                        key: key.to_owned(),
                        operator,
                        values,
                    });
                }
            }
            Some(_) => return Err("matchExpressions: not a list".into()),
        }
        Ok(Selector {
            labels,
            expressions,
        })
    }

    /// Whether `labels` satisfy the selector (an empty one selects all).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.expressions.iter().all(|e| {
                let value = labels.get(&e.key);
                match e.operator {
                    Operator::In => value.is_some_and(|v| e.values.contains(v)),
                    Operator::NotIn => value.is_none_or(|v| !e.values.contains(v)),
                    Operator::Exists => value.is_some(),
                    Operator::DoesNotExist => value.is_none(),
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn selectors_match_as_kubernetes_selectors_do() {
        let s = Selector::parse(&json!({"matchLabels": {"env": "prod"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                 {"key": "legacy", "operator": "DoesNotExist"}]}))
        .unwrap();
        let labels = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert!(s.matches(&labels(&[("env", "prod"), ("tier", "a")])));
        assert!(!s.matches(&labels(&[("env", "prod"), ("tier", "c")])));
        assert!(!s.matches(&labels(&[("env", "prod"), ("tier", "a"), ("legacy", "")])));
        assert!(
            Selector::parse(&json!({}))
                .unwrap()
                .matches(&BTreeMap::new())
        );
        assert!(
            Selector::parse(&json!({"matchExpressions": [{"key": "a", "operator": "In"}]}))
                .is_err()
        );
        assert!(
            Selector::parse(&json!({"matchLabel": {}}))
                .unwrap_err()
                .contains("matchLabel")
        );
    }
}
