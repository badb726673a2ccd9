//! Compiling policies and bindings, and evaluating them on the rendered set.

use std::collections::{BTreeMap, HashMap};

use kiln_cel_k8s::{CompileError, Compiled, Environment, Scope, Value, failure_message, from_json};

use crate::matching::{self, Matcher, SetKinds, Target};
use crate::model::{
    Binding, FailurePolicy, MatchResources, NotFoundAction, Policy, ValidationAction,
};
use crate::selector::labels_of;

/// Top-level variables of every expression (`authorizer` is not provided:
/// an expression using it is refused by name).
const VARIABLES: &[&str] = &[
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
    "variables",
];

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// `Audit`.
    Info,
    /// `Warn`.
    Warning,
    /// `Deny`.
    Error,
}

/// One finding about one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// `apiVersion` of the object.
    pub api_version: String,
    /// `kind` of the object.
    pub kind: String,
    /// Its namespace.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// The message, in the API server's wording.
    pub message: String,
    /// Severity from the binding's `validationActions`.
    pub severity: Severity,
}

/// A policy file set that cannot be used; every variant names the file and
/// the object (and the expression) concerned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReviewError {
    /// A document is not the object it should be.
    #[error("{file}: {what}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// What was read (`ValidatingAdmissionPolicy demo`).
        what: String,
        /// Why it is refused.
        message: String,
    },
    /// An expression does not compile.
    #[error("{file}: ValidatingAdmissionPolicy `{policy}`: {field}: {error}")]
    Compile {
        /// The file.
        file: String,
        /// The policy.
        policy: String,
        /// Which expression (`spec.validations[0].expression`).
        field: String,
        /// Why.
        error: CompileError,
    },
    /// A binding names a policy that no policy file defines.
    #[error(
        "{file}: ValidatingAdmissionPolicyBinding `{binding}` binds `{policy}`, which no policy file defines"
    )]
    UnknownPolicy {
        /// The binding's file.
        file: String,
        /// The binding.
        binding: String,
        /// The policy it names.
        policy: String,
    },
}

/// A document read from a settings file.
#[derive(Debug, Clone)]
pub struct Document {
    /// The file it came from.
    pub file: String,
    /// Its content.
    pub value: serde_json::Value,
}

struct CompiledPolicy {
    policy: Policy,
    match_conditions: Vec<(String, Compiled)>,
    variables: Vec<(String, Compiled)>,
    validations: Vec<CompiledValidation>,
    audit: Vec<(String, Compiled)>,
}

struct CompiledValidation {
    expression: Compiled,
    message: Option<String>,
    message_expression: Option<Compiled>,
    reason: Option<String>,
}

/// Policies, bindings and params, compiled and ready to review objects.
pub struct PolicySet {
    env: Environment,
    policies: BTreeMap<String, CompiledPolicy>,
    bindings: Vec<(String, Binding)>,
    params: Vec<serde_json::Value>,
}

/// Refuses resource rules the API server refuses: a policy's
/// `matchConstraints` without `resourceRules`, and a rule (included or
/// excluded) without `operations`, `apiGroups`, `apiVersions` or
/// `resources`. Such a rule matches nothing, so accepting it would leave a
/// policy silently inert.
fn check_rules(m: &MatchResources, field: &str, matcher: Matcher) -> Result<(), String> {
    if matcher == Matcher::Policy && m.resource_rules.is_empty() {
        return Err(format!("{field}.resourceRules must name at least one rule"));
    }
    for (list, rules) in [
        ("resourceRules", &m.resource_rules),
        ("excludeResourceRules", &m.exclude_resource_rules),
    ] {
        for (i, rule) in rules.iter().enumerate() {
            for (name, values) in [
                ("operations", &rule.operations),
                ("apiGroups", &rule.api_groups),
                ("apiVersions", &rule.api_versions),
                ("resources", &rule.resources),
            ] {
                if values.is_empty() {
                    return Err(format!("{field}.{list}[{i}].{name} must not be empty"));
                }
            }
        }
    }
    Ok(())
}

fn invalid(file: &str, what: String, message: impl ToString) -> ReviewError {
    ReviewError::Invalid {
        file: file.to_owned(),
        what,
        message: message.to_string(),
    }
}

