//! One reconcile of one Application: compare ([`super::compare`]) → sync
//! (when automated, or when a person asked for it) → status. Every failure
//! becomes a condition with a reason a person can act on; nothing here
//! crashes the controller or applies half of something without saying so.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::compare::{CompareTo, Stop, compare};
use super::destination::Destinations;
use super::live::LiveWatches;
use super::secrets::ControllerSecrets;
use crate::api::{
    Application, ApplicationStatus, Condition, HealthInfo, HistoryEntry, OPERATION_ANNOTATION,
    Operation, OperationState, REFRESH_ANNOTATION, ResourceResult, ResourceStatus, SyncInfo,
};
use crate::cluster::Cluster;
use crate::diff::SyncStatus;
use crate::health::{self, Health};
use crate::manifest::ObjectKey;
use crate::plugin::PluginHost;
use crate::source::git::{GitSource, RepoUrl};
use crate::sync::{Action as SyncAction, Outcome};

/// How long self-heal waits before reverting the same drift again:
/// `duration × factor^(attempts − 1)`, at most `max`. Attempts are counted
/// while the drift keeps coming back within `max` of the last revert, so a
/// controller fighting Kiln over a field is reverted ever more slowly
/// instead of in a tight loop. Defaults: 2 s, ×3, 5 min (Argo CD's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SelfHealBackoff {
    /// The wait before the second revert.
    pub duration: Duration,
    /// How much longer each further wait is.
    pub factor: u32,
    /// The longest wait; drift after a quiet period this long starts over.
    pub max: Duration,
}

impl Default for SelfHealBackoff {
    fn default() -> Self {
        Self {
            duration: Duration::from_secs(2),
            factor: 3,
            max: Duration::from_secs(300),
        }
    }
}

impl SelfHealBackoff {
    /// The wait after `attempts` reverts of the same drift.
    pub fn delay(&self, attempts: u32) -> Duration {
        if attempts == 0 {
            return Duration::ZERO;
        }
        let factor = self.factor.max(1).saturating_pow(attempts - 1);
        self.duration.saturating_mul(factor).min(self.max)
    }
}

/// The self-heal reverts of one application.
#[derive(Clone, Copy, Debug, Default)]
struct Reverts {
    attempts: u32,
    last: Option<Instant>,
}

impl Reverts {
    /// `Ok` when a revert may happen at `now` (and counts it); otherwise
    /// how long to wait.
    fn admit(&mut self, backoff: &SelfHealBackoff, now: Instant) -> Result<(), Duration> {
        let since = self.last.map(|last| now.saturating_duration_since(last));
        if since.is_none_or(|since| since > backoff.max) {
            self.attempts = 0;
        }
        let wait = backoff.delay(self.attempts);
        if let Some(since) = since
            && since < wait
        {
            return Err(wait - since);
        }
        self.attempts += 1;
        self.last = Some(now);
        Ok(())
    }
}

