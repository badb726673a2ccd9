//! The comparison half of a reconcile: project rules → destination →
//! revision → render → policy → kinds → diff. It changes nothing anywhere,
//! so `kiln app diff` runs exactly what the controller runs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::context::Context;
use super::destination::Target;
use super::plugins;
use super::project::{self, HELM_PLUGIN, Placement, Project};
use crate::api::PolicyMode;
use crate::api::{Application, PolicyStatus};
use crate::condition::{Reason, Stop};
use crate::diff::{DiffOptions, IgnoreRules, Report};
use crate::manifest::ObjectKey;
use crate::plugin::World;
use crate::policy::Mode;
use crate::policy::placement::{KindScope, KindScopes};
use crate::render::remote::{
    AppRef, HelmHostWork, PolicySourceRef, PolicyStepRef, RenderRequest, RenderStep, WireSecret,
};
use crate::source::git::{CredentialProvider as _, RepoUrl};
use crate::sync::{
    Application as SyncApp, DefinedScopes, Engine, PruneGuard, RetryPolicy, SyncOptions,
};

/// What an Application is compared to: its target revision, or the one an
/// operation asked for.
#[derive(Clone, Debug, Default)]
pub struct CompareTo {
    /// The revision (default: `spec.source.targetRevision`).
    pub revision: Option<String>,
}

/// Everything a comparison found, and what a sync needs.
pub struct Comparison {
    /// The commit compared.
    pub commit: String,
    /// The destination.
    pub target: Target,
    /// The rendered objects (policy findings do not change them).
    pub objects: Vec<Value>,
    /// Policy results for the status.
    pub policy: PolicyStatus,
    /// Whether an enforced policy failed.
    pub blocked: bool,
    /// The diff against the live state.
    pub diff: Report,
    /// The application as the sync engine knows it.
    pub sync_app: SyncApp,
    /// Sync options from the spec (prune from the automated policy).
    pub options: SyncOptions,
    /// Plugins that ran unverified (`verify.insecure: true`).
    pub insecure_plugins: Vec<String>,
    /// What a sync may prune.
    pub prune_guard: PruneGuard,
    /// The live state the comparison read (a sync records what it applied
    /// there).
    pub live_state: Arc<dyn crate::sync::LiveState>,
}

impl Comparison {
    /// A sync engine for this comparison's destination, pruning only what
    /// the project allows.
    pub fn engine(&self, options: SyncOptions) -> Engine<'_> {
        // The objects the comparison found missing need not be read
        // again before they are created (those that exist come from the
        // live state).
        let known = self
            .diff
            .objects
            .iter()
            .filter(|o| o.status == crate::diff::SyncStatus::Missing)
            .map(|o| (o.key.clone(), None))
            .collect();
        Engine::new(&self.target.cluster, self.sync_app.clone(), options)
            .with_prune_guard(self.prune_guard.clone())
            .with_live_state(self.live_state.clone())
            .with_known_live(known)
    }
}

