//! An Application being deleted, finalizer by finalizer, as Argo CD does:
//!
//! 1. [`PRE_DELETE_FINALIZER`] (added by a reconcile that rendered
//!    PreDelete hooks: Argo CD's `PreDelete`, Helm's `pre-delete`): the
//!    hooks are rendered again from the target revision, held to the
//!    project like a sync's objects, created, and judged by their health;
//!    the finalizer goes once every one completed.
//!    [`PRE_DELETE_CLEANUP_FINALIZER`]: then they are deleted as their
//!    delete policies say.
//! 2. [`RESOURCES_FINALIZER`]: the tracked resources are deleted (cascade),
//!    except those that say `Delete=false` or `helm.sh/resource-policy:
//!    keep`, and those the project does not allow; the finalizer goes once
//!    the rest are gone.
//! 3. [`POST_DELETE_FINALIZER`] and [`POST_DELETE_CLEANUP_FINALIZER`]: the
//!    same as 1. for the PostDelete hooks (Argo CD's `PostDelete`, Helm's
//!    `post-delete`), once the resources are gone.
//!
//! A hook that failed, or ran longer than the health timeout, stops the
//! deletion with a `DeletionError` condition naming it; the finalizer
//! stays, the failed hook is deleted and the next try (at the next resync,
//! at most 30 s later) runs it again, as Argo CD 3 does. A controller
//! restarted between a hook's completion and its cleanup never runs it
//! twice: the two finalizers record where the deletion stands.
//!
//! No step waits in place: each reconcile does one round and requeues, so
//! that a deletion never holds a worker the other Applications need.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::context::Context;
use super::context::ReconcileError;
use super::stages::compare::{CompareTo, compare};
use crate::api::{
    Application, Condition, POST_DELETE_CLEANUP_FINALIZER, POST_DELETE_FINALIZER,
    PRE_DELETE_CLEANUP_FINALIZER, PRE_DELETE_FINALIZER, RESOURCES_FINALIZER,
};
use crate::condition::Reason;
use crate::sync::plan::DeletionHook;
use crate::sync::{Action as SyncAction, Application as SyncApp, Engine, HookRound, SyncOptions};

/// How soon a deletion looks again while objects are being deleted or
/// hooks run.
pub const DELETION_POLL: Duration = Duration::from_secs(2);
/// The longest a deletion that cannot go on (its cluster or project
/// unreadable, a hook failed, the hooks could not be rendered) waits
/// before it tries again; a failed hook is retried at the next resync when
/// that comes sooner.
pub const DELETION_RETRY: Duration = Duration::from_secs(30);

/// Finalizes an Application being deleted (see the module's doc).
pub async fn finalize(
    app: &Application,
    ctx: &Context,
    apps: &Api<Application>,
) -> Result<Action, ReconcileError> {
    let name = app.metadata.name.clone().unwrap_or_default();
    ctx.read_paths.forget(&name);
    ctx.cluster_reads.forget(&name);
    ctx.live.forget(&name);
    let finalizers = app.metadata.finalizers.clone().unwrap_or_default();
    let has = |f: &str| finalizers.iter().any(|g| g == f);
    let ours = [
        PRE_DELETE_FINALIZER,
        PRE_DELETE_CLEANUP_FINALIZER,
        RESOURCES_FINALIZER,
        POST_DELETE_FINALIZER,
        POST_DELETE_CLEANUP_FINALIZER,
    ];
    if !ours.iter().any(|f| has(f)) {
        return Ok(Action::await_change());
    }
    let (resources, post_delete) = (has(RESOURCES_FINALIZER), has(POST_DELETE_FINALIZER));
    let options = SyncOptions {
        prune: true,
        manager: ctx.config.manager.clone(),
        ..SyncOptions::default()
    };
    let target = SyncApp {
        name: name.clone(),
        namespace: app.spec.destination.namespace.clone(),
    };
    let destination = match ctx.destinations.resolve(&app.spec.destination).await {
        Ok(destination) => destination,
        Err(e) => {
            // Its resources cannot be found without the cluster; the
            // finalizers stay until the cluster is registered again (or a
            // person removes them, leaving the resources in place).
            tracing::warn!(error = %e, "cannot delete the application's resources; retrying in 30s");
            return Ok(Action::requeue(DELETION_RETRY));
        }
    };
    if let Err(e) = ctx
        .policy_reports
        .remove(app, &destination, &ctx.metrics)
        .await
    {
        tracing::warn!(error = %crate::text::chain(&e), "could not delete the application's PolicyReport; retrying");
        return Ok(Action::requeue(Duration::from_secs(5)));
    }
    let (guard, project_missing) = match guard(app, ctx, &destination).await {
        Ok(guard) => guard,
        Err(wait) => return Ok(wait),
    };
    let engine = Engine::new(&destination.cluster, target, options.clone()).with_prune_guard(guard);

    if has(PRE_DELETE_FINALIZER) {
        return hooks_stage(
            app,
            ctx,
            apps,
            DeletionHook::PreDelete,
            options,
            project_missing,
        )
        .await;
    }
    if has(PRE_DELETE_CLEANUP_FINALIZER) {
        return cleanup_stage(app, apps, &engine, DeletionHook::PreDelete).await;
    }
    if resources {
        return delete_resources(app, apps, &engine).await;
    }

    if post_delete {
        return hooks_stage(
            app,
            ctx,
            apps,
            DeletionHook::PostDelete,
            options,
            project_missing,
        )
        .await;
    }
    cleanup_stage(app, apps, &engine, DeletionHook::PostDelete).await
}

