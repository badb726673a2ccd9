//! `ApplicationSet` (`kiln.dev/v1alpha1`): Applications stamped out of one
//! template by generators, with Argo CD's field names and semantics
//! (`src/appset` generates, `src/controller/appset` reconciles).
//!
//! Generators and the template are kept as JSON here (their schema
//! preserves unknown fields) and read, checked and typed where they are
//! used ([`crate::appset::spec`]), so that an error names the field.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

/// Applications generated from one template.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "kiln.dev",
    version = "v1alpha1",
    kind = "ApplicationSet",
    namespaced,
    status = "ApplicationSetStatus",
    shortname = "appset",
    shortname = "appsets",
    category = "kiln",
    printcolumn = r#"{"name":"Applications","type":"integer","jsonPath":".status.applicationCount"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSetSpec {
    /// Where the parameter sets come from: `list`, `clusters`, `git`,
    /// `matrix`, `merge` (Argo CD's generators; their parameter sets are
    /// concatenated, each generator's optionally filtered by its
    /// `selector`).
    #[schemars(schema_with = "generators_schema")]
    pub generators: Vec<serde_json::Value>,
    /// The Application each parameter set makes: `metadata` (`name`,
    /// `namespace`, `labels`, `annotations`, `finalizers`) and `spec`, every
    /// string of them a template.
    #[schemars(schema_with = "preserve_unknown")]
    pub template: serde_json::Value,
    /// Go's `text/template` (with Sprig) instead of `{{param}}`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub go_template: bool,
    /// Go template options: `missingkey=error` makes a missing parameter an
    /// error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub go_template_options: Vec<String>,
    /// With `goTemplate`: a Go template whose YAML result is merged into
    /// each generated Application.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_patch: Option<String>,
    /// What the set may change of its Applications.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_policy: Option<ApplicationSetSyncPolicy>,
    /// The projects (globs) its Applications may name. Empty: only the
    /// project the template names, written without parameters. A
    /// generated Application naming another is refused and nothing of the
    /// set changes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub projects: Vec<String>,
    /// Progressive syncs (`RollingSync`): not run yet; a set that asks for
    /// one is refused with a condition, never run all at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown")]
    pub strategy: Option<serde_json::Value>,
    /// Argo CD's `ignoreApplicationDifferences`: not run yet; a set that
    /// sets it is refused with a condition (kept here so that the API
    /// server does not drop it unseen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown_any")]
    pub ignore_application_differences: Option<serde_json::Value>,
    /// Argo CD's `preservedFields`: not run yet; refused as
    /// `ignoreApplicationDifferences` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown")]
    pub preserved_fields: Option<serde_json::Value>,
}

/// What an ApplicationSet may change of its Applications.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSetSyncPolicy {
    /// `create-only`, `create-update`, `create-delete` or `sync` (default:
    /// create, update and delete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "applications_sync_schema")]
    pub applications_sync: Option<String>,
    /// Delete generated Applications without deleting what they deployed
    /// (their resources finalizer removed first).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub preserve_resources_on_deletion: bool,
}

/// What the controller found of an ApplicationSet.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSetStatus {
    /// `ErrorOccurred`, `ParametersGenerated`, `ResourcesUpToDate`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// How many Applications it generates.
    #[serde(default)]
    pub application_count: u32,
    /// The generated Applications' names (at most 1,000 listed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applications: Vec<String>,
}

fn preserve_unknown(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

fn preserve_unknown_any(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    })
}

fn applications_sync_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "enum": ["create-only", "create-update", "create-delete", "sync"],
    })
}

fn generators_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    })
}
