//! One reconcile of one Application: compare ([`compare`](mod@super::compare)) → sync
//! (when automated, or when a person asked for it) → status. Every failure
//! becomes a condition with a reason a person can act on; nothing here
//! crashes the controller or applies half of something without saying so.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::compare::{CompareTo, compare};
use super::context::{Context, ControllerConfig, ReconcileError};
use crate::api::{
    Application, ApplicationStatus, Condition, HealthInfo, HistoryEntry, OPERATION_ANNOTATION,
    Operation, OperationState, REFRESH_ANNOTATION, ResourceResult, ResourceStatus, SyncInfo,
};
use crate::condition::{Reason, Stop};
use crate::diff::SyncStatus;
use crate::health::{self, Health};
use crate::manifest::ObjectKey;
use crate::source::git::RepoUrl;
use crate::sync::{Action as SyncAction, Outcome};

fn condition(stop: &Stop) -> Condition {
    Condition {
        type_: stop.condition().to_string(),
        status: "True".into(),
        reason: Some(stop.reason.to_string()),
        message: Some(stop.message.clone()),
        last_transition_time: Some(crate::units::now()),
    }
}

/// Conditions that were already there keep the time they appeared (a
/// condition's `lastTransitionTime` says when it became true).
fn keep_transition_times(status: &mut ApplicationStatus, stored: Option<&ApplicationStatus>) {
    let Some(stored) = stored else { return };
    for condition in &mut status.conditions {
        if let Some(earlier) = stored.conditions.iter().find(|c| {
            c.type_ == condition.type_
                && c.status == condition.status
                && c.reason == condition.reason
                && c.message == condition.message
        }) {
            condition.last_transition_time = earlier.last_transition_time.clone();
        }
    }
}

/// Whether `status` must be written over `stored`: it says something else,
/// or the stored `reconciledAt` is older than `heartbeat` (or unreadable).
fn needs_write(
    status: &ApplicationStatus,
    stored: Option<&ApplicationStatus>,
    heartbeat: Duration,
) -> bool {
    let Some(stored) = stored else { return true };
    let same = ApplicationStatus {
        reconciled_at: stored.reconciled_at.clone(),
        ..status.clone()
    } == *stored;
    let fresh = stored
        .reconciled_at
        .as_deref()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .is_some_and(|at| jiff::Timestamp::now().duration_since(at).unsigned_abs() < heartbeat);
    !(same && fresh)
}

fn requeue(config: &ControllerConfig) -> Action {
    // Up to 10% jitter so that a thousand apps do not all poll at once.
    let jitter = config.resync.as_millis() as u64 / 10;
    let extra = if jitter == 0 {
        0
    } else {
        rand_core::RngCore::next_u64(&mut rand_core::OsRng) % jitter
    };
    Action::requeue(config.resync + Duration::from_millis(extra))
}

/// The operation an Application's annotation asks for: `Ok(None)` when
/// there is none, `Err` (a condition) when it cannot be read.
fn requested(app: &Application) -> Result<Option<(String, Operation)>, Stop> {
    let Some(raw) = app
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(OPERATION_ANNOTATION))
    else {
        return Ok(None);
    };
    serde_json::from_str(raw)
        .map(|op| Some((raw.clone(), op)))
        .map_err(|e| {
            Stop::new(
                Reason::InvalidOperation,
                format!("annotation {OPERATION_ANNOTATION} is not a valid operation: {e}"),
            )
        })
}

/// Removes an annotation if it still holds `raw` (a newer request written
/// meanwhile stays for the next reconcile).
async fn clear_annotation(apps: &Api<Application>, name: &str, key: &str, raw: &str) {
    let path = format!(
        "/metadata/annotations/{}",
        key.replace('~', "~0").replace('/', "~1")
    );
    let patch: json_patch::Patch = match serde_json::from_value(json!([
        {"op": "test", "path": path, "value": raw},
        {"op": "remove", "path": path},
    ])) {
        Ok(patch) => patch,
        Err(_) => return,
    };
    if let Err(error) = apps
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
    {
        tracing::debug!(%error, annotation = key, "not removed (changed meanwhile?)");
    }
}

