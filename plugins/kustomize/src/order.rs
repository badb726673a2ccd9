//! kustomize's legacy output order: kinds that others depend on first
//! (Namespace, CRDs, ServiceAccounts, RBAC, ConfigMaps, ...), webhooks
//! last, everything else in between by group, version, kind, namespace and
//! name.

use serde_json::Value;

use crate::kustomization::LegacySortOptions;

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

fn rank<S: AsRef<str>>(kind: &str, first: &[S], last: &[S]) -> i64 {
    if let Some(i) = first.iter().position(|k| k.as_ref() == kind) {
        return i as i64 - first.len() as i64;
    }
    if let Some(i) = last.iter().position(|k| k.as_ref() == kind) {
        return i as i64 + 1;
    }
    0
}

/// The legacy sort key of an object, but for its rank.
fn key(object: &Value) -> (String, String) {
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
    (gvk, id)
}

/// Sorts objects into the legacy order (stable); `options` replaces the
/// kinds that go first and last.
pub fn legacy(objects: &mut [Value], options: Option<&LegacySortOptions>) {
    objects.sort_by_cached_key(|object| {
        let kind = object["kind"].as_str().unwrap_or_default();
        let rank = match options {
            Some(o) => rank(kind, &o.order_first, &o.order_last),
            None => rank(kind, FIRST, LAST),
        };
        (rank, key(object))
    });
}
