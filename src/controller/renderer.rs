//! Where the controller renders: a [`Renderer`] chosen once, when the
//! controller starts —
//! [`Local`] (the render engine in this process, with the controller's
//! Git, plugins and caches) or [`Remote`] (the render server; the
//! controller's Secrets go with a request only as it grants them).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::metrics::Metrics;
use super::project::Project;
use super::secrets::ControllerSecrets;
use crate::condition::{Reason, Stop};
use crate::plugin::{PluginHost, World};
use crate::policy::ReviewCache;
use crate::render::engine::{Catalog, RenderCache};
use crate::render::remote::{Pool, RenderRequest, RenderResponse};
use crate::source::git::{CredentialProvider as _, GitSource, KnownHostsSource, RepoUrl};
use crate::source::helm::{ChartError, ChartFetcher, ChartRef, HelmConfig};

/// One render: the request, what it names, and what the renderer may use
/// of the controller (its Secrets, as the project grants them; its
/// metrics).
pub struct Job<'a> {
    /// The request (a remote renderer fills in its credentials).
    pub request: &'a mut RenderRequest,
    /// The Application's Git repository (none for a chart source).
    pub repository: Option<&'a RepoUrl>,
    /// The chart, when the source is one.
    pub chart: Option<&'a ChartRef>,
    /// The repositories of the policies' sources, in the order of the
    /// request's policies that have one.
    pub policy_urls: &'a [RepoUrl],
    /// The Application's project (what its chart's dependencies may use).
    pub project: &'a Project,
    /// The controller's repository and registry Secrets.
    pub secrets: &'a ControllerSecrets,
    /// Where plugin calls and render server requests are counted.
    pub metrics: &'a Metrics,
}

/// Where the controller renders.
#[async_trait::async_trait]
pub trait Renderer: Send + Sync {
    /// Renders one planned request.
    async fn render(&self, job: Job<'_>) -> Result<RenderResponse, Stop>;

    /// A hard refresh of `url` (the controller's own Git engine forgets
    /// its refs besides): what this renderer must do so that its next
    /// render asks the server.
    fn forget_refs(&self, url: &RepoUrl);

    /// `(hits, misses)` of the render cache in this process (`(0, 0)`
    /// when renders happen elsewhere).
    fn cache_stats(&self) -> (u64, u64);

    /// `(hits, misses)` of the policy review cache in this process
    /// (`(0, 0)` when renders happen elsewhere).
    fn review_stats(&self) -> (u64, u64);
}

/// The render server: the repository's and the policy sources'
/// credentials go with the request; a chart's dependency repositories are
/// granted as the server names them, each checked against the project.
pub struct Remote {
    pool: Arc<Pool>,
    known_hosts: Option<Arc<dyn KnownHostsSource>>,
    /// Repositories whose refs the next request resolves afresh.
    forget: Mutex<HashSet<String>>,
}

impl Remote {
    /// Renders on `pool`, sending `known_hosts` (the configured SSH host
    /// keys) with every request.
    pub fn new(pool: Arc<Pool>, known_hosts: Option<Arc<dyn KnownHostsSource>>) -> Self {
        Self {
            pool,
            known_hosts,
            forget: Mutex::default(),
        }
    }

    /// Whether the refs of `url` are to be resolved afresh (once).
    fn take_forget(&self, url: &RepoUrl) -> bool {
        self.forget
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&url.to_string())
    }
}

#[async_trait::async_trait]
impl Renderer for Remote {
    async fn render(&self, job: Job<'_>) -> Result<RenderResponse, Stop> {
        let Job {
            request,
            repository,
            chart,
            policy_urls,
            project,
            secrets,
            metrics,
        } = job;
        request.ssh_known_hosts = self.known_hosts.as_ref().and_then(|k| k.known_hosts());
        let credentials = secrets.repo_credentials();
        // Requests of one repository (Git, or the chart's) go to one
        // replica, whose caches hold it.
        let route = match (repository, chart) {
            (Some(url), _) => {
                request.refresh = self.take_forget(url);
                request.repository_credentials = credentials.credentials(url).map(Into::into);
                url.as_str().to_owned()
            }
            (None, Some(reference)) => chart_route(reference),
            (None, None) => String::new(),
        };
        for (step, url) in request
            .policies
            .iter_mut()
            .filter_map(|p| p.source.as_mut())
            .zip(policy_urls)
        {
            step.refresh = self.take_forget(url);
            step.credentials = credentials.credentials(url).map(Into::into);
        }
        let mut round = 0;
        let routed = loop {
            match self.pool.render(&route, request).await {
                Ok(routed) => break routed,
                Err(e) => {
                    let stop = remote_stop(self.pool.name(), e);
                    super::chart_access::grant(project, secrets, request, stop, round)?;
                    round += 1;
                }
            }
        };
        for failed in &routed.failed_over {
            metrics
                .render_server_failovers
                .get_or_create(&vec![("server".into(), failed.clone())])
                .inc();
        }
        metrics
            .render_server_requests
            .get_or_create(&vec![("server".into(), routed.server.clone())])
            .inc();
        Ok(routed.response)
    }

    fn forget_refs(&self, url: &RepoUrl) {
        self.forget
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(url.to_string());
    }

    fn cache_stats(&self) -> (u64, u64) {
        (0, 0)
    }

    fn review_stats(&self) -> (u64, u64) {
        (0, 0)
    }
}