impl PolicySet {
    /// Compiles `policies` and checks `bindings`; `params` are the param
    /// objects bindings may refer to.
    pub fn compile(
        env: Environment,
        policies: Vec<Document>,
        bindings: Vec<Document>,
        params: Vec<Document>,
    ) -> Result<PolicySet, ReviewError> {
        let mut compiled = BTreeMap::new();
        for doc in policies {
            let kind = doc.value["kind"].as_str().unwrap_or_default();
            if kind != "ValidatingAdmissionPolicy" {
                return Err(invalid(
                    &doc.file,
                    format!("a `{kind}`"),
                    "is not a ValidatingAdmissionPolicy",
                ));
            }
            let name = doc
                .value
                .pointer("/metadata/name")
                .and_then(|n| n.as_str())
                .unwrap_or("");
            let what = format!("ValidatingAdmissionPolicy `{name}`");
            let policy: Policy = serde_json::from_value(doc.value.clone())
                .map_err(|e| invalid(&doc.file, what.clone(), e))?;
            if compiled.contains_key(name) {
                return Err(invalid(&doc.file, what, "is defined twice"));
            }
            let c = compile_policy(&env, policy, &doc.file)?;
            compiled.insert(name.to_owned(), c);
        }
        let mut bound = Vec::new();
        for doc in bindings {
            let kind = doc.value["kind"].as_str().unwrap_or_default();
            if kind != "ValidatingAdmissionPolicyBinding" {
                return Err(invalid(
                    &doc.file,
                    format!("a `{kind}`"),
                    "is not a ValidatingAdmissionPolicyBinding",
                ));
            }
            let name = doc
                .value
                .pointer("/metadata/name")
                .and_then(|n| n.as_str())
                .unwrap_or("");
            let what = format!("ValidatingAdmissionPolicyBinding `{name}`");
            let binding: Binding = serde_json::from_value(doc.value.clone())
                .map_err(|e| invalid(&doc.file, what.clone(), e))?;
            let Some(policy) = compiled.get(&binding.spec.policy_name) else {
                return Err(ReviewError::UnknownPolicy {
                    file: doc.file,
                    binding: name.to_owned(),
                    policy: binding.spec.policy_name,
                });
            };
            if binding.spec.validation_actions.is_empty() {
                return Err(invalid(
                    &doc.file,
                    what,
                    "spec.validationActions must name at least one of Deny, Warn, Audit",
                ));
            }
            if binding
                .spec
                .validation_actions
                .contains(&ValidationAction::Deny)
                && binding
                    .spec
                    .validation_actions
                    .contains(&ValidationAction::Warn)
            {
                return Err(invalid(
                    &doc.file,
                    what,
                    "spec.validationActions cannot hold both Deny and Warn",
                ));
            }
            if policy.policy.spec.param_kind.is_some() && binding.spec.param_ref.is_none() {
                return Err(invalid(
                    &doc.file,
                    what,
                    "its policy has a paramKind: spec.paramRef is required",
                ));
            }
            if let Some(r) = &binding.spec.param_ref {
                if r.name.is_some() == r.selector.is_some() {
                    return Err(invalid(
                        &doc.file,
                        what,
                        "spec.paramRef needs exactly one of name and selector",
                    ));
                }
                if policy.policy.spec.param_kind.is_none() {
                    return Err(invalid(
                        &doc.file,
                        what,
                        "spec.paramRef is set but its policy has no paramKind",
                    ));
                }
            }
            if let Some(m) = &binding.spec.match_resources {
                check_rules(m, "spec.matchResources", Matcher::Binding)
                    .map_err(|e| invalid(&doc.file, what.clone(), e))?;
            }
            bound.push((doc.file, binding));
        }
        Ok(PolicySet {
            env,
            policies: compiled,
            bindings: bound,
            params: params.into_iter().map(|d| d.value).collect(),
        })
    }

