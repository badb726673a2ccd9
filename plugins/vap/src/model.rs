//! The Kubernetes objects this policy reads, as `admissionregistration.k8s.io/v1`
//! defines them (unknown fields are refused, so that a misspelt field is an
//! error rather than ignored).

use serde::Deserialize;

use crate::selector::LabelSelector;

/// Object metadata (what is used of it).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// `metadata.name`.
    #[serde(default)]
    pub name: String,
    /// `metadata.namespace`.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// A ValidatingAdmissionPolicy.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// Its metadata.
    pub metadata: Meta,
    /// Its spec.
    pub spec: PolicySpec,
}

/// `ValidatingAdmissionPolicy.spec`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicySpec {
    /// The kind of the param objects, if the policy takes params.
    #[serde(default)]
    pub param_kind: Option<ParamKind>,
    /// Which requests the policy applies to.
    #[serde(default)]
    pub match_constraints: Option<MatchResources>,
    /// The checks.
    #[serde(default)]
    pub validations: Vec<Validation>,
    /// `Fail` (default) or `Ignore`: what a runtime error or missing param
    /// configuration means.
    #[serde(default)]
    pub failure_policy: Option<FailurePolicy>,
    /// Annotations computed for audit.
    #[serde(default)]
    pub audit_annotations: Vec<AuditAnnotation>,
    /// Preconditions; all must hold for the policy to apply.
    #[serde(default)]
    pub match_conditions: Vec<NamedExpression>,
    /// Named sub-expressions, read as `variables.NAME`.
    #[serde(default)]
    pub variables: Vec<NamedExpression>,
}

/// `paramKind`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParamKind {
    /// `apiVersion` of the param objects.
    pub api_version: String,
    /// `kind` of the param objects.
    pub kind: String,
}

/// `matchConstraints` / `matchResources`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MatchResources {
    /// Selects by the object's namespace labels.
    #[serde(default)]
    pub namespace_selector: Option<LabelSelector>,
    /// Selects by the object's labels.
    #[serde(default)]
    pub object_selector: Option<LabelSelector>,
    /// Resources included.
    #[serde(default)]
    pub resource_rules: Vec<ResourceRule>,
    /// Resources excluded.
    #[serde(default)]
    pub exclude_resource_rules: Vec<ResourceRule>,
    /// `Exact` or `Equivalent`; Kiln matches the object as written.
    #[serde(default)]
    pub match_policy: Option<String>,
}

/// One resource rule.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceRule {
    /// API groups (`""` is core, `*` all).
    #[serde(default)]
    pub api_groups: Vec<String>,
    /// API versions (`*` all).
    #[serde(default)]
    pub api_versions: Vec<String>,
    /// Resources, plural (`*` all; `x/y` subresources, never a rendered object).
    #[serde(default)]
    pub resources: Vec<String>,
    /// Operations (`CREATE`, `UPDATE`, `DELETE`, `CONNECT`, `*`).
    #[serde(default)]
    pub operations: Vec<String>,
    /// Object names (empty: all).
    #[serde(default)]
    pub resource_names: Vec<String>,
    /// `Cluster`, `Namespaced` or `*`.
    #[serde(default)]
    pub scope: Option<String>,
}

/// One validation.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Validation {
    /// The CEL expression; true means valid.
    pub expression: String,
    /// The message when it is false.
    #[serde(default)]
    pub message: Option<String>,
    /// A CEL expression computing the message.
    #[serde(default)]
    pub message_expression: Option<String>,
    /// The reason (`Unauthorized`, `Forbidden`, `Invalid`, `RequestEntityTooLarge`).
    #[serde(default)]
    pub reason: Option<String>,
}

/// An audit annotation.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuditAnnotation {
    /// The annotation key (prefixed with the policy name).
    pub key: String,
    /// A CEL expression yielding a string, or null for none.
    pub value_expression: String,
}

/// A named expression (`matchConditions`, `variables`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamedExpression {
    /// Its name.
    pub name: String,
    /// The CEL expression.
    pub expression: String,
}

/// `failurePolicy`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
pub enum FailurePolicy {
    /// An error denies (the default).
    Fail,
    /// An error is ignored.
    Ignore,
}

/// A ValidatingAdmissionPolicyBinding.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Binding {
    /// Its metadata.
    pub metadata: Meta,
    /// Its spec.
    pub spec: BindingSpec,
}

/// `ValidatingAdmissionPolicyBinding.spec`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BindingSpec {
    /// The policy bound.
    pub policy_name: String,
    /// Which params to use.
    #[serde(default)]
    pub param_ref: Option<ParamRef>,
    /// Further restricts what the policy applies to.
    #[serde(default)]
    pub match_resources: Option<MatchResources>,
    /// `Deny`, `Warn`, `Audit`.
    #[serde(default)]
    pub validation_actions: Vec<ValidationAction>,
}

/// `paramRef`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParamRef {
    /// One param object by name.
    #[serde(default)]
    pub name: Option<String>,
    /// Its namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Or every param object these labels select.
    #[serde(default)]
    pub selector: Option<LabelSelector>,
    /// `Allow` or `Deny` (default) when no param matches.
    #[serde(default)]
    pub parameter_not_found_action: Option<NotFoundAction>,
}

/// `parameterNotFoundAction`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
pub enum NotFoundAction {
    /// The binding does not apply.
    Allow,
    /// The request is denied.
    Deny,
}

/// `validationActions`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub enum ValidationAction {
    /// An `error` finding.
    Deny,
    /// A `warning` finding.
    Warn,
    /// An `info` finding.
    Audit,
}
