//! `ignoreDifferences`, as in Argo CD: fields to leave out of the comparison
//! of some objects, named by JSON pointer, by jq path expression, or by the
//! field managers that own them. jq expressions run in worker processes
//! ([`super::jq`]), under a deadline and a memory cap.

use serde::Deserialize;
use serde_json::Value;

use super::jq::{Jq, JqError};
use crate::manifest::ObjectKey;

/// Why an ignore rule could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IgnoreError {
    /// A jq expression does not compile (or its compilation was stopped).
    #[error("ignoreDifferences: jq expression {expression:?} is invalid: {error}")]
    InvalidJq {
        /// The expression.
        expression: String,
        /// The compiler's complaint, or why the compilation was stopped.
        error: JqError,
    },
    /// A JSON pointer does not start with `/`.
    #[error("ignoreDifferences: JSON pointer {0:?} must start with '/'")]
    InvalidPointer(String),
    /// A jq expression failed, or was stopped, on an object.
    #[error("ignoreDifferences: jq expression {expression:?} on {object}: {error}")]
    JqFailed {
        /// The expression.
        expression: String,
        /// The object it ran on.
        object: String,
        /// What went wrong.
        error: JqError,
    },
}

/// One rule, spelled as in an Argo CD Application's `spec.ignoreDifferences`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IgnoreDifferences {
    /// API group; absent or empty matches the core group only when `kind`
    /// is a core kind, as in Argo CD any group matches when omitted.
    #[serde(default)]
    pub group: Option<String>,
    /// Kind (`*` matches any).
    pub kind: String,
    /// Object name; absent matches all.
    #[serde(default)]
    pub name: Option<String>,
    /// Namespace; absent matches all.
    #[serde(default)]
    pub namespace: Option<String>,
    /// RFC 6901 pointers of fields to ignore.
    #[serde(default)]
    pub json_pointers: Vec<String>,
    /// jq path expressions selecting fields to ignore
    /// (`.spec.template.spec.containers[] | select(.name == "istio-proxy")`).
    #[serde(default)]
    pub jq_path_expressions: Vec<String>,
    /// Fields owned by these field managers are ignored.
    #[serde(default)]
    pub managed_fields_managers: Vec<String>,
}

impl IgnoreDifferences {
    fn matches(&self, key: &ObjectKey) -> bool {
        let group = self
            .group
            .as_deref()
            .is_none_or(|g| g == "*" || g == key.group);
        let kind = self.kind == "*" || self.kind == key.kind;
        let name = self.name.as_deref().is_none_or(|n| n == key.name);
        let namespace = self
            .namespace
            .as_deref()
            .is_none_or(|ns| Some(ns) == key.namespace.as_deref());
        group && kind && name && namespace
    }
}

/// A validated set of rules.
#[derive(Clone, Debug, Default)]
pub struct IgnoreRules {
    rules: Vec<IgnoreDifferences>,
    /// Where the jq expressions run; `None` when there are none.
    jq: Option<Jq>,
}

impl IgnoreRules {
    /// Checks every pointer and compiles every jq expression once (in a
    /// worker of `jq`, like their runs), so that a typo is reported before
    /// any comparison.
    pub async fn new(rules: Vec<IgnoreDifferences>, jq: &Jq) -> Result<Self, IgnoreError> {
        let mut uses_jq = false;
        for rule in &rules {
            if let Some(bad) = rule.json_pointers.iter().find(|p| !p.starts_with('/')) {
                return Err(IgnoreError::InvalidPointer(bad.clone()));
            }
            for expression in &rule.jq_path_expressions {
                uses_jq = true;
                jq.check(expression)
                    .await
                    .map_err(|error| IgnoreError::InvalidJq {
                        expression: expression.clone(),
                        error,
                    })?;
            }
        }
        Ok(Self {
            rules,
            jq: uses_jq.then(|| jq.clone()),
        })
    }