    /// Reviews `objects`: the rendered set as it will be applied (the host
    /// places each namespaced object in its namespace before any policy
    /// sees it).
    pub fn review(&self, objects: &[serde_json::Value]) -> Vec<Finding> {
        let max_depth = self.env.limits().max_value_depth;
        let namespaces: BTreeMap<String, BTreeMap<String, String>> = objects
            .iter()
            .filter(|o| o["kind"] == "Namespace" && o["apiVersion"] == "v1")
            .filter_map(|o| {
                Some((
                    o.pointer("/metadata/name")?.as_str()?.to_owned(),
                    labels_of(o),
                ))
            })
            .collect();
        let namespace_objects: HashMap<&str, &serde_json::Value> = objects
            .iter()
            .filter(|o| o["kind"] == "Namespace" && o["apiVersion"] == "v1")
            .filter_map(|o| Some((o.pointer("/metadata/name")?.as_str()?, o)))
            .collect();
        let kinds = SetKinds::of(objects);
        let mut findings = Vec::new();
        for object in objects {
            let target = Target::new(object, &kinds);
            for (_, binding) in &self.bindings {
                let Some(policy) = self.policies.get(&binding.spec.policy_name) else {
                    continue;
                };
                let applies = policy
                    .policy
                    .spec
                    .match_constraints
                    .as_ref()
                    .is_some_and(|m| matching::matches(m, Matcher::Policy, &target, &namespaces))
                    && binding.spec.match_resources.as_ref().is_none_or(|m| {
                        matching::matches(m, Matcher::Binding, &target, &namespaces)
                    });
                if !applies {
                    continue;
                }
                let report = |findings: &mut Vec<Finding>, message: String| {
                    for action in &binding.spec.validation_actions {
                        findings.push(finding(&target, *action, &message));
                    }
                };
                let header = format!(
                    "ValidatingAdmissionPolicy '{}' with binding '{}'",
                    policy.policy.metadata.name, binding.metadata.name
                );
                let params = match self.params_for(policy, binding, &target) {
                    Ok(p) => p,
                    Err(message) => {
                        report(&mut findings, format!("{header} denied request: {message}"));
                        continue;
                    }
                };
                let namespace_object = target
                    .namespace
                    .as_deref()
                    .and_then(|ns| namespace_objects.get(ns))
                    .map(|o| from_json(o, max_depth));
                let inputs = Inputs {
                    object: from_json(object, max_depth),
                    request: request(&target),
                    namespace_object,
                };
                for param in params {
                    let outcome = self.evaluate(policy, &inputs, param);
                    for message in outcome.denials {
                        report(&mut findings, format!("{header} denied request: {message}"));
                    }
                    for (key, value) in outcome.annotations {
                        findings.push(finding(
                            &target,
                            ValidationAction::Audit,
                            &format!(
                                "{header}: audit annotation {}/{key}: {value}",
                                policy.policy.metadata.name
                            ),
                        ));
                    }
                }
            }
        }
        findings
    }

    /// The param objects a binding selects for `target`; `Ok(vec![None])`
    /// for a policy without params, `Ok(vec![])` when none is found and the
    /// binding allows it, `Err` when none is found and it denies.
    fn params_for(
        &self,
        policy: &CompiledPolicy,
        binding: &Binding,
        target: &Target<'_>,
    ) -> Result<Vec<Option<&serde_json::Value>>, String> {
        let (Some(kind), Some(r)) = (&policy.policy.spec.param_kind, &binding.spec.param_ref)
        else {
            return Ok(vec![None]);
        };
        let namespace = r.namespace.clone().or_else(|| target.namespace.clone());
        let found: Vec<_> = self
            .params
            .iter()
            .filter(|p| {
                p["apiVersion"] == kind.api_version.as_str() && p["kind"] == kind.kind.as_str()
            })
            .filter(|p| {
                let ns = p.pointer("/metadata/namespace").and_then(|n| n.as_str());
                // Cluster-scoped params (no namespace) are found from anywhere.
                ns.is_none() || ns == namespace.as_deref()
            })
            .filter(|p| match (&r.name, &r.selector) {
                (Some(name), _) => {
                    p.pointer("/metadata/name").and_then(|n| n.as_str()) == Some(name)
                }
                (None, Some(selector)) => selector.matches(&labels_of(p)),
                (None, None) => false,
            })
            .map(Some)
            .collect();
        if !found.is_empty() {
            return Ok(found);
        }
        match r.parameter_not_found_action.unwrap_or(NotFoundAction::Deny) {
            NotFoundAction::Allow => Ok(Vec::new()),
            NotFoundAction::Deny => Err(format!(
                "no params found for policy binding with `Deny` parameterNotFoundAction (paramKind {} {}, {})",
                kind.api_version,
                kind.kind,
                match (&r.name, &namespace) {
                    (Some(n), Some(ns)) => format!("name {ns}/{n}"),
                    (Some(n), None) => format!("name {n}"),
                    _ => "selector".to_owned(),
                }
            )),
        }
    }

