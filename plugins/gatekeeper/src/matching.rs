//! `spec.match` of a constraint, applied as Gatekeeper applies it to an
//! object: kinds, scope, namespaces / excludedNamespaces (globs),
//! labelSelector, namespaceSelector (against the labels of the Namespace
//! objects Kiln knows: the rendered set and the inventory files), name.
//!
//! As in Gatekeeper, an object without a namespace (cluster-scoped) is
//! neither included nor excluded by a namespace rule nor by a
//! namespaceSelector, and a Namespace is matched by its own name and labels.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// The fields of `spec.match` (unknown fields are refused: a typo must not
/// silently widen or narrow a constraint).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Match {
    /// Kinds (with API groups); none means every kind.
    #[serde(default)]
    pub kinds: Vec<KindMatch>,
    /// `*` (default), `Cluster` or `Namespaced`.
    #[serde(default)]
    pub scope: Option<String>,
    /// Namespaces (globs with a leading or trailing `*`) an object must be in.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Namespaces (globs) whose objects are not matched.
    #[serde(default)]
    pub excluded_namespaces: Vec<String>,
    /// Selector on the object's labels.
    #[serde(default)]
    pub label_selector: Option<LabelSelector>,
    /// Selector on the labels of the object's Namespace.
    #[serde(default)]
    pub namespace_selector: Option<LabelSelector>,
    /// The object's name (a glob).
    #[serde(default)]
    pub name: Option<String>,
    /// `All` (default), `Original` or `Generated` (Kiln generates nothing:
    /// `Generated` matches no object).
    #[serde(default)]
    pub source: Option<String>,
}

/// One entry of `spec.match.kinds`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KindMatch {
    /// API groups (`""` is the core group, `*` any); none means any.
    #[serde(default)]
    pub api_groups: Vec<String>,
    /// Kinds (`*` any); none means any.
    #[serde(default)]
    pub kinds: Vec<String>,
}

/// A Kubernetes label selector.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    /// Labels that must have exactly these values.
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    /// Requirements.
    #[serde(default)]
    pub match_expressions: Vec<Requirement>,
}

/// One `matchExpressions` requirement.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// Values for `In` and `NotIn`.
    #[serde(default)]
    pub values: Vec<String>,
}

/// Why an object cannot be matched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatchError {
    /// A namespaceSelector needs the labels of a Namespace Kiln does not know.
    #[error(
        "spec.match.namespaceSelector needs the labels of Namespace `{0}`, which is neither in the rendered set nor in the inventory files"
    )]
    UnknownNamespace(String),
}

/// What the matcher needs to know about one object.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// API group (`""` for the core group).
    pub group: &'a str,
    /// Kind.
    pub kind: &'a str,
    /// `metadata.name`.
    pub name: &'a str,
    /// `metadata.generateName` (`""` when absent).
    pub generate_name: &'a str,
    /// `metadata.namespace`, when set.
    pub namespace: Option<&'a str>,
    /// `metadata.labels`.
    pub labels: Option<&'a serde_json::Map<String, Value>>,
}

impl Target<'_> {
    fn is_namespace(&self) -> bool {
        self.group.is_empty() && self.kind == "Namespace"
    }

    /// The namespace namespace rules look at: a Namespace's own name.
    fn rule_namespace(&self) -> Option<&str> {
        if self.is_namespace() {
            Some(self.name)
        } else {
            self.namespace.filter(|n| !n.is_empty())
        }
    }
}

/// Labels of the Namespaces Kiln knows, by name.
pub type NamespaceLabels = BTreeMap<String, serde_json::Map<String, Value>>;

