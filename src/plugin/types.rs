//! Host-side forms of the contract's data types.

use std::fmt;

/// The Application a plugin is called for (`app-context` in the contract).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppContext {
    /// `metadata.name` of the Application.
    pub name: String,
    /// Destination namespace (may be empty).
    pub namespace: String,
    /// The AppProject.
    pub project: String,
    /// Repository URL (empty for a local directory).
    pub repo_url: String,
    /// Resolved revision, or `local`.
    pub revision: String,
    /// Path of the Application inside the source tree (`.`-free, no leading
    /// `/`; empty for the root).
    pub path: String,
}

/// Ordered key/value parameters or settings; keys may repeat.
pub type Params = Vec<(String, String)>;

/// How serious a policy finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// For information.
    Info,
    /// Should be fixed.
    Warning,
    /// Violates the policy.
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// Identifies one object of a rendered set.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.namespace`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{ns}/{}", self.kind, self.name),
            None => write!(f, "{}/{}", self.kind, self.name),
        }
    }
}

/// The rule behind a finding or a rule result: a policy plugin may hold
/// several policies (Kyverno's), each made of named rules.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct RuleRef {
    /// The policy the rule belongs to, as its author named it.
    pub policy: String,
    /// The rule's name within it.
    pub rule: String,
}

/// `POLICY/RULE`, or `POLICY` for a policy whose one rule has no name
/// (Kyverno's ValidatingPolicy).
impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.rule.is_empty() {
            f.write_str(&self.policy)
        } else {
            write!(f, "{}/{}", self.policy, self.rule)
        }
    }
}

/// How one rule ended on one object (`rules.outcome` in the contract), as a
/// policy report records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum RuleOutcome {
    /// The rule applied and the object satisfies it.
    Pass,
    /// The rule applied and the object violates it (blocks in enforce mode).
    Fail,
    /// The rule applied and reports the violation as a warning only.
    Warn,
    /// The rule could not be evaluated on the object.
    Error,
    /// The rule does not apply to the object.
    Skip,
}

impl fmt::Display for RuleOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RuleOutcome::Pass => "pass",
            RuleOutcome::Fail => "fail",
            RuleOutcome::Warn => "warn",
            RuleOutcome::Error => "error",
            RuleOutcome::Skip => "skip",
        })
    }
}

/// One rule's result on one object, from a policy that reports them (the
/// contract's optional `rules` export).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleResult {
    /// The rule.
    pub rule: RuleRef,
    /// The object; `None` for the set as a whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<ObjectRef>,
    /// Field path inside the object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field_path: Option<String>,
    /// How it ended.
    pub outcome: RuleOutcome,
    /// Why, for a person.
    pub message: String,
}

impl RuleResult {
    /// The finding this result is, if it is one: `fail` an error, `warn` a
    /// warning (passes, skips and errors are not findings).
    pub fn to_finding(&self) -> Option<Finding> {
        let severity = match self.outcome {
            RuleOutcome::Fail => Severity::Error,
            RuleOutcome::Warn => Severity::Warning,
            _ => return None,
        };
        Some(Finding {
            object: self.object.clone(),
            field_path: self.field_path.clone(),
            message: format!("[{}] {}", self.rule, self.message),
            severity,
            rule: Some(self.rule.clone()),
        })
    }
}

/// One result of a policy review.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// The object concerned; `None` for the set as a whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<ObjectRef>,
    /// Field path inside the object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field_path: Option<String>,
    /// What is wrong.
    pub message: String,
    /// How serious.
    pub severity: Severity,
    /// The rule that found it, when the policy reports its rules.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<RuleRef>,
}
