//! Ordering a sync: phases (PreSync → Sync → PostSync, SyncFail on
//! failure), waves inside a phase (`kiln.dev/sync-wave`, or Argo CD's
//! `argocd.argoproj.io/sync-wave`), and Kubernetes kind order inside a wave.
//! Helm's hook annotations are read as Argo CD reads them ([`helm_hooks`]).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::helm_hooks;
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

/// A hook run when its Application is deleted, never by a sync (Argo CD's
/// hook types of the same names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeletionHook {
    /// Before the Application's objects are deleted (Argo CD 3; Helm's
    /// `pre-delete`).
    PreDelete,
    /// Once the Application's objects are gone (Argo CD 2.10+; Helm's
    /// `post-delete`).
    PostDelete,
}

impl DeletionHook {
    /// Both, in the order a deletion runs them.
    pub const ALL: [DeletionHook; 2] = [DeletionHook::PreDelete, DeletionHook::PostDelete];

    /// Its name in Kiln's and Argo CD's hook annotations.
    pub fn name(self) -> &'static str {
        match self {
            DeletionHook::PreDelete => "PreDelete",
            DeletionHook::PostDelete => "PostDelete",
        }
    }

    fn helm_event(self) -> helm_hooks::Event {
        match self {
            DeletionHook::PreDelete => helm_hooks::Event::PreDelete,
            DeletionHook::PostDelete => helm_hooks::Event::PostDelete,
        }
    }

    fn reason(self) -> &'static str {
        match self {
            DeletionHook::PreDelete => {
                "a PreDelete hook: runs when its Application is deleted, before its objects are"
            }
            DeletionHook::PostDelete => {
                "a PostDelete hook: runs when its Application is deleted, once its objects are gone"
            }
        }
    }
}

impl std::fmt::Display for DeletionHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The deletion hook types `object` has, by the annotation that decides:
/// Kiln's or Argo CD's, else Helm's.
fn deletion_hooks(object: &Value) -> Vec<DeletionHook> {
    DeletionHook::ALL
        .into_iter()
        .filter(|hook| match annotation(object, &[HOOK, ARGO_HOOK]) {
            Some(text) => text.split(',').any(|name| name.trim() == hook.name()),
            None => annotation(object, &[helm_hooks::HOOK])
                .is_some_and(|text| helm_hooks::lists(text, hook.helm_event())),
        })
        .collect()
}

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

fn annotation<'a>(object: &'a Value, names: &[&str]) -> Option<&'a str> {
    let annotations = object.pointer("/metadata/annotations")?;
    names
        .iter()
        .find_map(|name| annotations.get(*name).and_then(Value::as_str))
}

/// True when `object` is a hook (Kiln's, Argo CD's or a Helm hook other
/// than `crd-install`), including hooks a sync never runs. As in Argo CD,
/// hooks are run by a sync but never compared: a `HookSucceeded` Job that is
/// gone, or a Helm test Pod never created, does not make an Application
/// OutOfSync. A hook whose annotation is malformed counts as a hook (the
/// sync refuses it, naming the object).
pub fn is_hook(object: &Value) -> bool {
    if annotation(object, &[HOOK, ARGO_HOOK]).is_some() {
        return true;
    }
    match annotation(object, &[helm_hooks::HOOK]) {
        None => false,
        Some(text) => !matches!(helm_hooks::role(text), Ok(helm_hooks::Role::Object)),
    }
}

/// True when `object` is a `hook` hook: Kiln's or Argo CD's hook
/// annotation lists `PreDelete`/`PostDelete`, or (when neither is set)
/// Helm's lists `pre-delete`/`post-delete`. A sync never runs it; deleting
/// its Application does.
pub fn is_deletion_hook(object: &Value, hook: DeletionHook) -> bool {
    deletion_hooks(object).contains(&hook)
}

/// True when `object` is a PostDelete hook ([`is_deletion_hook`]).
pub fn is_post_delete(object: &Value) -> bool {
    is_deletion_hook(object, DeletionHook::PostDelete)
}

