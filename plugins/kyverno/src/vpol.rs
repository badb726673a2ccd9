//! `ValidatingPolicy` (`policies.kyverno.io`): Kyverno's CEL policies, a
//! ValidatingAdmissionPolicy's language (`matchConstraints`,
//! `matchConditions`, `variables`, `validations`) with Kyverno's additions:
//! `validationActions` decide enforcement, and `autogen` applies a policy
//! written for Pods to the pod templates of Deployments, CronJobs and the
//! other controllers.
//!
//! Matching is the ValidatingAdmissionPolicy plugin's (`kiln-vap`), CEL is
//! the library Kiln's policies share (`kiln-cel-k8s`, through
//! [`crate::cel`]). Kyverno's CEL libraries that read the cluster or the
//! network (`resource`, `http`, `globalContext`, image data) are refused
//! by name: the sandbox reaches neither.

use std::collections::BTreeMap;

use kiln_vap::matching::{self, Matcher, SetKinds, Target};
use kiln_vap::model::{FailurePolicy, MatchResources, NamedExpression, ResourceRule, Validation};
use kiln_vap::selector::LabelSelector;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use crate::cel::{self, Bindings, Check, OnError};
use crate::engine::{RuleResult, Status};
use crate::exception::CelException;

/// The API group of Kyverno's CEL policies.
pub const GROUP: &str = "policies.kyverno.io";

