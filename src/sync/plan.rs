//! Ordering a sync: phases (PreSync → Sync → PostSync, SyncFail on
//! failure), waves inside a phase (`kiln.dev/sync-wave`, or Argo CD's
//! `argocd.argoproj.io/sync-wave`), and Kubernetes kind order inside a wave.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::manifest::ObjectKey;

/// Kiln's sync-wave annotation.
pub const WAVE: &str = "kiln.dev/sync-wave";
/// Argo CD's sync-wave annotation, also accepted.
pub const ARGO_WAVE: &str = "argocd.argoproj.io/sync-wave";
/// Kiln's hook annotation.
pub const HOOK: &str = "kiln.dev/hook";
/// Argo CD's hook annotation, also accepted.
pub const ARGO_HOOK: &str = "argocd.argoproj.io/hook";
/// Kiln's hook delete policy annotation.
pub const HOOK_DELETE: &str = "kiln.dev/hook-delete-policy";
/// Argo CD's hook delete policy annotation, also accepted.
pub const ARGO_HOOK_DELETE: &str = "argocd.argoproj.io/hook-delete-policy";
/// Per-object sync options (`Prune=false`).
pub const SYNC_OPTIONS: &str = "kiln.dev/sync-options";
/// Argo CD's per-object sync options, also accepted.
pub const ARGO_SYNC_OPTIONS: &str = "argocd.argoproj.io/sync-options";

/// A sync phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Phase {
    /// Hooks before anything is applied.
    PreSync,
    /// The application's objects (and Sync hooks).
    Sync,
    /// Hooks after every wave is healthy.
    PostSync,
    /// Hooks run when the sync failed.
    SyncFail,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// When a hook object is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum DeletePolicy {
    /// After the hook succeeded.
    HookSucceeded,
    /// After the hook failed.
    HookFailed,
    /// Before the hook is created again (the default).
    BeforeHookCreation,
}

/// One object with its place in the sync.
#[derive(Clone, Debug)]
pub struct Planned {
    /// Which object.
    pub key: ObjectKey,
    /// The object to apply.
    pub object: Value,
    /// Its phase.
    pub phase: Phase,
    /// Its wave.
    pub wave: i64,
    /// For hooks: their delete policies. `None` for ordinary objects.
    pub hook: Option<Vec<DeletePolicy>>,
}

/// A wave of one phase: objects applied together, in kind order.
#[derive(Clone, Debug)]
pub struct Wave {
    /// The phase.
    pub phase: Phase,
    /// The wave number.
    pub wave: i64,
    /// The objects, in kind order.
    pub objects: Vec<Planned>,
}

/// Why an object cannot be placed.
#[derive(Debug, thiserror::Error)]
#[error("{object}: {message}")]
pub struct PlanError {
    /// The object.
    pub object: String,
    /// What is wrong.
    pub message: String,
}

fn annotation<'a>(object: &'a Value, names: [&str; 2]) -> Option<&'a str> {
    let annotations = object.pointer("/metadata/annotations")?;
    names
        .iter()
        .find_map(|name| annotations.get(*name).and_then(Value::as_str))
}

