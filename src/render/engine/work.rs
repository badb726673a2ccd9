//! The source work of one render: revision → plugins → render (through the
//! render cache) → policies. The same code runs in the controller (no
//! `--render-server`) and in `kiln render-server`; the request
//! ([`RenderRequest`]) is all it needs to know about the Application, so a
//! remote render and an in-process one cannot differ.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::cache::RenderCache;
use super::catalog::{self, Catalog};
use crate::api::helm::{INLINE_VALUES_FILE, escape_set_value};
use crate::artifact::RegistryCredentials;
use crate::condition::{Reason, Stop};
use crate::plugin::cluster::ClusterKey;
use crate::plugin::{AppContext, PluginHost, World};
use crate::policy::placement::KindScopes;
use crate::policy::{self, PolicySource, PolicyStep};
use crate::render::remote::{
    ChartSourceRef, HelmHostWork, PolicySourceRef, RenderRequest, RenderResponse, WireCredentials,
    WireObject,
};
use crate::render::{self, Step};
use crate::source::git::{GitSource, GitTreeView, Revision};
use crate::source::helm::{ChartAccess, ChartFetcher, ChartRef, FileOverlay};
use crate::source::{SourcePath, SourceView, Subtree};

/// What the source work uses: Git, the plugin host and catalog, and the
/// render cache.
#[derive(Clone, Copy)]
pub struct Workshop<'a> {
    /// Helm charts (`spec.source.chart`); `None`: refused (a process that
    /// renders no chart need not make one).
    pub charts: Option<&'a ChartFetcher>,
    /// The dependency repositories and credentials a chart may use: the
    /// controller's (its project's `sourceRepos`, the repository Secrets);
    /// `None` (a render server): those the request grants
    /// ([`ChartSourceRef::dependency_repositories`]) and nothing else.
    pub chart_access: Option<&'a ChartAccess>,
    /// Git (its credential provider answers for the request's repository).
    pub git: &'a GitSource,
    /// The plugin host.
    pub host: &'a PluginHost,
    /// Verified, compiled plugins.
    pub catalog: &'a Catalog,
    /// Renders reused while what they read holds.
    pub cache: &'a RenderCache,
    /// Policy reviews reused while what they depend on holds.
    pub reviews: &'a crate::policy::ReviewCache,
    /// Whether repositories on this process's filesystem may be read.
    pub allow_file_repositories: bool,
}

/// The answer, and how long each plugin call took (for metrics).
pub struct Worked {
    /// The answer.
    pub response: RenderResponse,
    /// Plugin, world and duration of each call that ran.
    pub timings: Vec<(String, World, Duration)>,
}

