//! One policy's rules evaluated on one resource: match and exclude,
//! preconditions, then the validation, each rule ending `pass`, `fail`,
//! `skip` or `error` as `kyverno apply` reports them.

use serde_json::{Map, Value, json};

use crate::autogen;
use crate::conditions::{self, Operator};
use crate::exception::PolicyException;
use crate::images;
use crate::matching::{self, Request};
use crate::model::{Policy, Rule};
use crate::pattern::{self, Outcome};
use crate::variables;

/// How a rule ended on a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The resource satisfies the rule.
    Pass,
    /// It does not.
    Fail,
    /// The rule does not apply (a precondition or anchor did not hold).
    Skip,
    /// The rule could not be evaluated (its message says why).
    Error,
}

/// A rule's result on a resource.
#[derive(Debug, Clone)]
pub struct RuleResult {
    /// The rule (generated rules: `autogen-…`).
    pub rule: String,
    /// How it ended.
    pub status: Status,
    /// Why, for a person.
    pub message: String,
    /// Whether a failure blocks: the rule's `validate.failureAction`, else
    /// the policy's `validationFailureAction` (`Enforce`, any case).
    pub enforce: bool,
}

/// A policy with its rules as they run: its own and those autogen makes,
/// computed once for every resource it reviews, and the exceptions that
/// name it.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The policy.
    pub policy: Policy,
    /// Its rules, generated ones included.
    pub rules: Vec<Rule>,
    /// The exceptions naming it.
    pub exceptions: Vec<PolicyException>,
}

impl Prepared {
    /// The name exceptions know it by: a ClusterPolicy's name, a Policy's
    /// `NAMESPACE/NAME`.
    pub fn key(&self) -> String {
        match (&self.policy.kind[..], &self.policy.metadata.namespace) {
            ("Policy", Some(namespace)) => format!("{namespace}/{}", self.policy.metadata.name),
            ("Policy", None) => format!("default/{}", self.policy.metadata.name),
            _ => self.policy.metadata.name.clone(),
        }
    }
}

/// Prepares `policy` for reviews, with those of `exceptions` that name it.
pub fn prepare(policy: Policy, exceptions: &[PolicyException]) -> Prepared {
    let rules = autogen::rules(&policy);
    let mut prepared = Prepared {
        policy,
        rules,
        exceptions: Vec::new(),
    };
    let key = prepared.key();
    prepared.exceptions = exceptions
        .iter()
        .filter(|e| prepared.rules.iter().any(|r| e.names(&key, &r.name)))
        .cloned()
        .collect();
    prepared
}

/// The results of every rule of `policy` that applies to `resource` (a
/// rule whose `match` does not select it, or whose `exclude` does, gives
/// none).
pub fn evaluate(policy: &Prepared, resource: &Value, request: &Request<'_>) -> Vec<RuleResult> {
    let key = policy.key();
    let Prepared {
        policy,
        rules,
        exceptions,
    } = policy;
    if policy.kind == "Policy" {
        let namespace = resource
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        // A Policy reviews its own namespace (`default` when it names none,
        // as the API server would place it).
        if policy.metadata.namespace.as_deref().unwrap_or("default") != namespace {
            return Vec::new();
        }
    }
    let mut results = Vec::new();
    for rule in rules {
        let excepted: Vec<&PolicyException> = exceptions
            .iter()
            .filter(|e| e.names(&key, &rule.name))
            .collect();
        let lookups = Lookups {
            request,
            policy_namespace: (policy.kind == "Policy")
                .then(|| policy.metadata.namespace.as_deref().unwrap_or("default")),
        };
        if let Some(mut result) = evaluate_rule(rule, resource, &lookups, &excepted) {
            match rule_action(rule, policy, resource, request) {
                Ok(action) => result.enforce = action.is_some_and(is_enforce),
                Err(e) => {
                    result.status = Status::Error;
                    result.message = format!("failureActionOverrides: {e}");
                }
            }
            results.push(result);
        }
    }
    results
}

fn is_enforce(action: &str) -> bool {
    action.eq_ignore_ascii_case("enforce")
}