/// What a deletion may delete: what the project allows, like what was
/// applied, and whether the project is missing. An Application naming a
/// project that does not exist deletes nothing and runs no hook: otherwise
/// anyone recreating an Application under an old name with a made-up
/// project could delete what it once wrote anywhere. `Err` is when to look
/// again (the project could not be read).
async fn guard(
    app: &Application,
    ctx: &Context,
    destination: &super::destination::Target,
) -> Result<(crate::sync::PruneGuard, bool), Action> {
    match super::stages::admit::load_project(app, ctx).await {
        Ok(project) => Ok((
            super::stages::admit::prune_guard(
                project,
                &destination.server,
                &destination.name,
                &ctx.config.namespace,
            ),
            false,
        )),
        Err(stop) if stop.reason == Reason::ProjectNotFound => {
            tracing::warn!(project = %app.spec.project, "the project does not exist; the application's resources are left in place");
            let project = app.spec.project.clone();
            Ok((
                Arc::new(move |_, _| Err(format!("project {project:?} does not exist"))),
                true,
            ))
        }
        Err(stop) => {
            tracing::warn!(error = %stop, "cannot read the project; retrying in 30s");
            Err(Action::requeue(DELETION_RETRY))
        }
    }
}

/// Deletes the Application's resources; its resources finalizer goes once
/// they are gone.
async fn delete_resources(
    app: &Application,
    apps: &Api<Application>,
    engine: &Engine<'_>,
) -> Result<Action, ReconcileError> {
    let deletion = match engine.delete_objects().await {
        Ok(deletion) => deletion,
        Err(e) => {
            tracing::warn!(error = %crate::text::chain(&e), "could not delete the application's resources; retrying");
            return Ok(Action::requeue(Duration::from_secs(5)));
        }
    };
    for left in deletion
        .objects
        .iter()
        .filter(|o| matches!(o.action, SyncAction::Kept | SyncAction::PruneSkipped))
    {
        tracing::info!(object = %left.key, reason = %left.message, "left in place");
    }
    if deletion.remaining > 0 {
        tracing::info!(
            remaining = deletion.remaining,
            "waiting for the application's resources to be gone"
        );
        return Ok(Action::requeue(DELETION_POLL));
    }
    tracing::info!(
        left = deletion.count(SyncAction::Kept) + deletion.count(SyncAction::PruneSkipped),
        "the application's resources are gone"
    );
    remove_finalizers(app, apps, &[RESOURCES_FINALIZER]).await
}

/// The finalizer that holds an Application until its `hook` hooks
/// completed, and the one that holds it until they are cleaned up.
fn finalizers_of(hook: DeletionHook) -> [&'static str; 2] {
    match hook {
        DeletionHook::PreDelete => [PRE_DELETE_FINALIZER, PRE_DELETE_CLEANUP_FINALIZER],
        DeletionHook::PostDelete => [POST_DELETE_FINALIZER, POST_DELETE_CLEANUP_FINALIZER],
    }
}

/// One round of the `hook` hooks: rendered again from the target revision
/// (as Argo CD renders them) and held to the project like everything a
/// sync writes, then run ([`Engine::run_deletion_hooks`]).
async fn hooks_stage(
    app: &Application,
    ctx: &Context,
    apps: &Api<Application>,
    hook: DeletionHook,
    options: SyncOptions,
    project_missing: bool,
) -> Result<Action, ReconcileError> {
    let name = app.metadata.name.clone().unwrap_or_default();
    let [finalizer, cleanup] = finalizers_of(hook);
    if project_missing {
        return remove_finalizers(app, apps, &[finalizer, cleanup]).await;
    }
    let compared = compare(app, ctx, &CompareTo { revision: None }).await;
    ctx.live.forget(&name);
    ctx.read_paths.forget(&name);
    ctx.cluster_reads.forget(&name);
    let cmp = match compared {
        Ok(cmp) => cmp,
        Err(stop) => {
            let message = format!(
                "cannot run the {hook} hooks: {stop}; the finalizer {finalizer} stays (remove it to delete the Application without them)"
            );
            return fail(apps, ctx, &name, stop.reason, message).await;
        }
    };
    if !cmp
        .objects
        .iter()
        .any(|object| crate::sync::plan::is_deletion_hook(object, hook))
    {
        return remove_finalizers(app, apps, &[finalizer, cleanup]).await;
    }
    if cmp.blocked {
        let message = format!(
            "an enforced policy failed: the {hook} hooks are not run (see status.policy); the finalizer {finalizer} stays"
        );
        return fail(apps, ctx, &name, Reason::DeletionPolicyBlocked, message).await;
    }
    let engine = Engine::new(&cmp.target.cluster, cmp.sync_app.clone(), options)
        .with_prune_guard(cmp.prune_guard.clone());
    let round = engine
        .run_deletion_hooks(hook, cmp.objects.clone(), ctx.config.health_timeout)
        .await;
    match round {
        Ok(HookRound::None | HookRound::Succeeded) => {
            tracing::info!(%hook, "the hooks completed");
            remove_finalizers(app, apps, &[finalizer]).await
        }
        Ok(HookRound::Running(waiting)) => {
            tracing::info!(%hook, %waiting, "waiting for the hooks");
            Ok(Action::requeue(DELETION_POLL))
        }
        Ok(HookRound::Failed(why)) => {
            let message = format!(
                "{hook} hook {why}; the finalizer {finalizer} stays: the hooks run again at the next try, or remove the finalizer to give up"
            );
            let reason = match hook {
                DeletionHook::PreDelete => Reason::PreDeleteHookFailed,
                DeletionHook::PostDelete => Reason::PostDeleteHookFailed,
            };
            fail(apps, ctx, &name, reason, message).await
        }
        Err(e) => {
            let message = format!("cannot run the {hook} hooks: {}", crate::text::chain(&e));
            fail(apps, ctx, &name, Reason::DeletionHookInvalid, message).await
        }
    }
}