impl Match {
    /// Refuses values Gatekeeper would refuse.
    pub fn check(&self) -> Result<(), String> {
        if let Some(scope) = &self.scope
            && !matches!(scope.as_str(), "*" | "Cluster" | "Namespaced")
        {
            return Err(format!(
                "scope `{scope}` is not one of *, Cluster, Namespaced"
            ));
        }
        if let Some(source) = &self.source
            && !matches!(source.as_str(), "All" | "Original" | "Generated")
        {
            return Err(format!(
                "source `{source}` is not one of All, Original, Generated"
            ));
        }
        for selector in [&self.label_selector, &self.namespace_selector]
            .into_iter()
            .flatten()
        {
            for r in &selector.match_expressions {
                match r.operator.as_str() {
                    "In" | "NotIn" if r.values.is_empty() => {
                        return Err(format!(
                            "matchExpressions `{}` {}: values must not be empty",
                            r.key, r.operator
                        ));
                    }
                    "Exists" | "DoesNotExist" if !r.values.is_empty() => {
                        return Err(format!(
                            "matchExpressions `{}` {}: values must be empty",
                            r.key, r.operator
                        ));
                    }
                    "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
                    other => {
                        return Err(format!(
                            "matchExpressions operator `{other}` is not one of In, NotIn, Exists, DoesNotExist"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether the constraint applies to `target`.
    pub fn matches(
        &self,
        target: &Target<'_>,
        namespaces: &NamespaceLabels,
    ) -> Result<bool, MatchError> {
        if self.source.as_deref() == Some("Generated") {
            return Ok(false);
        }
        if !self.kinds.is_empty() && !self.kinds.iter().any(|k| k.matches(target)) {
            return Ok(false);
        }
        let namespaced = target.namespace.is_some_and(|n| !n.is_empty());
        match self.scope.as_deref() {
            Some("Cluster") if namespaced => return Ok(false),
            Some("Namespaced") if !namespaced => return Ok(false),
            _ => {}
        }
        if let Some(ns) = target.rule_namespace() {
            if !self.namespaces.is_empty() && !self.namespaces.iter().any(|g| glob(g, ns)) {
                return Ok(false);
            }
            if self.excluded_namespaces.iter().any(|g| glob(g, ns)) {
                return Ok(false);
            }
        }
        if let Some(name) = self.name.as_deref().filter(|n| !n.is_empty())
            && !glob(name, target.name)
            && !(target.name.is_empty() && generated_name_may_match(name, target.generate_name))
        {
            return Ok(false);
        }
        if self
            .label_selector
            .as_ref()
            .is_some_and(|selector| !selector.matches(target.labels))
        {
            return Ok(false);
        }
        if let Some(selector) = &self.namespace_selector {
            if target.is_namespace() {
                if !selector.matches(target.labels) {
                    return Ok(false);
                }
            } else if let Some(ns) = target.rule_namespace() {
                let labels = namespaces
                    .get(ns)
                    .ok_or_else(|| MatchError::UnknownNamespace(ns.to_owned()))?;
                if !selector.matches(Some(labels)) {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }
}

impl KindMatch {
    fn matches(&self, target: &Target<'_>) -> bool {
        let any = |list: &[String], value: &str| {
            list.is_empty() || list.iter().any(|x| x == "*" || x == value)
        };
        any(&self.kinds, target.kind) && any(&self.api_groups, target.group)
    }
}

impl LabelSelector {
    /// Whether labels satisfy the selector (an empty selector matches all).
    pub fn matches(&self, labels: Option<&serde_json::Map<String, Value>>) -> bool {
        let get = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        self.match_labels
            .iter()
            .all(|(k, v)| get(k) == Some(v.as_str()))
            && self.match_expressions.iter().all(|r| {
                let value = get(&r.key);
                match r.operator.as_str() {
                    "In" => value.is_some_and(|v| r.values.iter().any(|x| x == v)),
                    "NotIn" => !value.is_some_and(|v| r.values.iter().any(|x| x == v)),
                    "Exists" => value.is_some(),
                    "DoesNotExist" => value.is_none(),
                    _ => false,
                }
            })
    }
}

/// Whether a name the API server generates from `generate_name` (it adds
/// five random characters) may match `pattern`, as Gatekeeper's
/// `MatchesGenerateName` reads a prefix glob: `web-*` matches the
/// generated names of `web-` and `web-x-`; so, since the random part may
/// complete it, does `web-a*` for `web-`.
fn generated_name_may_match(pattern: &str, generate_name: &str) -> bool {
    if generate_name.is_empty() {
        return false;
    }
    match pattern.strip_suffix('*') {
        Some(prefix) if !prefix.starts_with('*') => {
            generate_name.starts_with(prefix) || prefix.starts_with(generate_name)
        }
        _ => pattern == "*",
    }
}

/// Gatekeeper's wildcard: a `*` at the start and/or the end of the pattern.
pub fn glob(pattern: &str, value: &str) -> bool {
    match (pattern.strip_prefix('*'), pattern.strip_suffix('*')) {
        _ if pattern == "*" => true,
        (Some(rest), _) if rest.ends_with('*') => value.contains(&rest[..rest.len() - 1]),
        (Some(suffix), _) => value.ends_with(suffix),
        (None, Some(prefix)) => value.starts_with(prefix),
        (None, None) => pattern == value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target<'a>(
        kind: &'a str,
        name: &'a str,
        ns: Option<&'a str>,
        labels: &'a Value,
    ) -> Target<'a> {
        Target {
            group: "",
            kind,
            name,
            generate_name: "",
            namespace: ns,
            labels: labels.as_object(),
        }
    }

    fn m(v: Value) -> Match {
        let m: Match = serde_json::from_value(v).unwrap();
        m.check().unwrap();
        m
    }

    #[test]
    fn an_empty_name_matches_every_name_and_a_prefix_glob_generated_names() {
        let labels = json!({});
        let any = m(json!({"name": ""}));
        let none = NamespaceLabels::new();
        assert!(
            any.matches(&target("Job", "x", Some("a"), &labels), &none)
                .unwrap()
        );
        let web = m(json!({"name": "web-*"}));
        let generated = |generate_name| Target {
            name: "",
            generate_name,
            ..target("Job", "", Some("a"), &labels)
        };
        assert!(web.matches(&generated("web-"), &none).unwrap());
        assert!(web.matches(&generated("web-migrate-"), &none).unwrap());
        assert!(web.matches(&generated("we"), &none).unwrap());
        assert!(!web.matches(&generated("api-"), &none).unwrap());
        assert!(!web.matches(&generated(""), &none).unwrap());
        // A named object is matched by its name alone.
        assert!(
            !web.matches(&target("Job", "api", Some("a"), &labels), &none)
                .unwrap()
        );
    }

    #[test]
    fn globs() {
        assert!(glob("kube-*", "kube-system"));
        assert!(glob("*-system", "kube-system"));
        assert!(glob("*ube*", "kube-system"));
        assert!(glob("*", "x"));
        assert!(!glob("kube-*", "default"));
        assert!(glob("default", "default"));
    }

    #[test]
    fn namespace_rules_do_not_exclude_cluster_objects_and_name_namespaces_by_themselves() {
        let none = json!({});
        let rules = m(json!({"namespaces": ["prod-*"], "excludedNamespaces": ["prod-x"]}));
        let ns = NamespaceLabels::new();
        assert!(
            rules
                .matches(&target("ClusterRole", "r", None, &none), &ns)
                .unwrap()
        );
        assert!(
            rules
                .matches(&target("Pod", "p", Some("prod-a"), &none), &ns)
                .unwrap()
        );
        assert!(
            !rules
                .matches(&target("Pod", "p", Some("prod-x"), &none), &ns)
                .unwrap()
        );
        assert!(
            !rules
                .matches(&target("Pod", "p", Some("dev"), &none), &ns)
                .unwrap()
        );
        assert!(
            !rules
                .matches(&target("Namespace", "dev", None, &none), &ns)
                .unwrap()
        );
        assert!(
            rules
                .matches(&target("Namespace", "prod-b", None, &none), &ns)
                .unwrap()
        );
    }

    #[test]
    fn selectors_kinds_scope_and_name() {
        let labels = json!({"env": "prod", "team": "a"});
        let none = json!({});
        let mut ns = NamespaceLabels::new();
        ns.insert("shop".into(), labels.as_object().unwrap().clone());
        let rules = m(json!({
            "kinds": [{"apiGroups": [""], "kinds": ["Pod"]}],
            "labelSelector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]},
            "namespaceSelector": {"matchLabels": {"env": "prod"}},
            "name": "web-*",
            "scope": "Namespaced",
        }));
        assert!(
            rules
                .matches(&target("Pod", "web-1", Some("shop"), &labels), &ns)
                .unwrap()
        );
        assert!(
            !rules
                .matches(&target("Pod", "web-1", Some("shop"), &none), &ns)
                .unwrap()
        );
        assert!(
            !rules
                .matches(&target("Pod", "db-1", Some("shop"), &labels), &ns)
                .unwrap()
        );
        assert!(
            !rules
                .matches(&target("Service", "web-1", Some("shop"), &labels), &ns)
                .unwrap()
        );
        assert_eq!(
            rules.matches(&target("Pod", "web-1", Some("other"), &labels), &ns),
            Err(MatchError::UnknownNamespace("other".into()))
        );
        let cluster = m(json!({"scope": "Cluster"}));
        assert!(
            !cluster
                .matches(&target("Pod", "p", Some("shop"), &none), &ns)
                .unwrap()
        );
        assert!(
            cluster
                .matches(&target("Node", "n", None, &none), &ns)
                .unwrap()
        );
    }

    #[test]
    fn bad_match_fields_are_refused() {
        assert!(serde_json::from_value::<Match>(json!({"namespace": ["x"]})).is_err());
        let bad: Match = serde_json::from_value(json!({"scope": "Everything"})).unwrap();
        assert!(bad.check().is_err());
        let bad: Match = serde_json::from_value(
            json!({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Is"}]}}),
        )
        .unwrap();
        assert!(bad.check().is_err());
    }
}