/// The action of `rule` on `resource`, as Kyverno resolves it: the rule's
/// `failureActionOverrides`, then its `failureAction`, then the policy's
/// `validationFailureActionOverrides`, then its `validationFailureAction`.
fn rule_action<'a>(
    rule: &'a Rule,
    policy: &'a Policy,
    resource: &Value,
    request: &Request<'_>,
) -> Result<Option<&'a str>, String> {
    let validate = rule.validate.as_ref();
    if let Some(overrides) = validate.and_then(|v| v.get("failureActionOverrides"))
        && let Some(action) = override_action(overrides, resource, request)?
    {
        return Ok(Some(action));
    }
    if let Some(action) = validate
        .and_then(|v| v.get("failureAction"))
        .and_then(Value::as_str)
    {
        return Ok(Some(action));
    }
    if let Some(overrides) = &policy.spec.validation_failure_action_overrides
        && let Some(action) = override_action(overrides, resource, request)?
    {
        return Ok(Some(action));
    }
    Ok(policy.spec.validation_failure_action.as_deref())
}

/// The action of the first entry of a `failureActionOverrides` list that
/// applies to `resource`, as Kyverno matches them: without `namespaces`,
/// its `namespaceSelector` decides (neither: every namespace); with them,
/// the resource's namespace must match one (wildcards) and the selector,
/// when given, must select it too. A selector over a namespace whose
/// labels are unknown holds only for an entry that enforces (fail closed).
fn override_action<'a>(
    overrides: &'a Value,
    resource: &Value,
    request: &Request<'_>,
) -> Result<Option<&'a str>, String> {
    let Some(list) = overrides.as_array() else {
        return Err("must be a list of {action, namespaces, namespaceSelector}".into());
    };
    let namespace = resource
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    for entry in list {
        let action = entry
            .get("action")
            .and_then(Value::as_str)
            .ok_or("an override without an action")?;
        if !(is_enforce(action) || action.eq_ignore_ascii_case("audit")) {
            return Err(format!("action `{action}` is not Enforce or Audit"));
        }
        let selected = || -> Result<bool, String> {
            let Some(selector) = entry.get("namespaceSelector") else {
                return Ok(true);
            };
            let labels = if namespace.is_empty() {
                Some(serde_json::Map::new())
            } else {
                (request.namespace_labels)(namespace).ok()
            };
            match labels {
                Some(labels) => matching::selector_selects(selector, Some(&labels)),
                None => Ok(is_enforce(action)),
            }
        };
        let applies = match entry.get("namespaces") {
            None | Some(Value::Null) => selected()?,
            Some(Value::Array(patterns)) => {
                patterns
                    .iter()
                    .filter_map(Value::as_str)
                    .any(|pattern| crate::wildcard::matches(pattern, namespace))
                    && selected()?
            }
            Some(_) => return Err("`namespaces` must be a list".into()),
        };
        if applies {
            return Ok(Some(action));
        }
    }
    Ok(None)
}

fn result(rule: &Rule, status: Status, message: impl Into<String>) -> Option<RuleResult> {
    Some(RuleResult {
        rule: rule.name.clone(),
        status,
        message: message.into(),
        enforce: false,
    })
}

/// What a rule's context entries may read: the review's request (the
/// rendered set's ConfigMaps, then the destination's) and, for a namespaced Policy, its namespace
/// (it reads ConfigMaps there only, as in Kyverno).
struct Lookups<'a> {
    request: &'a Request<'a>,
    policy_namespace: Option<&'a str>,
}