/// Does the source work of `request`.
pub async fn work(shop: Workshop<'_>, request: &RenderRequest) -> Result<Worked, Stop> {
    if let Some(scopes) = &request.scopes
        && scopes.len() > KindScopes::MAX_KINDS
    {
        return Err(Stop::new(
            Reason::InvalidRenderRequest,
            format!(
                "the request names {} kinds of the destination, more than {}",
                scopes.len(),
                KindScopes::MAX_KINDS
            ),
        ));
    }
    let names: Vec<String> = (0..request.registry_credentials.len())
        .map(|i| format!("#{i} of the request"))
        .collect();
    let registry = catalog::registry_credentials(
        names
            .iter()
            .zip(&request.registry_credentials)
            .map(|(name, json)| (name.as_str(), json.0.as_str())),
    )?;
    let source = match &request.chart {
        Some(chart) => fetch_chart(shop, request, chart, &registry).await?,
        None => poll_git(shop, request).await?,
    };
    let Source {
        view,
        commit,
        time,
        pin,
        path,
    } = source;
    tracing::Span::current().record("revision", commit.as_str());

    let mut chain = Vec::new();
    for step in &request.chain {
        let plugin = shop
            .catalog
            .materialize(shop.host, &registry, &step.plugin)
            .await?;
        chain.push(Step::Plugin {
            plugin,
            params: step.params.clone(),
        });
    }
    let app = &request.app;
    let context = AppContext {
        name: app.name.clone(),
        namespace: app.namespace.clone(),
        project: app.project.clone(),
        repo_url: app.repo_url.clone(),
        revision: commit.clone(),
        path,
    };
    // What shapes the render besides the source: plugins, parameters, the
    // application's path and destination, the chart's pin, what the host
    // added for the Helm block.
    let mut shape = vec![
        context.path.clone(),
        context.namespace.clone(),
        context.name.clone(),
        context.project.clone(),
        context.repo_url.clone(),
        pin.unwrap_or_default(),
    ];
    let view = match &request.helm {
        Some(helm) => {
            let Some(Step::Plugin { params, .. }) = chain.get_mut(helm.step) else {
                return Err(Stop::new(
                    Reason::InvalidHelmSource,
                    format!(
                        "spec.source.helm: the render chain has no step #{}",
                        helm.step
                    ),
                ));
            };
            add_clock(params, time);
            helm_host_work(view, &context.path, helm, params, &mut shape)?
        }
        None => view,
    };
    for step in &chain {
        if let Step::Plugin { plugin, params } = step {
            shape.push(plugin.digest().to_string());
            shape.push(format!("{params:?}"));
        }
    }
    let key = RenderCache::key(&shape.iter().map(String::as_str).collect::<Vec<_>>());
    let mut timings = Vec::new();
    let (objects, read_set, cached) = match shop.cache.get(&key, view.clone()).await {
        Some(hit) => {
            tracing::debug!("render cache hit");
            (hit.objects, hit.read_set, true)
        }
        None => {
            let rendered = render::render(view.clone(), &context, &chain)
                .await
                .map_err(|e| Stop::new(Reason::RenderFailed, crate::text::chain(&e)))?;
            for (plugin, took) in &rendered.timings {
                timings.push((plugin.clone(), World::Renderer, *took));
            }
            shop.cache
                .put(key, rendered.read_set.clone(), &rendered.objects)
                .await;
            (rendered.objects, rendered.read_set, false)
        }
    };

    let mut steps = Vec::new();
    let mut sources = PolicySources::default();
    for used in &request.policies {
        let plugin = shop
            .catalog
            .materialize(shop.host, &registry, &used.plugin)
            .await?;
        let source = match &used.source {
            None => PolicySource::Application(view.clone()),
            Some(source) => sources.open(shop, &used.plugin.name, source).await?,
        };
        steps.push(PolicyStep {
            plugin,
            settings: used.settings.clone(),
            mode: used.mode,
            source,
        });
    }
    // Each object is reviewed where it will land.
    let reviewed =
        policy::placement::as_applied(&objects, &context.namespace, request.scopes.as_ref());
    let cluster = request.cluster.clone().map(Arc::new);
    let report =
        policy::evaluate_cached(shop.reviews, &context, reviewed, &steps, cluster.as_ref()).await;
    let cluster_reads: std::collections::BTreeSet<ClusterKey> = report
        .results
        .iter()
        .flat_map(|r| r.lookups.objects().chain(&r.pending))
        .filter(|key| key.readable())
        .cloned()
        .collect();
    for result in report.results.iter().filter(|r| !r.cached) {
        timings.push((result.policy.clone(), World::Policy, result.duration));
    }
    Ok(Worked {
        response: RenderResponse {
            commit,
            objects: objects
                .into_iter()
                .map(|o| WireObject {
                    source: o.source().map(str::to_owned),
                    value: o.value().clone(),
                })
                .collect(),
            read_set,
            policy: crate::policy::status::policy_status(&report),
            blocked: report.blocked(),
            cached,
            cluster_reads: cluster_reads.into_iter().collect(),
            cluster_pending: report.pending(),
        },
        timings,
    })
}

/// The source of one render: its view, what plays the commit (the Git
/// commit, or the chart's version), the chart's digest, and the
/// application's path in the view.
struct Source {
    view: Arc<dyn SourceView>,
    commit: String,
    /// When the revision was made: the render's clock (see [`add_clock`]).
    time: Option<jiff::Timestamp>,
    pin: Option<String>,
    path: String,
}

/// Polls the Application's Git repository.
async fn poll_git(shop: Workshop<'_>, request: &RenderRequest) -> Result<Source, Stop> {
    let url = super::access::repository(
        &request.app.repo_url,
        super::access::RepositoryField::Application,
        shop.allow_file_repositories,
    )?;
    if request.refresh {
        shop.git.forget_refs(&url).await;
    }
    let revision = Revision::parse(&request.revision);
    let tree = shop
        .git
        .poll(&url, &revision)
        .await
        .map_err(|e| Stop::new(Reason::SourceUnavailable, crate::text::chain(&e)))?;
    Ok(Source {
        commit: tree.commit().to_string(),
        time: tree.commit_time(),
        view: Arc::new(tree),
        pin: None,
        path: request.app.path.clone(),
    })
}