/// True when `object` sets a hook delete policy itself (Kiln's, Argo CD's
/// or Helm's annotation): a deletion hook without one is deleted once the
/// deletion's hooks completed, as Argo CD does.
pub fn has_delete_policy(object: &Value) -> bool {
    annotation(
        object,
        &[HOOK_DELETE, ARGO_HOOK_DELETE, helm_hooks::DELETE_POLICY],
    )
    .is_some_and(|text| text.split(',').any(|p| !p.trim().is_empty()))
}

/// Why deleting its Application leaves `object` in the cluster, if it
/// does: the sync option `Delete=false` (Kiln's or Argo CD's annotation), or
/// Helm's `helm.sh/resource-policy: keep` (which Argo CD reads as
/// `Delete=false` too).
pub fn kept_on_delete(object: &Value) -> Option<&'static str> {
    if object_options(object).iter().any(|o| o == "Delete=false") {
        Some("Delete=false")
    } else if helm_keep(object) {
        Some("helm.sh/resource-policy: keep")
    } else {
        None
    }
}

/// True when `object` says `helm.sh/resource-policy: keep`: Helm never
/// deletes it, neither when the release goes nor when the object leaves
/// the chart, so Kiln never prunes it either.
pub fn helm_keep(object: &Value) -> bool {
    annotation(object, &[helm_hooks::RESOURCE_POLICY]).is_some_and(helm_hooks::keeps)
}

/// The per-object sync options (`Prune=false,...`).
pub fn object_options(object: &Value) -> Vec<String> {
    annotation(object, &[SYNC_OPTIONS, ARGO_SYNC_OPTIONS])
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

/// Where one object goes: once per phase it runs in (hooks may list
/// several), or nowhere with the reason.
enum Placement {
    /// Applied or run in each of these places.
    Runs(Vec<Planned>),
    /// Never applied by a sync.
    NeverRun(Skipped),
}

fn place(object: Value) -> Result<Placement, PlanError> {
    let key = ObjectKey::of(&object);
    let fail = |message: String| PlanError {
        object: key.to_string(),
        message,
    };
    let wave = wave_of(&object).map_err(fail)?;
    let phases = match annotation(&object, &[HOOK, ARGO_HOOK]) {
        // A Kiln or Argo CD hook annotation wins over Helm's.
        Some(text) => {
            let mut phases = Vec::new();
            for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                let phase = match name {
                    "PreSync" => Phase::PreSync,
                    "Sync" => Phase::Sync,
                    "PostSync" => Phase::PostSync,
                    "SyncFail" => Phase::SyncFail,
                    "PreDelete" | "PostDelete" => continue,
                    other => {
                        return Err(fail(format!(
                            "hook {other:?} is not PreSync, Sync, PostSync, SyncFail, PreDelete or PostDelete"
                        )));
                    }
                };
                if !phases.contains(&phase) {
                    phases.push(phase);
                }
            }
            if let (true, Some(hook)) = (phases.is_empty(), deletion_hooks(&object).first()) {
                // Checked now, so that a typo fails the sync rather than
                // the Application's deletion.
                delete_policies(&object)?;
                return Ok(Placement::NeverRun(Skipped {
                    key,
                    reason: hook.reason().into(),
                }));
            }
            if phases.is_empty() {
                return Err(fail(format!("hook {text:?} names no phase")));
            }
            phases.sort();
            Some(phases)
        }
        None => match annotation(&object, &[helm_hooks::HOOK]) {
            None => None,
            Some(text) => match helm_hooks::role(text).map_err(fail)? {
                helm_hooks::Role::Object => None,
                helm_hooks::Role::Hook(phases) => Some(phases),
                helm_hooks::Role::NeverRun(events) if !deletion_hooks(&object).is_empty() => {
                    delete_policies(&object)?;
                    let reasons: Vec<&str> =
                        deletion_hooks(&object).iter().map(|h| h.reason()).collect();
                    return Ok(Placement::NeverRun(Skipped {
                        key,
                        reason: format!("Helm hook {events:?}: {}", reasons.join("; ")),
                    }));
                }
                helm_hooks::Role::NeverRun(events) => {
                    return Ok(Placement::NeverRun(Skipped {
                        key,
                        reason: format!(
                            "Helm hook {events:?}: a sync never runs it (as in Argo CD)"
                        ),
                    }));
                }
            },
        },
    };
    let Some(phases) = phases else {
        return Ok(Placement::Runs(vec![Planned {
            key,
            object,
            phase: Phase::Sync,
            wave,
            hook: None,
        }]));
    };
    let policies = delete_policies(&object)?;
    Ok(Placement::Runs(
        phases
            .into_iter()
            .map(|phase| Planned {
                key: key.clone(),
                object: object.clone(),
                phase,
                wave,
                hook: Some(policies.clone()),
            })
            .collect(),
    ))
}