fn evaluate_rule(
    rule: &Rule,
    resource: &Value,
    lookups: &Lookups<'_>,
    exceptions: &[&PolicyException],
) -> Option<RuleResult> {
    let request = lookups.request;
    crate::budget::reset();
    match matching::selects(rule.match_.as_ref(), resource, request) {
        Ok(true) => {}
        Ok(false) => return None,
        Err(e) => return result(rule, Status::Error, e),
    }
    match matching::selects(rule.exclude.as_ref(), resource, request) {
        Ok(false) => {}
        Ok(true) => return None,
        Err(e) => return result(rule, Status::Error, e),
    }
    // What Kiln does not run is an error on what the rule selects, never a
    // rule quietly left out.
    let Some(validate) = rule.validate.as_ref() else {
        let what = if rule.mutate.is_some() {
            "mutate rules are not run by Kiln (policies review, they never change objects)"
        } else if rule.generate.is_some() {
            "generate rules are not run by Kiln"
        } else if rule.verify_images.is_some() {
            "verifyImages rules are not run by the kyverno plugin (sign and verify plugins with Kiln's trust policies)"
        } else {
            "the rule has no validate (a misspelt key?)"
        };
        return result(rule, Status::Error, what);
    };
    let mut context = base_context(resource, request);
    if let Err(e) = add_context(
        rule.context.as_deref().unwrap_or_default(),
        &mut context,
        lookups,
    ) {
        return result(rule, Status::Error, e);
    }
    if let Some(preconditions) = &rule.preconditions {
        match conditions_hold(preconditions, &context) {
            Ok(true) => {}
            Ok(false) => return result(rule, Status::Skip, "preconditions not met"),
            Err(e) => return result(rule, Status::Error, format!("preconditions: {e}")),
        }
    }
    if let Some(conditions) = &rule.cel_preconditions {
        match crate::cel::preconditions_hold(conditions, resource, request.operation) {
            Ok(true) => {}
            Ok(false) => return result(rule, Status::Skip, "CEL preconditions not met"),
            Err(e) => return result(rule, Status::Error, format!("celPreconditions: {e}")),
        }
    }
    // Exceptions are weighed once the rule applies, as in Kyverno.
    let covering: Vec<&PolicyException> = exceptions
        .iter()
        .filter(|e| e.covers(resource, request, &context))
        .copied()
        .collect();
    // `podSecurity: {}` is no Pod Security rule to Kyverno.
    if let Some(spec) = validate
        .get("podSecurity")
        .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()))
    {
        return pod_security(rule, spec, resource, &covering);
    }
    let granted: Vec<&str> = covering.iter().map(|e| e.key.as_str()).collect();
    if !granted.is_empty() {
        return result(
            rule,
            Status::Skip,
            format!(
                "rule is skipped due to policy exceptions {}",
                granted.join(", ")
            ),
        );
    }
    let (status, detail) = match validation(validate, resource, &context, lookups, 0) {
        Ok(outcome) => outcome,
        Err(e) => (Status::Error, e),
    };
    let message = match status {
        // A CEL expression's failure message is the message.
        Status::Fail if validate.get("cel").is_some() => detail,
        Status::Fail => {
            let message = match validate
                .get("message")
                .map(|m| variables::substitute(m, &context))
            {
                None => String::new(),
                Some(Ok(Value::String(s))) => s,
                Some(Ok(other)) => other.to_string(),
                Some(Err(e)) => format!("(the message's variables: {e})"),
            };
            if detail.is_empty() {
                format!("validation error: {message}")
            } else {
                format!(
                    "validation error: {message} rule {} failed at path {detail}",
                    rule.name
                )
            }
        }
        _ => detail,
    };
    result(rule, status, message)
}

/// A `validate.podSecurity` rule ([`crate::pss`]). The exceptions that
/// cover the object skip it, unless every one of them grants `podSecurity`
/// exclusions: then those are applied after the rule's own, and the rule is
/// skipped only when they clear every failed check (Kyverno's order).
fn pod_security(
    rule: &Rule,
    spec: &Value,
    resource: &Value,
    covering: &[&PolicyException],
) -> Option<RuleResult> {
    if let Some(plain) = covering.iter().find(|e| e.pod_security().is_empty()) {
        let why = format!("rule is skipped due to policy exception {}", plain.key);
        return result(rule, Status::Skip, why);
    }
    let policy = match crate::pss::PodSecurity::parse(spec) {
        Ok(policy) => policy,
        Err(e) => return result(rule, Status::Error, e),
    };
    let more: Vec<crate::pss::Exclusion> = covering
        .iter()
        .flat_map(|e| e.pod_security().iter().cloned())
        .collect();
    // The object is read once, and once more per exclusion.
    let passes = 1 + policy.exclusions() + more.len();
    let weight = crate::budget::weight(resource, crate::budget::MAX_STEPS);
    if let Err(e) = crate::budget::charge(weight.saturating_mul(passes as u64)) {
        return result(rule, Status::Error, e);
    }
    match policy.evaluate(resource, &rule.name, &more) {
        Ok(crate::pss::Verdict::Pass) => result(
            rule,
            Status::Pass,
            format!("Validation rule '{}' passed.", rule.name),
        ),
        Ok(crate::pss::Verdict::Excepted) => {
            let keys: Vec<&str> = covering.iter().map(|e| e.key.as_str()).collect();
            let why = format!(
                "rule is skipped due to policy exceptions {}",
                keys.join(", ")
            );
            result(rule, Status::Skip, why)
        }
        Ok(crate::pss::Verdict::Fail(message)) => result(rule, Status::Fail, message),
        Err(e) => result(rule, Status::Error, e),
    }
}

/// What every rule's variables can read.
fn base_context(resource: &Value, request: &Request<'_>) -> Value {
    let namespace = resource
        .pointer("/metadata/namespace")
        .cloned()
        .unwrap_or(json!(""));
    json!({
        "request": {
            "object": resource,
            "oldObject": null,
            "operation": request.operation,
            "namespace": namespace,
        },
        "images": images::of(resource),
    })
}

