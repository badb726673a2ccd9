//! kustomize's legacy output order: kinds that others depend on first
//! (Namespace, CRDs, ServiceAccounts, RBAC, ConfigMaps, ...), webhooks
//! last, everything else in between by group, version, kind, namespace and
//! name.

use serde_json::Value;

const FIRST: &[&str] = &[
    "Namespace",
    "ResourceQuota",
    "StorageClass",
    "CustomResourceDefinition",
    "ServiceAccount",
    "PodSecurityPolicy",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "ConfigMap",
    "Secret",
    "Endpoints",
    "Service",
    "LimitRange",
    "PriorityClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Deployment",
    "StatefulSet",
    "CronJob",
    "PodDisruptionBudget",
];

const LAST: &[&str] = &[
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

fn rank(kind: &str) -> i64 {
    if let Some(i) = FIRST.iter().position(|k| *k == kind) {
        return i as i64 - FIRST.len() as i64;
    }
    if let Some(i) = LAST.iter().position(|k| *k == kind) {
        return i as i64 + 1;
    }
    0
}

/// The legacy sort key of an object.
fn key(object: &Value) -> (i64, String, String) {
    let kind = object["kind"].as_str().unwrap_or_default();
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let or = |s: &str, empty: &str| {
        if s.is_empty() {
            empty.to_owned()
        } else {
            s.to_owned()
        }
    };
    let gvk = format!(
        "{}_{}_{}",
        or(group, "~G"),
        or(version, "~V"),
        or(kind, "~K")
    );
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let id = format!("{gvk}|{}|{}", or(namespace, "~X"), or(name, "~N"));
    (rank(kind), gvk, id)
}

/// Sorts objects into the legacy order (stable).
pub fn legacy(objects: &mut [Value]) {
    objects.sort_by_cached_key(key);
}