/// Resolves and fetches `spec.source.chart` (its index polled with its
/// ETag, the archive checked against the index's digest and unpacked once
/// per digest); the chart's files are the view's root. An OCI chart is
/// pulled with the request's registry credentials and, for its registry,
/// the chart's own (`chart.credentials`); a Helm repository's credentials
/// are the workshop's [`ChartAccess`]'s (on a render server: those the
/// request brought for the chart's repository and each granted dependency
/// repository, for this render only).
async fn fetch_chart(
    shop: Workshop<'_>,
    request: &RenderRequest,
    chart: &ChartSourceRef,
    registry: &RegistryCredentials,
) -> Result<Source, Stop> {
    let Some(charts) = shop.charts else {
        return Err(Stop::new(
            Reason::ChartCacheUnavailable,
            format!(
                "spec.source.chart {:?}: this renderer has no chart fetcher",
                chart.chart
            ),
        ));
    };
    let reference = ChartRef::of_application(
        &request.app.repo_url,
        &chart.chart,
        &request.revision,
        chart.oci,
    )
    .map_err(|e| Stop::new(Reason::InvalidChartSource, crate::text::chain(&e)))?;
    let mut registry = registry.clone();
    if let (Some(host), Some(WireCredentials::Basic { username, password })) =
        (reference.registry(), &chart.credentials)
    {
        registry.merge(RegistryCredentials::basic(host, username, &password.0));
    }
    let requested;
    let access = match shop.chart_access {
        Some(access) => access,
        None => {
            requested = super::access::requested(&reference, chart);
            &requested
        }
    };
    let fetched = charts
        .fetch_scoped(&reference, &registry, access)
        .await
        .map_err(|e| {
            let message = format!("{reference}: {}", crate::text::chain(&e));
            if let Some(needed) = e.repositories_needed() {
                let mut stop = Stop::new(Reason::DependencyRepositoriesNeeded, message);
                stop.repositories_needed = needed.to_vec();
                stop
            } else if e.is_refused_dependency() {
                Stop::new(Reason::DependencyRepositoryNotPermitted, message)
            } else {
                Stop::new(Reason::ChartUnavailable, message)
            }
        })?;
    tracing::debug!(chart = %reference, version = %fetched.version, digest = %fetched.digest, "chart resolved");
    Ok(Source {
        view: fetched.view,
        commit: fetched.version,
        time: fetched.created,
        pin: Some(fetched.digest.to_string()),
        path: String::new(),
    })
}

/// The helm plugin's parameter giving the render's clock.
pub const CLOCK_PARAM: &str = "now";

/// Gives the helm step the time its source revision was made as its clock
/// (`now`, certificates' validity), unless the step sets one: a render
/// stays a function of the revision (the same commit renders the same
/// objects at every refresh), and what `now` prints moves with the commits.
fn add_clock(params: &mut crate::plugin::Params, time: Option<jiff::Timestamp>) {
    if let Some(time) = time
        && !params.iter().any(|(key, _)| key == CLOCK_PARAM)
    {
        params.push((CLOCK_PARAM.to_owned(), time.to_string()));
    }
}

/// The host's part of `spec.source.helm` on the chart at `chart_dir`:
/// drops missing value files when asked, reads `fileParameters` into
/// `setString` parameters, serves the inline values as a file. What it read
/// goes into the render cache key (`shape`).
fn helm_host_work(
    view: Arc<dyn SourceView>,
    chart_dir: &str,
    helm: &HelmHostWork,
    params: &mut crate::plugin::Params,
    shape: &mut Vec<String>,
) -> Result<Arc<dyn SourceView>, Stop> {
    let invalid = |message: String| Stop::new(Reason::InvalidHelmSource, message);
    let dir = SourcePath::parse(chart_dir)
        .map_err(|e| invalid(format!("spec.source.path {chart_dir:?}: {e}")))?;
    if helm.ignore_missing_value_files {
        params.retain(|(key, file)| {
            key != "valueFiles"
                || file == INLINE_VALUES_FILE
                || dir
                    .join(file)
                    .ok()
                    .and_then(|p| view.stat(&p).ok())
                    .is_none_or(|found| found.is_some())
        });
    }
    for (name, file) in &helm.file_parameters {
        let path = dir.join(file).map_err(|e| {
            invalid(format!(
                "spec.source.helm.fileParameters {name}: {file:?}: {e}"
            ))
        })?;
        let bytes = view.read_file(&path).map_err(|e| {
            invalid(format!(
                "spec.source.helm.fileParameters {name}: {}",
                crate::text::chain(&e)
            ))
        })?;
        let text = String::from_utf8(bytes).map_err(|_| {
            invalid(format!(
                "spec.source.helm.fileParameters {name}: {path} is not UTF-8"
            ))
        })?;
        params.push((
            "setString".to_owned(),
            format!("{name}={}", escape_set_value(&text)),
        ));
    }
    shape.push(format!("{:?}", helm.file_parameters));
    shape.push(format!("{params:?}"));
    let Some(values) = &helm.inline_values else {
        return Ok(view);
    };
    shape.push(values.clone());
    let at = dir
        .join(INLINE_VALUES_FILE)
        .map_err(|e| invalid(format!("spec.source.helm.values: {e}")))?;
    Ok(Arc::new(FileOverlay::new(
        view,
        at,
        values.as_bytes().to_vec(),
    )))
}