/// Reconciles one Application.
pub async fn reconcile(app: Arc<Application>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let name = app.metadata.name.clone().unwrap_or_default();
    let namespace = app
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| ctx.config.namespace.clone());
    let span = tracing::info_span!(
        "reconcile",
        app = %name,
        revision = tracing::field::Empty,
        phase = tracing::field::Empty
    );
    // Another replica's shard: nothing to do until this one owns it (a
    // shard taken over reconciles all of its Applications).
    let Some(_running) = ctx.shards.enter(&namespace, &name) else {
        return Ok(Action::await_change());
    };
    let apps: Api<Application> = Api::namespaced(ctx.client.clone(), &namespace);
    if app.metadata.deletion_timestamp.is_some() {
        return tracing::Instrument::instrument(super::deletion::finalize(&app, &ctx, &apps), span)
            .await;
    }
    // A new refresh request (`kiln app refresh`, a webhook) asks the server
    // for its refs now rather than reusing a lookup a few seconds old. The
    // annotation stays (removing it would cost a write and a reconcile per
    // refresh); the value last acted on is remembered instead.
    let refresh = app
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REFRESH_ANNOTATION))
        .cloned();
    if let Some(value) = &refresh {
        let new = ctx
            .refreshes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(format!("{namespace}/{name}"), value.clone())
            .as_ref()
            != Some(value);
        if new && let Ok(url) = RepoUrl::parse(&app.spec.source.repo_url) {
            ctx.forget_refs(&url).await;
        }
    }
    let mut status = app.status.clone().unwrap_or_default();
    status.conditions.clear();
    let (raw_operation, operation, invalid_operation) = match requested(&app) {
        Ok(Some((raw, op))) => (Some(raw), Some(op), None),
        Ok(None) => (None, None, None),
        Err(stop) => {
            let raw = app
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(OPERATION_ANNOTATION))
                .cloned();
            (raw, None, Some(stop))
        }
    };
    // An operation already carried out (its annotation outlived it).
    let done = |status: &ApplicationStatus, op: &Operation| {
        status
            .operation_state
            .as_ref()
            .and_then(|s| s.id.as_deref())
            == Some(op.id.as_str())
    };
    let operation = operation.filter(|op| !done(&status, op));
    let started = std::time::Instant::now();
    let outcome = tracing::Instrument::instrument(
        run(&app, &ctx, &mut status, operation.as_ref()),
        span.clone(),
    )
    .await;
    ctx.metrics
        .reconcile_seconds
        .observe(started.elapsed().as_secs_f64());
    let result = if outcome.is_ok() { "ok" } else { "condition" };
    ctx.metrics
        .reconciles
        .get_or_create(&vec![("result".into(), result.into())])
        .inc();
    let mut after = None;
    match outcome {
        Ok(wait) => after = wait,
        Err(stop) => {
            span.in_scope(|| {
                tracing::warn!(reason = %stop.reason, message = %stop.message, "reconcile stopped");
            });
            status.conditions.push(condition(&stop));
            if status.sync.is_none() {
                status.sync = Some(SyncInfo {
                    status: "Unknown".into(),
                    ..SyncInfo::default()
                });
            }
            // A requested operation that could not even start still gets
            // its result, so that whoever asked is not left waiting.
            if let Some(op) = &operation
                && !done(&status, op)
            {
                let now = crate::units::now();
                status.operation_state = Some(OperationState {
                    phase: "Failed".into(),
                    id: Some(op.id.clone()),
                    initiated_by: op.initiated_by.clone(),
                    dry_run: op.sync.dry_run,
                    message: Some(stop.to_string()),
                    started_at: Some(now.clone()),
                    finished_at: Some(now),
                    ..OperationState::default()
                });
            }
        }
    }
    if let Some(stop) = &invalid_operation {
        status.conditions.push(condition(stop));
    }
    status.observed_generation = app.metadata.generation;
    keep_transition_times(&mut status, app.status.as_ref());
    // A status that says what the stored one says is not written again
    // (a resync at rest costs no request); `reconciledAt` is refreshed at
    // least every `status_heartbeat`.
    if needs_write(&status, app.status.as_ref(), ctx.config.status_heartbeat) {
        status.reconciled_at = Some(crate::units::now());
        let patch =
            json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Application", "status": status});
        apps.patch_status(
            &name,
            &PatchParams::apply("kiln-controller").force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(|source| ReconcileError {
            app: name.clone(),
            source,
        })?;
    }
    // After the status: the watch event of the removal then carries it.
    if let Some(raw) = &raw_operation {
        clear_annotation(&apps, &name, OPERATION_ANNOTATION, raw).await;
    }
    Ok(after.map_or_else(|| requeue(&ctx.config), Action::requeue))
}