/// A rule's `context` entries: `variable` (a value, or a JMESPath over what
/// is known, with a default); lookups the sandbox cannot make are refused
/// by name.
fn add_context(
    entries: &[Value],
    context: &mut Value,
    lookups: &Lookups<'_>,
) -> Result<(), String> {
    for entry in entries {
        let name = entry
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| format!("a context entry has no name: {entry}"))?;
        if let Some(variable) = entry.get("variable") {
            let mut value = match variable.get("value") {
                Some(v) => variables::substitute(v, context)?,
                None => Value::Null,
            };
            if let Some(path) = variable.get("jmesPath").and_then(Value::as_str) {
                let path = match variables::substitute_str(path, context)? {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                value = if variable.get("value").is_some() {
                    variables::query(&path, &value)?
                } else {
                    variables::query(&path, context)?
                };
            }
            if value.is_null()
                && let Some(default) = variable.get("default")
            {
                value = variables::substitute(default, context)?;
            }
            set(context, name, value);
        } else if let Some(reference) = entry.get("configMap") {
            let value = config_map(name, reference, context, lookups)?;
            set(context, name, value);
        } else {
            let what = ["apiCall", "imageRegistry", "globalReference"]
                .into_iter()
                .find(|k| entry.get(*k).is_some())
                .unwrap_or("unknown");
            return Err(format!(
                "context entry {name}: {what} lookups are not available before apply (the sandbox reaches no cluster or network)"
            ));
        }
    }
    Ok(())
}

/// A `configMap` context entry: the ConfigMap it names, from the rendered
/// set or else the destination (its `name` and `namespace` may hold
/// variables; no namespace is `default`, or a Policy's own, and a Policy
/// reads no other), as `{data, metadata}`, Kyverno's shape. One neither
/// has is an error naming it.
fn config_map(
    entry: &str,
    reference: &Value,
    context: &Value,
    lookups: &Lookups<'_>,
) -> Result<Value, String> {
    let field = |key: &str| -> Result<String, String> {
        match reference.get(key) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(raw) => match variables::substitute(raw, context)? {
                Value::String(s) => Ok(s),
                other => Err(format!(
                    "context entry {entry}: configMap.{key} must be a string, not {other}"
                )),
            },
        }
    };
    let name = field("name")?;
    if name.is_empty() {
        return Err(format!("context entry {entry}: configMap.name is empty"));
    }
    let namespace = match (field("namespace")?, lookups.policy_namespace) {
        (ns, Some(own)) if ns.is_empty() => own.to_owned(),
        (ns, None) if ns.is_empty() => "default".to_owned(),
        (ns, Some(own)) if ns != own => {
            return Err(format!(
                "context entry {entry}: configMap namespace {ns:?} is different from policy namespace {own:?}"
            ));
        }
        (ns, _) => ns,
    };
    let found = (lookups.request.config_maps)(&namespace, &name).map_err(|why| {
        format!("context entry {entry}: failed to get configmap {namespace}/{name}: {why}")
    })?;
    // Copied into the rule's context: charged.
    crate::budget::charge(crate::budget::weight(&found, crate::budget::MAX_STEPS))?;
    Ok(json!({
        "data": found.get("data").cloned().unwrap_or(Value::Null),
        "metadata": found.get("metadata").cloned().unwrap_or(Value::Null),
    }))
}

/// Sets a dotted name in the context.
fn set(context: &mut Value, name: &str, value: Value) {
    let mut here = context;
    let parts: Vec<&str> = name.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        if !here.is_object() {
            *here = Value::Object(Map::new());
        }
        let map = here.as_object_mut().expect("an object");
        if i + 1 == parts.len() {
            map.insert((*part).to_owned(), value);
            return;
        }
        here = map
            .entry((*part).to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
    }
}

/// `any`/`all` blocks, or a list (all must hold).
pub fn conditions_hold(block: &Value, context: &Value) -> Result<bool, String> {
    match block {
        Value::Array(list) => all_hold(list, context),
        Value::Object(map) => {
            if let Some(Value::Array(any)) = map.get("any")
                && !any.is_empty()
                && !any_holds(any, context)?
            {
                return Ok(false);
            }
            if let Some(Value::Array(all)) = map.get("all")
                && !all_hold(all, context)?
            {
                return Ok(false);
            }
            Ok(true)
        }
        Value::Null => Ok(true),
        _ => Err("conditions must be a list or an any/all block".into()),
    }
}

