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
}
