//! The `K8sNativeValidation` engine of ConstraintTemplates: CEL, as
//! Gatekeeper evaluates it (a ValidatingAdmissionPolicy built from the
//! template, with the constraint as its param object), on the Kubernetes
//! CEL environment of `kiln-cel-k8s` (libraries, limits, refusal by name of
//! what it does not provide).
//!
//! The source (`code[].source`) holds `variables`, `validations`
//! (`expression`, `message`, `messageExpression`), `matchConditions` and
//! `failurePolicy`. Top-level names: `object` (the rendered object),
//! `oldObject` (`null`: a review before apply has none), `request` (an
//! admission request for the object: `kind`, `name`, `namespace`,
//! `operation: CREATE`), `params` (the whole constraint), `namespaceObject`
//! (a Namespace holding only the object's namespace name, as Gatekeeper
//! builds it) and `variables`, where Gatekeeper adds `variables.params` (the
//! constraint's `spec.parameters`, or `null`) and `variables.anyObject`
//! (`object`, or `oldObject` when there is no object).
//!
//! A validation whose expression is false is a violation whose message is
//! the `messageExpression`'s, else `message`, else `failed expression: …`
//! ([`kiln_cel_k8s::failure_message`]). A runtime error (or a non-bool
//! result) fails the review, naming the template and the expression, unless
//! the source's `failurePolicy` is `Ignore`; going over the cost budget
//! always fails it.

use kiln_cel_k8s::{Compiled, Environment, Scope, Value, failure_message};
use serde::Deserialize;

/// Names no template variable or match condition may take (Gatekeeper
/// reserves them).
pub const RESERVED_PREFIX: &str = "gatekeeper_internal_";

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

/// Longest excerpt of an expression quoted in an error.
const MAX_QUOTED_EXPRESSION: usize = 200;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Source {
    #[serde(default)]
    validations: Vec<ValidationSource>,
    #[serde(default)]
    variables: Vec<NamedSource>,
    /// Gatekeeper's schema spells it `matchCondition`; both are read.
    #[serde(default, alias = "matchCondition")]
    match_conditions: Vec<NamedSource>,
    #[serde(default)]
    failure_policy: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ValidationSource {
    expression: String,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    message_expression: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NamedSource {
    name: String,
    expression: String,
}

/// One compiled validation.
#[derive(Debug, Clone)]
struct Validation {
    field: String,
    expression: Compiled,
    message: Option<String>,
    message_expression: Option<Compiled>,
}

/// A template's `K8sNativeValidation` source, compiled.
#[derive(Clone)]
pub struct CelProgram {
    env: Environment,
    /// Where the source is in the template (`spec.targets[0].code[1].source`).
    field: String,
    variables: Vec<(String, Compiled)>,
    match_conditions: Vec<(String, Compiled)>,
    validations: Vec<Validation>,
    ignore_errors: bool,
}

impl std::fmt::Debug for CelProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CelProgram")
            .field("field", &self.field)
            .field("variables", &self.variables.len())
            .field("validations", &self.validations.len())
            .finish_non_exhaustive()
    }
}

/// Why an evaluation failed: which expression, and the error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CelFailure {
    /// The expression's place in the template
    /// (`spec.targets[0].code[0].source.validations[1].expression`).
    pub field: String,
    /// The error.
    pub message: String,
}

impl std::fmt::Display for CelFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// The expression, cut to [`MAX_QUOTED_EXPRESSION`] bytes for a message.
fn quote(source: &str) -> String {
    let source = source.trim();
    if source.len() <= MAX_QUOTED_EXPRESSION {
        return format!("`{source}`");
    }
    let mut end = MAX_QUOTED_EXPRESSION;
    while !source.is_char_boundary(end) {
        end -= 1;
    }
    format!("`{}…`", &source[..end])
}

/// What the review gives one evaluation.
pub struct Inputs {
    /// The object, as a CEL value.
    pub object: Value,
    /// The admission request for it.
    pub request: Value,
    /// The whole constraint (`params`).
    pub constraint: Value,
    /// The constraint's `spec.parameters`, or `null` (`variables.params`).
    pub parameters: Value,
    /// The Namespace of the object, or `null`.
    pub namespace_object: Value,
}