/// The per-object sync options (`Prune=false,...`).
pub fn object_options(object: &Value) -> Vec<String> {
    annotation(object, [SYNC_OPTIONS, ARGO_SYNC_OPTIONS])
        .map(|text| {
            text.split(',')
                .map(|o| o.trim().to_owned())
                .filter(|o| !o.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// Kubernetes kind order inside a wave: what others depend on first.
const KIND_ORDER: &[&str] = &[
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
];

/// The position of a kind; unknown kinds (custom resources) come last.
pub fn kind_rank(kind: &str) -> usize {
    KIND_ORDER
        .iter()
        .position(|k| *k == kind)
        .unwrap_or(KIND_ORDER.len())
}

fn place(object: Value) -> Result<Planned, PlanError> {
    let key = ObjectKey::of(&object);
    let fail = |message: String| PlanError {
        object: key.to_string(),
        message,
    };
    let wave = match annotation(&object, [WAVE, ARGO_WAVE]) {
        None => 0,
        Some(text) => text
            .trim()
            .parse()
            .map_err(|_| fail(format!("sync wave {text:?} is not an integer")))?,
    };
    let (phase, hook) = match annotation(&object, [HOOK, ARGO_HOOK]) {
        None => (Phase::Sync, None),
        Some(text) => {
            // Several phases may be listed; the first one decides.
            let first = text.split(',').next().unwrap_or_default().trim();
            let phase = match first {
                "PreSync" => Phase::PreSync,
                "Sync" => Phase::Sync,
                "PostSync" => Phase::PostSync,
                "SyncFail" => Phase::SyncFail,
                other => {
                    return Err(fail(format!(
                        "hook {other:?} is not PreSync, Sync, PostSync or SyncFail"
                    )));
                }
            };
            let mut policies = Vec::new();
            for policy in annotation(&object, [HOOK_DELETE, ARGO_HOOK_DELETE])
                .unwrap_or("BeforeHookCreation")
                .split(',')
            {
                policies.push(match policy.trim() {
                    "HookSucceeded" => DeletePolicy::HookSucceeded,
                    "HookFailed" => DeletePolicy::HookFailed,
                    "BeforeHookCreation" => DeletePolicy::BeforeHookCreation,
                    other => return Err(fail(format!("hook delete policy {other:?} is not HookSucceeded, HookFailed or BeforeHookCreation"))),
                });
            }
            (phase, Some(policies))
        }
    };
    Ok(Planned {
        key,
        object,
        phase,
        wave,
        hook,
    })
}

/// The ordered plan: PreSync, Sync and PostSync waves in order, then the
/// SyncFail hooks (run only when something failed).
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// PreSync, Sync and PostSync waves, in order.
    pub waves: Vec<Wave>,
    /// SyncFail hooks.
    pub on_failure: Vec<Planned>,
}

impl Plan {
    /// Orders `objects`.
    pub fn new(objects: Vec<Value>) -> Result<Self, PlanError> {
        let mut groups: BTreeMap<(Phase, i64), Vec<Planned>> = BTreeMap::new();
        let mut on_failure = Vec::new();
        for object in objects {
            let planned = place(object)?;
            if planned.phase == Phase::SyncFail {
                on_failure.push(planned);
            } else {
                groups
                    .entry((planned.phase, planned.wave))
                    .or_default()
                    .push(planned);
            }
        }
        let waves = groups
            .into_iter()
            .map(|((phase, wave), mut objects)| {
                // Stable: same-kind objects keep the rendered order.
                objects.sort_by_key(|p| kind_rank(&p.key.kind));
                Wave {
                    phase,
                    wave,
                    objects,
                }
            })
            .collect();
        Ok(Self { waves, on_failure })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(kind: &str, name: &str, annotations: Value) -> Value {
        json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "annotations": annotations}})
    }

    #[test]
    fn phases_then_waves_then_kinds() {
        let plan = Plan::new(vec![
            object("Deployment", "web", json!({})),
            object("Service", "web", json!({})),
            object("ConfigMap", "late", json!({"kiln.dev/sync-wave": "2"})),
            object(
                "Namespace",
                "team",
                json!({"argocd.argoproj.io/sync-wave": "-1"}),
            ),
            object(
                "Job",
                "migrate",
                json!({"kiln.dev/hook": "PreSync", "kiln.dev/hook-delete-policy": "HookSucceeded"}),
            ),
            object(
                "Job",
                "notify",
                json!({"argocd.argoproj.io/hook": "PostSync"}),
            ),
            object("Job", "rollback", json!({"kiln.dev/hook": "SyncFail"})),
        ])
        .unwrap();
        let order: Vec<String> = plan
            .waves
            .iter()
            .map(|w| {
                format!(
                    "{}/{}:{}",
                    w.phase,
                    w.wave,
                    w.objects
                        .iter()
                        .map(|o| o.key.name.clone())
                        .collect::<Vec<_>>()
                        .join(",")
                )
            })
            .collect();
        assert_eq!(
            order,
            vec![
                "PreSync/0:migrate",
                "Sync/-1:team",
                "Sync/0:web,web",
                "Sync/2:late",
                "PostSync/0:notify"
            ]
        );
        assert_eq!(
            plan.waves[2].objects[0].key.kind, "Service",
            "Services before Deployments"
        );
        assert_eq!(
            plan.waves[0].objects[0].hook,
            Some(vec![DeletePolicy::HookSucceeded])
        );
        assert_eq!(
            plan.waves[4].objects[0].hook,
            Some(vec![DeletePolicy::BeforeHookCreation])
        );
        assert_eq!(plan.on_failure[0].key.name, "rollback");
    }

    #[test]
    fn bad_annotations_name_the_object() {
        let error = Plan::new(vec![object(
            "ConfigMap",
            "c",
            json!({"kiln.dev/sync-wave": "soon"}),
        )])
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "ConfigMap c: sync wave \"soon\" is not an integer"
        );
        assert!(Plan::new(vec![object("Job", "j", json!({"kiln.dev/hook": "Later"}))]).is_err());
    }
}
