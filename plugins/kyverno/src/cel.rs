//! `validate.cel`: Kubernetes CEL expressions in a Kyverno rule, on the CEL
//! library Kiln's other policies share (`kiln-cel-k8s`: the Kubernetes
//! libraries, cost and size limits, variables evaluated on demand, the
//! API server's choice of failure message).

use std::cell::RefCell;
use std::collections::HashMap;

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

/// How many compiled expressions a review keeps, and the longest source
/// kept: a review evaluates each CEL rule on every object, and compiling
/// (parsing, checking) is most of what a rule costs.
const MAX_CACHED: usize = 4096;
const MAX_CACHED_SOURCE: usize = 16 << 10;

fn compile(env: &Environment, source: &str, what: &str) -> Result<Compiled, String> {
    thread_local! {
        static CACHE: RefCell<HashMap<String, Result<Compiled, String>>> =
            RefCell::new(HashMap::new());
    }
    let found = CACHE.with(|cache| cache.borrow().get(source).cloned());
    let result = found.unwrap_or_else(|| {
        let result = env.compile(source, NAMES).map_err(|e| e.to_string());
        CACHE.with(|cache| {
            let mut cache = cache.borrow_mut();
            if cache.len() < MAX_CACHED && source.len() <= MAX_CACHED_SOURCE {
                cache.insert(source.to_owned(), result.clone());
            }
        });
        result
    });
    result.map_err(|e| format!("{what}: {e}"))
}

/// The CEL environment of Kyverno's rules: the Kubernetes libraries with
/// CEL's optional types.
///
/// Built once per thread (it registers every library function) and shared:
/// a review evaluates each CEL rule on every object of the set.
fn environment() -> Environment {
    thread_local! {
        static ENVIRONMENT: Environment =
            Environment::with_optional_types(kiln_cel_k8s::Limits::default()).with_lenient_or_value();
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

/// One CEL check: an expression that must be true, and its message.
#[derive(Debug, Clone, Copy)]
pub struct Check<'a> {
    /// The expression.
    pub expression: &'a str,
    /// The message when it is false.
    pub message: Option<&'a str>,
    /// An expression computing the message.
    pub message_expression: Option<&'a str>,
}

/// What the expressions of a rule or policy read besides their variables.
#[derive(Debug, Clone, Copy)]
pub struct Bindings<'a> {
    /// `object`.
    pub object: &'a Json,
    /// `request.operation`.
    pub operation: &'a str,
    /// `namespaceObject`, when known.
    pub namespace_object: Option<&'a Json>,
}

/// Whether every one of `conditions` (name, expression) holds; an
/// expression that does not compile or return a bool is an error.
pub fn all_hold(conditions: &[(&str, &str)], bindings: Bindings<'_>) -> Result<bool, String> {
    let env = environment();
    let compiled = conditions
        .iter()
        .map(|(name, source)| Ok((*name, compile(&env, source, name)?)))
        .collect::<Result<Vec<_>, String>>()?;
    let none = Vec::new();
    let mut scope = Scope::new(env.evaluation(), &none);
    bind(
        &mut scope,
        bindings.object,
        bindings.operation,
        bindings.namespace_object,
        env.limits().max_value_depth,
    )?;
    for (name, expression) in &compiled {
        match scope.eval(expression) {
            Ok(Value::Bool(true)) => {}
            Ok(Value::Bool(false)) => return Ok(false),
            Ok(other) => return Err(format!("{name} returned {}, not a bool", shown(&other))),
            Err(e) => return Err(format!("{name}: {e}")),
        }
    }
    Ok(true)
}

/// A CEL value as a person reads it (JSON), at most 200 bytes.
fn shown(value: &Value) -> String {
    let text = kiln_cel_k8s::to_json(value).to_string();
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// What an expression that cannot be evaluated means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// The result is `Status::Error` (never a pass).
    Report,
    /// The check is left out and the others still decide
    /// (`failurePolicy: Ignore`, as the API server applies it to each
    /// validation).
    Skip,
}