    fn evaluate(
        &self,
        policy: &CompiledPolicy,
        inputs: &Inputs,
        param: Option<&serde_json::Value>,
    ) -> Outcome {
        let max_depth = self.env.limits().max_value_depth;
        let fail = policy
            .policy
            .spec
            .failure_policy
            .unwrap_or(FailurePolicy::Fail)
            == FailurePolicy::Fail;
        let mut outcome = Outcome::default();
        // A runaway expression (over the cost budget) denies whatever the
        // failurePolicy says: fail closed.
        let on_error = |outcome: &mut Outcome, what: String, error: String| {
            if fail || error.contains(kiln_cel_k8s::compile::COST_EXCEEDED) {
                outcome
                    .denials
                    .push(format!("{what} resulted in error: {error}"));
            }
        };
        let converted = (
            inputs.object.clone(),
            param.map(|p| from_json(p, max_depth)).transpose(),
            inputs.namespace_object.clone().transpose(),
        );
        let (object, params, namespace_object) = match converted {
            (Ok(o), Ok(p), Ok(n)) => (o, p, n),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                on_error(&mut outcome, "reading the object".to_owned(), e.to_string());
                return outcome;
            }
        };
        let mut scope = Scope::new(self.env.evaluation(), &policy.variables);
        scope.set("object", object);
        scope.set("oldObject", Value::Null);
        scope.set("request", inputs.request.clone());
        scope.set("params", params.unwrap_or(Value::Null));
        scope.set("namespaceObject", namespace_object.unwrap_or(Value::Null));
        for (name, condition) in &policy.match_conditions {
            match scope.eval(condition) {
                Ok(Value::Bool(true)) => {}
                Ok(Value::Bool(false)) => return outcome,
                Ok(other) => {
                    on_error(
                        &mut outcome,
                        format!("matchCondition '{name}'"),
                        format!("returned {other:?}, not a bool"),
                    );
                    return outcome;
                }
                Err(e) => {
                    on_error(&mut outcome, format!("matchCondition '{name}'"), e);
                    return outcome;
                }
            }
        }
        for v in &policy.validations {
            match scope.eval(&v.expression) {
                Ok(Value::Bool(true)) => {}
                Ok(Value::Bool(false)) => {
                    let message = match failure_message(
                        &mut scope,
                        &v.expression,
                        v.message.as_deref(),
                        v.message_expression.as_ref(),
                    ) {
                        Ok(m) => m,
                        Err(e) => {
                            on_error(
                                &mut outcome,
                                format!("messageExpression of '{}'", v.expression.source()),
                                e,
                            );
                            continue;
                        }
                    };
                    let reason = v.reason.as_deref().filter(|r| *r != "Invalid");
                    outcome.denials.push(match reason {
                        Some(r) => format!("{message} (reason: {r})"),
                        None => message,
                    });
                }
                Ok(other) => on_error(
                    &mut outcome,
                    format!("expression '{}'", v.expression.source()),
                    format!("returned {other:?}, not a bool"),
                ),
                Err(e) => on_error(
                    &mut outcome,
                    format!("expression '{}'", v.expression.source()),
                    e,
                ),
            }
        }
        for (key, expression) in &policy.audit {
            match scope.eval(expression) {
                Ok(Value::Null) => {}
                Ok(Value::String(s)) => outcome.annotations.push((key.clone(), s.to_string())),
                Ok(other) => on_error(
                    &mut outcome,
                    format!("auditAnnotation '{key}'"),
                    format!("returned {other:?}, not a string"),
                ),
                Err(e) => on_error(&mut outcome, format!("auditAnnotation '{key}'"), e),
            }
        }
        outcome
    }
}

struct Inputs {
    object: Result<Value, kiln_cel_k8s::convert::TooDeep>,
    request: Value,
    namespace_object: Option<Result<Value, kiln_cel_k8s::convert::TooDeep>>,
}

#[derive(Default)]
struct Outcome {
    denials: Vec<String>,
    annotations: Vec<(String, String)>,
}