fn all_hold(list: &[Value], context: &Value) -> Result<bool, String> {
    for condition in list {
        if !condition_holds(condition, context)? {
            return Ok(false);
        }
    }
    Ok(true)
}

fn any_holds(list: &[Value], context: &Value) -> Result<bool, String> {
    for condition in list {
        if condition_holds(condition, context)? {
            return Ok(true);
        }
    }
    Ok(false)
}

fn condition_holds(condition: &Value, context: &Value) -> Result<bool, String> {
    let operator_name = condition
        .get("operator")
        .and_then(Value::as_str)
        .unwrap_or("");
    let operator = Operator::parse(operator_name)
        .ok_or_else(|| format!("unknown condition operator {operator_name:?}"))?;
    let key = variables::substitute(condition.get("key").unwrap_or(&Value::Null), context)?;
    let value = variables::substitute(condition.get("value").unwrap_or(&Value::Null), context)?;
    Ok(conditions::holds(&key, operator, &value))
}

/// The validation of a rule (or of one `foreach` element): its status and,
/// for a failed pattern, the path where.
fn validation(
    validate: &Value,
    resource: &Value,
    context: &Value,
    lookups: &Lookups<'_>,
    depth: usize,
) -> Result<(Status, String), String> {
    if depth > 8 {
        return Err("foreach nested more than 8 deep".into());
    }
    if let Some(deny) = validate.get("deny") {
        let holds = conditions_hold(deny.get("conditions").unwrap_or(&Value::Null), context)?;
        return Ok(if holds {
            (Status::Fail, String::new())
        } else {
            (Status::Pass, String::new())
        });
    }
    if let Some(pattern) = validate.get("pattern") {
        let pattern = variables::substitute(pattern, context)?;
        return Ok(match pattern::check(resource, &pattern) {
            Outcome::Pass => (Status::Pass, String::new()),
            Outcome::Skip(why) => (Status::Skip, why),
            Outcome::Fail { path, .. } => (Status::Fail, path),
        });
    }
    if let Some(Value::Array(patterns)) = validate.get("anyPattern") {
        let mut skipped = 0;
        let mut failed = Vec::new();
        for pattern in patterns {
            let pattern = variables::substitute(pattern, context)?;
            match pattern::check(resource, &pattern) {
                Outcome::Pass => return Ok((Status::Pass, String::new())),
                Outcome::Skip(_) => skipped += 1,
                Outcome::Fail { path, .. } => failed.push(path),
            }
        }
        if skipped == patterns.len() {
            return Ok((Status::Skip, "every anyPattern was skipped".into()));
        }
        return Ok((Status::Fail, failed.join(", ")));
    }
    if let Some(Value::Array(foreach)) = validate.get("foreach") {
        return for_each(foreach, context, lookups, depth);
    }
    if let Some(cel) = validate.get("cel") {
        let object = context.pointer("/request/object").unwrap_or(&Value::Null);
        let operation = context
            .pointer("/request/operation")
            .and_then(Value::as_str)
            .unwrap_or("CREATE");
        return crate::cel::validate(cel, object, operation, None);
    }
    if validate.get("podSecurity").is_some() {
        return Err("podSecurity is not allowed inside foreach".into());
    }
    if validate.get("manifests").is_some() {
        return Err("validate.manifests is not supported by the kyverno plugin".into());
    }
    Err("validate has none of pattern, anyPattern, deny, foreach".into())
}