/// The policies' own sources of one request: each repository and revision
/// is polled once, however many policies read it.
#[derive(Default)]
struct PolicySources {
    polled: HashMap<(String, String), Result<GitTreeView, String>>,
}

impl PolicySources {
    /// The source `policy` reads. A URL that cannot be used (malformed, a
    /// file repository this process may not read) or a path that climbs
    /// out of the repository is a spec error; a repository that cannot be
    /// reached makes the policy unable to run ([`PolicySource::Unavailable`]:
    /// enforced, it blocks).
    async fn open(
        &mut self,
        shop: Workshop<'_>,
        policy: &str,
        source: &PolicySourceRef,
    ) -> Result<PolicySource, Stop> {
        let url = super::access::repository(
            &source.repo_url,
            super::access::RepositoryField::PolicySource(policy),
            shop.allow_file_repositories,
        )?;
        let root = SourcePath::parse(&source.path).map_err(|e| {
            Stop::new(
                Reason::InvalidPolicySource,
                format!("policy {policy}: source.path: {e}"),
            )
        })?;
        let key = (url.key().to_owned(), source.revision.clone());
        if !self.polled.contains_key(&key) {
            if source.refresh {
                shop.git.forget_refs(&url).await;
            }
            let polled = shop
                .git
                .poll(&url, &Revision::parse(&source.revision))
                .await
                .map_err(|e| crate::text::chain(&e));
            self.polled.insert(key.clone(), polled);
        }
        Ok(match &self.polled[&key] {
            Ok(tree) => PolicySource::Own {
                revision: tree.commit().to_string(),
                view: Subtree::of(Arc::new(tree.clone()), root),
                repo_url: source.repo_url.clone(),
            },
            Err(error) => PolicySource::Unavailable {
                repo_url: source.repo_url.clone(),
                error: format!("revision {}: {error}", source.revision),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::LocalDir;

    fn chart() -> (tempfile::TempDir, Arc<dyn SourceView>) {
        let tmp = tempfile::tempdir().unwrap();
        for (path, text) in [
            ("apps/web/Chart.yaml", "name: web\n"),
            ("apps/web/values-prod.yaml", "a: 1\n"),
            ("apps/web/files/app.conf", "x=1,y=2\n"),
            ("secret.txt", "not for the chart\n"),
        ] {
            let p = tmp.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let view: Arc<dyn SourceView> = Arc::new(LocalDir::open(tmp.path()).unwrap());
        (tmp, view)
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn file_parameters_cannot_climb_out_of_the_source() {
        let (_tmp, view) = chart();
        let helm = HelmHostWork {
            file_parameters: pairs(&[("leak", "../../../etc/passwd")]),
            ..HelmHostWork::default()
        };
        let mut params = Vec::new();
        let err = helm_host_work(view, "apps/web", &helm, &mut params, &mut Vec::new())
            .expect_err("refused");
        assert_eq!(err.reason, Reason::InvalidHelmSource);
        assert!(err.message.contains("fileParameters leak"), "{err}");
        assert!(params.is_empty());
    }

    #[test]
    fn the_host_part_of_the_helm_block_is_done_on_the_view() {
        let (_tmp, view) = chart();
        let helm = HelmHostWork {
            step: 0,
            inline_values: Some("replicas: 3\n".into()),
            file_parameters: pairs(&[("config", "files/app.conf")]),
            ignore_missing_value_files: true,
        };
        let mut params = pairs(&[
            ("valueFiles", "values-prod.yaml"),
            ("valueFiles", "values-missing.yaml"),
            ("valueFiles", INLINE_VALUES_FILE),
        ]);
        let mut shape = Vec::new();
        let view = helm_host_work(view, "apps/web", &helm, &mut params, &mut shape).unwrap();
        assert_eq!(
            params,
            pairs(&[
                ("valueFiles", "values-prod.yaml"),
                ("valueFiles", INLINE_VALUES_FILE),
                ("setString", "config=x=1\\,y=2\n"),
            ])
        );
        let inline = SourcePath::parse(&format!("apps/web/{INLINE_VALUES_FILE}")).unwrap();
        assert_eq!(view.read_file(&inline).unwrap(), b"replicas: 3\n");
        assert!(
            shape.iter().any(|s| s == "replicas: 3\n"),
            "in the cache key"
        );
    }
}
