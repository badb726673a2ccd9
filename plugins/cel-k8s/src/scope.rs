//! Policy variables (`variables.NAME`, as in ValidatingAdmissionPolicy's
//! `spec.variables`) evaluated on demand in one evaluation scope, and the
//! message of a failed validation: what every CEL policy engine of Kiln
//! (ValidatingAdmissionPolicy, Gatekeeper's `K8sNativeValidation`) shares.

use std::collections::HashMap;

use crate::Value;
use crate::compile::{Compiled, EvalError, Evaluation};

/// The top-level name policy variables are read under.
pub const VARIABLES: &str = "variables";

/// An evaluation whose `variables` are computed when an expression first
/// reads them (and those they read, in declaration order); a variable's
/// error is the error of every expression that reads it.
pub struct Scope<'a> {
    evaluation: Evaluation<'a>,
    variables: &'a [(String, Compiled)],
    values: HashMap<String, Result<Value, String>>,
}

impl<'a> Scope<'a> {
    /// A scope over `evaluation` with the policy's `variables` (name and
    /// compiled expression, in declaration order).
    pub fn new(evaluation: Evaluation<'a>, variables: &'a [(String, Compiled)]) -> Self {
        Scope {
            evaluation,
            variables,
            values: HashMap::new(),
        }
    }

    /// Binds a top-level variable (`object`, `params`, ...).
    pub fn set(&mut self, name: &str, value: Value) {
        self.evaluation.set(name, value);
    }

    /// Binds `variables.NAME` to a value computed by the caller (Gatekeeper's
    /// `variables.params` and `variables.anyObject`).
    pub fn preset(&mut self, name: &str, value: Value) {
        self.values.insert(name.to_owned(), Ok(value));
    }

    /// Evaluates `compiled` after the variables it reads. The error is the
    /// message to report; a cost-budget error keeps the words of
    /// [`crate::compile::COST_EXCEEDED`].
    pub fn eval(&mut self, compiled: &Compiled) -> Result<Value, String> {
        for name in compiled.fields_of(VARIABLES) {
            self.variable(&name)?;
        }
        self.bind_variables();
        self.evaluation.eval(compiled).map_err(|e| match e {
            EvalError::CostExceeded(_) => e.to_string(),
            EvalError::Execution(m) => m,
        })
    }

    fn variable(&mut self, name: &str) -> Result<(), String> {
        if let Some(result) = self.values.get(name) {
            return result.clone().map(|_| ());
        }
        let Some(index) = self.variables.iter().position(|(n, _)| n == name) else {
            return Err(format!("no such variable: {name}"));
        };
        // Mark it first: a variable reading itself (or a later one) errors.
        self.values.insert(
            name.to_owned(),
            Err(format!(
                "variable '{name}' refers to itself or a later variable"
            )),
        );
        let compiled = &self.variables[index].1;
        for dep in compiled.fields_of(VARIABLES) {
            let declared_before = self.variables[..index].iter().any(|(n, _)| *n == dep)
                || self.values.get(&dep).is_some_and(Result::is_ok);
            if !declared_before {
                return Err(format!(
                    "variable '{name}' reads '{dep}', which is not declared before it"
                ));
            }
            self.variable(&dep)?;
        }
        self.bind_variables();
        let result = self
            .evaluation
            .eval(compiled)
            .map_err(|e| format!("variable '{name}': {e}"));
        self.values.insert(name.to_owned(), result.clone());
        result.map(|_| ())
    }

    fn bind_variables(&mut self) {
        let map: HashMap<String, Value> = self
            .values
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.clone().ok()?)))
            .collect();
        self.evaluation.set(VARIABLES, Value::from(map));
    }
}

/// The message of a validation whose expression returned false, as the API
/// server's validator chooses it: the `messageExpression`'s result when it
/// evaluates to a non-blank string without line breaks, else the static
/// `message`, else `failed expression: EXPRESSION`. A `messageExpression`
/// that errors falls back the same way, except over the cost budget: that
/// error is returned (the caller fails closed).
pub fn failure_message(
    scope: &mut Scope<'_>,
    expression: &Compiled,
    message: Option<&str>,
    message_expression: Option<&Compiled>,
) -> Result<String, String> {
    if let Some(m) = message_expression {
        match scope.eval(m) {
            Ok(Value::String(s)) if !s.trim().is_empty() && !s.contains('\n') => {
                return Ok(s.to_string());
            }
            Err(e) if e.contains(crate::compile::COST_EXCEEDED) => return Err(e),
            _ => {}
        }
    }
    Ok(message
        .filter(|m| !m.is_empty())
        .map(str::to_owned)
        .unwrap_or_else(|| format!("failed expression: {}", expression.source())))
}