fn for_each(
    entries: &[Value],
    context: &Value,
    lookups: &Lookups<'_>,
    depth: usize,
) -> Result<(Status, String), String> {
    let mut applied = 0;
    for entry in entries {
        let list = entry
            .get("list")
            .and_then(Value::as_str)
            .ok_or("foreach without a list")?;
        let list = match variables::substitute_str(list, context)? {
            Value::String(expression) => variables::search(&expression, context)?,
            other => other,
        };
        let items = match list {
            Value::Array(items) => items,
            Value::Null => continue,
            other => vec![other],
        };
        // Each element gets its own copy of the context: charged.
        let copy = crate::budget::weight(context, crate::budget::MAX_STEPS) + 1;
        for (index, element) in items.iter().enumerate() {
            crate::budget::charge(copy)?;
            let mut scoped = context.clone();
            set(&mut scoped, "element", element.clone());
            set(&mut scoped, "elementIndex", json!(index));
            set(&mut scoped, &format!("element{depth}"), element.clone());
            set(&mut scoped, &format!("elementIndex{depth}"), json!(index));
            if let Some(entries) = entry.get("context").and_then(Value::as_array) {
                add_context(entries, &mut scoped, lookups)?;
            }
            if let Some(preconditions) = entry.get("preconditions")
                && !conditions_hold(preconditions, &scoped)?
            {
                continue;
            }
            let scope_is_element = entry
                .get("elementScope")
                .and_then(Value::as_bool)
                .unwrap_or(true);
            let target = if scope_is_element {
                element.clone()
            } else {
                scoped
                    .pointer("/request/object")
                    .cloned()
                    .unwrap_or(Value::Null)
            };
            let (status, detail) = validation(entry, &target, &scoped, lookups, depth + 1)?;
            match status {
                Status::Fail => return Ok((Status::Fail, detail)),
                Status::Error => return Ok((Status::Error, detail)),
                Status::Pass => applied += 1,
                Status::Skip => {}
            }
        }
    }
    if applied == 0 {
        return Ok((
            Status::Skip,
            "no element of the foreach list applied".into(),
        ));
    }
    Ok((Status::Pass, String::new()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model;

    fn policy(rules: &str) -> Prepared {
        let text = format!(
            "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {{name: p}}\nspec:\n  validationFailureAction: Enforce\n  rules:\n{rules}"
        );
        prepare(model::policies("p.yaml", &text).unwrap().remove(0), &[])
    }

    fn request() -> Request<'static> {
        Request {
            operation: "CREATE",
            namespace_labels: &|_| Ok(Map::new()),
            config_maps: &|_, _| Err("not in the rendered set".into()),
        }
    }

    fn pod(image: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "labels": {"team": "a"}},
               "spec": {"containers": [{"name": "c", "image": image}]}})
    }

    #[test]
    fn failure_action_overrides_decide_per_namespace() {
        let text = "apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  validationFailureAction: Audit
  validationFailureActionOverrides:
  - {action: Enforce, namespaces: [prod-*]}
  - action: Enforce
    namespaceSelector: {matchLabels: {tier: critical}}
  rules:
  - name: no-latest
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      pattern: {spec: {containers: [{image: '!*:latest'}]}}
";
        let policy = prepare(model::policies("p.yaml", text).unwrap().remove(0), &[]);
        let in_namespace = |ns: &str| {
            let mut pod = pod("x:latest");
            pod["metadata"]["namespace"] = json!(ns);
            pod
        };
        let labels = |ns: &str| match ns {
            "shop" => Ok(Map::from_iter([("tier".to_owned(), json!("critical"))])),
            "unknown" => Err("unknown".to_owned()),
            _ => Ok(Map::new()),
        };
        let request = Request {
            operation: "CREATE",
            namespace_labels: &labels,
            config_maps: &|_, _| Err("not in the rendered set".into()),
        };
        let enforced = |ns: &str| {
            let results = evaluate(&policy, &in_namespace(ns), &request);
            assert_eq!(results[0].status, Status::Fail, "{ns}");
            results[0].enforce
        };
        assert!(!enforced("dev"));
        assert!(enforced("prod-eu"));
        assert!(enforced("shop"));
        // Labels unknown: an enforcing selector applies (fail closed).
        assert!(enforced("unknown"));

        // Kyverno's order: the rule's own action beats the policy's
        // overrides; an entry with namespaces and a selector needs both; one
        // with neither covers every namespace.
        let with = |rule_action: &str, overrides: &str| {
            let text = format!(
                "apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {{name: p}}
spec:
  validationFailureAction: Enforce
  validationFailureActionOverrides: {overrides}
  rules:
  - name: no-latest
    match: {{any: [{{resources: {{kinds: [Pod]}}}}]}}
    validate:
      {rule_action}
      pattern: {{spec: {{containers: [{{image: '!*:latest'}}]}}}}
"
            );
            prepare(model::policies("p.yaml", &text).unwrap().remove(0), &[])
        };
        let enforced_by =
            |policy: &Prepared, ns: &str| evaluate(policy, &in_namespace(ns), &request)[0].enforce;
        let audit_all = "[{action: Audit}]";
        assert!(enforced_by(
            &with("failureAction: Enforce", audit_all),
            "dev"
        ));
        assert!(!enforced_by(&with("", audit_all), "dev"));
        let both = "[{action: Audit, namespaces: ['*'], namespaceSelector: {matchLabels: {tier: critical}}}]";
        assert!(
            enforced_by(&with("", both), "dev"),
            "the selector must hold too"
        );
        assert!(!enforced_by(&with("", both), "shop"));
    }

    #[test]
    fn deny_preconditions_and_autogen() {
        let p = policy(
            "  - name: no-latest\n    match: {any: [{resources: {kinds: [Pod]}}]}\n    preconditions: {all: [{key: '{{ request.operation }}', operator: Equals, value: CREATE}]}\n    validate:\n      message: 'image {{ request.object.spec.containers[0].image }}'\n      deny:\n        conditions:\n          any: [{key: '{{ request.object.spec.containers[].image }}', operator: AnyIn, value: ['*:latest']}]\n",
        );
        let results = evaluate(&p, &pod("nginx:latest"), &request());
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].status, Status::Fail);
        assert!(
            results[0].message.contains("image nginx:latest"),
            "{}",
            results[0].message
        );
        assert_eq!(
            evaluate(&p, &pod("nginx:1"), &request())[0].status,
            Status::Pass
        );

        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"metadata": {}, "spec": {"containers": [{"name": "c", "image": "x:latest"}]}}}});
        let results = evaluate(&p, &deployment, &request());
        assert_eq!(results.len(), 1, "{results:?}");
        assert_eq!(results[0].rule, "autogen-no-latest");
        assert_eq!(results[0].status, Status::Fail);
    }

    #[test]
    fn attack_omitting_a_field_never_evades_a_rule() {
        // deny when the label is not one of the allowed ones: a Pod without
        // the label is an error (Kyverno's "Unknown key"), not a pass.
        let p = policy(
            "  - name: animal\n    match: {any: [{resources: {kinds: [Pod]}}]}\n    validate:\n      deny:\n        conditions:\n          any: [{key: '{{ request.object.metadata.labels.animal }}', operator: NotIn, value: [cat, dog]}]\n",
        );
        let results = evaluate(&p, &pod("a:1"), &request());
        assert_eq!(results[0].status, Status::Error, "{results:?}");
        assert!(
            results[0].message.contains("not found"),
            "{}",
            results[0].message
        );
        // A rule Kiln does not run is an error on what it selects.
        let p = policy(
            "  - name: m\n    match: {any: [{resources: {kinds: [Pod]}}]}\n    mutate: {patchStrategicMerge: {metadata: {labels: {a: b}}}}\n",
        );
        let results = evaluate(&p, &pod("a:1"), &request());
        assert_eq!(results[0].status, Status::Error);
        assert!(
            results[0].message.contains("mutate rules are not run"),
            "{}",
            results[0].message
        );
        // A rule named autogen-… is kept when autogen does not apply.
        let p = policy(
            "  - name: autogen-own\n    match: {any: [{resources: {kinds: [Service]}}]}\n    validate: {pattern: {metadata: {name: 'x'}}}\n",
        );
        let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "y"}});
        assert_eq!(evaluate(&p, &service, &request())[0].status, Status::Fail);
    }

    #[test]
    fn cel_expressions_with_variables_and_autogen() {
        let p = policy(
            "  - name: tag\n    match: {any: [{resources: {kinds: [Pod]}}]}\n    validate:\n      cel:\n        variables: [{name: images, expression: 'object.spec.containers.map(c, c.image)'}]\n        expressions:\n          - expression: \"variables.images.all(i, !i.endsWith(':latest'))\"\n            messageExpression: \"'latest in ' + object.metadata.name\"\n",
        );
        let results = evaluate(&p, &pod("a:latest"), &request());
        assert_eq!(results[0].status, Status::Fail, "{results:?}");
        assert_eq!(results[0].message, "latest in p");
        assert_eq!(
            evaluate(&p, &pod("a:1"), &request())[0].status,
            Status::Pass
        );
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"metadata": {"name": "t"}, "spec": {"containers": [{"name": "c", "image": "x:latest"}]}}}});
        let results = evaluate(&p, &deployment, &request());
        assert_eq!(results[0].rule, "autogen-tag");
        assert_eq!(results[0].status, Status::Fail, "{results:?}");
        // An expression that does not compile is an error, never a pass.
        let p = policy(
            "  - name: bad\n    match: {any: [{resources: {kinds: [Pod]}}]}\n    validate: {cel: {expressions: [{expression: 'object.('}]}}\n",
        );
        assert_eq!(
            evaluate(&p, &pod("a:1"), &request())[0].status,
            Status::Error
        );
    }

    #[test]
    fn what_the_sandbox_cannot_do_is_an_error_naming_it() {
        let p = policy(
            "  - name: lookup\n    match: {any: [{resources: {kinds: [Pod]}}]}\n    context: [{name: cm, apiCall: {urlPath: /api/v1/namespaces}}]\n    validate: {pattern: {metadata: {name: '*'}}}\n",
        );
        let results = evaluate(&p, &pod("a:1"), &request());
        assert_eq!(results[0].status, Status::Error);
        assert!(
            results[0]
                .message
                .contains("apiCall lookups are not available"),
            "{}",
            results[0].message
        );
    }

    #[test]
    fn attack_hostile_policies_fail_closed_within_bounds() {
        // A foreach nested past the bound.
        let mut foreach = "{pattern: {name: '*'}}".to_owned();
        for _ in 0..12 {
            foreach = format!("{{list: 'request.object.spec.containers', foreach: [{foreach}]}}");
        }
        let p = policy(&format!(
            "  - name: deep\n    match: {{any: [{{resources: {{kinds: [Pod]}}}}]}}\n    validate: {{foreach: [{foreach}]}}\n"
        ));
        let results = evaluate(&p, &pod("a:1"), &request());
        assert_eq!(results[0].status, Status::Error, "{results:?}");

        // Variables nested past the bound.
        let mut variable = "request.operation".to_owned();
        for _ in 0..12 {
            variable = format!("to_upper('{{{{ {variable} }}}}')");
        }
        assert!(
            variables::substitute_str(
                &format!("{{{{ {variable} }}}}"),
                &json!({"request": {"operation": "x"}})
            )
            .is_err()
        );

        // A regular expression too large, and a billion laughs for parse_yaml.
        assert!(
            variables::query(
                &format!("regex_match('{}', 'a')", "a".repeat(5000)),
                &json!({})
            )
            .is_err()
        );
        let laughs = "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n";
        let err = variables::query("parse_yaml(y)", &json!({"y": laughs})).unwrap_err();
        assert!(err.contains("parse_yaml"), "{err}");
        // A policy file that is a billion laughs is refused naming the file.
        let err = model::policies("bomb.yaml", laughs).unwrap_err();
        assert!(err.starts_with("bomb.yaml"), "{err}");
    }

    #[test]
    fn config_map_context_reads_the_rendered_set() {
        let rules = "  - name: allowed-registry
    match: {any: [{resources: {kinds: [Pod]}}]}
    context:
    - name: settings
      configMap: {name: registries, namespace: '{{ request.object.metadata.namespace }}'}
    validate:
      message: 'registry not allowed'
      deny:
        conditions:
          all:
          - {key: '{{ images.containers.*.registry }}', operator: AnyNotIn, value: \"{{ settings.data.allowed | split(@, ',') }}\"}
";
        let policy = policy(rules);
        let settings = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "registries", "namespace": "ns"},
            "data": {"allowed": "ghcr.io,docker.io"}});
        let lookup = |ns: &str, name: &str| {
            (ns == "ns" && name == "registries")
                .then(|| settings.clone())
                .ok_or_else(|| "not in the rendered set".to_owned())
        };
        let with_settings = Request {
            operation: "CREATE",
            namespace_labels: &|_| Ok(Map::new()),
            config_maps: &lookup,
        };
        let status = |image: &str| evaluate(&policy, &pod(image), &with_settings)[0].status;
        assert_eq!(status("ghcr.io/app:1"), Status::Pass);
        assert_eq!(status("quay.io/app:1"), Status::Fail);
        // One the rendered set does not have is an error naming it.
        let results = evaluate(&policy, &pod("ghcr.io/app:1"), &request());
        assert_eq!(results[0].status, Status::Error);
        assert!(
            results[0]
                .message
                .contains("failed to get configmap ns/registries: not in the rendered set"),
            "{}",
            results[0].message
        );
    }

    #[test]
    fn a_namespaced_policy_reads_config_maps_of_its_namespace_only() {
        let text = "apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: p, namespace: ns}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    context:
    - name: other
      configMap: {name: registries, namespace: kube-system}
    validate:
      deny: {conditions: {all: [{key: '{{ other.data.x }}', operator: Equals, value: 'y'}]}}
";
        let policy = prepare(model::policies("p.yaml", text).unwrap().remove(0), &[]);
        let any = json!({"data": {"x": "y"}});
        let lookup = |_: &str, _: &str| Ok(any.clone());
        let request = Request {
            operation: "CREATE",
            namespace_labels: &|_| Ok(Map::new()),
            config_maps: &lookup,
        };
        let results = evaluate(&policy, &pod("x"), &request);
        assert_eq!(results[0].status, Status::Error);
        assert!(
            results[0]
                .message
                .contains("different from policy namespace"),
            "{}",
            results[0].message
        );
    }
}
