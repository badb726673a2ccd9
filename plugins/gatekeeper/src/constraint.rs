//! Constraints: which template (by kind), what they match, their
//! parameters and what a violation means (`enforcementAction`).

use serde_json::Value;

use crate::matching::Match;
use crate::yaml::Document;

/// The API group of constraints.
pub const CONSTRAINTS_GROUP: &str = "constraints.gatekeeper.sh";

/// What a violation of a constraint becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `deny` (the default): an error finding.
    Deny,
    /// `warn`: a warning finding.
    Warn,
    /// `dryrun`: an info finding.
    Dryrun,
}

/// A constraint that cannot be used; names the file and line.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{file}:{line}: constraint `{name}`: {message}")]
pub struct ConstraintError {
    /// The constraint's file.
    pub file: String,
    /// 1-based line of its document.
    pub line: usize,
    /// `metadata.name`, or `?`.
    pub name: String,
    /// What is wrong.
    pub message: String,
}

/// A constraint, read.
#[derive(Debug, Clone)]
pub struct Constraint {
    /// `kind`: the template's constraint kind.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// Its file.
    pub file: String,
    /// 1-based line of its document.
    pub line: usize,
    /// `spec.enforcementAction`.
    pub action: Action,
    /// `spec.match`.
    pub matching: Match,
    /// `spec.parameters`, when given.
    pub parameters: Option<Value>,
    /// The whole constraint (the CEL engine's `params`).
    pub object: Value,
}

impl Constraint {
    /// Reads one document of `file`.
    pub fn parse(doc: &Document, file: &str) -> Result<Constraint, ConstraintError> {
        let v = &doc.value;
        let name = v
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_owned();
        let error = |message: String| ConstraintError {
            file: file.to_owned(),
            line: doc.line,
            name: name.clone(),
            message,
        };
        let api_version = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        if api_version.split('/').next() != Some(CONSTRAINTS_GROUP) || !api_version.contains('/') {
            return Err(error(format!(
                "apiVersion `{api_version}` is not in the group `{CONSTRAINTS_GROUP}`"
            )));
        }
        let kind = v
            .get("kind")
            .and_then(Value::as_str)
            .filter(|k| !k.is_empty())
            .ok_or_else(|| error("kind is missing".into()))?
            .to_owned();
        if name == "?" {
            return Err(error("metadata.name is missing".into()));
        }
        let spec = v.get("spec").cloned().unwrap_or(Value::Null);
        let action = match spec.get("enforcementAction").map(|a| a.as_str()) {
            None | Some(Some("deny")) => Action::Deny,
            Some(Some("warn")) => Action::Warn,
            Some(Some("dryrun")) => Action::Dryrun,
            Some(other) => {
                return Err(error(format!(
                    "spec.enforcementAction {} is not one of deny, warn, dryrun",
                    other
                        .map(|s| format!("`{s}`"))
                        .unwrap_or_else(|| "(not a string)".into())
                )));
            }
        };
        let matching = match spec.get("match") {
            None | Some(Value::Null) => Match::default(),
            Some(m) => {
                serde_json::from_value(m.clone()).map_err(|e| error(format!("spec.match: {e}")))?
            }
        };
        matching
            .check()
            .map_err(|e| error(format!("spec.match: {e}")))?;
        let parameters = spec.get("parameters").filter(|p| !p.is_null()).cloned();
        Ok(Constraint {
            kind,
            name,
            file: file.to_owned(),
            line: doc.line,
            action,
            matching,
            parameters,
            object: v.clone(),
        })
    }
}