impl CelProgram {
    /// Compiles the `source` found at `field` of a template; the error names
    /// the field and quotes the expression.
    pub fn compile(source: &serde_json::Value, field: &str) -> Result<CelProgram, String> {
        let parsed: Source =
            serde_json::from_value(source.clone()).map_err(|e| format!("{field}: {e}"))?;
        let env = Environment::default();
        let compile = |at: String, source: &str| {
            env.compile(source, VARIABLES)
                .map_err(|e| format!("{at} {}: {e}", quote(source)))
        };
        let ignore_errors = match parsed.failure_policy.as_deref() {
            None | Some("Fail") => false,
            Some("Ignore") => true,
            Some(other) => {
                return Err(format!(
                    "{field}.failurePolicy `{other}` is neither `Fail` nor `Ignore`"
                ));
            }
        };
        if parsed.validations.is_empty() {
            return Err(format!(
                "{field}.validations is empty: the template would allow everything"
            ));
        }
        let mut variables = Vec::new();
        for (i, v) in parsed.variables.iter().enumerate() {
            let at = format!("{field}.variables[{i}]");
            if v.name == "params" || v.name == "anyObject" || v.name.starts_with(RESERVED_PREFIX) {
                return Err(format!(
                    "{at}.name `{}` is reserved by Gatekeeper (params, anyObject, {RESERVED_PREFIX}*)",
                    v.name
                ));
            }
            if variables.iter().any(|(n, _)| *n == v.name) {
                return Err(format!("{at}.name `{}` is declared twice", v.name));
            }
            variables.push((
                v.name.clone(),
                compile(format!("{at}.expression"), &v.expression)?,
            ));
        }
        let mut match_conditions = Vec::new();
        for (i, m) in parsed.match_conditions.iter().enumerate() {
            let at = format!("{field}.matchConditions[{i}]");
            if m.name.starts_with(RESERVED_PREFIX) {
                return Err(format!(
                    "{at}.name `{}` is reserved by Gatekeeper ({RESERVED_PREFIX}*)",
                    m.name
                ));
            }
            match_conditions.push((
                m.name.clone(),
                compile(format!("{at}.expression"), &m.expression)?,
            ));
        }
        let mut validations = Vec::new();
        for (i, v) in parsed.validations.iter().enumerate() {
            let at = format!("{field}.validations[{i}]");
            validations.push(Validation {
                expression: compile(format!("{at}.expression"), &v.expression)?,
                message: v.message.clone(),
                message_expression: v
                    .message_expression
                    .as_deref()
                    .filter(|m| !m.trim().is_empty())
                    .map(|m| compile(format!("{at}.messageExpression"), m))
                    .transpose()?,
                field: at,
            });
        }
        Ok(CelProgram {
            env,
            field: field.to_owned(),
            variables,
            match_conditions,
            validations,
            ignore_errors,
        })
    }

    /// The largest nesting of a document this program converts.
    pub fn max_value_depth(&self) -> usize {
        self.env.limits().max_value_depth
    }

    /// Evaluates the program on one object for one constraint: the
    /// violations' messages, or the failure that stops the review.
    pub fn evaluate(&self, inputs: &Inputs) -> Result<Vec<String>, CelFailure> {
        let mut scope = Scope::new(self.env.evaluation(), &self.variables);
        scope.set("object", inputs.object.clone());
        scope.set("oldObject", Value::Null);
        scope.set("request", inputs.request.clone());
        scope.set("params", inputs.constraint.clone());
        scope.set("namespaceObject", inputs.namespace_object.clone());
        scope.preset("params", inputs.parameters.clone());
        scope.preset("anyObject", inputs.object.clone());
        let fail = |field: String, message: String| {
            let over_budget = message.contains(kiln_cel_k8s::compile::COST_EXCEEDED);
            if self.ignore_errors && !over_budget {
                Ok(())
            } else {
                Err(CelFailure { field, message })
            }
        };
        for (i, (_, condition)) in self.match_conditions.iter().enumerate() {
            let field = format!("{}.matchConditions[{i}].expression", self.field);
            match scope.eval(condition) {
                Ok(Value::Bool(true)) => {}
                Ok(Value::Bool(false)) => return Ok(Vec::new()),
                Ok(other) => {
                    fail(field, format!("returned {other:?}, not a bool"))?;
                    return Ok(Vec::new());
                }
                Err(e) => {
                    fail(field, e)?;
                    return Ok(Vec::new());
                }
            }
        }
        let mut violations = Vec::new();
        for v in &self.validations {
            let field = format!("{}.expression", v.field);
            match scope.eval(&v.expression) {
                Ok(Value::Bool(true)) => {}
                Ok(Value::Bool(false)) => {
                    match failure_message(
                        &mut scope,
                        &v.expression,
                        v.message.as_deref(),
                        v.message_expression.as_ref(),
                    ) {
                        Ok(message) => violations.push(message),
                        Err(e) => {
                            return Err(CelFailure {
                                field: format!("{}.messageExpression", v.field),
                                message: e,
                            });
                        }
                    }
                }
                Ok(other) => fail(field, format!("returned {other:?}, not a bool"))?,
                Err(e) => fail(field, e)?,
            }
        }
        Ok(violations)
    }
}
