//! The resource types the server serves: the built-in kinds of Kubernetes
//! 1.32 (from [`crate::builtin`]), and every version of every established
//! CRD.

use std::sync::Arc;

use serde_json::Value;

use super::builtin;
use super::schema::Schema;

/// One served resource type at one version.
#[derive(Clone, Debug)]
pub struct ResourceType {
    /// API group ("" for core).
    pub group: String,
    /// Version (`v1`, `v1alpha1`).
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name, used in URLs.
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// The verbs it supports, as discovery lists them.
    pub verbs: Vec<String>,
    /// `kubectl` short names.
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Whether the type has a `status` subresource.
    pub status: bool,
    /// Whether objects carry `metadata.generation`.
    pub generation: bool,
    /// How lists and maps merge.
    pub schema: Schema,
    /// For custom resources: the version's `openAPIV3Schema`.
    pub openapi: Option<Arc<Value>>,
    /// With a `scale` subresource: where the replicas are
    /// (`specReplicasPath`, `statusReplicasPath`, as in a CRD).
    pub scale: Option<Value>,
    /// For custom resources: `additionalPrinterColumns` (`kubectl get` columns).
    pub printer_columns: Vec<Value>,
}

impl ResourceType {
    /// `apps/v1`, or `v1` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `group/plural`: the storage identity shared by all versions.
    pub fn storage_key(&self) -> (String, String) {
        (self.group.clone(), self.plural.clone())
    }

    /// True when the type can only be created (access and token reviews,
    /// pod bindings): the answer is computed, nothing is stored.
    pub fn create_only(&self) -> bool {
        self.verbs.iter().all(|verb| verb == "create")
    }

    /// True for custom resources.
    pub fn is_custom(&self) -> bool {
        self.openapi.is_some()
    }
}

/// The verbs of every custom resource (and of most built-in ones).
pub const STANDARD_VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The built-in resource types: every resource Kubernetes 1.32 serves by
/// default, from the embedded catalog ([`crate::builtin`]). None when the
/// embedded data is broken (which [`crate::DevCluster::start`] reports).
pub fn builtins() -> Vec<Arc<ResourceType>> {
    let catalog = match builtin::catalog() {
        Ok(catalog) => catalog,
        Err(error) => {
            tracing::error!(%error, "the built-in API data is broken: serving no built-in kinds");
            return Vec::new();
        }
    };
    catalog
        .resources()
        .iter()
        .map(|b| {
            let scale = b.subresource("scale").map(|scale| {
                serde_json::json!({
                    "specReplicasPath": scale.spec_replicas_path,
                    "statusReplicasPath": scale.status_replicas_path,
                })
            });
            Arc::new(ResourceType {
                group: b.group.clone(),
                version: b.version.clone(),
                kind: b.kind.clone(),
                plural: b.name.clone(),
                singular: b.singular(),
                namespaced: b.namespaced,
                verbs: b.verbs.clone(),
                short_names: b.short_names.clone(),
                categories: b.categories.clone(),
                status: b.subresource("status").is_some(),
                generation: b.generation,
                schema: Schema::builtin_at(&b.group, &b.version, &b.kind),
                openapi: None,
                scale,
                printer_columns: Vec::new(),
            })
        })
        .collect()
}

/// Why a CustomResourceDefinition cannot be served: `(field, message)` pairs.
pub type CrdProblems = Vec<(String, String)>;

/// The resource types a CRD defines, one per served version.
pub fn from_crd(crd: &Value) -> Result<Vec<Arc<ResourceType>>, CrdProblems> {
    let mut problems = CrdProblems::new();
    let text = |pointer: &str| {
        crd.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let group = text("/spec/group");
    let plural = text("/spec/names/plural");
    let kind = text("/spec/names/kind");
    let scope = text("/spec/scope");
    let name = text("/metadata/name");
    if group.is_empty() || !group.contains('.') {
        problems.push((
            "spec.group".into(),
            format!("Invalid value: {group:?}: should be a domain with at least one dot"),
        ));
    }
    if plural.is_empty() || plural != plural.to_lowercase() {
        problems.push((
            "spec.names.plural".into(),
            format!("Invalid value: {plural:?}: a lowercase name is required"),
        ));
    }
    if kind.is_empty() {
        problems.push(("spec.names.kind".into(), "Required value".into()));
    }
    if name != format!("{plural}.{group}") {
        problems.push((
            "metadata.name".into(),
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let namespaced = match scope.as_str() {
        "Namespaced" => true,
        "Cluster" => false,
        other => {
            problems.push((
                "spec.scope".into(),
                format!(
                    "Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""
                ),
            ));
            true
        }
    };
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        problems.push((
            "spec.versions".into(),
            "Invalid value: must have exactly one version marked as storage version".into(),
        ));
    }
    let storage = versions
        .iter()
        .filter(|v| v["storage"] == Value::Bool(true))
        .count();
    if !versions.is_empty() && storage != 1 {
        problems.push((
            "spec.versions".into(),
            "Invalid value: must have exactly one version marked as storage version".into(),
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let strings = |pointer: &str| -> Vec<String> {
        crd.pointer(pointer)
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let singular = Some(text("/spec/names/singular"))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| kind.to_lowercase());
    Ok(versions
        .iter()
        .filter(|version| version["served"] != Value::Bool(false))
        .map(|version| {
            let openapi = Arc::new(
                version
                    .pointer("/schema/openAPIV3Schema")
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})),
            );
            Arc::new(ResourceType {
                group: group.clone(),
                version: version["name"].as_str().unwrap_or_default().to_owned(),
                kind: kind.clone(),
                plural: plural.clone(),
                singular: singular.clone(),
                namespaced,
                verbs: STANDARD_VERBS.iter().map(|&v| v.to_owned()).collect(),
                short_names: strings("/spec/names/shortNames"),
                categories: strings("/spec/names/categories"),
                status: version.pointer("/subresources/status").is_some(),
                generation: true,
                schema: Schema::Custom(openapi.clone()),
                openapi: Some(openapi),
                scale: version.pointer("/subresources/scale").cloned(),
                printer_columns: version
                    .get("additionalPrinterColumns")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            })
        })
        .collect())
}