/// Deletes the `hook` hooks as their delete policies say, then the cleanup
/// finalizer.
async fn cleanup_stage(
    app: &Application,
    apps: &Api<Application>,
    engine: &Engine<'_>,
    hook: DeletionHook,
) -> Result<Action, ReconcileError> {
    if let Err(e) = engine.cleanup_deletion_hooks(hook).await {
        tracing::warn!(%hook, error = %crate::text::chain(&e), "could not delete the hooks; retrying");
        return Ok(Action::requeue(Duration::from_secs(5)));
    }
    let [_, cleanup] = finalizers_of(hook);
    remove_finalizers(app, apps, &[cleanup]).await
}

/// Records a deletion that cannot go on as a `DeletionError` condition
/// (the finalizers stay) and tries again later.
async fn fail(
    apps: &Api<Application>,
    ctx: &Context,
    name: &str,
    reason: Reason,
    message: String,
) -> Result<Action, ReconcileError> {
    tracing::warn!(%reason, %message, "the deletion cannot go on");
    let condition = Condition {
        type_: crate::condition::Condition::DeletionError.to_string(),
        status: "True".into(),
        reason: Some(reason.to_string()),
        message: Some(message),
        last_transition_time: Some(crate::units::now()),
    };
    let patch = json!({"status": {"conditions": [condition]}});
    apps.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| ReconcileError {
            app: name.to_owned(),
            source,
        })?;
    Ok(Action::requeue(retry_after(ctx)))
}

/// How soon a deletion that cannot go on tries again: at the next resync,
/// at most [`DELETION_RETRY`] later.
fn retry_after(ctx: &Context) -> Duration {
    ctx.config.resync.min(DELETION_RETRY)
}

/// Removes `gone` from the Application's finalizers, if it is still the
/// version read (a newer one is reconciled again).
async fn remove_finalizers(
    app: &Application,
    apps: &Api<Application>,
    gone: &[&str],
) -> Result<Action, ReconcileError> {
    let name = app.metadata.name.clone().unwrap_or_default();
    let remaining: Vec<String> = app
        .metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| !gone.contains(&f.as_str()))
        .cloned()
        .collect();
    let patch = json!({"metadata": {"finalizers": remaining, "resourceVersion": app.metadata.resource_version}});
    apps.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| ReconcileError { app: name, source })?;
    Ok(Action::await_change())
}

/// Adds the finalizers of the deletion hooks among `objects` (an
/// Application's rendered objects) that the Application lacks, as Argo CD
/// adds its own: its deletion then runs them. Best effort: a failure is
/// logged, and the next reconcile tries again.
pub async fn add_hook_finalizers(
    app: &Application,
    apps: &Api<Application>,
    objects: &[serde_json::Value],
) {
    let mut finalizers = app.metadata.finalizers.clone().unwrap_or_default();
    let before = finalizers.len();
    for hook in DeletionHook::ALL {
        if !objects
            .iter()
            .any(|object| crate::sync::plan::is_deletion_hook(object, hook))
        {
            continue;
        }
        for wanted in finalizers_of(hook) {
            if !finalizers.iter().any(|f| f == wanted) {
                finalizers.push(wanted.to_owned());
            }
        }
    }
    if finalizers.len() == before {
        return;
    }
    let name = app.metadata.name.clone().unwrap_or_default();
    let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": app.metadata.resource_version}});
    match apps
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => tracing::info!("added the deletion hooks' finalizers"),
        Err(error) => {
            tracing::warn!(%error, "could not add the deletion hooks' finalizers; the next reconcile tries again");
        }
    }
}