/// How the controller runs. Defaults: namespace `kiln`, resync every 180 s.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// Where Applications, AppProjects, Plugins and the controller's
    /// Secrets live.
    pub namespace: String,
    /// How often every Application is reconciled (plus up to 10% jitter).
    pub resync: Duration,
    /// How long a sync waits for a wave to become healthy, and how long
    /// an Application's PostDelete hooks may run (from their creation)
    /// before its deletion stops with a condition. Default 5 minutes.
    pub health_timeout: Duration,
    /// How many synced revisions `status.history` keeps.
    pub history_limit: usize,
    /// The field manager of applied resources.
    pub manager: String,
    /// Where the render cache keeps its entries; `None`: memory only.
    pub render_cache_dir: Option<PathBuf>,
    /// Bytes of serialized renders the render cache keeps (in memory, and
    /// as much again at most on disk). Default: 256 MiB
    /// ([`super::cache::DEFAULT_CAPACITY`]).
    pub render_cache_size: u64,
    /// Where charts of `spec.source.chart` are unpacked (created `0700`);
    /// `None`: `kiln-charts-PID` in the system's temporary directory.
    pub chart_cache_dir: Option<PathBuf>,
    /// How many Applications reconcile at once (default 32).
    pub concurrency: u16,
    /// A repository no Application has read for this long leaves the Git
    /// cache (checked every tenth of it). Default: 24 h.
    pub git_cache_idle: Duration,
    /// How self-heal backs off from drift that keeps coming back.
    pub self_heal_backoff: SelfHealBackoff,
    /// Where plugins come from and how they are trusted.
    pub catalog: super::plugins::CatalogConfig,
    /// Whether Applications may use repositories on the controller's
    /// filesystem (`file://` URLs, plain paths). Default `false`: such a
    /// repository is refused with an `InvalidSpec` condition, since it
    /// would let any Application read what the controller can read. For
    /// local trials and tests only.
    pub allow_file_repositories: bool,
    /// How `ignoreDifferences` jq expressions run (worker processes, their
    /// deadline and memory).
    pub jq: crate::diff::JqConfig,
    /// The longest a status that did not change goes unwritten
    /// (`status.reconciledAt` is refreshed then): a resync at rest writes
    /// nothing. Default: 1 h.
    pub status_heartbeat: Duration,
    /// How Applications are split over controller replicas. Default: one
    /// shard.
    pub sharding: super::shard::ShardingConfig,
    /// How the clients of destination clusters pace and count their
    /// requests (the counts are served as `kiln_kube_requests_total`; give
    /// the controller's own cluster's client the same options).
    pub kube_client: crate::cluster::requests::ClientOptions,
    /// How the live watches are kept: stopped when unneeded, their caches
    /// within a byte budget.
    pub live: super::live::LiveConfig,
    /// Whether a missing random-seed key ([`super::random_seed`]) is made.
    /// Default `true` (the controller); `kiln app diff` only reads it, so
    /// that a person's kubeconfig never makes the installation's key.
    pub make_random_seed_key: bool,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            namespace: "kiln".into(),
            resync: Duration::from_secs(180),
            health_timeout: Duration::from_secs(300),
            history_limit: 10,
            manager: "kiln".into(),
            render_cache_dir: None,
            render_cache_size: super::cache::DEFAULT_CAPACITY,
            chart_cache_dir: None,
            concurrency: 32,
            git_cache_idle: Duration::from_secs(24 * 3600),
            self_heal_backoff: SelfHealBackoff::default(),
            catalog: super::plugins::CatalogConfig::default(),
            allow_file_repositories: false,
            jq: crate::diff::JqConfig::default(),
            status_heartbeat: Duration::from_secs(3600),
            sharding: super::shard::ShardingConfig::default(),
            kube_client: crate::cluster::requests::ClientOptions::default(),
            live: super::live::LiveConfig::default(),
            make_random_seed_key: true,
        }
    }
}

/// What every reconcile shares.
pub struct Context {
    /// The client of the controller's own cluster, where Applications live.
    pub client: kube::Client,
    /// Destination clusters: this one and those registered by Secrets.
    pub destinations: Destinations,
    /// Git.
    pub git: GitSource,
    /// The plugin host.
    pub host: PluginHost,
    /// Tunables.
    pub config: ControllerConfig,
    /// Metrics served on `/metrics`.
    pub metrics: super::http::Metrics,
    /// Renders reused while what they read holds.
    pub render_cache: super::cache::RenderCache,
    /// Policy reviews reused while what they depend on holds.
    pub review_cache: crate::policy::ReviewCache,
    /// What each Application's last render read (the webhook's filter).
    pub read_paths: super::read_paths::ReadPaths,
    /// Watches on managed kinds, which trigger reconciles on live changes.
    pub live: LiveWatches,
    /// Raised when the controller is stopping: syncs end after their
    /// current wave ([`Engine::with_interrupt`]).
    pub shutdown: Arc<AtomicBool>,
    /// The controller's labeled Secrets (repositories, clusters, registries).
    pub secrets: ControllerSecrets,
    /// Verified, compiled catalog plugins.
    pub catalog: super::plugins::Catalog,
    /// The worker processes of `ignoreDifferences` jq expressions.
    pub jq: crate::diff::Jq,
    /// The shards this replica owns.
    pub shards: Arc<super::shard::Shards>,
    /// The AppProjects of the controller's namespace, from a watch.
    pub projects: super::resources::Cached<crate::api::AppProject>,
    /// The Plugins of the controller's namespace, from a watch.
    pub plugins: super::resources::Cached<crate::api::Plugin>,
    /// The render server doing the source work, if any; `None`: this
    /// process renders ([`Context::with_render_server`]).
    pub render_server: Option<Arc<crate::render::remote::Pool>>,
    /// The SSH known hosts sent with remote renders.
    pub ssh_known_hosts: Option<Arc<dyn crate::source::git::KnownHostsSource>>,
    /// The Applications' PolicyReports and the findings gauge.
    pub policy_reports: super::policy_report::PolicyReports,
    /// Fetches the charts of `spec.source.chart` (made at the first one).
    charts: tokio::sync::OnceCell<crate::source::helm::ChartFetcher>,
    /// The key of the Helm plugin's random seeds (read at the first chart).
    random_seeds: tokio::sync::OnceCell<super::random_seed::RandomSeeds>,
    forget: std::sync::Mutex<std::collections::HashSet<String>>,
    reverts: std::sync::Mutex<HashMap<String, Reverts>>,
    refreshes: std::sync::Mutex<HashMap<String, String>>,
}