    /// True when no rule is set.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Removes the ignored fields of `object` (identified by `key`); `live`
    /// provides the managed fields for `managedFieldsManagers`.
    pub async fn apply(
        &self,
        key: &ObjectKey,
        live: Option<&Value>,
        object: &mut Value,
    ) -> Result<(), IgnoreError> {
        for rule in self.rules.iter().filter(|r| r.matches(key)) {
            for pointer in &rule.json_pointers {
                remove_pointer(object, pointer);
            }
            for expression in &rule.jq_path_expressions {
                let jq = self.jq.as_ref().expect("set when a rule has an expression");
                *object = jq
                    .delete(expression, object.take())
                    .await
                    .map_err(|error| IgnoreError::JqFailed {
                        expression: expression.clone(),
                        object: key.to_string(),
                        error,
                    })?;
            }
            if let Some(entries) = live
                .and_then(|l| l.pointer("/metadata/managedFields"))
                .and_then(Value::as_array)
            {
                for entry in entries {
                    let manager = entry
                        .get("manager")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    if rule.managed_fields_managers.iter().any(|m| m == manager)
                        && let Some(fields) = entry.get("fieldsV1")
                    {
                        remove_fields(object, fields);
                    }
                }
            }
        }
        Ok(())
    }
}

/// Removes the field at an RFC 6901 pointer, if present.
fn remove_pointer(object: &mut Value, pointer: &str) {
    let unescape = |s: &str| s.replace("~1", "/").replace("~0", "~");
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let last = unescape(last);
    match object.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.remove(&last);
        }
        Some(Value::Array(items)) => {
            if let Ok(index) = last.parse::<usize>()
                && index < items.len()
            {
                items.remove(index);
            }
        }
        _ => {}
    }
}

/// Removes the fields of a `fieldsV1` set from `object`.
pub(crate) fn remove_fields(object: &mut Value, fields: &Value) {
    let Some(fields) = fields.as_object() else {
        return;
    };
    for (element, child) in fields {
        let leaf = child.as_object().is_none_or(|c| c.keys().all(|k| k == "."));
        if let Some(name) = element.strip_prefix("f:") {
            if let Value::Object(map) = object {
                if leaf {
                    map.remove(name);
                } else if let Some(next) = map.get_mut(name) {
                    remove_fields(next, child);
                }
            }
        } else if let Some(key) = element.strip_prefix("k:") {
            let Ok(Value::Object(key)) = serde_json::from_str::<Value>(key) else {
                continue;
            };
            if let Value::Array(items) = object {
                let matches = |item: &Value| key.iter().all(|(k, v)| item.get(k) == Some(v));
                if leaf {
                    items.retain(|item| !matches(item));
                } else if let Some(item) = items.iter_mut().find(|item| matches(item)) {
                    remove_fields(item, child);
                }
            }
        } else if let Some(value) = element.strip_prefix("v:") {
            let Ok(value) = serde_json::from_str::<Value>(value) else {
                continue;
            };
            if let Value::Array(items) = object {
                items.retain(|item| *item != value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn key() -> ObjectKey {
        ObjectKey {
            group: "apps".into(),
            kind: "Deployment".into(),
            namespace: Some("default".into()),
            name: "web".into(),
        }
    }

    /// jq expressions need the `kiln` binary as their worker: they are
    /// tested in `tests/ignore_differences.rs`.
    #[tokio::test]
    async fn pointers_and_managers_remove_fields() {
        let rules = IgnoreRules::new(
            vec![IgnoreDifferences {
                group: Some("apps".into()),
                kind: "Deployment".into(),
                json_pointers: vec!["/spec/replicas".into()],
                managed_fields_managers: vec!["hpa".into()],
                ..Default::default()
            }],
            &Jq::default(),
        )
        .await
        .unwrap();
        let live = json!({"metadata": {"managedFields": [{"manager": "hpa", "fieldsV1": {"f:metadata": {"f:labels": {"f:scaled": {}}}}}]}});
        let mut object = json!({"metadata": {"labels": {"scaled": "yes", "app": "web"}}, "spec": {"replicas": 3}});
        rules.apply(&key(), Some(&live), &mut object).await.unwrap();
        assert_eq!(
            object,
            json!({"metadata": {"labels": {"app": "web"}}, "spec": {}})
        );
        let other = ObjectKey {
            kind: "StatefulSet".into(),
            ..key()
        };
        let mut untouched = json!({"spec": {"replicas": 3}});
        rules.apply(&other, None, &mut untouched).await.unwrap();
        assert_eq!(untouched, json!({"spec": {"replicas": 3}}));
    }

    #[tokio::test]
    async fn bad_pointers_are_refused_up_front() {
        let bad_pointer = IgnoreDifferences {
            kind: "*".into(),
            json_pointers: vec!["spec".into()],
            ..Default::default()
        };
        assert!(matches!(
            IgnoreRules::new(vec![bad_pointer], &Jq::default()).await,
            Err(IgnoreError::InvalidPointer(_))
        ));
    }
}
