//! Selecting objects: patch `target`s and replacement selectors
//! (group, version, kind, name and namespace as anchored regular
//! expressions, label and annotation selectors).

use serde::Deserialize;
use serde_json::Value;

use crate::build::Res;

/// A selector as kustomization files write it.
#[derive(Debug, Default, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Selector {
    /// API group (`""` is the core group).
    pub group: Option<String>,
    /// API version.
    pub version: Option<String>,
    /// Kind.
    pub kind: Option<String>,
    /// Name (a regular expression, anchored).
    pub name: Option<String>,
    /// Namespace (a regular expression, anchored).
    pub namespace: Option<String>,
    /// A label selector (`a=b,c in (d,e),!f`).
    pub label_selector: Option<String>,
    /// An annotation selector, in the label-selector syntax.
    pub annotation_selector: Option<String>,
}

/// A selector ready to match.
#[derive(Debug)]
pub struct Matcher {
    group: Option<regex_lite::Regex>,
    version: Option<regex_lite::Regex>,
    kind: Option<regex_lite::Regex>,
    name: Option<regex_lite::Regex>,
    namespace: Option<regex_lite::Regex>,
    labels: Option<Vec<Requirement>>,
    annotations: Option<Vec<Requirement>>,
}

fn anchored(field: &str, pattern: &Option<String>) -> Result<Option<regex_lite::Regex>, String> {
    match pattern.as_deref() {
        None | Some("") => Ok(None),
        Some(p) => regex_lite::Regex::new(&format!("^(?:{p})$"))
            .map(Some)
            .map_err(|e| format!("{field} {p:?} is not a valid regular expression: {e}")),
    }
}

impl Selector {
    /// Compiles the selector; a bad regular expression or label selector is
    /// an error naming the field.
    pub fn matcher(&self) -> Result<Matcher, String> {
        Ok(Matcher {
            group: anchored("group", &self.group)?,
            version: anchored("version", &self.version)?,
            kind: anchored("kind", &self.kind)?,
            name: anchored("name", &self.name)?,
            namespace: anchored("namespace", &self.namespace)?,
            labels: self
                .label_selector
                .as_deref()
                .filter(|s| !s.trim().is_empty())
                .map(|s| parse_requirements(s).map_err(|e| format!("labelSelector: {e}")))
                .transpose()?,
            annotations: self
                .annotation_selector
                .as_deref()
                .filter(|s| !s.trim().is_empty())
                .map(|s| parse_requirements(s).map_err(|e| format!("annotationSelector: {e}")))
                .transpose()?,
        })
    }

    /// How the selector reads in a message.
    pub fn describe(&self) -> String {
        let text = describe_fields(&[
            ("group", &self.group),
            ("version", &self.version),
            ("kind", &self.kind),
            ("name", &self.name),
            ("namespace", &self.namespace),
            ("labelSelector", &self.label_selector),
            ("annotationSelector", &self.annotation_selector),
        ]);
        if text.is_empty() {
            "everything".into()
        } else {
            text
        }
    }
}

/// `field=value, ...` for the fields that are set.
pub fn describe_fields(fields: &[(&str, &Option<String>)]) -> String {
    fields
        .iter()
        .filter_map(|(field, value)| value.as_ref().map(|v| format!("{field}={v}")))
        .collect::<Vec<_>>()
        .join(", ")
}

fn matches(regex: &Option<regex_lite::Regex>, values: &[&str]) -> bool {
    regex
        .as_ref()
        .is_none_or(|r| values.iter().any(|v| r.is_match(v)))
}

impl Matcher {
    /// Whether `res` is selected: names and namespaces match the original
    /// or the current one (kustomize's rule), the rest the current object.
    pub fn selects(&self, res: &Res) -> bool {
        let current = res.current();
        let original = res.original();
        matches(&self.group, &[&current.group])
            && matches(&self.version, &[&current.version])
            && matches(&self.kind, &[&current.kind])
            && matches(&self.name, &[&original.name, &current.name])
            && matches(
                &self.namespace,
                &[
                    original.effective_namespace(),
                    current.effective_namespace(),
                ],
            )
            && self
                .labels
                .as_ref()
                .is_none_or(|r| satisfied(r, &res.value["metadata"]["labels"]))
            && self
                .annotations
                .as_ref()
                .is_none_or(|r| satisfied(r, &res.value["metadata"]["annotations"]))
    }
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// Splits at commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn parse_requirements(s: &str) -> Result<Vec<Requirement>, String> {
    let mut out = Vec::new();
    for part in split_top(s) {
        let part = part.trim();
        if part.is_empty() {
            return Err(format!("{s:?} has an empty requirement"));
        }
        let set = |rest: &str| -> Result<Vec<String>, String> {
            let rest = rest.trim();
            let inner = rest
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| format!("{part:?}: expected a (value, ...) list"))?;
            Ok(inner.split(',').map(|v| v.trim().to_owned()).collect())
        };
        let requirement = if let Some(key) = part.strip_prefix('!') {
            Requirement::NotExists(key.trim().to_owned())
        } else if let Some((key, value)) = part.split_once("!=") {
            Requirement::NotEquals(key.trim().into(), value.trim().into())
        } else if let Some((key, value)) = part.split_once("==") {
            Requirement::Equals(key.trim().into(), value.trim().into())
        } else if let Some((key, value)) = part.split_once('=') {
            Requirement::Equals(key.trim().into(), value.trim().into())
        } else if let Some((key, rest)) = part.split_once(" notin ") {
            Requirement::NotIn(key.trim().into(), set(rest)?)
        } else if let Some((key, rest)) = part.split_once(" in ") {
            Requirement::In(key.trim().into(), set(rest)?)
        } else if part.contains(char::is_whitespace) || part.contains(['(', ')']) {
            return Err(format!("{part:?} is not a requirement"));
        } else {
            Requirement::Exists(part.to_owned())
        };
        out.push(requirement);
    }
    Ok(out)
}

fn satisfied(requirements: &[Requirement], labels: &Value) -> bool {
    let get = |key: &str| labels.get(key).and_then(Value::as_str);
    requirements.iter().all(|r| match r {
        Requirement::Equals(k, v) => get(k) == Some(v),
        Requirement::NotEquals(k, v) => get(k) != Some(v),
        Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
        Requirement::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
        Requirement::Exists(k) => get(k).is_some(),
        Requirement::NotExists(k) => get(k).is_none(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors_use_the_kubernetes_syntax() {
        let labels = json!({"app": "web", "tier": "front"});
        let yes = |s: &str| satisfied(&parse_requirements(s).unwrap(), &labels);
        assert!(yes("app=web"));
        assert!(yes("app==web,tier in (front, back)"));
        assert!(yes("!missing,tier"));
        assert!(yes("app!=api,env notin (prod)"));
        assert!(!yes("app=api"));
        assert!(!yes("tier notin (front)"));
        assert!(parse_requirements("app in front").is_err());
    }
}