impl Context {
    /// A context. `secrets` holds the controller's repository and cluster
    /// Secrets (give the Git engine `secrets.repo_credentials()`).
    pub fn new(
        client: kube::Client,
        git: GitSource,
        host: PluginHost,
        config: ControllerConfig,
        secrets: ControllerSecrets,
    ) -> Self {
        let shards = super::shard::Shards::new(config.sharding.clone());
        let metrics = super::http::Metrics::with_kube_requests(config.kube_client.requests.clone());
        let render_cache = super::cache::RenderCache::new(config.render_cache_size);
        let render_cache = match &config.render_cache_dir {
            Some(dir) => render_cache.with_dir(dir),
            None => render_cache,
        };
        let local = Arc::new(Cluster::new(client.clone()));
        let projects = super::resources::Cached::watch(client.clone(), &config.namespace);
        let plugins = super::resources::Cached::watch(client.clone(), &config.namespace);
        Self {
            destinations: Destinations::new(
                local,
                &config.namespace,
                secrets.clone(),
                config.kube_client.clone(),
            ),
            catalog: super::plugins::Catalog::new(config.catalog.clone()),
            jq: crate::diff::Jq::new(config.jq.clone()),
            secrets,
            live: LiveWatches::new(
                &config.namespace,
                &config.manager,
                config.live.clone(),
                metrics.live.clone(),
            ),
            client,
            git,
            host,
            config,
            metrics,
            render_cache,
            review_cache: crate::policy::ReviewCache::default(),
            read_paths: super::read_paths::ReadPaths::default(),
            shutdown: Arc::new(AtomicBool::new(false)),
            shards,
            projects,
            plugins,
            render_server: None,
            ssh_known_hosts: None,
            policy_reports: super::policy_report::PolicyReports::default(),
            charts: tokio::sync::OnceCell::new(),
            random_seeds: tokio::sync::OnceCell::new(),
            forget: std::sync::Mutex::new(std::collections::HashSet::new()),
            reverts: std::sync::Mutex::new(HashMap::new()),
            refreshes: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// Forgets what the refs of `url` named (a hard refresh, a webhook):
    /// in this process's Git cache, and on the render server with the next
    /// request for that repository.
    pub async fn forget_refs(&self, url: &RepoUrl) {
        self.git.forget_refs(url).await;
        if self.render_server.is_some() {
            self.forget
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(url.to_string());
        }
    }

    /// The chart fetcher: Helm repository credentials from the repository
    /// Secrets (by URL prefix, as for Git), OCI credentials from the
    /// registry Secrets (refreshed on each call).
    pub(super) async fn charts(
        &self,
        registry: crate::artifact::RegistryCredentials,
    ) -> Result<&crate::source::helm::ChartFetcher, crate::source::helm::ChartError> {
        let fetcher = self
            .charts
            .get_or_try_init(|| async {
                let dir = self.config.chart_cache_dir.clone().unwrap_or_else(|| {
                    std::env::temp_dir().join(format!("kiln-charts-{}", std::process::id()))
                });
                crate::source::helm::ChartFetcher::new(
                    crate::source::helm::HelmConfig::new(dir),
                    Arc::new(self.secrets.repo_credentials()),
                    crate::artifact::RegistryCredentials::none(),
                )
            })
            .await?;
        fetcher.set_registry_credentials(registry);
        Ok(fetcher)
    }

    /// The `randomSeed` of the Application `namespace`/`name` for the Helm
    /// plugin, derived from the installation's key
    /// ([`super::random_seed`]; read, or made, at the first call).
    pub(super) async fn random_seed(
        &self,
        namespace: &str,
        name: &str,
        project: &str,
    ) -> Result<String, super::random_seed::SeedError> {
        let seeds = self
            .random_seeds
            .get_or_try_init(|| {
                super::random_seed::RandomSeeds::load(
                    self.client.clone(),
                    &self.config.namespace,
                    self.config.make_random_seed_key,
                )
            })
            .await?;
        Ok(seeds.for_application(namespace, name, project))
    }

    /// Whether the refs of `url` are to be resolved afresh (once).
    pub(super) fn take_forget(&self, url: &RepoUrl) -> bool {
        self.forget
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&url.to_string())
    }

    /// Sends every render to `server` instead of rendering in this
    /// process: Git, plugins and the render cache are then the render
    /// server's, and this process never loads a plugin.
    /// `known_hosts` (the configured SSH host keys) go with every request.
    pub fn with_render_server(
        mut self,
        server: Arc<crate::render::remote::Pool>,
        known_hosts: Option<Arc<dyn crate::source::git::KnownHostsSource>>,
    ) -> Self {
        self.render_server = Some(server);
        self.ssh_known_hosts = known_hosts;
        self
    }
}

/// Why a reconcile could not even record its result.
#[derive(Debug, thiserror::Error)]
#[error("cannot update the status of Application {app}")]
pub struct ReconcileError {
    /// The application.
    pub app: String,
    /// Why.
    #[source]
    pub source: kube::Error,
}

fn condition(stop: &Stop) -> Condition {
    Condition {
        type_: stop.kind.to_string(),
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
                "InvalidSpec",
                "InvalidOperation",
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
            "OperationError",
            "AutomatedSyncEnabled",
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
            type_: "InsecurePlugin".into(),
            status: "True".into(),
            reason: Some("VerificationDisabled".into()),
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
            "PolicyBlocked",
            "EnforcedPolicyFailed",
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
        .map_err(|e| Stop::new("SyncError", "SyncFailed", crate::text::chain(&e)))?;
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
                "SyncError",
                "SyncTerminated",
                format!(
                    "the controller stopped during the sync: {}; the next reconcile syncs again",
                    result.message
                ),
            ));
        }
        _ => return Err(Stop::new("SyncError", "SyncFailed", result.message)),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_heal_backoff_grows_and_caps() {
        let backoff = SelfHealBackoff::default();
        let delays: Vec<u64> = (0..8).map(|n| backoff.delay(n).as_secs()).collect();
        assert_eq!(delays, [0, 2, 6, 18, 54, 162, 300, 300]);
    }

    #[test]
    fn reverts_wait_longer_each_time_and_start_over_after_a_quiet_period() {
        let backoff = SelfHealBackoff::default();
        let mut reverts = Reverts::default();
        let t0 = Instant::now();
        let at = |secs: u64| t0 + Duration::from_secs(secs);
        // The first revert is immediate, the second waits 2 s, the third 6 s.
        assert_eq!(reverts.admit(&backoff, at(0)), Ok(()));
        assert_eq!(reverts.admit(&backoff, at(1)), Err(Duration::from_secs(1)));
        assert_eq!(reverts.admit(&backoff, at(2)), Ok(()));
        assert_eq!(reverts.admit(&backoff, at(5)), Err(Duration::from_secs(3)));
        assert_eq!(reverts.admit(&backoff, at(8)), Ok(()));
        assert_eq!(reverts.attempts, 3);
        // Quiet for longer than the cap: immediate again.
        assert_eq!(reverts.admit(&backoff, at(8 + 301)), Ok(()));
        assert_eq!(reverts.attempts, 1);
    }
}