/// A `ValidatingPolicy` or `NamespacedValidatingPolicy`.
#[derive(Debug, Clone)]
pub struct ValidatingPolicy {
    /// `metadata.name`.
    pub name: String,
    /// The namespace of a `NamespacedValidatingPolicy` (it applies there
    /// only).
    pub namespace: Option<String>,
    /// `ValidatingPolicy` or `NamespacedValidatingPolicy`.
    pub kind: &'static str,
    spec: Spec,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Spec {
    #[serde(default)]
    match_constraints: Option<MatchResources>,
    #[serde(default)]
    match_conditions: Vec<NamedExpression>,
    #[serde(default)]
    variables: Vec<NamedExpression>,
    #[serde(default)]
    validations: Vec<Validation>,
    #[serde(default)]
    validation_actions: Vec<String>,
    #[serde(default)]
    failure_policy: Option<FailurePolicy>,
    /// Annotations for an audit log: nothing to check before apply.
    #[serde(default, rename = "auditAnnotations")]
    _audit_annotations: IgnoredAny,
    /// When Kyverno evaluates (admission, background): a review before
    /// apply is both.
    #[serde(default, rename = "evaluation")]
    _evaluation: IgnoredAny,
    #[serde(default)]
    autogen: Option<Autogen>,
    /// How Kyverno registers its webhook: nothing to review.
    #[serde(default, rename = "webhookConfiguration")]
    _webhook_configuration: IgnoredAny,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Autogen {
    #[serde(default)]
    pod_controllers: Option<PodControllers>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct PodControllers {
    #[serde(default)]
    controllers: Option<Vec<String>>,
}

/// The Kyverno CEL libraries that reach outside the rendered set.
const REFUSED_LIBRARIES: &[(&str, &str)] = &[
    ("resource.", "reads objects from the cluster"),
    ("http.", "calls HTTP services"),
    ("globalContext.", "reads Kyverno's global context"),
    ("image.", "reads image registries"),
    ("imagedata.", "reads image registries"),
];

impl ValidatingPolicy {
    /// Reads one document of kind `kind` (`ValidatingPolicy` or
    /// `NamespacedValidatingPolicy`); the error names what is wrong.
    pub fn parse(kind: &str, document: &Value) -> Result<Self, String> {
        let metadata = document.get("metadata");
        let name = metadata
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if name.is_empty() {
            return Err(format!("{kind} without metadata.name"));
        }
        let spec: Spec = serde_json::from_value(document.get("spec").cloned().unwrap_or_default())
            .map_err(|e| format!("{kind} {name}: spec: {e}"))?;
        if spec.validations.is_empty() {
            return Err(format!("{kind} {name}: spec.validations is empty"));
        }
        if let Some(action) = spec
            .validation_actions
            .iter()
            .find(|a| !matches!(a.as_str(), "Deny" | "Audit" | "Warn"))
        {
            return Err(format!(
                "{kind} {name}: validationActions: `{action}` is not Deny, Audit or Warn"
            ));
        }
        let (kind, namespace) = if kind == "NamespacedValidatingPolicy" {
            (
                "NamespacedValidatingPolicy",
                Some(
                    metadata
                        .and_then(|m| m.get("namespace"))
                        .and_then(Value::as_str)
                        .unwrap_or("default")
                        .to_owned(),
                ),
            )
        } else {
            ("ValidatingPolicy", None)
        };
        let policy = ValidatingPolicy {
            name,
            namespace,
            kind,
            spec,
        };
        for expression in policy.expressions() {
            if let Some((library, why)) = REFUSED_LIBRARIES
                .iter()
                .find(|(library, _)| mentions(expression, library))
            {
                return Err(format!(
                    "{kind} {}: Kyverno's `{}` CEL library {why}, which the sandbox cannot: `{expression}`",
                    policy.name,
                    library.trim_end_matches('.')
                ));
            }
        }
        Ok(policy)
    }

    fn expressions(&self) -> impl Iterator<Item = &str> {
        let spec = &self.spec;
        spec.match_conditions
            .iter()
            .chain(&spec.variables)
            .map(|e| e.expression.as_str())
            .chain(spec.validations.iter().flat_map(|v| {
                std::iter::once(v.expression.as_str()).chain(v.message_expression.as_deref())
            }))
    }

    /// Whether a failure blocks: `validationActions` holds `Deny`, or is
    /// empty (Kyverno's default).
    fn enforce(&self) -> bool {
        let actions = &self.spec.validation_actions;
        actions.is_empty() || actions.iter().any(|a| a == "Deny")
    }

    /// The policy's result on `object`, or `None` when it does not apply.
    /// `namespaces`: the labels of the namespaces known; `kinds`: the CRDs
    /// of the set; `exceptions`: the CEL policy exceptions of the source.
    pub fn evaluate(
        &self,
        object: &Value,
        namespaces: &BTreeMap<String, BTreeMap<String, String>>,
        kinds: &SetKinds,
        operation: &str,
        exceptions: &[CelException],
    ) -> Option<RuleResult> {
        // A namespaced policy reviews the namespaced objects of its own
        // namespace (placed by the host where they will be applied).
        if let Some(namespace) = &self.namespace {
            let of_object = object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            if of_object != namespace {
                return None;
            }
        }
        let target = Target::new(object, kinds);
        let rewrite = self.applies(&target, namespaces)?;
        let result = |status, message: String| {
            Some(RuleResult {
                rule: String::new(),
                status,
                message,
                enforce: self.enforce(),
            })
        };
        // Exceptions are weighed once the policy matches, before its match
        // conditions, as in Kyverno.
        let mut granted = Vec::new();
        let mut pass = false;
        for exception in exceptions.iter().filter(|e| e.names(&self.name, self.kind)) {
            if exception.covers(object, operation) {
                granted.push(exception.key.as_str());
                pass |= exception.reports_pass();
            }
        }
        if !granted.is_empty() {
            let (status, word) = if pass {
                (Status::Pass, "passed")
            } else {
                (Status::Skip, "skipped")
            };
            return result(
                status,
                format!(
                    "rule is {word} due to policy exception: {}",
                    granted.join(", ")
                ),
            );
        }
        // `failurePolicy: Ignore` leaves out a validation that cannot be
        // evaluated, as the API server does; the others still decide. An
        // expression that does not compile, or a match condition that
        // fails, is an error whatever the policy says (fail closed).
        let on_error = match self.spec.failure_policy {
            Some(FailurePolicy::Ignore) => OnError::Skip,
            _ => OnError::Report,
        };
        match self.run(object, operation, rewrite, on_error) {
            Ok((status, message)) => result(status, message),
            Err(e) => result(Status::Error, e),
        }
    }

    /// How the policy applies to `target`: as written, or rewritten for a
    /// pod controller's template (autogen); `None` when it does not.
    fn applies(
        &self,
        target: &Target<'_>,
        namespaces: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> Option<Option<&'static Template>> {
        let constraints = self.spec.match_constraints.as_ref()?;
        if matching::matches(constraints, Matcher::Policy, target, namespaces) {
            return Some(None);
        }
        let (template, pods) = self.autogen_template(target)?;
        // Kyverno's generated constraints: the controller's resource, the
        // policy's operations and namespace selector.
        let generated = MatchResources {
            namespace_selector: constraints.namespace_selector.clone(),
            resource_rules: vec![ResourceRule {
                api_groups: vec![template.group.into()],
                api_versions: vec!["v1".into()],
                resources: vec![template.resource.into()],
                operations: pods.operations.clone(),
                ..ResourceRule::default()
            }],
            ..MatchResources::default()
        };
        matching::matches(&generated, Matcher::Policy, target, namespaces).then_some(Some(template))
    }

    /// The controller template `target` is, if autogen applies the policy
    /// to it: a policy matching exactly Pods (one rule, core `v1` `pods`,
    /// no names, no object selector, no exclusions), for the controllers
    /// `autogen.podControllers.controllers` names (all of them by default).
    fn autogen_template(&self, target: &Target<'_>) -> Option<(&'static Template, &ResourceRule)> {
        let constraints = self.spec.match_constraints.as_ref()?;
        let selector_set = constraints
            .object_selector
            .as_ref()
            .is_some_and(|s| *s != LabelSelector::default());
        let [rule] = &constraints.resource_rules[..] else {
            return None;
        };
        let pods_only = rule.resource_names.is_empty()
            && rule.api_groups == [""]
            && rule.api_versions == ["v1"]
            && rule.resources == ["pods"];
        if selector_set || !constraints.exclude_resource_rules.is_empty() || !pods_only {
            return None;
        }
        let template = TEMPLATES
            .iter()
            .find(|t| t.group == target.group && t.kind == target.kind)?;
        let chosen = self
            .spec
            .autogen
            .as_ref()
            .and_then(|a| a.pod_controllers.as_ref())
            .and_then(|p| p.controllers.as_ref());
        let chosen =
            chosen.is_none_or(|controllers| controllers.iter().any(|c| c == template.resource));
        chosen.then_some((template, rule))
    }

    /// Runs the policy's CEL on `object`, its expressions rewritten for a
    /// controller's template when `template` is given.
    fn run(
        &self,
        object: &Value,
        operation: &str,
        template: Option<&Template>,
        on_error: OnError,
    ) -> Result<(Status, String), String> {
        let text = |e: &str| match template {
            Some(t) => t.rewrite(e),
            None => e.to_owned(),
        };
        let named = |list: &[NamedExpression]| -> Vec<(String, String)> {
            list.iter()
                .map(|e| (e.name.clone(), text(&e.expression)))
                .collect()
        };
        let bindings = Bindings {
            object,
            operation,
            namespace_object: None,
        };
        let conditions = named(&self.spec.match_conditions);
        let conditions: Vec<(&str, &str)> = conditions
            .iter()
            .map(|(n, e)| (n.as_str(), e.as_str()))
            .collect();
        if !cel::all_hold(&conditions, bindings).map_err(|e| format!("matchConditions: {e}"))? {
            return Ok((Status::Skip, "a match condition is false".into()));
        }
        let variables = named(&self.spec.variables);
        let variables: Vec<(&str, &str)> = variables
            .iter()
            .map(|(n, e)| (n.as_str(), e.as_str()))
            .collect();
        let validations: Vec<(String, Option<String>)> = self
            .spec
            .validations
            .iter()
            .map(|v| {
                (
                    text(&v.expression),
                    v.message_expression.as_deref().map(text),
                )
            })
            .collect();
        let checks: Vec<Check<'_>> = validations
            .iter()
            .zip(&self.spec.validations)
            .map(|((expression, message_expression), v)| Check {
                expression,
                message: v.message.as_deref(),
                message_expression: message_expression.as_deref(),
            })
            .collect();
        cel::run_checks(&variables, &checks, bindings, "validations", on_error)
    }
}

/// Whether `expression` reads `library` (`resource.`) as a top-level name,
/// not as a field (`object.resource.x`) or part of a longer name.
fn mentions(expression: &str, library: &str) -> bool {
    expression.match_indices(library).any(|(at, _)| {
        let before = expression[..at].chars().next_back();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.' || c == '?')
    })
}

/// A pod controller autogen applies Pod policies to, and where its pod
/// template is.
#[derive(Debug)]
struct Template {
    group: &'static str,
    kind: &'static str,
    resource: &'static str,
    /// The template's path from the object (`spec.template`).
    path: &'static str,
}

const TEMPLATES: &[Template] = &[
    Template {
        group: "apps",
        kind: "DaemonSet",
        resource: "daemonsets",
        path: "spec.template",
    },
    Template {
        group: "apps",
        kind: "Deployment",
        resource: "deployments",
        path: "spec.template",
    },
    Template {
        group: "apps",
        kind: "ReplicaSet",
        resource: "replicasets",
        path: "spec.template",
    },
    Template {
        group: "apps",
        kind: "StatefulSet",
        resource: "statefulsets",
        path: "spec.template",
    },
    Template {
        group: "batch",
        kind: "Job",
        resource: "jobs",
        path: "spec.template",
    },
    Template {
        group: "batch",
        kind: "CronJob",
        resource: "cronjobs",
        path: "spec.jobTemplate.spec.template",
    },
];

impl Template {
    /// `expression` reading the pod template: `object.spec` and
    /// `object.metadata` (and `oldObject`'s) become the template's, as
    /// Kyverno rewrites them, except `object.metadata.namespace`, which
    /// stays the controller's own.
    fn rewrite(&self, expression: &str) -> String {
        let mut text = expression.to_owned();
        for root in ["object", "oldObject"] {
            for field in ["spec", "metadata"] {
                let from = format!("{root}.{field}");
                let to = format!("{root}.{}.{field}", self.path);
                text = replace_unprotected(&text, &from, &to);
            }
        }
        text
    }
}

/// Every `from` in `text` replaced by `to`, except where `from` is part
/// of a longer name (`myobject.spec`, `object.specs`) or is followed by
/// `.namespace`.
fn replace_unprotected(text: &str, from: &str, to: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(from) {
        let prefix = &rest[..at];
        let before = prefix
            .chars()
            .next_back()
            .or_else(|| out.chars().next_back());
        let after = &rest[at + from.len()..];
        let joined = before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.');
        let longer = after
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        out.push_str(prefix);
        if joined || longer || after.starts_with(".namespace") {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(spec: Value) -> ValidatingPolicy {
        ValidatingPolicy::parse(
            "ValidatingPolicy",
            &json!({"metadata": {"name": "p"}, "spec": spec}),
        )
        .unwrap()
    }

    fn pods(validations: Value) -> Value {
        json!({
            "validationActions": ["Deny"],
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["pods"]
            }]},
            "validations": validations
        })
    }

    fn eval(policy: &ValidatingPolicy, object: Value) -> Option<(Status, String)> {
        policy
            .evaluate(
                &object,
                &BTreeMap::new(),
                &SetKinds::default(),
                "CREATE",
                &[],
            )
            .map(|r| (r.status, r.message))
    }

    fn pod(host_network: bool) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "a"},
               "spec": {"hostNetwork": host_network, "containers": [{"name": "c"}]}})
    }

    #[test]
    fn validations_pass_fail_and_name_their_message() {
        let p = policy(pods(json!([{
            "expression": "!object.spec.?hostNetwork.orValue(false)",
            "message": "no host network"
        }])));
        assert_eq!(eval(&p, pod(false)).unwrap().0, Status::Pass);
        assert_eq!(
            eval(&p, pod(true)).unwrap(),
            (Status::Fail, "no host network".into())
        );
        // A ConfigMap is not matched.
        assert!(
            eval(
                &p,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
            )
            .is_none()
        );
    }

    #[test]
    fn autogen_reads_the_pod_template_of_every_controller() {
        let p = policy(pods(json!([{
            "expression": "!object.spec.?hostNetwork.orValue(false) && object.metadata.namespace != 'kube-system'",
            "messageExpression": "'bad: ' + object.metadata.name"
        }])));
        let template =
            json!({"metadata": {"name": "tpl"}, "spec": {"hostNetwork": true, "containers": []}});
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "a"}, "spec": {"template": template}});
        let (status, message) = eval(&p, deployment).unwrap();
        assert_eq!(status, Status::Fail);
        assert_eq!(message, "bad: tpl");
        let cronjob = json!({"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "c", "namespace": "a"},
            "spec": {"jobTemplate": {"spec": {"template": template}}}});
        assert_eq!(eval(&p, cronjob).unwrap().0, Status::Fail);
        // Only the controllers named.
        let mut spec = pods(json!([{"expression": "false"}]));
        spec["autogen"] = json!({"podControllers": {"controllers": ["jobs"]}});
        let only_jobs = policy(spec);
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d"}, "spec": {"template": {"spec": {}}}});
        assert!(eval(&only_jobs, deployment).is_none());
    }

    #[test]
    fn the_namespace_stays_the_controllers_own() {
        let template = Template {
            group: "apps",
            kind: "Deployment",
            resource: "deployments",
            path: "spec.template",
        };
        assert_eq!(
            template.rewrite("object.metadata.namespace == object.metadata.name && object.spec.x && oldObject.spec.y && myobject.spec"),
            "object.metadata.namespace == object.spec.template.metadata.name && object.spec.template.spec.x && oldObject.spec.template.spec.y && myobject.spec"
        );
    }

    #[test]
    fn match_conditions_skip_and_errors_fail_closed() {
        let mut spec = pods(json!([{"expression": "object.spec.nope.x == 1"}]));
        spec["matchConditions"] =
            json!([{"name": "labelled", "expression": "has(object.metadata.labels)"}]);
        let p = policy(spec.clone());
        assert_eq!(eval(&p, pod(false)).unwrap().0, Status::Skip);
        let mut labelled = pod(false);
        labelled["metadata"]["labels"] = json!({"a": "b"});
        assert_eq!(eval(&p, labelled.clone()).unwrap().0, Status::Error);
        // Ignore leaves the failing validation out: nothing else to check.
        spec["failurePolicy"] = json!("Ignore");
        assert_eq!(eval(&policy(spec), labelled).unwrap().0, Status::Pass);
    }

    #[test]
    fn ignore_leaves_out_only_the_validations_that_error() {
        let mut spec = pods(json!([
            {"expression": "object.spec.nope.x == 1"},
            {"expression": "!object.spec.hostNetwork", "message": "no host network"}
        ]));
        spec["failurePolicy"] = json!("Ignore");
        let p = policy(spec.clone());
        assert_eq!(
            eval(&p, pod(true)).unwrap(),
            (Status::Fail, "no host network".into())
        );
        assert_eq!(eval(&p, pod(false)).unwrap().0, Status::Pass);
        // A match condition that fails is an error whatever the policy says.
        spec["matchConditions"] = json!([{"name": "broken", "expression": "object.nope.x"}]);
        assert_eq!(eval(&policy(spec), pod(false)).unwrap().0, Status::Error);
    }

    #[test]
    fn without_validation_actions_a_failure_is_denied() {
        let mut spec = pods(json!([{"expression": "false"}]));
        spec.as_object_mut().unwrap().remove("validationActions");
        let result = policy(spec.clone())
            .evaluate(
                &pod(false),
                &BTreeMap::new(),
                &SetKinds::default(),
                "CREATE",
                &[],
            )
            .unwrap();
        assert!(result.enforce);
        spec["validationActions"] = json!(["Dney"]);
        let error = ValidatingPolicy::parse(
            "ValidatingPolicy",
            &json!({"metadata": {"name": "p"}, "spec": spec}),
        )
        .unwrap_err();
        assert!(error.contains("`Dney`"), "{error}");
    }

    #[test]
    fn cluster_libraries_and_unknown_fields_are_refused_by_name() {
        let error = ValidatingPolicy::parse(
            "ValidatingPolicy",
            &json!({"metadata": {"name": "p"}, "spec": pods(json!([{
                "expression": "resource.Get('v1', 'configmaps', 'ns', 'x').data.a == 'b'"
            }]))}),
        )
        .unwrap_err();
        assert!(error.contains("`resource` CEL library"), "{error}");
        // A field named like a library is not one.
        policy(pods(json!([{"expression": "has(object.spec.resource.x)"}])));
        let mut spec = pods(json!([{"expression": "true"}]));
        spec["paramKind"] = json!({"kind": "ConfigMap"});
        let error = ValidatingPolicy::parse(
            "ValidatingPolicy",
            &json!({"metadata": {"name": "p"}, "spec": spec}),
        )
        .unwrap_err();
        assert!(error.contains("paramKind"), "{error}");
    }

    #[test]
    fn audit_is_not_enforced() {
        let mut spec = pods(json!([{"expression": "false"}]));
        spec["validationActions"] = json!(["Audit"]);
        let p = policy(spec);
        let result = p
            .evaluate(
                &pod(false),
                &BTreeMap::new(),
                &SetKinds::default(),
                "CREATE",
                &[],
            )
            .unwrap();
        assert!(!result.enforce);
    }
}