fn finding(target: &Target<'_>, action: ValidationAction, message: &str) -> Finding {
    Finding {
        api_version: target.object["apiVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        kind: target.kind.clone(),
        namespace: target.namespace.clone(),
        name: target.name.clone(),
        message: match action {
            ValidationAction::Warn => message.replacen(" denied request: ", ": ", 1),
            _ => message.to_owned(),
        },
        severity: match action {
            ValidationAction::Deny => Severity::Error,
            ValidationAction::Warn => Severity::Warning,
            ValidationAction::Audit => Severity::Info,
        },
    }
}

fn request(target: &Target<'_>) -> Value {
    let json = serde_json::json!({
        "kind": {"group": target.group, "version": target.version, "kind": target.kind},
        "resource": {"group": target.group, "version": target.version, "resource": target.resource},
        "requestKind": {"group": target.group, "version": target.version, "kind": target.kind},
        "requestResource": {"group": target.group, "version": target.version, "resource": target.resource},
        "name": target.name,
        "namespace": target.namespace.clone().unwrap_or_default(),
        "operation": "CREATE",
        "userInfo": {},
        "dryRun": false,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    });
    from_json(&json, 8).unwrap_or(Value::Null)
}

fn compile_policy(
    env: &Environment,
    policy: Policy,
    file: &str,
) -> Result<CompiledPolicy, ReviewError> {
    let name = policy.metadata.name.clone();
    let compile = |field: String, source: &str| {
        env.compile(source, VARIABLES)
            .map_err(|error| ReviewError::Compile {
                file: file.to_owned(),
                policy: name.clone(),
                field,
                error,
            })
    };
    let spec = &policy.spec;
    if spec.match_constraints.is_none() {
        return Err(invalid(
            file,
            format!("ValidatingAdmissionPolicy `{name}`"),
            "spec.matchConstraints is required",
        ));
    }
    if let Some(m) = &spec.match_constraints {
        check_rules(m, "spec.matchConstraints", Matcher::Policy)
            .map_err(|e| invalid(file, format!("ValidatingAdmissionPolicy `{name}`"), e))?;
    }
    if spec.validations.is_empty() && spec.audit_annotations.is_empty() {
        return Err(invalid(
            file,
            format!("ValidatingAdmissionPolicy `{name}`"),
            "spec.validations or spec.auditAnnotations must not be empty",
        ));
    }
    let match_conditions = spec
        .match_conditions
        .iter()
        .enumerate()
        .map(|(i, m)| {
            Ok((
                m.name.clone(),
                compile(
                    format!("spec.matchConditions[{i}].expression"),
                    &m.expression,
                )?,
            ))
        })
        .collect::<Result<_, ReviewError>>()?;
    let variables = spec
        .variables
        .iter()
        .enumerate()
        .map(|(i, v)| {
            Ok((
                v.name.clone(),
                compile(format!("spec.variables[{i}].expression"), &v.expression)?,
            ))
        })
        .collect::<Result<_, ReviewError>>()?;
    let validations = spec
        .validations
        .iter()
        .enumerate()
        .map(|(i, v)| {
            Ok(CompiledValidation {
                expression: compile(format!("spec.validations[{i}].expression"), &v.expression)?,
                message: v.message.clone(),
                message_expression: v
                    .message_expression
                    .as_ref()
                    .map(|m| compile(format!("spec.validations[{i}].messageExpression"), m))
                    .transpose()?,
                reason: v.reason.clone(),
            })
        })
        .collect::<Result<_, ReviewError>>()?;
    let audit = spec
        .audit_annotations
        .iter()
        .enumerate()
        .map(|(i, a)| {
            Ok((
                a.key.clone(),
                compile(
                    format!("spec.auditAnnotations[{i}].valueExpression"),
                    &a.value_expression,
                )?,
            ))
        })
        .collect::<Result<_, ReviewError>>()?;
    Ok(CompiledPolicy {
        policy,
        match_conditions,
        variables,
        validations,
        audit,
    })
}

impl std::fmt::Debug for PolicySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicySet")
            .field("policies", &self.policies.keys().collect::<Vec<_>>())
            .field("bindings", &self.bindings.len())
            .field("params", &self.params.len())
            .finish()
    }
}
