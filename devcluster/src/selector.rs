//! Label and field selectors, in the text form of the `labelSelector` and
//! `fieldSelector` query parameters.

use serde_json::Value;

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector; every requirement must hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    /// Parses `app=web,tier!=db,env in (a,b),!legacy,owner`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for term in split_terms(text) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            requirements.push(
                parse_term(term).ok_or_else(|| format!("unable to parse requirement: {term:?}"))?,
            );
        }
        Ok(Self(requirements))
    }

    /// True when the object's labels satisfy every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object);
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        self.0.iter().all(|requirement| match requirement {
            Requirement::Equals(k, v) => label(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            Requirement::In(k, values) => label(k).is_some_and(|l| values.iter().any(|v| v == l)),
            Requirement::NotIn(k, values) => label(k).is_none_or(|l| values.iter().all(|v| v != l)),
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::DoesNotExist(k) => label(k).is_none(),
        })
    }
}

/// Splits on commas outside parentheses.
fn split_terms(text: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    terms
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

fn parse_term(term: &str) -> Option<Requirement> {
    if let Some(key) = term.strip_prefix('!') {
        return valid_key(key.trim()).then(|| Requirement::DoesNotExist(key.trim().to_owned()));
    }
    for (op, set_op) in [(" notin ", false), (" in ", true)] {
        if let Some((key, values)) = term.split_once(op) {
            let values = values.trim().strip_prefix('(')?.strip_suffix(')')?;
            let values: Vec<String> = values
                .split(',')
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .collect();
            let key = key.trim().to_owned();
            if !valid_key(&key) {
                return None;
            }
            return Some(if set_op {
                Requirement::In(key, values)
            } else {
                Requirement::NotIn(key, values)
            });
        }
    }
    for (op, equal) in [("!=", false), ("==", true), ("=", true)] {
        if let Some((key, value)) = term.split_once(op) {
            let (key, value) = (key.trim().to_owned(), value.trim().to_owned());
            if !valid_key(&key) {
                return None;
            }
            return Some(if equal {
                Requirement::Equals(key, value)
            } else {
                Requirement::NotEquals(key, value)
            });
        }
    }
    valid_key(term).then(|| Requirement::Exists(term.to_owned()))
}

/// A parsed field selector over `metadata.name` and `metadata.namespace`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses `metadata.name=web,metadata.namespace!=kube-system`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{text}'; can't understand '{term}'"
                ));
            };
            let field = field.trim();
            if !matches!(field, "metadata.name" | "metadata.namespace") {
                return Err(format!("field label not supported: {field}"));
            }
            terms.push((field.to_owned(), equal, value.trim().to_owned()));
        }
        Ok(Self(terms))
    }

    /// True when the object satisfies every term.
    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let pointer = if field == "metadata.name" {
                "/metadata/name"
            } else {
                "/metadata/namespace"
            };
            let actual = object
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default();
            (actual == value) == *equal
        })
    }

    /// The name this selector pins, if any (`kubectl get x --watch`).
    pub fn name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(field, equal, _)| field == "metadata.name" && *equal)
            .map(|(_, _, value)| value.as_str())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn label_selector_operators() {
        let object = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        for (selector, expected) in [
            ("app=web", true),
            ("app==web,tier=front", true),
            ("app!=web", false),
            ("tier in (front, back)", true),
            ("tier notin (front)", false),
            ("env notin (prod)", true),
            ("app", true),
            ("!app", false),
            ("!env", true),
            ("", true),
        ] {
            assert_eq!(
                LabelSelector::parse(selector).unwrap().matches(&object),
                expected,
                "{selector}"
            );
        }
        assert!(LabelSelector::parse("app in web").is_err());
    }

    #[test]
    fn field_selector_supports_name_and_namespace_only() {
        let object = json!({"metadata": {"name": "a", "namespace": "n"}});
        assert!(
            FieldSelector::parse("metadata.name=a,metadata.namespace==n")
                .unwrap()
                .matches(&object)
        );
        assert!(
            !FieldSelector::parse("metadata.name!=a")
                .unwrap()
                .matches(&object)
        );
        assert!(
            FieldSelector::parse("spec.nodeName=x")
                .unwrap_err()
                .contains("not supported")
        );
    }
}
