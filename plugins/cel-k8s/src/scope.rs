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
    /// Names bound by [`Scope::preset`]: declared before every variable.
    presets: Vec<String>,
}

impl<'a> Scope<'a> {
    /// A scope over `evaluation` with the policy's `variables` (name and
    /// compiled expression, in declaration order).
    pub fn new(evaluation: Evaluation<'a>, variables: &'a [(String, Compiled)]) -> Self {
        Scope {
            evaluation,
            variables,
            values: HashMap::new(),
            presets: Vec::new(),
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
        self.presets.push(name.to_owned());
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
                || self.presets.contains(&dep);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Environment;

    #[test]
    fn variables_read_earlier_variables_and_presets_only() {
        let env = Environment::default();
        let compile = |s: &str| env.compile(s, &["variables"]).unwrap();
        let variables = vec![
            ("a".to_owned(), compile("variables.p + 1")),
            ("b".to_owned(), compile("variables.a * 2")),
            ("c".to_owned(), compile("variables.d")),
            ("d".to_owned(), compile("1")),
        ];
        let mut scope = Scope::new(env.evaluation(), &variables);
        scope.preset("p", Value::Int(1));
        assert_eq!(scope.eval(&compile("variables.b")), Ok(Value::Int(4)));
        // `d` is evaluated first, yet `c` may still not read it.
        assert_eq!(scope.eval(&compile("variables.d")), Ok(Value::Int(1)));
        let err = scope.eval(&compile("variables.c")).unwrap_err();
        assert!(err.contains("not declared before it"), "{err}");
    }
}
