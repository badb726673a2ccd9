//! One reconcile of one Application: compare ([`compare`](mod@super::stages::compare)) → sync
//! (when automated, or when a person asked for it) → status. Every failure
//! becomes a condition with a reason a person can act on; nothing here
//! crashes the controller or applies half of something without saying so.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::context::{Context, ControllerConfig, ReconcileError};
use super::stages::compare::{CompareTo, Comparison, compare};
use super::stages::{health, status, sync, trigger};
use crate::api::ApplicationStatus;
use crate::api::{Application, OPERATION_ANNOTATION, Operation, REFRESH_ANNOTATION};
use crate::condition::{Reason, Stop};
use crate::source::git::RepoUrl;

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
    note_refresh(&app, &ctx, &namespace, &name).await;
    let mut status = app.status.clone().unwrap_or_default();
    status.conditions.clear();
    let request = Request::read(&app, &status);
    let started = std::time::Instant::now();
    let outcome = tracing::Instrument::instrument(
        run(&app, &ctx, &mut status, request.operation.as_ref()),
        span.clone(),
    )
    .await;
    ctx.metrics
        .observe_reconcile(started.elapsed(), outcome.is_ok());
    let after = match outcome {
        Ok(wait) => wait,
        Err(stop) => {
            span.in_scope(|| {
                tracing::warn!(reason = %stop.reason, message = %stop.message, "reconcile stopped");
            });
            status::record_stop(&mut status, &stop, request.operation.as_ref());
            None
        }
    };
    if let Some(stop) = &request.invalid {
        status.conditions.push(status::condition(stop));
    }
    status.observed_generation = app.metadata.generation;
    status::write(
        &apps,
        &name,
        status,
        app.status.as_ref(),
        ctx.config.status_heartbeat,
    )
    .await
    .map_err(|source| ReconcileError {
        app: name.clone(),
        source,
    })?;
    // After the status: the watch event of the removal then carries it.
    if let Some(raw) = &request.raw {
        clear_annotation(&apps, &name, OPERATION_ANNOTATION, raw).await;
    }
    Ok(after.map_or_else(|| requeue(&ctx.config), Action::requeue))
}

/// A new refresh request (`kiln app refresh`, a webhook) asks the server
/// for its refs now rather than reusing a lookup a few seconds old. The
/// annotation stays (removing it would cost a write and a reconcile per
/// refresh); the value last acted on is remembered instead.
async fn note_refresh(app: &Application, ctx: &Context, namespace: &str, name: &str) {
    let Some(value) = app
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REFRESH_ANNOTATION))
    else {
        return;
    };
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

/// The operation an Application's annotation asks for.
struct Request {
    /// The annotation as written (removed once acted on).
    raw: Option<String>,
    /// The operation, unless already carried out.
    operation: Option<Operation>,
    /// Why the annotation could not be read.
    invalid: Option<Stop>,
}

impl Request {
    fn read(app: &Application, status: &ApplicationStatus) -> Self {
        let raw = app
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(OPERATION_ANNOTATION))
            .cloned();
        match requested(app) {
            Ok(operation) => Self {
                raw,
                operation: operation
                    .map(|(_, op)| op)
                    .filter(|op| !status::carried_out(status, op)),
                invalid: None,
            },
            Err(stop) => Self {
                raw,
                operation: None,
                invalid: Some(stop),
            },
        }
    }
}

/// The work: compare → status → (sync) → health. `Ok` carries an earlier
/// requeue when one is needed, `Err` is the condition to record.
async fn run(
    app: &Application,
    ctx: &Context,
    status: &mut ApplicationStatus,
    operation: Option<&Operation>,
) -> Result<Option<Duration>, Stop> {
    let config = &ctx.config;
    let name = app.metadata.name.clone().unwrap_or_default();
    let revision = trigger::wanted_revision(app, operation)?;
    let span = tracing::Span::current();
    span.record("phase", "compare");
    let cmp = compare(app, ctx, &CompareTo { revision }).await?;
    add_hook_finalizers(app, ctx, &cmp).await;
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
    status::record_comparison(status, &cmp);
    if cmp.blocked {
        return Err(status::blocked(&cmp.policy));
    }
    let mut after = None;
    let mut written = Default::default();
    let decided = trigger::decide(
        app,
        status,
        operation,
        &cmp.commit,
        &cmp.diff,
        cmp.objects.len(),
    );
    if let Some(decided) = decided {
        let admitted = trigger::admit(
            &ctx.reverts,
            &config.self_heal_backoff,
            &ctx.metrics,
            &name,
            decided,
        );
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
                let sync_ctx = sync::SyncContext {
                    shutdown: &ctx.shutdown,
                    metrics: &ctx.metrics,
                    history_limit: config.history_limit,
                };
                written = sync::sync(sync_ctx, status, &cmp, decided, operation).await?;
            }
        }
    }
    span.record("phase", "health");
    health::assess(status, &cmp, &ctx.live, written).await;
    Ok(after)
}

/// Objects with deletion hooks need the Application's hook finalizers, so
/// that its deletion runs them.
async fn add_hook_finalizers(app: &Application, ctx: &Context, cmp: &Comparison) {
    let hooked = cmp.objects.iter().any(|object| {
        crate::sync::plan::DeletionHook::ALL
            .into_iter()
            .any(|hook| crate::sync::plan::is_deletion_hook(object, hook))
    });
    if !hooked {
        return;
    }
    let namespace = app
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| ctx.config.namespace.clone());
    let apps: Api<Application> = Api::namespaced(ctx.client.clone(), &namespace);
    super::deletion::add_hook_finalizers(app, &apps, &cmp.objects).await;
}
