//! What every reconcile shares ([`Context`]) and how the controller runs
//! ([`ControllerConfig`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tokio::time::Instant;

use super::destination::Destinations;
use super::live::LiveWatches;
use super::renderer::{Local, LocalConfig, Remote, Renderer};
use super::secrets::ControllerSecrets;
use crate::cluster::Cluster;
use crate::plugin::PluginHost;
use crate::source::git::{GitSource, RepoUrl};

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
pub(crate) struct Reverts {
    attempts: u32,
    last: Option<Instant>,
}

impl Reverts {
    /// `Ok` when a revert may happen at `now` (and counts it); otherwise
    /// how long to wait.
    pub(crate) fn admit(
        &mut self,
        backoff: &SelfHealBackoff,
        now: Instant,
    ) -> Result<(), Duration> {
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
    /// How often every ApplicationSet is generated again without a change
    /// (Argo CD's `requeueAfterSeconds`). Default 3 minutes.
    pub appset_resync: Duration,
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
    /// ([`crate::render::engine::cache::DEFAULT_CAPACITY`]).
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
    pub catalog: crate::render::engine::CatalogConfig,
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
    /// Whether the controller's resources (AppProjects, Plugins) and the
    /// destinations' live objects are kept by watches. Default `true` (the
    /// controller); `false` for one comparison (`kiln app diff`): each is
    /// read from the API server when needed and no watch is started.
    pub watch: bool,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            namespace: "kiln".into(),
            resync: Duration::from_secs(180),
            appset_resync: Duration::from_secs(180),
            health_timeout: Duration::from_secs(300),
            history_limit: 10,
            manager: "kiln".into(),
            render_cache_dir: None,
            render_cache_size: crate::render::engine::cache::DEFAULT_CAPACITY,
            chart_cache_dir: None,
            concurrency: 32,
            git_cache_idle: Duration::from_secs(24 * 3600),
            self_heal_backoff: SelfHealBackoff::default(),
            catalog: crate::render::engine::CatalogConfig::default(),
            allow_file_repositories: false,
            jq: crate::diff::JqConfig::default(),
            status_heartbeat: Duration::from_secs(3600),
            sharding: super::shard::ShardingConfig::default(),
            kube_client: crate::cluster::requests::ClientOptions::default(),
            live: super::live::LiveConfig::default(),
            make_random_seed_key: true,
            watch: true,
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
    pub metrics: super::metrics::Metrics,
    /// What each Application's last render read (the webhook's filter).
    pub read_paths: super::read_paths::ReadPaths,
    /// What each Application's last review read of its destination.
    pub cluster_reads: super::cluster_view::ClusterMemory,
    /// Watches on managed kinds, which trigger reconciles on live changes.
    pub live: LiveWatches,
    /// Raised when the controller is stopping: syncs end after their
    /// current wave ([`Engine::with_interrupt`](crate::sync::Engine::with_interrupt)).
    pub shutdown: Arc<AtomicBool>,
    /// The controller's labeled Secrets (repositories, clusters, registries).
    pub secrets: ControllerSecrets,
    /// The worker processes of `ignoreDifferences` jq expressions.
    pub jq: crate::diff::Jq,
    /// The shards this replica owns.
    pub shards: Arc<super::shard::Shards>,
    /// The AppProjects of the controller's namespace, from a watch.
    pub projects: super::resources::Cached<crate::api::AppProject>,
    /// The Plugins of the controller's namespace, from a watch.
    pub plugins: super::resources::Cached<crate::api::Plugin>,
    /// The Applications' PolicyReports and the findings gauge.
    pub policy_reports: super::policy_report::PolicyReports,
    /// Where comparisons are rendered: here ([`Local`], the default) or
    /// on the render server ([`Context::with_render_server`]).
    pub renderer: Box<dyn Renderer>,
    /// The key of the Helm plugin's random seeds (read at the first chart).
    random_seeds: tokio::sync::OnceCell<super::random_seed::RandomSeeds>,
    pub(super) reverts: std::sync::Mutex<HashMap<String, Reverts>>,
    pub(super) refreshes: std::sync::Mutex<HashMap<String, String>>,
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
        let metrics =
            super::metrics::Metrics::with_kube_requests(config.kube_client.requests.clone());
        let render_cache = crate::render::engine::RenderCache::new(config.render_cache_size);
        let renderer = Box::new(Local::new(
            git.clone(),
            host.clone(),
            LocalConfig {
                catalog: crate::render::engine::Catalog::new(config.catalog.clone()),
                cache: match &config.render_cache_dir {
                    Some(dir) => render_cache.with_dir(dir),
                    None => render_cache,
                },
                chart_cache_dir: config.chart_cache_dir.clone(),
                allow_file_repositories: config.allow_file_repositories,
            },
        ));
        let local = Arc::new(Cluster::new(client.clone()));
        let (projects, plugins) = if config.watch {
            (
                super::resources::Cached::watch(client.clone(), &config.namespace),
                super::resources::Cached::watch(client.clone(), &config.namespace),
            )
        } else {
            (
                super::resources::Cached::direct(client.clone(), &config.namespace),
                super::resources::Cached::direct(client.clone(), &config.namespace),
            )
        };
        Self {
            destinations: Destinations::new(
                local,
                &config.namespace,
                secrets.clone(),
                config.kube_client.clone(),
            ),
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
            read_paths: super::read_paths::ReadPaths::default(),
            cluster_reads: super::cluster_view::ClusterMemory::default(),
            shutdown: Arc::new(AtomicBool::new(false)),
            shards,
            projects,
            plugins,
            policy_reports: super::policy_report::PolicyReports::default(),
            renderer,
            random_seeds: tokio::sync::OnceCell::new(),
            reverts: std::sync::Mutex::new(HashMap::new()),
            refreshes: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// Forgets what the refs of `url` named (a hard refresh, a webhook):
    /// in this process's Git cache, and on the render server with the next
    /// request for that repository.
    pub async fn forget_refs(&self, url: &RepoUrl) {
        self.git.forget_refs(url).await;
        self.renderer.forget_refs(url);
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

    /// Sends every render to `server` instead of rendering in this
    /// process: Git, plugins and the render cache are then the render
    /// server's, and this process never loads a plugin.
    /// `known_hosts` (the configured SSH host keys) go with every request.
    pub fn with_render_server(
        mut self,
        server: Arc<crate::render::remote::Pool>,
        known_hosts: Option<Arc<dyn crate::source::git::KnownHostsSource>>,
    ) -> Self {
        self.renderer = Box::new(Remote::new(server, known_hosts));
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
