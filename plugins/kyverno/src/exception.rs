//! `PolicyException`: what a security team grants in writing. A
//! `kyverno.io` exception names policies and rules (`exceptions[]`:
//! `policyName`, `ruleNames` with wildcards) and the resources it covers
//! (`match`, as a rule's, and optional `conditions`); a rule it covers is
//! skipped on those resources, after its preconditions, as Kyverno skips
//! it. A `policies.kyverno.io` exception names CEL policies
//! (`policyRefs`) and covers the objects its `matchConditions` accept.
//!
//! Exceptions come from the policy source, as the policies do: the team
//! whose application is reviewed cannot grant itself one.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use crate::cel::{self, Bindings};
use crate::matching::{self, Request};
use crate::wildcard;

/// A `kyverno.io` `PolicyException` (`v2`, `v2beta1`).
#[derive(Debug, Clone)]
pub struct PolicyException {
    /// `NAMESPACE/NAME`, as Kyverno names it in messages.
    pub key: String,
    spec: Spec,
    /// Its `podSecurity` exclusions, read.
    pod_security: Vec<crate::pss::Exclusion>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Spec {
    exceptions: Vec<Grant>,
    #[serde(rename = "match")]
    match_: Value,
    #[serde(default)]
    conditions: Option<Value>,
    /// Exemptions from `podSecurity` controls, for `validate.podSecurity`
    /// rules.
    #[serde(default)]
    pod_security: Option<Value>,
    /// Whether background scans honour it: a review before apply always
    /// does.
    #[serde(default, rename = "background")]
    _background: IgnoredAny,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Grant {
    policy_name: String,
    #[serde(default)]
    rule_names: Vec<String>,
}

/// An exception's `NAMESPACE/NAME` (`default` when it names none).
fn key_of(document: &Value) -> Result<String, String> {
    let metadata = document.get("metadata");
    let text = |key: &str| {
        metadata
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let name = text("name");
    if name.is_empty() {
        return Err("PolicyException without metadata.name".into());
    }
    let namespace = match text("namespace") {
        "" => "default",
        ns => ns,
    };
    Ok(format!("{namespace}/{name}"))
}

/// The shape of an exception's `match`, checked when it is read: an
/// exception grants, so a typo in it must be an error, never a wider grant.
/// Exactly one of `any` and `all`, each filter naming resources (users and
/// roles are not known before apply), each description saying something.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MatchShape {
    #[serde(default)]
    any: Vec<FilterShape>,
    #[serde(default)]
    all: Vec<FilterShape>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilterShape {
    resources: DescriptionShape,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DescriptionShape {
    #[serde(default)]
    kinds: Vec<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    names: Vec<String>,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    selector: Option<SelectorShape>,
    #[serde(default)]
    namespace_selector: Option<SelectorShape>,
    #[serde(default)]
    operations: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SelectorShape {
    #[serde(default)]
    match_labels: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    match_expressions: Vec<RequirementShape>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequirementShape {
    #[serde(rename = "key")]
    _key: String,
    #[serde(rename = "operator")]
    _operator: String,
    #[serde(default, rename = "values")]
    _values: Vec<String>,
}

/// The shape of an exception's `conditions`: `any` and/or `all` lists of
/// `{key, operator, value}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConditionsShape {
    #[serde(default)]
    any: Option<Vec<ConditionShape>>,
    #[serde(default)]
    all: Option<Vec<ConditionShape>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConditionShape {
    #[serde(rename = "key")]
    _key: Value,
    #[serde(rename = "operator")]
    _operator: String,
    #[serde(default, rename = "value")]
    _value: Value,
    #[serde(default, rename = "message")]
    _message: Option<String>,
}

/// Checks an exception's `match` and `conditions` strictly.
fn check_shape(spec: &Spec) -> Result<(), String> {
    let shape: MatchShape =
        serde_json::from_value(spec.match_.clone()).map_err(|e| format!("match: {e}"))?;
    let filters = match (shape.any.is_empty(), shape.all.is_empty()) {
        (false, true) => &shape.any,
        (true, false) => &shape.all,
        _ => return Err("match: give exactly one of a non-empty `any` or `all`".into()),
    };
    for filter in filters {
        let d = &filter.resources;
        let says_something = !d.kinds.is_empty()
            || d.name.as_deref().is_some_and(|n| !n.is_empty())
            || !d.names.is_empty()
            || !d.namespaces.is_empty()
            || !d.annotations.is_empty()
            || d.selector.is_some()
            || d.namespace_selector.is_some()
            || !d.operations.is_empty();
        if !says_something {
            return Err(
                "match: a filter's `resources` names nothing (it would exempt everything)".into(),
            );
        }
        for selector in [&d.selector, &d.namespace_selector].into_iter().flatten() {
            if selector.match_labels.is_empty() && selector.match_expressions.is_empty() {
                return Err("match: an empty label selector (it would select everything)".into());
            }
        }
    }
    if let Some(conditions) = &spec.conditions {
        let shape: ConditionsShape =
            serde_json::from_value(conditions.clone()).map_err(|e| format!("conditions: {e}"))?;
        let any = shape.any.as_ref().is_some_and(|a| !a.is_empty());
        let all = shape.all.as_ref().is_some_and(|a| !a.is_empty());
        if !any && !all {
            return Err("conditions: give a non-empty `any` or `all`".into());
        }
    }
    Ok(())
}

impl PolicyException {
    /// Reads a `kyverno.io` `PolicyException` document.
    pub fn parse(document: &Value) -> Result<Self, String> {
        let key = key_of(document)?;
        let spec: Spec = serde_json::from_value(document.get("spec").cloned().unwrap_or_default())
            .map_err(|e| format!("PolicyException {key}: spec: {e}"))?;
        let pod_security = crate::pss::Exclusion::parse_all(spec.pod_security.as_ref())
            .map_err(|e| format!("PolicyException {key}: podSecurity: {e}"))?;
        if spec.exceptions.is_empty()
            || spec
                .exceptions
                .iter()
                .any(|g| g.policy_name.is_empty() || g.rule_names.is_empty())
        {
            return Err(format!(
                "PolicyException {key}: every exception names a policyName and ruleNames"
            ));
        }
        check_shape(&spec).map_err(|e| format!("PolicyException {key}: {e}"))?;
        Ok(PolicyException {
            key,
            spec,
            pod_security,
        })
    }

    /// Its `podSecurity` exclusions: a `validate.podSecurity` rule it
    /// covers is checked with them rather than skipped.
    pub fn pod_security(&self) -> &[crate::pss::Exclusion] {
        &self.pod_security
    }

    /// Whether it names rule `rule` of the policy named `policy` (a
    /// ClusterPolicy's name, or `NAMESPACE/NAME` for a Policy).
    pub fn names(&self, policy: &str, rule: &str) -> bool {
        self.spec.exceptions.iter().any(|grant| {
            grant.policy_name == policy
                && grant
                    .rule_names
                    .iter()
                    .any(|pattern| wildcard::matches(pattern, rule))
        })
    }

    /// Whether it covers `resource`: its `match` selects it and its
    /// `conditions` hold (read against `context`, the rule's). When that
    /// cannot be told (a namespace whose labels are unknown, a condition
    /// that fails), it does not: an exception grants only what it surely
    /// names, as Kyverno passes over an exception it cannot evaluate.
    pub fn covers(&self, resource: &Value, request: &Request<'_>, context: &Value) -> bool {
        matching::selects(Some(&self.spec.match_), resource, request) == Ok(true)
            && self.spec.conditions.as_ref().is_none_or(|conditions| {
                crate::engine::conditions_hold(conditions, context) == Ok(true)
            })
    }
}

/// A `policies.kyverno.io` `PolicyException`, for CEL policies.
#[derive(Debug, Clone)]
pub struct CelException {
    /// `NAMESPACE/NAME`.
    pub key: String,
    spec: CelSpec,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CelSpec {
    policy_refs: Vec<PolicyRef>,
    #[serde(default)]
    match_conditions: Vec<kiln_vap::model::NamedExpression>,
    /// `pass` or `skip` (the default): what an excepted object's result
    /// reads.
    #[serde(default)]
    report_result: Option<String>,
    /// Image references exempt from image policies (not run by Kiln).
    #[serde(default, rename = "images")]
    _images: IgnoredAny,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyRef {
    name: String,
    kind: String,
}

impl CelException {
    /// Reads a `policies.kyverno.io` `PolicyException` document.
    pub fn parse(document: &Value) -> Result<Self, String> {
        let key = key_of(document)?;
        let spec: CelSpec =
            serde_json::from_value(document.get("spec").cloned().unwrap_or_default())
                .map_err(|e| format!("PolicyException {key}: spec: {e}"))?;
        match spec.report_result.as_deref() {
            None | Some("skip" | "pass") => {}
            Some(other) => {
                return Err(format!(
                    "PolicyException {key}: reportResult `{other}` is not pass or skip"
                ));
            }
        }
        Ok(CelException { key, spec })
    }

    /// Whether it names the CEL policy `name` of `kind`.
    pub fn names(&self, name: &str, kind: &str) -> bool {
        self.spec
            .policy_refs
            .iter()
            .any(|r| r.name == name && r.kind == kind)
    }

    /// Whether the excepted result reads `pass` (else `skip`).
    pub fn reports_pass(&self) -> bool {
        self.spec.report_result.as_deref() == Some("pass")
    }

    /// Whether it covers `object`: every match condition holds (one that
    /// fails to evaluate grants nothing).
    pub fn covers(&self, object: &Value, operation: &str) -> bool {
        let conditions: Vec<(&str, &str)> = self
            .spec
            .match_conditions
            .iter()
            .map(|c| (c.name.as_str(), c.expression.as_str()))
            .collect();
        let bindings = Bindings {
            object,
            operation,
            namespace_object: None,
        };
        cel::all_hold(&conditions, bindings) == Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request() -> Request<'static> {
        Request {
            operation: "CREATE",
            namespace_labels: &|_| Ok(serde_json::Map::new()),
            config_maps: &|_, _| Err("none".into()),
        }
    }

    fn exception(spec: Value) -> Result<PolicyException, String> {
        PolicyException::parse(
            &json!({"metadata": {"name": "e", "namespace": "ops"}, "spec": spec}),
        )
    }

    fn pod(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "delta"}})
    }

    #[test]
    fn an_exception_covers_the_rules_and_resources_it_names() {
        let e = exception(json!({
            "exceptions": [{"policyName": "disallow-host-namespaces",
                            "ruleNames": ["host-namespaces", "autogen-*"]}],
            "match": {"any": [{"resources": {"kinds": ["Pod"], "namespaces": ["delta"], "names": ["tool-*"]}}]}
        }))
        .unwrap();
        assert_eq!(e.key, "ops/e");
        assert!(e.names("disallow-host-namespaces", "host-namespaces"));
        assert!(e.names(
            "disallow-host-namespaces",
            "autogen-cronjob-host-namespaces"
        ));
        assert!(!e.names("disallow-host-namespaces", "other"));
        assert!(!e.names("another-policy", "host-namespaces"));
        let context = json!({});
        assert!(e.covers(&pod("tool-1"), &request(), &context));
        assert!(!e.covers(&pod("web"), &request(), &context));
    }

    #[test]
    fn conditions_narrow_it_and_a_failing_one_is_never_a_grant() {
        let e = exception(json!({
            "exceptions": [{"policyName": "p", "ruleNames": ["r"]}],
            "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
            "conditions": {"any": [{"key": "{{ request.object.metadata.name }}", "operator": "Equals", "value": "tool"}]}
        }))
        .unwrap();
        let context = |name: &str| json!({"request": {"object": pod(name)}});
        assert!(e.covers(&pod("tool"), &request(), &context("tool")));
        assert!(!e.covers(&pod("web"), &request(), &context("web")));
        let broken = exception(json!({
            "exceptions": [{"policyName": "p", "ruleNames": ["r"]}],
            "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
            "conditions": {"any": [{"key": "{{ request.object.nope.deeper }}", "operator": "Equals", "value": "x"}]}
        }))
        .unwrap();
        assert!(!broken.covers(&pod("tool"), &request(), &context("tool")));
    }

    #[test]
    fn what_kiln_cannot_honour_is_refused_by_name() {
        // podSecurity exclusions are read strictly: an unknown control
        // would exclude nothing and must not pass unnoticed.
        let granted = exception(json!({
            "exceptions": [{"policyName": "p", "ruleNames": ["r"]}],
            "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
            "podSecurity": [{"controlName": "Capabilities", "images": ["nginx*"]}]
        }))
        .unwrap();
        assert_eq!(granted.pod_security()[0].control(), "Capabilities");
        let error = exception(json!({
            "exceptions": [{"policyName": "p", "ruleNames": ["r"]}],
            "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
            "podSecurity": [{"controlName": "Capabilties"}]
        }))
        .unwrap_err();
        assert!(
            error.contains("podSecurity: exclude: unknown controlName"),
            "{error}"
        );
        let error = exception(json!({"exceptions": [], "match": {}, "extra": 1})).unwrap_err();
        assert!(error.contains("extra"), "{error}");
        // A grant never widens by a typo or an empty filter.
        let grant = json!([{"policyName": "p", "ruleNames": ["r"]}]);
        for (spec, says) in [
            (
                json!({"exceptions": grant, "match": {"any": [{"resources": {}}]}}),
                "names nothing",
            ),
            (
                json!({"exceptions": grant, "match": {"any": [{"resources": {"kind": ["Pod"]}}]}}),
                "kind",
            ),
            (
                json!({"exceptions": grant, "match": {"resources": {"kinds": ["Pod"]}}}),
                "resources",
            ),
            (
                json!({"exceptions": grant, "match": {"any": [{"resources": {"kinds": ["Pod"], "namespaceSelector": {"matchLabel": {"a": "b"}}}}]}}),
                "matchLabel",
            ),
            (
                json!({"exceptions": grant, "match": {"any": [{"subjects": [{"kind": "User", "name": "x"}], "resources": {"kinds": ["Pod"]}}]}}),
                "subjects",
            ),
            (
                json!({"exceptions": grant, "match": {"any": [{"resources": {"kinds": ["Pod"]}}]},
                    "conditions": {"any": {"key": "a", "operator": "Equals", "value": "a"}}}),
                "conditions",
            ),
            (
                json!({"exceptions": [{"policyName": "p"}], "match": {"any": [{"resources": {"kinds": ["Pod"]}}]}}),
                "ruleNames",
            ),
        ] {
            let error = exception(spec).unwrap_err();
            assert!(error.contains(says), "{says}: {error}");
        }
    }

    #[test]
    fn a_cel_exception_covers_what_its_match_conditions_accept() {
        let e = CelException::parse(&json!({
            "metadata": {"name": "skip-tool"},
            "spec": {"policyRefs": [{"name": "no-latest", "kind": "ValidatingPolicy"}],
                     "matchConditions": [{"name": "tool", "expression": "object.metadata.name == 'tool'"}]}
        }))
        .unwrap();
        assert_eq!(e.key, "default/skip-tool");
        assert!(e.names("no-latest", "ValidatingPolicy"));
        assert!(!e.names("other", "ValidatingPolicy"));
        assert!(e.covers(&pod("tool"), "CREATE"));
        assert!(!e.covers(&pod("web"), "CREATE"));
        assert!(!e.reports_pass());
    }
}