/// An object's sync wave: its sync-wave annotation (Kiln's or Argo CD's),
/// else its Helm hook weight (Argo CD takes it for the wave), else 0.
fn wave_of(object: &Value) -> Result<i64, String> {
    match annotation(object, &[WAVE, ARGO_WAVE]) {
        Some(text) => text
            .trim()
            .parse()
            .map_err(|_| format!("sync wave {text:?} is not an integer")),
        None => match annotation(object, &[helm_hooks::WEIGHT]) {
            Some(text) => helm_hooks::weight(text),
            None => Ok(0),
        },
    }
}

/// A hook's delete policies: Argo CD combines its own with Helm's, and
/// deletes a hook with none before creating it again (BeforeHookCreation).
pub fn delete_policies(object: &Value) -> Result<Vec<DeletePolicy>, PlanError> {
    let fail = |message: String| PlanError {
        object: ObjectKey::of(object).to_string(),
        message,
    };
    let mut policies = Vec::new();
    if let Some(text) = annotation(object, &[HOOK_DELETE, ARGO_HOOK_DELETE]) {
        for policy in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            policies.push(match policy {
                "HookSucceeded" => DeletePolicy::HookSucceeded,
                "HookFailed" => DeletePolicy::HookFailed,
                "BeforeHookCreation" => DeletePolicy::BeforeHookCreation,
                other => return Err(fail(format!("hook delete policy {other:?} is not HookSucceeded, HookFailed or BeforeHookCreation"))),
            });
        }
    }
    if let Some(text) = annotation(object, &[helm_hooks::DELETE_POLICY]) {
        for policy in helm_hooks::delete_policies(text).map_err(fail)? {
            if !policies.contains(&policy) {
                policies.push(policy);
            }
        }
    }
    if policies.is_empty() {
        policies.push(DeletePolicy::BeforeHookCreation);
    }
    Ok(policies)
}

/// An object a sync never applies, and why.
#[derive(Clone, Debug)]
pub struct Skipped {
    /// Which object.
    pub key: ObjectKey,
    /// Why it is never applied.
    pub reason: String,
}

/// The ordered plan: PreSync, Sync and PostSync waves in order, then the
/// SyncFail hooks (run only when something failed).
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// PreSync, Sync and PostSync waves, in order.
    pub waves: Vec<Wave>,
    /// SyncFail hooks.
    pub on_failure: Vec<Planned>,
    /// Objects no sync applies (Helm test, deletion and rollback hooks).
    pub never_run: Vec<Skipped>,
}