/// The render engine in this process, with the controller's Git engine,
/// plugin host and caches, and the project's chart access.
pub struct Local {
    git: GitSource,
    host: PluginHost,
    catalog: Catalog,
    cache: RenderCache,
    reviews: ReviewCache,
    /// Fetches the charts of `spec.source.chart` (made at the first one).
    charts: tokio::sync::OnceCell<ChartFetcher>,
    chart_cache_dir: Option<PathBuf>,
    allow_file_repositories: bool,
}

/// What [`Local`] renders with besides the controller's Git engine and
/// plugin host.
pub struct LocalConfig {
    /// Verified, compiled plugins.
    pub catalog: Catalog,
    /// Renders reused while what they read holds.
    pub cache: RenderCache,
    /// Where fetched charts are kept (default: a directory of this
    /// process under the system's temporary directory).
    pub chart_cache_dir: Option<PathBuf>,
    /// Whether Applications may name repositories on this filesystem.
    pub allow_file_repositories: bool,
}

impl Local {
    /// Renders with `git` and `host`.
    pub fn new(git: GitSource, host: PluginHost, config: LocalConfig) -> Self {
        Self {
            git,
            host,
            catalog: config.catalog,
            cache: config.cache,
            reviews: ReviewCache::default(),
            charts: tokio::sync::OnceCell::new(),
            chart_cache_dir: config.chart_cache_dir,
            allow_file_repositories: config.allow_file_repositories,
        }
    }

    /// The chart fetcher: Helm repository credentials from the repository
    /// Secrets (by URL prefix, as for Git); OCI credentials come with each
    /// render request.
    async fn charts(&self, secrets: &ControllerSecrets) -> Result<&ChartFetcher, ChartError> {
        self.charts
            .get_or_try_init(|| async {
                let dir = self.chart_cache_dir.clone().unwrap_or_else(|| {
                    std::env::temp_dir().join(format!("kiln-charts-{}", std::process::id()))
                });
                ChartFetcher::new(HelmConfig::new(dir), Arc::new(secrets.repo_credentials()))
            })
            .await
    }
}

#[async_trait::async_trait]
impl Renderer for Local {
    async fn render(&self, job: Job<'_>) -> Result<RenderResponse, Stop> {
        let Job {
            request,
            chart,
            project,
            secrets,
            metrics,
            ..
        } = job;
        let charts =
            match chart {
                Some(_) => Some(self.charts(secrets).await.map_err(|e| {
                    Stop::new(Reason::ChartCacheUnavailable, crate::text::chain(&e))
                })?),
                None => None,
            };
        let chart_access = super::chart_access::for_project(project, secrets);
        let shop = crate::render::engine::work::Workshop {
            charts,
            chart_access: Some(&chart_access),
            git: &self.git,
            host: &self.host,
            catalog: &self.catalog,
            cache: &self.cache,
            reviews: &self.reviews,
            allow_file_repositories: self.allow_file_repositories,
        };
        let worked = crate::render::engine::work::work(shop, request).await?;
        for (plugin, world, took) in &worked.timings {
            metrics
                .plugin_call_seconds
                .get_or_create(&vec![
                    ("plugin".into(), plugin.clone()),
                    ("world".into(), world_label(*world).into()),
                ])
                .observe(took.as_secs_f64());
        }
        Ok(worked.response)
    }

    /// Nothing: this renderer uses the controller's own Git engine.
    fn forget_refs(&self, _url: &RepoUrl) {}

    fn cache_stats(&self) -> (u64, u64) {
        self.cache.stats()
    }

    fn review_stats(&self) -> (u64, u64) {
        self.reviews.stats()
    }
}

/// What routes a chart's renders to one render server replica: its
/// repository (a Helm repository's URL, an OCI chart's registry path).
fn chart_route(reference: &ChartRef) -> String {
    match reference {
        ChartRef::Repo { repo, .. } => repo.clone(),
        ChartRef::Oci { repository, .. } => format!("oci://{repository}"),
    }
}

fn world_label(world: World) -> &'static str {
    match world {
        World::Renderer => "renderer",
        _ => "policy",
    }
}

/// The condition of a remote render that failed: the server's own when it
/// refused, `RenderServerUnavailable` naming the URL and the cause chain
/// when it could not be used.
fn remote_stop(pool: &str, error: crate::render::remote::PoolError) -> Stop {
    use crate::render::remote::{ClientError, PoolError};
    match error {
        PoolError::Client(ClientError::Refused(failure)) => {
            let mut stop = match Reason::parse(&failure.reason) {
                Some(reason) => Stop::new(reason, failure.message),
                None => Stop::new(
                    Reason::RenderServerFailed,
                    format!(
                        "render server {pool}: {} ({}): {}",
                        failure.kind, failure.reason, failure.message
                    ),
                ),
            };
            stop.repositories_needed = failure.repositories_needed;
            stop
        }
        PoolError::Client(
            error @ (ClientError::ResponseTooLarge { .. }
            | ClientError::ResponseTooComplex { .. }
            | ClientError::RequestTooLarge { .. }),
        ) => Stop::new(Reason::RenderTooLarge, crate::text::chain(&error)),
        other => Stop::new(
            Reason::RenderServerUnavailable,
            format!("render server {pool}: {}", crate::text::chain(&other)),
        ),
    }
}