/// Evaluates `checks` in order with `variables` (name, expression; each
/// evaluated when first read): pass when every check is true, fail with
/// the first false one's message; a check that cannot be evaluated is
/// `Status::Error` or left out, as `on_error` says. An expression that
/// does not compile, or bindings that cannot be made, are an `Err`
/// whatever `on_error` says. `what` names the block in messages.
pub fn run_checks(
    variables: &[(&str, &str)],
    checks: &[Check<'_>],
    bindings: Bindings<'_>,
    what: &str,
    on_error: OnError,
) -> Result<(Status, String), String> {
    let env = environment();
    let max_depth = env.limits().max_value_depth;
    let variables = variables
        .iter()
        .map(|(name, source)| {
            Ok((
                (*name).to_owned(),
                compile(&env, source, &format!("{what} variable {name}"))?,
            ))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut compiled = Vec::new();
    for (i, check) in checks.iter().enumerate() {
        let expression = compile(&env, check.expression, &format!("{what}[{i}]"))?;
        let message_expression = check
            .message_expression
            .map(|m| compile(&env, m, &format!("{what}[{i}].messageExpression")))
            .transpose()?;
        compiled.push((expression, check.message, message_expression));
    }
    if compiled.is_empty() {
        return Err(format!("{what} has no expressions"));
    }
    let mut scope = Scope::new(env.evaluation(), &variables);
    bind(
        &mut scope,
        bindings.object,
        bindings.operation,
        bindings.namespace_object,
        max_depth,
    )
    .map_err(|e| format!("{what}: {e}"))?;
    for (expression, message, message_expression) in &compiled {
        match scope.eval(expression) {
            Ok(Value::Bool(true)) => {}
            Ok(Value::Bool(false)) => {
                let message = failure_message(
                    &mut scope,
                    expression,
                    *message,
                    message_expression.as_ref(),
                )?;
                return Ok((Status::Fail, message));
            }
            _ if on_error == OnError::Skip => {}
            Ok(other) => {
                return Ok((
                    Status::Error,
                    format!(
                        "{what}: {} returned {}, not a bool",
                        expression.source(),
                        shown(&other)
                    ),
                ));
            }
            Err(e) => {
                return Ok((
                    Status::Error,
                    format!("{what}: {}: {e}", expression.source()),
                ));
            }
        }
    }
    Ok((Status::Pass, String::new()))
}

/// A rule's `celPreconditions`: whether every one holds.
pub fn preconditions_hold(
    conditions: &Json,
    object: &Json,
    operation: &str,
) -> Result<bool, String> {
    let Some(list) = conditions.as_array() else {
        return Err("must be a list of {name, expression}".into());
    };
    let names: Vec<String> = list
        .iter()
        .enumerate()
        .map(|(i, c)| {
            c.get("name")
                .and_then(Json::as_str)
                .map_or_else(|| format!("[{i}]"), str::to_owned)
        })
        .collect();
    let conditions: Vec<(&str, &str)> = list
        .iter()
        .zip(&names)
        .map(|(c, name)| {
            (
                name.as_str(),
                c.get("expression").and_then(Json::as_str).unwrap_or(""),
            )
        })
        .collect();
    all_hold(
        &conditions,
        Bindings {
            object,
            operation,
            namespace_object: None,
        },
    )
}

/// Evaluates the `cel` block of a rule on `object` ([`run_checks`]). An
/// expression that cannot be evaluated fails the rule, as in Kyverno (its
/// CEL rules are ValidatingAdmissionPolicies with `failurePolicy: Fail`).
pub fn validate(
    cel: &Json,
    object: &Json,
    operation: &str,
    namespace_object: Option<&Json>,
) -> Result<(Status, String), String> {
    if cel.get("paramKind").is_some() || cel.get("paramRef").is_some() {
        return Err("validate.cel: paramKind and paramRef are not supported (params are read from the cluster)".into());
    }
    fn str_of<'v>(v: &'v Json, key: &str) -> Option<&'v str> {
        v.get(key).and_then(Json::as_str)
    }
    let list = |key: &str| cel.get(key).and_then(Json::as_array).into_iter().flatten();
    let variables = list("variables")
        .map(|v| {
            let name = str_of(v, "name").ok_or("validate.cel: a variable has no name")?;
            Ok((name, str_of(v, "expression").unwrap_or("")))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let checks: Vec<Check<'_>> = list("expressions")
        .map(|e| Check {
            expression: str_of(e, "expression").unwrap_or(""),
            message: str_of(e, "message"),
            message_expression: str_of(e, "messageExpression"),
        })
        .collect();
    let (status, message) = run_checks(
        &variables,
        &checks,
        Bindings {
            object,
            operation,
            namespace_object,
        },
        "validate.cel expressions",
        OnError::Report,
    )?;
    Ok(match status {
        Status::Error => (Status::Fail, message),
        status => (status, message),
    })
}
