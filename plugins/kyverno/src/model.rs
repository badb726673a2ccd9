//! Kyverno's documents as the plugin reads them: `kyverno.io/v1`
//! `ClusterPolicy` and `Policy`. Parts whose shape varies (conditions,
//! patterns) stay JSON values, read where they are evaluated.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A `ClusterPolicy` or `Policy`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// `ClusterPolicy` or `Policy`.
    pub kind: String,
    /// Its name and annotations.
    pub metadata: Metadata,
    /// Its rules and defaults.
    pub spec: Spec,
}

/// What the policy's metadata says.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Metadata {
    /// The policy's name (results name it).
    #[serde(default)]
    pub name: String,
    /// A `Policy`'s namespace (it applies there only).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Annotations (`pod-policies.kyverno.io/autogen-controllers`).
    #[serde(default)]
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// A policy's spec.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    /// `Enforce` or `Audit` (any case), for every rule without its own.
    #[serde(default)]
    pub validation_failure_action: Option<String>,
    /// Per-namespace actions (`action`, `namespaces`, `namespaceSelector`),
    /// for every rule without its own `failureActionOverrides`.
    #[serde(default)]
    pub validation_failure_action_overrides: Option<Value>,
    /// The rules, in order.
    #[serde(default)]
    pub rules: Vec<Rule>,
}

/// One rule.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// Its name (results name it).
    pub name: String,
    /// What it applies to.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_: Option<Value>,
    /// What it leaves out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude: Option<Value>,
    /// Variables and lookups it defines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Vec<Value>>,
    /// Conditions for it to apply (`any`/`all`, or a list: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preconditions: Option<Value>,
    /// CEL conditions for it to apply (`name` and `expression` each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel_preconditions: Option<Value>,
    /// A validation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validate: Option<Value>,
    /// A mutation (not run by Kiln: refused by name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutate: Option<Value>,
    /// A generation (refused by name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate: Option<Value>,
    /// Image verification (refused by name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_images: Option<Value>,
}

/// A policy document of any kind the plugin runs.
#[derive(Debug, Clone)]
pub enum Document {
    /// A `kyverno.io` `ClusterPolicy` or `Policy`.
    Policy(Policy),
    /// A `policies.kyverno.io` `ValidatingPolicy` or
    /// `NamespacedValidatingPolicy`.
    Validating(crate::vpol::ValidatingPolicy),
    /// A `kyverno.io` `PolicyException`.
    Exception(crate::exception::PolicyException),
    /// A `policies.kyverno.io` `PolicyException`.
    CelException(crate::exception::CelException),
}

/// The policy documents of a text: every `kyverno.io` ClusterPolicy,
/// Policy or PolicyException and every `policies.kyverno.io`
/// ValidatingPolicy or PolicyException among its YAML documents (other documents are ignored: a policy file may carry a README
/// ConfigMap, a test file its resources), each with the file named in
/// errors. Other Kyverno policy kinds (mutating, generating, image
/// verification, deleting) are refused by name.
pub fn documents(file: &str, text: &str) -> Result<Vec<Document>, String> {
    kiln_yaml_limits::check(text, &kiln_yaml_limits::YamlLimits::default())
        .map_err(|e| format!("{file}: {e}"))?;
    let mut out = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value = Value::deserialize(document).map_err(|e| format!("{file}: {e}"))?;
        let Some(object) = value.as_object() else {
            continue;
        };
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
        let name = object
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("?");
        let group = api_version.split('/').next().unwrap_or("");
        match (group, kind) {
            ("kyverno.io", "ClusterPolicy" | "Policy") => {
                let policy: Policy = serde_json::from_value(value.clone())
                    .map_err(|e| format!("{file}: {kind} {name}: {e}"))?;
                out.push(Document::Policy(policy));
            }
            (crate::vpol::GROUP, "ValidatingPolicy" | "NamespacedValidatingPolicy") => {
                let policy = crate::vpol::ValidatingPolicy::parse(kind, &value)
                    .map_err(|e| format!("{file}: {e}"))?;
                out.push(Document::Validating(policy));
            }
            ("kyverno.io", "PolicyException") => {
                let exception = crate::exception::PolicyException::parse(&value)
                    .map_err(|e| format!("{file}: {e}"))?;
                out.push(Document::Exception(exception));
            }
            (crate::vpol::GROUP, "PolicyException") => {
                let exception = crate::exception::CelException::parse(&value)
                    .map_err(|e| format!("{file}: {e}"))?;
                out.push(Document::CelException(exception));
            }
            (crate::vpol::GROUP, _) if kind.ends_with("Policy") => {
                return Err(format!(
                    "{file}: {kind} {name}: Kiln runs Kyverno's validating policies only (ValidatingPolicy, ClusterPolicy, Policy)"
                ));
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The `ClusterPolicy` and `Policy` documents of a text ([`documents`]).
pub fn policies(file: &str, text: &str) -> Result<Vec<Policy>, String> {
    Ok(documents(file, text)?
        .into_iter()
        .filter_map(|d| match d {
            Document::Policy(p) => Some(p),
            _ => None,
        })
        .collect())
}

/// The documents of a policy source, by kind.
#[derive(Debug, Clone, Default)]
pub struct PolicySet {
    /// ClusterPolicies and Policies.
    pub policies: Vec<Policy>,
    /// ValidatingPolicies.
    pub validating: Vec<crate::vpol::ValidatingPolicy>,
    /// `kyverno.io` PolicyExceptions.
    pub exceptions: Vec<crate::exception::PolicyException>,
    /// `policies.kyverno.io` PolicyExceptions.
    pub cel_exceptions: Vec<crate::exception::CelException>,
}

impl PolicySet {
    /// Sorts `documents` by kind.
    pub fn of(documents: impl IntoIterator<Item = Document>) -> Self {
        let mut set = PolicySet::default();
        for document in documents {
            match document {
                Document::Policy(p) => set.policies.push(p),
                Document::Validating(p) => set.validating.push(p),
                Document::Exception(e) => set.exceptions.push(e),
                Document::CelException(e) => set.cel_exceptions.push(e),
            }
        }
        set
    }

    /// The ClusterPolicies and Policies prepared for reviews, each with the
    /// exceptions naming it.
    pub fn prepared(&self) -> Vec<crate::engine::Prepared> {
        self.policies
            .iter()
            .map(|p| crate::engine::prepare(p.clone(), &self.exceptions))
            .collect()
    }
}