impl Plan {
    /// Orders `objects`.
    pub fn new(objects: Vec<Value>) -> Result<Self, PlanError> {
        let mut groups: BTreeMap<(Phase, i64), Vec<Planned>> = BTreeMap::new();
        let mut on_failure = Vec::new();
        let mut never_run = Vec::new();
        for object in objects {
            let placed = match place(object)? {
                Placement::Runs(placed) => placed,
                Placement::NeverRun(skipped) => {
                    never_run.push(skipped);
                    continue;
                }
            };
            for planned in placed {
                if planned.phase == Phase::SyncFail {
                    on_failure.push(planned);
                } else {
                    groups
                        .entry((planned.phase, planned.wave))
                        .or_default()
                        .push(planned);
                }
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
        Ok(Self {
            waves,
            on_failure,
            never_run,
        })
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

    fn places(plan: &Plan) -> Vec<String> {
        plan.waves
            .iter()
            .flat_map(|w| {
                w.objects
                    .iter()
                    .map(move |o| format!("{}/{} {} {:?}", w.phase, w.wave, o.key, o.hook))
            })
            .collect()
    }

    #[test]
    fn helm_hooks_run_where_argo_cd_runs_them() {
        let plan = Plan::new(vec![
            object("Deployment", "web", json!({})),
            object(
                "Job",
                "migrate",
                json!({"helm.sh/hook": "pre-install,pre-upgrade", "helm.sh/hook-weight": "5",
                    "helm.sh/hook-delete-policy": "hook-succeeded"}),
            ),
            object(
                "ConfigMap",
                "seed",
                json!({"helm.sh/hook": "pre-install", "helm.sh/hook-weight": "-5"}),
            ),
            object(
                "Job",
                "notify",
                json!({"helm.sh/hook": "post-upgrade", "helm.sh/hook-delete-policy": "before-hook-creation,hook-failed"}),
            ),
            object("Pod", "smoke", json!({"helm.sh/hook": "test"})),
            object("Pod", "old-smoke", json!({"helm.sh/hook": "test-success"})),
            object("Job", "goodbye", json!({"helm.sh/hook": "pre-delete"})),
            object("Job", "undo", json!({"helm.sh/hook": "post-rollback"})),
            object(
                "CustomResourceDefinition",
                "crd",
                json!({"helm.sh/hook": "crd-install"}),
            ),
            object("ConfigMap", "weighted", json!({"helm.sh/hook-weight": "3"})),
        ])
        .unwrap();
        assert_eq!(
            places(&plan),
            vec![
                "PreSync/-5 ConfigMap seed Some([BeforeHookCreation])",
                "PreSync/5 Job migrate Some([HookSucceeded])",
                "Sync/0 CustomResourceDefinition crd None",
                "Sync/0 Deployment web None",
                "Sync/3 ConfigMap weighted None",
                "PostSync/0 Job notify Some([BeforeHookCreation, HookFailed])",
            ]
        );
        let never: Vec<String> = plan.never_run.iter().map(|s| s.key.name.clone()).collect();
        assert_eq!(never, vec!["smoke", "old-smoke", "goodbye", "undo"]);
        assert!(plan.never_run[0].reason.contains("\"test\""));
    }

    #[test]
    fn argo_and_kiln_annotations_win_over_helms() {
        let plan = Plan::new(vec![
            object(
                "Job",
                "a",
                json!({"argocd.argoproj.io/hook": "PostSync", "helm.sh/hook": "pre-install",
                    "argocd.argoproj.io/sync-wave": "2", "helm.sh/hook-weight": "-9",
                    "argocd.argoproj.io/hook-delete-policy": "HookFailed",
                    "helm.sh/hook-delete-policy": "hook-succeeded"}),
            ),
            object(
                "Job",
                "b",
                json!({"kiln.dev/hook": "Sync", "helm.sh/hook": "test"}),
            ),
            object(
                "Job",
                "c",
                json!({"argocd.argoproj.io/hook": "PreSync", "helm.sh/hook": "no-such-hook",
                    "kiln.dev/sync-wave": "1", "helm.sh/hook-weight": "x"}),
            ),
        ])
        .unwrap();
        assert_eq!(
            places(&plan),
            vec![
                "PreSync/1 Job c Some([BeforeHookCreation])",
                "Sync/0 Job b Some([BeforeHookCreation])",
                // Delete policies of both annotations count, as in Argo CD.
                "PostSync/2 Job a Some([HookFailed, HookSucceeded])",
            ]
        );
        assert!(plan.never_run.is_empty());
    }

    #[test]
    fn a_hook_listing_several_phases_runs_in_each() {
        let plan = Plan::new(vec![
            object(
                "Job",
                "twice",
                json!({"helm.sh/hook": "post-install,pre-upgrade"}),
            ),
            object(
                "Job",
                "thrice",
                json!({"kiln.dev/hook": "PreSync, PostSync,SyncFail"}),
            ),
        ])
        .unwrap();
        assert_eq!(
            places(&plan),
            vec![
                "PreSync/0 Job twice Some([BeforeHookCreation])",
                "PreSync/0 Job thrice Some([BeforeHookCreation])",
                "PostSync/0 Job twice Some([BeforeHookCreation])",
                "PostSync/0 Job thrice Some([BeforeHookCreation])",
            ]
        );
        assert_eq!(plan.on_failure[0].key.name, "thrice");
    }

    #[test]
    fn bad_helm_annotations_name_the_object() {
        let error = |annotations| {
            Plan::new(vec![object("Job", "j", annotations)])
                .unwrap_err()
                .to_string()
        };
        assert!(
            error(json!({"helm.sh/hook": "pre-install,pre-instal"}))
                .starts_with("Job j: helm.sh/hook \"pre-instal\" is not one of pre-install,")
        );
        assert_eq!(
            error(json!({"helm.sh/hook": "pre-install", "helm.sh/hook-weight": "1.5"})),
            "Job j: helm.sh/hook-weight \"1.5\" is not an integer"
        );
        assert_eq!(
            error(
                json!({"helm.sh/hook": "pre-install", "helm.sh/hook-delete-policy": "HookSucceeded"})
            ),
            "Job j: helm.sh/hook-delete-policy \"HookSucceeded\" is not before-hook-creation, hook-succeeded or hook-failed"
        );
    }

    #[test]
    fn post_delete_hooks_are_never_run_by_a_sync() {
        let plan = Plan::new(vec![
            object(
                "Job",
                "argo",
                json!({"argocd.argoproj.io/hook": "PostDelete"}),
            ),
            object("Job", "helm", json!({"helm.sh/hook": "post-delete"})),
            object(
                "Job",
                "both",
                json!({"kiln.dev/hook": "PostSync,PostDelete"}),
            ),
        ])
        .unwrap();
        assert_eq!(
            places(&plan),
            vec!["PostSync/0 Job both Some([BeforeHookCreation])"]
        );
        let never: Vec<String> = plan.never_run.iter().map(|s| s.key.name.clone()).collect();
        assert_eq!(never, vec!["argo", "helm"]);
        assert!(plan.never_run[1].reason.contains("PostDelete"));
        // A bad delete policy fails the sync, not the deletion.
        assert!(
            Plan::new(vec![object(
                "Job",
                "j",
                json!({"argocd.argoproj.io/hook": "PostDelete",
                    "argocd.argoproj.io/hook-delete-policy": "Never"})
            )])
            .is_err()
        );
        assert!(is_deletion_hook(
            &object("Job", "j", json!({"helm.sh/hook": "pre-delete"})),
            DeletionHook::PreDelete
        ));
        assert!(is_deletion_hook(
            &object("Job", "j", json!({"argocd.argoproj.io/hook": "PreDelete"})),
            DeletionHook::PreDelete
        ));
        assert!(!has_delete_policy(&object(
            "Job",
            "j",
            json!({"helm.sh/hook": "pre-delete"})
        )));
        assert!(has_delete_policy(&object(
            "Job",
            "j",
            json!({"helm.sh/hook-delete-policy": "hook-succeeded"})
        )));
        let hook = |annotations| is_post_delete(&object("Job", "j", annotations));
        assert!(hook(json!({"argocd.argoproj.io/hook": "PostDelete"})));
        assert!(hook(json!({"kiln.dev/hook": "PostSync, PostDelete"})));
        assert!(hook(json!({"helm.sh/hook": "post-delete"})));
        assert!(!hook(json!({"helm.sh/hook": "pre-delete"})));
        assert!(
            !hook(json!({"argocd.argoproj.io/hook": "PostSync", "helm.sh/hook": "post-delete"})),
            "Argo CD's annotation wins over Helm's"
        );
    }

    #[test]
    fn what_deleting_the_application_leaves() {
        let kept = |annotations| kept_on_delete(&object("ConfigMap", "c", annotations));
        assert_eq!(
            kept(json!({"argocd.argoproj.io/sync-options": "Delete=false"})),
            Some("Delete=false")
        );
        assert_eq!(
            kept(json!({"kiln.dev/sync-options": "Prune=false,Delete=false"})),
            Some("Delete=false")
        );
        assert_eq!(
            kept(json!({"helm.sh/resource-policy": "keep"})),
            Some("helm.sh/resource-policy: keep")
        );
        assert_eq!(
            kept(json!({"argocd.argoproj.io/sync-options": "Delete=true"})),
            None
        );
        assert_eq!(kept(json!({"helm.sh/resource-policy": "delete"})), None);
        assert_eq!(kept(json!({})), None);
    }
}
