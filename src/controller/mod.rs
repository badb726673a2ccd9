//! The Application controller: keeps clusters equal to Git, continuously.
//!
//! [`reconcile`] does one pass for one Application; [`run`] drives it for
//! every Application with kube-runtime's controller: on a timer with jitter,
//! when an Application changes, and when one is annotated
//! `kiln.dev/refresh`.

pub mod cache;
pub mod http;
pub mod leader;
pub mod project;
pub mod reconcile;

use std::sync::Arc;

use futures_util::StreamExt as _;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt as _, reflector, watcher};

use crate::api::Application;
pub use reconcile::{Context, ControllerConfig, ReconcileError, reconcile};

fn error_policy(app: Arc<Application>, error: &ReconcileError, _ctx: Arc<Context>) -> Action {
    tracing::warn!(app = app.metadata.name.as_deref().unwrap_or_default(), error = %error, "reconcile failed; retrying in 10s");
    Action::requeue(std::time::Duration::from_secs(10))
}

/// What makes an Application worth a reconcile when it changes: its spec
/// (generation), its annotations (`kiln.dev/refresh`), its finalizers and
/// its deletion. Not its status: the controller writes that itself, and
/// reacting to it would reconcile every application in a loop.
fn trigger(app: &Application) -> Option<u64> {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    app.metadata.generation.hash(&mut hasher);
    app.metadata.annotations.hash(&mut hasher);
    app.metadata.finalizers.hash(&mut hasher);
    app.metadata.deletion_timestamp.is_some().hash(&mut hasher);
    Some(hasher.finish())
}

/// Runs the controller until `shutdown` resolves.
pub async fn run(
    ctx: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let apps: Api<Application> = Api::namespaced(ctx.client.clone(), &ctx.config.namespace);
    let (reader, writer) = reflector::store();
    let changes = watcher(apps, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .predicate_filter(trigger, Default::default());
    Controller::for_stream(changes, reader)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "controller event");
            }
        })
        .await;
}