/// Why a sync is about to happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trigger {
    /// A person asked (`kiln app sync`, `kiln app rollback`).
    Operation,
    /// Automated sync of a revision not synced yet.
    NewRevision,
    /// Automated sync of drift at the revision already synced.
    SelfHeal,
}

/// The work; `Ok` carries an earlier requeue when one is needed, `Err` is
/// the condition to record.
async fn run(
    app: &Application,
    ctx: &Context,
    status: &mut ApplicationStatus,
    operation: Option<&Operation>,
) -> Result<Option<Duration>, Stop> {
    let config = &ctx.config;
    let name = app.metadata.name.clone().unwrap_or_default();
    let automated = app
        .spec
        .sync_policy
        .as_ref()
        .and_then(|p| p.automated.clone());
    let wanted = operation.and_then(|op| op.sync.revision.clone());
    if let Some(revision) = &wanted
        && automated.is_some()
        && *revision != app.spec.source.target_revision
    {
        return Err(Stop::new(
            Reason::AutomatedSyncEnabled,
            format!(
                "cannot sync to revision {revision:?}: automated sync is enabled and follows targetRevision {:?}; disable spec.syncPolicy.automated first",
                app.spec.source.target_revision
            ),
        ));
    }
    let span = tracing::Span::current();
    span.record("phase", "compare");
    let cmp = compare(app, ctx, &CompareTo { revision: wanted }).await?;
    let commit = cmp.commit.clone();
    if cmp.objects.iter().any(|object| {
        crate::sync::plan::DeletionHook::ALL
            .into_iter()
            .any(|hook| crate::sync::plan::is_deletion_hook(object, hook))
    }) {
        let namespace = app
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| config.namespace.clone());
        let apps: Api<Application> = Api::namespaced(ctx.client.clone(), &namespace);
        super::deletion::add_hook_finalizers(app, &apps, &cmp.objects).await;
    }

    status.policy = Some(cmp.policy.clone());
    ctx.policy_reports
        .publish(
            app,
            &cmp.target,
            &cmp.policy,
            &cmp.objects,
            &ctx.metrics,
            &config.manager,
        )
        .await;
    for plugin in &cmp.insecure_plugins {
        // Visible wherever it is used, not only in the controller's log.
        status.conditions.push(Condition {
            type_: Reason::VerificationDisabled.condition().to_string(),
            status: "True".into(),
            reason: Some(Reason::VerificationDisabled.to_string()),
            message: Some(format!(
                "plugin {plugin:?} runs unverified (its spec.verify says insecure: true); for development only"
            )),
            last_transition_time: Some(crate::units::now()),
        });
    }
    let in_sync = cmp.diff.in_sync();
    status.sync = Some(SyncInfo {
        status: if in_sync { "Synced" } else { "OutOfSync" }.into(),
        revision: Some(commit.clone()),
        compared_to: None,
    });
    status.resources = cmp
        .diff
        .objects
        .iter()
        .map(|o| ResourceStatus {
            group: o.key.group.clone(),
            kind: o.key.kind.clone(),
            namespace: o.key.namespace.clone(),
            name: o.key.name.clone(),
            status: o.status.to_string(),
            health: None,
        })
        .collect();
    if cmp.blocked {
        // The first thing that blocks, so that the condition alone says
        // what to fix (a finding, or why a policy could not run: its
        // source's repository unreachable, its settings invalid...).
        let first = cmp
            .policy
            .findings
            .iter()
            .find(|f| f.mode == "enforce" && f.severity == "error")
            .map(|f| match &f.object {
                Some(object) => format!(": {}: {object}: {}", f.policy, f.message),
                None => format!(": {}: {}", f.policy, f.message),
            })
            .unwrap_or_default();
        return Err(Stop::new(
            Reason::EnforcedPolicyFailed,
            format!("an enforced policy failed; nothing was applied (see status.policy){first}"),
        ));
    }

    // Sync: when asked, or when automated and needed (a new revision, or
    // drift with self-heal). A sync abandoned at shutdown is not an attempt.
    let last_attempt = status
        .operation_state
        .as_ref()
        .filter(|o| o.phase != "Terminated")
        .and_then(|o| o.revision.clone());
    let trigger = match (&operation, &automated) {
        (Some(_), _) => Some(Trigger::Operation),
        (None, Some(_)) if in_sync => None,
        (None, Some(_)) if last_attempt.as_deref() != Some(commit.as_str()) => {
            Some(Trigger::NewRevision)
        }
        (None, Some(a)) if a.self_heal || cmp.diff.count(SyncStatus::Missing) > 0 => {
            Some(Trigger::SelfHeal)
        }
        _ => None,
    };
    let mut after = None;
    // What a sync wrote, by object: read for health when the watches do
    // not have it yet, instead of asking the API server again.
    let mut written = HashMap::new();
    let empty = cmp.objects.is_empty() && !automated.as_ref().is_some_and(|a| a.allow_empty);
    let trigger = trigger.filter(|t| *t == Trigger::Operation || !empty);
    if let Some(trigger) = trigger {
        let admitted = match trigger {
            Trigger::SelfHeal => {
                let mut reverts = ctx.reverts.lock().unwrap_or_else(|e| e.into_inner());
                let entry = reverts.entry(name.clone()).or_default();
                entry.admit(&config.self_heal_backoff, Instant::now())
            }
            _ => {
                ctx.reverts
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&name);
                Ok(())
            }
        };
        if trigger == Trigger::SelfHeal {
            let result = if admitted.is_ok() {
                "synced"
            } else {
                "backed_off"
            };
            ctx.metrics
                .self_heals
                .get_or_create(&vec![("result".into(), result.into())])
                .inc();
        }
        match admitted {
            Err(wait) => {
                tracing::info!(
                    ?wait,
                    "drift came back soon after a revert; self-heal backs off"
                );
                after = Some(wait.min(config.resync));
            }
            Ok(()) => {
                span.record("phase", "sync");
                written = sync(ctx, status, &cmp, trigger, operation).await?;
            }
        }
    }

    // Health of what is live.
    span.record("phase", "health");
    let mut healths = Vec::new();
    for resource in &mut status.resources {
        let object = cmp.objects.iter().find(|o| {
            let key = ObjectKey::of(o);
            key.kind == resource.kind && key.name == resource.name && key.group == resource.group
        });
        let Some(object) = object else { continue };
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let cluster = &cmp.target.cluster;
        let health = match cluster.resolve(api_version, &resource.kind).await {
            Ok(resolved) => {
                // The status's namespace is the one applied (the rendered
                // object may name none).
                let key = ObjectKey {
                    namespace: resource.namespace.clone(),
                    ..ObjectKey::of(object)
                };
                // From the watch's cache, or what the sync wrote; the API
                // server when neither has it.
                let cached = match ctx.live.get(&cmp.target.server, &resolved, &key).await {
                    Some(live) => Some(live),
                    None => written.remove(&key),
                };
                let live = match cached {
                    Some(live) => Ok(Some(live)),
                    None => cluster
                        .api(&resolved, resource.namespace.as_deref())
                        .get_opt(&resource.name)
                        .await
                        .map(|o| o.map(|o| serde_json::to_value(o).unwrap_or_default())),
                };
                match live {
                    Ok(Some(live)) => health::assess(&live).status,
                    Ok(None) => Health::Missing,
                    Err(_) => Health::Unknown,
                }
            }
            Err(_) => Health::Missing,
        };
        resource.health = Some(health.to_string());
        healths.push(health);
    }
    status.health = Some(HealthInfo {
        status: health::aggregate(healths).to_string(),
        message: None,
    });
    Ok(after)
}

