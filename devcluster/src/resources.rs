//! The resource types the server serves: the built-in kinds a GitOps tool
//! meets daily, and every version of every established CRD.

use std::sync::Arc;

use serde_json::Value;

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
    /// For custom resources with a `scale` subresource: its definition.
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

    /// True for custom resources.
    pub fn is_custom(&self) -> bool {
        self.openapi.is_some()
    }
}

struct Builtin {
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    status: bool,
    generation: bool,
    all: bool,
}

#[allow(clippy::too_many_arguments)] // one row of the table below
const fn b(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    status: bool,
    generation: bool,
    all: bool,
) -> Builtin {
    Builtin {
        group,
        kind,
        plural,
        namespaced,
        short,
        status,
        generation,
        all,
    }
}

const BUILTINS: &[Builtin] = &[
    b(
        "",
        "Namespace",
        "namespaces",
        false,
        &["ns"],
        true,
        false,
        false,
    ),
    b(
        "",
        "ConfigMap",
        "configmaps",
        true,
        &["cm"],
        false,
        false,
        false,
    ),
    b("", "Secret", "secrets", true, &[], false, false, false),
    b("", "Service", "services", true, &["svc"], true, false, true),
    b(
        "",
        "ServiceAccount",
        "serviceaccounts",
        true,
        &["sa"],
        false,
        false,
        false,
    ),
    b("", "Pod", "pods", true, &["po"], true, false, true),
    b(
        "",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        true,
        &["pvc"],
        true,
        false,
        false,
    ),
    b("", "Event", "events", true, &["ev"], false, false, false),
    b(
        "apps",
        "Deployment",
        "deployments",
        true,
        &["deploy"],
        true,
        true,
        true,
    ),
    b(
        "apps",
        "StatefulSet",
        "statefulsets",
        true,
        &["sts"],
        true,
        true,
        true,
    ),
    b(
        "apps",
        "DaemonSet",
        "daemonsets",
        true,
        &["ds"],
        true,
        true,
        true,
    ),
    b(
        "apps",
        "ReplicaSet",
        "replicasets",
        true,
        &["rs"],
        true,
        true,
        true,
    ),
    b("batch", "Job", "jobs", true, &[], true, true, true),
    b(
        "batch",
        "CronJob",
        "cronjobs",
        true,
        &["cj"],
        true,
        true,
        true,
    ),
    b(
        "networking.k8s.io",
        "Ingress",
        "ingresses",
        true,
        &["ing"],
        true,
        true,
        false,
    ),
    b(
        "networking.k8s.io",
        "NetworkPolicy",
        "networkpolicies",
        true,
        &["netpol"],
        false,
        true,
        false,
    ),
    b(
        "rbac.authorization.k8s.io",
        "Role",
        "roles",
        true,
        &[],
        false,
        false,
        false,
    ),
    b(
        "rbac.authorization.k8s.io",
        "RoleBinding",
        "rolebindings",
        true,
        &[],
        false,
        false,
        false,
    ),
    b(
        "rbac.authorization.k8s.io",
        "ClusterRole",
        "clusterroles",
        false,
        &[],
        false,
        false,
        false,
    ),
    b(
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
        &[],
        false,
        false,
        false,
    ),
    b(
        "coordination.k8s.io",
        "Lease",
        "leases",
        true,
        &[],
        false,
        false,
        false,
    ),
    b(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
        &["crd", "crds"],
        true,
        true,
        false,
    ),
];

/// The built-in resource types, all at their `v1` version.
pub fn builtins() -> Vec<Arc<ResourceType>> {
    BUILTINS
        .iter()
        .map(|b| {
            Arc::new(ResourceType {
                group: b.group.to_owned(),
                version: "v1".to_owned(),
                kind: b.kind.to_owned(),
                plural: b.plural.to_owned(),
                singular: b.kind.to_lowercase(),
                namespaced: b.namespaced,
                short_names: b.short.iter().map(|&s| s.to_owned()).collect(),
                categories: if b.all {
                    vec!["all".to_owned()]
                } else {
                    Vec::new()
                },
                status: b.status,
                generation: b.generation,
                schema: Schema::builtin(b.group, b.kind),
                openapi: None,
                scale: None,
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
