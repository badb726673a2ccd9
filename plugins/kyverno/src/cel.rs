//! `validate.cel`: Kubernetes CEL expressions in a Kyverno rule, on the CEL
//! library Kiln's other policies share (`kiln-cel-k8s`: the Kubernetes
//! libraries, cost and size limits, variables evaluated on demand, the
//! API server's choice of failure message).

use kiln_cel_k8s::{Compiled, Environment, Scope, Value, failure_message, from_json};
use serde_json::{Value as Json, json};

use crate::engine::Status;

/// Top-level names an expression may read (`params` is refused: a rule's
/// `paramKind` needs a cluster to read the params from).
const NAMES: &[&str] = &[
    "object",
    "oldObject",
    "request",
    "namespaceObject",
    "variables",
];

fn compile(env: &Environment, source: &str, what: &str) -> Result<Compiled, String> {
    env.compile(source, NAMES)
        .map_err(|e| format!("{what}: {e}"))
}

/// The CEL environment of Kyverno's rules: the Kubernetes libraries with
/// CEL's optional types.
///
/// Built once per thread (it registers every library function) and shared:
/// a review evaluates each CEL rule on every object of the set.
fn environment() -> Environment {
    thread_local! {
        static ENVIRONMENT: Environment =
            Environment::with_optional_types(kiln_cel_k8s::Limits::default());
    }
    ENVIRONMENT.with(Environment::clone)
}

/// The bindings every expression of a rule reads.
fn bind(
    scope: &mut Scope<'_>,
    object: &Json,
    operation: &str,
    namespace_object: Option<&Json>,
    max_depth: usize,
) -> Result<(), String> {
    let read = |value: &Json| from_json(value, max_depth).map_err(|e| format!("the object: {e}"));
    let metadata = object.get("metadata");
    let request = json!({
        "operation": operation,
        "namespace": metadata.and_then(|m| m.get("namespace")).cloned().unwrap_or(json!("")),
        "name": metadata.and_then(|m| m.get("name")).cloned().unwrap_or(json!("")),
        "kind": {"kind": object.get("kind").cloned().unwrap_or(json!(""))},
    });
    scope.set("object", read(object)?);
    scope.set("oldObject", Value::Null);
    scope.set("request", read(&request)?);
    scope.set(
        "namespaceObject",
        namespace_object
            .map(read)
            .transpose()?
            .unwrap_or(Value::Null),
    );
    Ok(())
}

/// A rule's `celPreconditions`: whether every one holds (an expression
/// that does not compile or return a bool is an error).
pub fn preconditions_hold(
    conditions: &Json,
    object: &Json,
    operation: &str,
) -> Result<bool, String> {
    let env = environment();
    let Some(list) = conditions.as_array() else {
        return Err("must be a list of {name, expression}".into());
    };
    let mut compiled = Vec::new();
    for (i, condition) in list.iter().enumerate() {
        let name = condition
            .get("name")
            .and_then(Json::as_str)
            .map_or_else(|| format!("[{i}]"), str::to_owned);
        let source = condition
            .get("expression")
            .and_then(Json::as_str)
            .unwrap_or("");
        compiled.push((name.clone(), compile(&env, source, &name)?));
    }
    let none = Vec::new();
    let mut scope = Scope::new(env.evaluation(), &none);
    bind(
        &mut scope,
        object,
        operation,
        None,
        env.limits().max_value_depth,
    )?;
    for (name, expression) in &compiled {
        match scope.eval(expression) {
            Ok(Value::Bool(true)) => {}
            Ok(Value::Bool(false)) => return Ok(false),
            Ok(other) => return Err(format!("{name} returned {other:?}, not a bool")),
            Err(e) => return Err(format!("{name}: {e}")),
        }
    }
    Ok(true)
}

/// Evaluates the `cel` block of a rule on `object`: pass when every
/// expression is true, fail with the first false one's message, error when
/// one cannot be compiled or evaluated (never a pass).
pub fn validate(
    cel: &Json,
    object: &Json,
    operation: &str,
    namespace_object: Option<&Json>,
) -> Result<(Status, String), String> {
    if cel.get("paramKind").is_some() || cel.get("paramRef").is_some() {
        return Err("validate.cel: paramKind and paramRef are not supported (params are read from the cluster)".into());
    }
    let env = environment();
    let max_depth = env.limits().max_value_depth;
    let mut variables = Vec::new();
    for variable in cel
        .get("variables")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
    {
        let name = variable
            .get("name")
            .and_then(Json::as_str)
            .ok_or("validate.cel: a variable has no name")?;
        let source = variable
            .get("expression")
            .and_then(Json::as_str)
            .unwrap_or("");
        variables.push((
            name.to_owned(),
            compile(&env, source, &format!("validate.cel variable {name}"))?,
        ));
    }
    let mut expressions = Vec::new();
    for (i, entry) in cel
        .get("expressions")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let source = entry.get("expression").and_then(Json::as_str).unwrap_or("");
        let compiled = compile(&env, source, &format!("validate.cel expressions[{i}]"))?;
        let message_expression = entry
            .get("messageExpression")
            .and_then(Json::as_str)
            .map(|m| {
                compile(
                    &env,
                    m,
                    &format!("validate.cel expressions[{i}].messageExpression"),
                )
            })
            .transpose()?;
        let message = entry
            .get("message")
            .and_then(Json::as_str)
            .map(str::to_owned);
        expressions.push((compiled, message, message_expression));
    }
    if expressions.is_empty() {
        return Err("validate.cel has no expressions".into());
    }
    let mut scope = Scope::new(env.evaluation(), &variables);
    bind(&mut scope, object, operation, namespace_object, max_depth)
        .map_err(|e| format!("validate.cel: {e}"))?;
    for (compiled, message, message_expression) in &expressions {
        match scope.eval(compiled) {
            Ok(Value::Bool(true)) => {}
            Ok(Value::Bool(false)) => {
                let message = failure_message(
                    &mut scope,
                    compiled,
                    message.as_deref(),
                    message_expression.as_ref(),
                )?;
                return Ok((Status::Fail, message));
            }
            Ok(other) => {
                return Err(format!(
                    "validate.cel: {} returned {other:?}, not a bool",
                    compiled.source()
                ));
            }
            Err(e) => return Err(format!("validate.cel: {}: {e}", compiled.source())),
        }
    }
    Ok((Status::Pass, String::new()))
}