/// Syncs a comparison and records the operation in the status; returns
/// what the sync wrote, by object.
async fn sync(
    ctx: &Context,
    status: &mut ApplicationStatus,
    cmp: &super::compare::Comparison,
    trigger: Trigger,
    operation: Option<&Operation>,
) -> Result<HashMap<ObjectKey, Value>, Stop> {
    let mut options = cmp.options.clone();
    if let Some(op) = operation {
        options.prune = op.sync.prune;
        options.dry_run = op.sync.dry_run;
    }
    let dry_run = options.dry_run;
    let prune = options.prune;
    tracing::info!(?trigger, dry_run, "syncing");
    let started = crate::units::now();
    let result = cmp
        .engine(options)
        .with_interrupt(ctx.shutdown.clone())
        .sync(cmp.objects.clone())
        .await
        .map_err(|e| Stop::new(Reason::SyncFailed, crate::text::chain(&e)))?;
    let phase = match result.outcome {
        Outcome::Succeeded => "Succeeded",
        Outcome::Terminated => "Terminated",
        _ => "Failed",
    };
    ctx.metrics
        .syncs
        .get_or_create(&vec![("outcome".into(), phase.to_lowercase())])
        .inc();
    status.operation_state = Some(OperationState {
        phase: phase.into(),
        id: operation.map(|op| op.id.clone()),
        initiated_by: Some(match operation {
            Some(op) => op.initiated_by.clone().unwrap_or_else(|| "user".into()),
            None => "automated".into(),
        }),
        dry_run,
        message: Some(result.message.clone()),
        revision: Some(cmp.commit.clone()),
        resources: result
            .objects
            .iter()
            .map(|o| ResourceResult {
                group: o.key.group.clone(),
                kind: o.key.kind.clone(),
                namespace: o.key.namespace.clone(),
                name: o.key.name.clone(),
                action: o.action.to_string(),
                message: Some(o.message.clone()).filter(|m| !m.is_empty()),
            })
            .collect(),
        started_at: Some(started),
        finished_at: Some(crate::units::now()),
    });
    match result.outcome {
        Outcome::Succeeded => {}
        Outcome::Terminated => {
            return Err(Stop::new(
                Reason::SyncTerminated,
                format!(
                    "the controller stopped during the sync: {}; the next reconcile syncs again",
                    result.message
                ),
            ));
        }
        _ => return Err(Stop::new(Reason::SyncFailed, result.message)),
    }
    if dry_run {
        return Ok(HashMap::new());
    }
    let id = status.history.last().map_or(0, |h| h.id) + 1;
    status.history.push(HistoryEntry {
        id,
        revision: cmp.commit.clone(),
        deployed_at: crate::units::now(),
    });
    let excess = status
        .history
        .len()
        .saturating_sub(ctx.config.history_limit);
    status.history.drain(..excess);
    let synced = result.count(SyncAction::Failed) == 0;
    status.sync = Some(SyncInfo {
        status: if synced { "Synced" } else { "OutOfSync" }.into(),
        revision: Some(cmp.commit.clone()),
        compared_to: None,
    });
    // Pruned objects are gone; extraneous ones stay reported otherwise.
    status
        .resources
        .retain(|r| !(prune && r.status == "Extraneous"));
    for resource in &mut status.resources {
        if resource.status != "Extraneous" {
            resource.status = "Synced".into();
        }
    }
    Ok(result.written.0)
}
