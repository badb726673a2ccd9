//! The Application controller: keeps clusters equal to Git, continuously.
//!
//! [`reconcile`](fn@reconcile) does one pass for one Application; [`run`] drives it for
//! every Application with kube-runtime's controller: on a timer with jitter,
//! when an Application changes (including the `kiln.dev/refresh` and
//! `kiln.dev/operation` annotations), and when something it manages
//! changes in a destination cluster ([`live`]).

pub mod appset;
pub mod chart_access;
pub mod chart_source;
pub mod cluster_view;
pub mod context;
pub mod deletion;
pub mod destination;
pub mod http;
pub mod known_hosts;
pub mod leader;
pub mod live;
pub mod metrics;
pub mod plugins;
pub mod policy_report;
pub mod project;
pub mod random_seed;
pub mod read_paths;
pub mod reconcile;
pub mod renderer;
pub mod resources;
pub mod secrets;
pub mod shard;
pub mod stages;

use std::sync::Arc;

use futures_util::StreamExt as _;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt as _, reflector, watcher};

use crate::api::Application;
pub use crate::condition::Stop;
pub use crate::render::engine::CatalogConfig;
pub use context::ReconcileError;
pub use context::{Context, ControllerConfig, SelfHealBackoff};
pub use reconcile::reconcile;
pub use secrets::ControllerSecrets;
pub use stages::compare::{CompareTo, Comparison, compare};

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

/// Deletes the Git caches of repositories no Application has read for
/// [`ControllerConfig::git_cache_idle`], every tenth of that, until the
/// controller stops.
async fn evict_idle_repositories(ctx: Arc<Context>) {
    let idle = ctx.config.git_cache_idle;
    let mut every = tokio::time::interval((idle / 10).max(std::time::Duration::from_secs(1)));
    every.tick().await;
    while !ctx.shutdown.load(std::sync::atomic::Ordering::Relaxed) {
        every.tick().await;
        ctx.git.evict_idle(idle).await;
    }
}

/// How often the live watches are checked for one no Application needs:
/// a quarter of the grace period, within these bounds.
const SWEEP_BOUNDS: (std::time::Duration, std::time::Duration) = (
    std::time::Duration::from_millis(100),
    std::time::Duration::from_secs(30),
);

/// Stops the live watches no Application of this replica's shards has
/// needed for [`live::LiveConfig::grace`], until the controller stops.
/// `apps` is the controller's store of Applications: those gone, or of
/// shards this replica does not own, need nothing.
async fn stop_unneeded_watches(ctx: Arc<Context>, apps: reflector::Store<Application>) {
    use futures_util::FutureExt as _;
    let grace = ctx.config.live.grace;
    let every = (grace / 4).clamp(SWEEP_BOUNDS.0, SWEEP_BOUNDS.1);
    let mut ticks = tokio::time::interval(every);
    while !ctx.shutdown.load(std::sync::atomic::Ordering::Relaxed) {
        ticks.tick().await;
        // Not before the Applications are listed (all would seem gone).
        if !matches!(apps.wait_until_ready().now_or_never(), Some(Ok(()))) {
            continue;
        }
        let mine: std::collections::HashSet<String> = apps
            .state()
            .iter()
            .filter_map(|app| {
                let name = app.metadata.name.clone()?;
                let namespace = app.metadata.namespace.as_deref();
                let namespace = namespace.unwrap_or(&ctx.config.namespace);
                ctx.shards.owns_app(namespace, &name).then_some(name)
            })
            .collect();
        ctx.live.retain_apps(|app| mine.contains(app));
        ctx.cluster_reads.retain(&mine);
        ctx.live.stop_unneeded(grace);
    }
}

/// Runs the controller until `shutdown` resolves. Then no reconcile
/// starts; those running finish, their syncs ending after the current wave
/// ([`Context::shutdown`]).
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
    let flag = ctx.shutdown.clone();
    let stopping = tokio_util::sync::CancellationToken::new();
    let asked = stopping.clone();
    let shutdown = async move {
        shutdown.await;
        tracing::info!("stopping: running reconciles finish, syncs after their current wave");
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
        asked.cancel();
    };
    let config = kube::runtime::controller::Config::default()
        .concurrency(ctx.config.concurrency)
        // Live changes come in bursts (a Deployment's status moves several
        // times while it rolls out): one reconcile per burst.
        .debounce(std::time::Duration::from_millis(500));
    tokio::spawn(evict_idle_repositories(ctx.clone()));
    tokio::spawn(appset::run(ctx.clone(), ctx.config.appset_resync));
    tokio::spawn(stop_unneeded_watches(ctx.clone(), reader.clone()));
    let listed = reader.clone();
    let mut controller = Controller::for_stream(changes, reader).with_config(config);
    if let Some(live) = ctx.live.triggers() {
        controller = controller.reconcile_on(live);
    }
    // Sharded: the shard Leases are held beside the controller, and every
    // Application is reconciled when a shard is taken.
    let mut contending = None;
    if ctx.shards.config().shards > 1 {
        let (gained, taken) = tokio::sync::mpsc::unbounded_channel();
        contending = Some(tokio::spawn(ctx.shards.clone().contend(
            ctx.client.clone(),
            ctx.config.namespace.clone(),
            gained,
            ctx.shutdown.clone(),
        )));
        controller = controller
            .reconcile_all_on(tokio_stream::wrappers::UnboundedReceiverStream::new(taken));
    }
    let running = controller
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "controller event");
            }
        });
    // kube-runtime holds its runner until the Applications are listed, and
    // a graceful stop ends the watch that lists them: asked to stop before
    // that, it would wait forever. Nothing has run then, so nothing is cut.
    let before_listed = async move {
        use futures_util::FutureExt as _;
        stopping.cancelled().await;
        if !matches!(listed.wait_until_ready().now_or_never(), Some(Ok(()))) {
            tracing::info!("stopped before the Applications were listed");
            return;
        }
        std::future::pending::<()>().await;
    };
    tokio::select! {
        () = running => {}
        () = before_listed => {}
    }
    // The Leases held are released (after the reconciles running), so the
    // other replicas take the shards at once.
    if let Some(contending) = contending
        && let Err(e) = contending.await
    {
        tracing::warn!(error = %e, "the shard leases task failed");
    }
}
