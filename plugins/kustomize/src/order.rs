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
/// kinds that go first and last. Like kustomize, two `Namespace` kinds of
/// which one is the core group's compare their group, version and kind in
/// reverse (the core `v1` Namespace before another group's).
pub fn legacy(objects: &mut Vec<Value>, options: Option<&LegacySortOptions>) {
    let keys: Vec<(i64, String, String, bool)> = objects
        .iter()
        .map(|object| {
            let kind = object["kind"].as_str().unwrap_or_default();
            let rank = match options {
                Some(o) => rank(kind, &o.order_first, &o.order_last),
                None => rank(kind, FIRST, LAST),
            };
            let (gvk, id) = key(object);
            let core_namespace = kind == "Namespace" && gvk.starts_with("~G_");
            (rank, gvk, id, core_namespace)
        })
        .collect();
    let mut order: Vec<usize> = (0..objects.len()).collect();
    order.sort_by(|&a, &b| {
        let ((rank_a, gvk_a, id_a, core_a), (rank_b, gvk_b, id_b, core_b)) = (&keys[a], &keys[b]);
        rank_a.cmp(rank_b).then_with(|| {
            if gvk_a == gvk_b {
                id_a.cmp(id_b)
            } else if gvk_a.ends_with("_Namespace")
                && gvk_b.ends_with("_Namespace")
                && (*core_a || *core_b)
            {
                gvk_b.cmp(gvk_a)
            } else {
                gvk_a.cmp(gvk_b)
            }
        })
    });
    let mut taken: Vec<Option<Value>> = objects.drain(..).map(Some).collect();
    objects.extend(order.into_iter().filter_map(|i| taken[i].take()));
}