/// Compares one Application with its destination.
pub async fn compare(app: &Application, ctx: &Context, to: &CompareTo) -> Result<Comparison, Stop> {
    let config = &ctx.config;
    let name = app.metadata.name.clone().unwrap_or_default();

    // Project rules, before anything else.
    let project = load_project(app, ctx).await?;
    // A chart's repository is a Helm repository or an OCI registry, not
    // Git: its URL is checked where the chart is fetched.
    let chart = app.spec.source.chart.clone().filter(|c| !c.is_empty());
    let url = match &chart {
        Some(_) => None,
        None => Some(repository(app, config)?),
    };
    project
        .admit(app)
        .map_err(|v| Stop::new(Reason::SourceOrDestinationNotAllowed, v.to_string()))?;
    let target = ctx
        .destinations
        .resolve(&app.spec.destination)
        .await
        .map_err(|e| {
            let reason = match e {
                super::destination::DestinationError::NotRegistered { .. } => {
                    // Its cluster is gone: it needs no watch there.
                    ctx.live.release(&name);
                    Reason::UnknownDestination
                }
                _ => Reason::InvalidDestination,
            };
            Stop::new(reason, crate::text::chain(&e))
        })?;
    let destination_namespace = app.spec.destination.namespace.clone().unwrap_or_default();
    project
        .admit_destination(&target.server, &target.name, &destination_namespace)
        .map_err(|v| Stop::new(Reason::SourceOrDestinationNotAllowed, v.to_string()))?;

    // Plugins and policies, as the catalog describes them.
    let mut insecure = Vec::new();
    let mut chain = Vec::new();
    for used in &app.spec.source.plugins {
        let described = plugins::describe(ctx, &project, &used.name, World::Renderer).await?;
        if described.insecure {
            insecure.push(used.name.clone());
        }
        let mut params: BTreeMap<String, String> = described.defaults;
        params.extend(used.parameters.clone());
        chain.push(RenderStep {
            plugin: described.description,
            params: params.into_iter().collect(),
        });
    }
    let helm = helm_step(app, ctx, &project, &target, &mut chain, &mut insecure).await?;
    let mut policies = Vec::new();
    let mut policy_urls = Vec::new();
    for used in project.policies().iter().chain(&app.spec.policies) {
        let source = match &used.source {
            Some(source) => {
                let url = policy_repository(&used.name, &source.repo_url, config)?;
                let source = PolicySourceRef {
                    repo_url: source.repo_url.clone(),
                    revision: source.target_revision.clone(),
                    // Parsed where the work is done (`..` out of the
                    // repository is refused there).
                    path: source.path.trim_start_matches('/').to_owned(),
                    refresh: false,
                    credentials: None,
                };
                policy_urls.push(url);
                Some(source)
            }
            None => None,
        };
        let described = plugins::describe(ctx, &project, &used.name, World::Policy).await?;
        if described.insecure {
            insecure.push(used.name.clone());
        }
        let mut settings = described.defaults;
        settings.extend(used.settings.clone());
        let mode = match used.mode.unwrap_or(PolicyMode::Enforce) {
            PolicyMode::Enforce => Mode::Enforce,
            PolicyMode::Warn => Mode::Warn,
            PolicyMode::Audit => Mode::Audit,
        };
        policies.push(PolicyStepRef {
            plugin: described.description,
            settings: settings.into_iter().collect(),
            mode,
            source,
        });
    }
    // The chart, parsed here (after sourceRepos), with its repository's
    // credentials and nobody else's.
    let revision = to
        .revision
        .clone()
        .unwrap_or_else(|| app.spec.source.target_revision.clone());
    let chart = match &chart {
        Some(chart) => Some(
            super::chart_source::chart_source(
                &ctx.secrets,
                &app.spec.source.repo_url,
                chart,
                &revision,
            )
            .map_err(|e| Stop::new(Reason::InvalidChartSource, crate::text::chain(&e)))?,
        ),
        None => None,
    };
    let mut request = RenderRequest {
        app: AppRef {
            name: name.clone(),
            namespace: destination_namespace.clone(),
            project: app.spec.project.clone(),
            repo_url: app.spec.source.repo_url.clone(),
            path: normalized_path(&app.spec.source.path),
        },
        revision,
        chain,
        policies,
        refresh: false,
        ssh_known_hosts: None,
        repository_credentials: None,
        registry_credentials: Vec::new(),
        chart: chart.as_ref().map(|(_, source)| source.clone()),
        helm,
        scopes: None,
    };
    if !request.policies.is_empty() {
        request.scopes = Some(kind_scopes(&target).await?);
    }
    // Checked here, so that a malformed Secret is named in the condition.
    plugins::controller_registry_credentials(ctx)?;
    request.registry_credentials = plugins::registry_secrets(ctx)
        .into_iter()
        .map(WireSecret)
        .collect();

    // Revision, render and policies: here, or on the render server.
    let rendered = match &ctx.render_server {
        Some(server) => {
            request.ssh_known_hosts = ctx.ssh_known_hosts.as_ref().and_then(|k| k.known_hosts());
            // Requests of one repository (Git, or the chart's) go to one
            // replica, whose caches hold it.
            let route = match (&url, &chart) {
                (Some(url), _) => {
                    request.refresh = ctx.take_forget(url);
                    request.repository_credentials = ctx
                        .secrets
                        .repo_credentials()
                        .credentials(url)
                        .map(Into::into);
                    url.as_str().to_owned()
                }
                (None, Some((reference, _))) => chart_route(reference),
                (None, None) => String::new(),
            };
            let credentials = ctx.secrets.repo_credentials();
            for (step, url) in request
                .policies
                .iter_mut()
                .filter_map(|p| p.source.as_mut())
                .zip(&policy_urls)
            {
                step.refresh = ctx.take_forget(url);
                step.credentials = credentials.credentials(url).map(Into::into);
            }
            // A chart's dependency repositories are granted as the render
            // server names them, each checked against the project.
            let mut round = 0;
            let routed = loop {
                match server.render(&route, &request).await {
                    Ok(routed) => break routed,
                    Err(e) => {
                        let stop = remote_stop(server.name(), e);
                        super::chart_access::grant(
                            &project,
                            &ctx.secrets,
                            &mut request,
                            stop,
                            round,
                        )?;
                        round += 1;
                    }
                }
            };
            for failed in &routed.failed_over {
                ctx.metrics
                    .render_server_failovers
                    .get_or_create(&vec![("server".into(), failed.clone())])
                    .inc();
            }
            ctx.metrics
                .render_server_requests
                .get_or_create(&vec![("server".into(), routed.server.clone())])
                .inc();
            routed.response
        }
        None => {
            let charts = match &chart {
                Some(_) => Some(
                    ctx.charts(plugins::controller_registry_credentials(ctx)?)
                        .await
                        .map_err(|e| {
                            Stop::new(Reason::ChartCacheUnavailable, crate::text::chain(&e))
                        })?,
                ),
                None => None,
            };
            let chart_access = super::chart_access::for_project(&project, &ctx.secrets);
            let shop = crate::render::engine::work::Workshop {
                charts,
                chart_access: Some(&chart_access),
                git: &ctx.git,
                host: &ctx.host,
                catalog: &ctx.catalog,
                cache: &ctx.render_cache,
                reviews: &ctx.review_cache,
                allow_file_repositories: config.allow_file_repositories,
            };
            let worked = crate::render::engine::work::work(shop, &request).await?;
            for (plugin, world, took) in &worked.timings {
                ctx.metrics
                    .plugin_call_seconds
                    .get_or_create(&vec![
                        ("plugin".into(), plugin.clone()),
                        ("world".into(), world_label(*world).into()),
                    ])
                    .observe(took.as_secs_f64());
            }
            worked.response
        }
    };
    if !rendered.cached {
        ctx.metrics.renders.inc();
    }
    ctx.read_paths.record(&name, &rendered.read_set);
    let commit = rendered.commit;
    tracing::Span::current().record("revision", commit.as_str());
    let policy = rendered.policy;
    let blocked = rendered.blocked;
    let rendered_objects = rendered.objects;

    // Kinds and namespaces allowed by the project.
    let objects: Vec<Value> = rendered_objects
        .into_iter()
        .map(|o| Value::Object(o.value))
        .collect();
    admit_objects(&project, &target, &objects, &destination_namespace, config).await?;

    // Diff.
    let sync_app = SyncApp {
        name: name.clone(),
        namespace: Some(destination_namespace).filter(|ns| !ns.is_empty()),
    };
    let options = sync_options(app, ctx)?;
    let rules: Vec<crate::diff::IgnoreDifferences> =
        app.spec.ignore_differences.iter().map(Into::into).collect();
    let diff_options = DiffOptions {
        ignore: IgnoreRules::new(rules, &ctx.jq)
            .await
            .map_err(|e| Stop::new(Reason::InvalidIgnoreDifferences, crate::text::chain(&e)))?,
        manager: config.manager.clone(),
        ..DiffOptions::default()
    };
    // Live state comes from the watches: of every kind rendered, and of
    // every kind the application had objects of (what it may prune).
    watch_kinds(app, &name, ctx, &target, &objects).await;
    let state = ctx.live.state(
        &target.server,
        &name,
        app.metadata.generation.unwrap_or_default(),
    );
    let diff = Engine::new(&target.cluster, sync_app.clone(), options.clone())
        .with_live_state(state.clone())
        .diff(objects.clone(), &diff_options)
        .await
        .map_err(|e| Stop::new(Reason::DiffFailed, crate::text::chain(&e)))?;
    let prune_guard = prune_guard(project, &target.server, &target.name, &config.namespace);
    Ok(Comparison {
        commit,
        target,
        objects,
        blocked,
        policy,
        diff,
        sync_app,
        options,
        insecure_plugins: insecure,
        prune_guard,
        live_state: state,
    })
}

/// What routes a chart's renders to one render server replica: its
/// repository (a Helm repository's URL, an OCI chart's registry path).
fn chart_route(reference: &crate::source::helm::ChartRef) -> String {
    use crate::source::helm::ChartRef;
    match reference {
        ChartRef::Repo { repo, .. } => repo.clone(),
        ChartRef::Oci { repository, .. } => format!("oci://{repository}"),
    }
}

/// Records that application `name` needs the kinds of `objects`, and
/// those of the objects its status lists, watched on `target` (and no
/// other kinds).
async fn watch_kinds(
    app: &Application,
    name: &str,
    ctx: &Context,
    target: &super::destination::Target,
    objects: &[Value],
) {
    let mut kinds: std::collections::BTreeSet<(String, String)> = objects
        .iter()
        .map(|object| {
            let text = |field: &str| {
                object
                    .get(field)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            (text("apiVersion"), text("kind"))
        })
        .collect();
    let listed = app
        .status
        .as_ref()
        .map(|s| s.resources.as_slice())
        .unwrap_or_default();
    for resource in listed {
        if let Ok(resolved) = target
            .cluster
            .resolve_group_kind(&resource.group, &resource.kind)
            .await
        {
            kinds.insert((resolved.resource.api_version.clone(), resource.kind.clone()));
        }
    }
    let mut needed = Vec::new();
    for (api_version, kind) in kinds {
        if let Ok(resolved) = target.cluster.resolve(&api_version, &kind).await {
            needed.push(resolved);
        }
    }
    ctx.live
        .need(name, &target.server, &target.cluster, &needed);
}

/// Maps `spec.source.helm` (and `spec.source.chart`) onto the chain: the
/// step of the Plugin named [`HELM_PLUGIN`] (added when the Application
/// names no plugins) gets the block's parameters after its own, with
/// `kubeVersion`/`apiVersions` from the destination cluster unless the
/// block sets them. Returns what the host must do on the view.
async fn helm_step(
    app: &Application,
    ctx: &Context,
    project: &Project,
    target: &Target,
    chain: &mut Vec<RenderStep>,
    insecure: &mut Vec<String>,
) -> Result<Option<HelmHostWork>, Stop> {
    let source = &app.spec.source;
    let is_chart = source.chart.as_deref().is_some_and(|c| !c.is_empty());
    if source.helm.is_none() && !is_chart {
        // A helm step the Application configures itself gets only the
        // host's seed and clock.
        let Some(step) = chain.iter().position(|s| s.plugin.name == HELM_PLUGIN) else {
            return Ok(None);
        };
        add_random_seed(app, ctx, &mut chain[step].params).await?;
        return Ok(Some(HelmHostWork {
            step,
            ..HelmHostWork::default()
        }));
    }
    if chain.is_empty() {
        let described = plugins::describe(ctx, project, HELM_PLUGIN, World::Renderer).await?;
        if described.insecure {
            insecure.push(HELM_PLUGIN.to_owned());
        }
        chain.push(RenderStep {
            plugin: described.description,
            params: described.defaults.into_iter().collect(),
        });
    }
    let step = chain
        .iter()
        .position(|s| s.plugin.name == HELM_PLUGIN)
        .ok_or_else(|| {
            Stop::new(
                Reason::HelmPluginNotInChain,
                format!(
                    "spec.source.helm: the block maps onto the Plugin named {HELM_PLUGIN:?}, \
                     which spec.source.plugins does not name"
                ),
            )
        })?;
    let block = source.helm.clone().unwrap_or_default();
    let needs_cluster = block.kube_version.is_none() || block.api_versions.is_empty();
    let facts = if needs_cluster {
        target.cluster.facts().await.map_err(|e| {
            Stop::new(
                Reason::ClusterCapabilitiesUnavailable,
                format!(
                    "destination {}: cannot read its version and API versions for Helm's \
                     .Capabilities: {}",
                    target.server,
                    crate::text::chain(&e)
                ),
            )
        })?
    } else {
        crate::api::helm::ClusterFacts::default()
    };
    let name = app.metadata.name.clone().unwrap_or_default();
    let namespace = app.spec.destination.namespace.clone().unwrap_or_default();
    let plan = block
        .plan(&name, &namespace, &facts)
        .map_err(|e| Stop::new(Reason::InvalidHelmSource, e.to_string()))?;
    chain[step].params.extend(plan.params);
    add_random_seed(app, ctx, &mut chain[step].params).await?;
    Ok(Some(HelmHostWork {
        step,
        inline_values: plan.inline_values,
        file_parameters: plan.file_parameters,
        ignore_missing_value_files: plan.ignore_missing_value_files,
    }))
}

/// Gives the helm step the Application's `randomSeed` (unless it sets one):
/// its random functions' output cannot be computed from the repository.
async fn add_random_seed(
    app: &Application,
    ctx: &Context,
    params: &mut crate::plugin::Params,
) -> Result<(), Stop> {
    if params.iter().any(|(key, _)| key == RANDOM_SEED_PARAM) {
        return Ok(());
    }
    let seed = ctx
        .random_seed(
            app.metadata.namespace.as_deref().unwrap_or_default(),
            app.metadata.name.as_deref().unwrap_or_default(),
            &app.spec.project,
        )
        .await
        .map_err(|e| {
            Stop::new(
                Reason::RandomSeedUnavailable,
                format!(
                    "the key of the helm plugin's random functions: {}",
                    crate::text::chain(&e)
                ),
            )
        })?;
    params.push((RANDOM_SEED_PARAM.to_owned(), seed));
    Ok(())
}

/// The helm plugin's parameter carrying the Application's secret seed.
pub const RANDOM_SEED_PARAM: &str = "randomSeed";

/// The Application's project (the implicit `default` one when no AppProject
/// of that name exists).
pub(super) async fn load_project(app: &Application, ctx: &Context) -> Result<Project, Stop> {
    // The implicit `default` project is absent from the cache as from the
    // cluster: no request for it.
    let cached = ctx
        .projects
        .cached(&app.spec.project)
        .filter(|found| found.is_some() || app.spec.project == "default");
    let found = match cached {
        Some(found) => Ok(found),
        None => ctx.projects.get_opt(&app.spec.project).await,
    };
    match found {
        Ok(Some(found)) => Ok(Project::new(&app.spec.project, found.spec)),
        Ok(None) if app.spec.project == "default" => {
            Ok(Project::new("default", project::permissive()))
        }
        Ok(None) => Err(Stop::new(
            Reason::ProjectNotFound,
            format!("project {:?} does not exist", app.spec.project),
        )),
        Err(e) => Err(Stop::new(Reason::ProjectUnreadable, crate::text::chain(&e))),
    }
}

/// What a sync of `project`'s application may prune on `target`: only what
/// the project would let it write there.
pub(super) fn prune_guard(
    project: Project,
    server: &str,
    name: &str,
    controller_namespace: &str,
) -> PruneGuard {
    let (server, name, controller_namespace) = (
        server.to_owned(),
        name.to_owned(),
        controller_namespace.to_owned(),
    );
    Arc::new(move |key: &ObjectKey, namespaced: bool| {
        let at = Placement {
            server: &server,
            name: &name,
            controller_namespace: &controller_namespace,
        };
        project
            .admit_object(key, namespaced, &at)
            .map_err(|v| v.to_string())
    })
}

/// The destination's kinds and scopes, for policies to review each object
/// where it will land ([`crate::policy::placement`]).
async fn kind_scopes(target: &Target) -> Result<KindScopes, Stop> {
    let kinds = target
        .cluster
        .all_kinds()
        .await
        .map_err(|e| Stop::new(Reason::DiscoveryFailed, crate::text::chain(&e)))?;
    Ok(KindScopes::new(kinds.iter().map(|k| KindScope {
        group: k.resource.group.clone(),
        kind: k.resource.kind.clone(),
        namespaced: k.namespaced,
    })))
}

/// Holds every rendered object to the project: its kind, and its namespace
/// as the sync will write it (the destination namespace filled in for
/// namespaced objects that name none). A kind's scope comes from the
/// destination's discovery, else from a CRD in the same set; a kind known
/// to neither is held to the cluster-scoped rules unless it names a
/// namespace. One object out of bounds stops the whole sync.
async fn admit_objects(
    project: &Project,
    target: &Target,
    objects: &[Value],
    destination_namespace: &str,
    config: &super::ControllerConfig,
) -> Result<(), Stop> {
    let defined = DefinedScopes::of(objects);
    let at = Placement {
        server: &target.server,
        name: &target.name,
        controller_namespace: &config.namespace,
    };
    for object in objects {
        let mut key = ObjectKey::of(object);
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let namespaced = match target.cluster.resolve(api_version, &key.kind).await {
            Ok(resolved) => resolved.namespaced,
            Err(crate::cluster::ClusterError::UnknownKind { .. }) => {
                defined.namespaced(&key).unwrap_or(key.namespace.is_some())
            }
            // Without discovery the scope is unknown: never guess it.
            Err(e) => {
                return Err(Stop::new(
                    Reason::DiscoveryFailed,
                    format!("{key}: {}", crate::text::chain(&e)),
                ));
            }
        };
        if namespaced && key.namespace.is_none() && !destination_namespace.is_empty() {
            key.namespace = Some(destination_namespace.to_owned());
        }
        project
            .admit_object(&key, namespaced, &at)
            .map_err(|v| Stop::new(Reason::ResourceNotAllowed, v.to_string()))?;
    }
    Ok(())
}

/// The Application's repository, if the controller may fetch it: a
/// repository on the controller's own filesystem (`file://`, a plain path)
/// would let any Application read whatever the controller can read, so it
/// is refused unless [`ControllerConfig::allow_file_repositories`] is set.
///
/// [`ControllerConfig::allow_file_repositories`]: super::ControllerConfig::allow_file_repositories
fn repository(app: &Application, config: &super::ControllerConfig) -> Result<RepoUrl, Stop> {
    let url = RepoUrl::parse(&app.spec.source.repo_url)
        .map_err(|e| Stop::new(Reason::InvalidRepoUrl, format!("spec.source.repoURL: {e}")))?;
    if url.is_local() && !config.allow_file_repositories {
        return Err(Stop::new(
            Reason::FileRepositoryNotAllowed,
            format!(
                "spec.source.repoURL {url}: repositories on the controller's filesystem are refused; \
                 start the controller with --allow-file-repositories to allow them (development only)"
            ),
        ));
    }
    Ok(url)
}

/// A path of a spec as the request carries it: no `./`, no slashes at
/// either end, empty for the root.
fn normalized_path(path: &str) -> String {
    path.trim_start_matches("./")
        .trim_matches('/')
        .trim_start_matches('.')
        .to_owned()
}

/// The repository of a policy's own source, if the controller may fetch
/// it. Policy sources are set by whoever may edit the AppProject (or, for
/// an Application's own policies, held to its project's `sourceRepos` by
/// [`Project::admit`]); either way a repository on the controller's
/// filesystem is refused unless
/// [`ControllerConfig::allow_file_repositories`] is set, as for
/// Applications.
///
/// [`ControllerConfig::allow_file_repositories`]: super::ControllerConfig::allow_file_repositories
fn policy_repository(
    policy: &str,
    raw: &str,
    config: &super::ControllerConfig,
) -> Result<RepoUrl, Stop> {
    let url = RepoUrl::parse(raw).map_err(|e| {
        Stop::new(
            Reason::InvalidPolicySource,
            format!("policy {policy}: source.repoURL: {e}"),
        )
    })?;
    if url.is_local() && !config.allow_file_repositories {
        return Err(Stop::new(
            Reason::FileRepositoryNotAllowed,
            format!(
                "policy {policy}: source.repoURL {url}: repositories on the controller's filesystem are refused; \
                 start the controller with --allow-file-repositories to allow them (development only)"
            ),
        ));
    }
    Ok(url)
}

/// The sync options an Application's spec asks for.
fn sync_options(app: &Application, ctx: &Context) -> Result<SyncOptions, Stop> {
    let config = &ctx.config;
    let mut options = SyncOptions {
        health_timeout: config.health_timeout,
        manager: config.manager.clone(),
        ..SyncOptions::default()
    };
    let policy = app.spec.sync_policy.clone().unwrap_or_default();
    for option in &policy.sync_options {
        options
            .set(option)
            .map_err(|e| Stop::new(Reason::InvalidSyncOption, e.to_string()))?;
    }
    options.prune = policy.automated.as_ref().is_some_and(|a| a.prune);
    if let Some(retry) = &policy.retry {
        let backoff = retry.backoff.clone().unwrap_or_default();
        let parse = |text: Option<&String>, default: Duration| -> Result<Duration, Stop> {
            match text {
                None => Ok(default),
                Some(t) => crate::units::parse_duration(t).map_err(|_| {
                    Stop::new(
                        Reason::InvalidRetry,
                        format!("retry backoff duration {t:?} is not a duration such as 5s"),
                    )
                }),
            }
        };
        options.retry = RetryPolicy {
            limit: retry.limit.unwrap_or(5),
            duration: parse(backoff.duration.as_ref(), Duration::from_secs(5))?,
            factor: backoff.factor.unwrap_or(2),
            max_duration: parse(backoff.max_duration.as_ref(), Duration::from_secs(180))?,
        };
    }
    Ok(options)
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
