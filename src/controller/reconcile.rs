//! One reconcile of one Application: project rules → revision → render →
//! policy → diff → sync (when automated) → status. Every failure becomes a
//! condition with a reason a person can act on; nothing here crashes the
//! controller or applies half of something without saying so.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use super::project::{self, Project};
use crate::api::{
    AppProject, Application, ApplicationStatus, Condition, HealthInfo, HistoryEntry,
    OperationState, Plugin as PluginResource, PluginKind, PolicyFinding, PolicyMode, PolicyStatus,
    PolicyUse, ResourceResult, ResourceStatus, SyncInfo,
};
use crate::cluster::Cluster;
use crate::diff::{DiffOptions, IgnoreRules, SyncStatus};
use crate::health::{self, Health};
use crate::manifest::ObjectKey;
use crate::plugin::{AppContext, Limits, Plugin, PluginHost, World};
use crate::policy::{self, Mode, PolicyStep};
use crate::render::{self, Step};
use crate::source::SourceView;
use crate::source::git::{GitSource, RepoUrl, Revision};
use crate::sync::{
    Action as SyncAction, Application as SyncApp, Engine, Outcome, RetryPolicy, SyncOptions,
};

/// How the controller runs. Defaults: namespace `kiln`, resync every 180 s.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// Where Applications, AppProjects and Plugins live.
    pub namespace: String,
    /// How often every Application is reconciled (plus up to 10% jitter).
    pub resync: Duration,
    /// How long a sync waits for a wave to become healthy.
    pub health_timeout: Duration,
    /// How many synced revisions `status.history` keeps.
    pub history_limit: usize,
    /// The field manager of applied resources.
    pub manager: String,
    /// Where the render cache keeps its entries; `None`: memory only.
    pub render_cache_dir: Option<PathBuf>,
    /// How many renders the cache keeps in memory.
    pub render_cache_entries: usize,
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
            render_cache_entries: 4096,
        }
    }
}

/// What every reconcile shares.
pub struct Context {
    /// The client of the controller's own cluster (where Applications live
    /// and, for now, the only destination).
    pub client: kube::Client,
    /// The destination cluster.
    pub cluster: Cluster,
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
    plugins: Mutex<HashMap<(PathBuf, World, String), Plugin>>,
}

impl Context {
    /// A context.
    pub fn new(
        client: kube::Client,
        git: GitSource,
        host: PluginHost,
        config: ControllerConfig,
    ) -> Self {
        let render_cache = super::cache::RenderCache::new(config.render_cache_entries);
        let render_cache = match &config.render_cache_dir {
            Some(dir) => render_cache.with_dir(dir),
            None => render_cache,
        };
        Self {
            cluster: Cluster::new(client.clone()),
            client,
            git,
            host,
            config,
            metrics: super::http::Metrics::default(),
            render_cache,
            plugins: Mutex::new(HashMap::new()),
        }
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

/// A failure that ends the reconcile with a condition.
struct Stop {
    kind: &'static str,
    reason: &'static str,
    message: String,
}

impl Stop {
    fn new(kind: &'static str, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            kind,
            reason,
            message: message.into(),
        }
    }
}

fn condition(stop: &Stop) -> Condition {
    Condition {
        type_: stop.kind.into(),
        status: "True".into(),
        reason: Some(stop.reason.into()),
        message: Some(stop.message.clone()),
        last_transition_time: Some(crate::units::now()),
    }
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

/// Reconciles one Application.
pub async fn reconcile(app: Arc<Application>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let name = app.metadata.name.clone().unwrap_or_default();
    let namespace = app
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| ctx.config.namespace.clone());
    let span = tracing::info_span!("reconcile", app = %name, revision = tracing::field::Empty);
    let apps: Api<Application> = Api::namespaced(ctx.client.clone(), &namespace);
    if app.metadata.deletion_timestamp.is_some() {
        return tracing::Instrument::instrument(finalize(&app, &ctx, &apps), span).await;
    }
    let mut status = app.status.clone().unwrap_or_default();
    status.conditions.clear();
    let started = std::time::Instant::now();
    let outcome =
        tracing::Instrument::instrument(run(&app, &ctx, &mut status, &span), span.clone()).await;
    ctx.metrics
        .reconcile_seconds
        .observe(started.elapsed().as_secs_f64());
    let result = if outcome.is_ok() { "ok" } else { "condition" };
    ctx.metrics
        .reconciles
        .get_or_create(&vec![("result".into(), result.into())])
        .inc();
    match outcome {
        Ok(()) => {}
        Err(stop) => {
            tracing::warn!(reason = stop.reason, message = %stop.message, "reconcile stopped");
            status.conditions.push(condition(&stop));
            if status.sync.is_none() {
                status.sync = Some(SyncInfo {
                    status: "Unknown".into(),
                    ..SyncInfo::default()
                });
            }
        }
    }
    status.reconciled_at = Some(crate::units::now());
    status.observed_generation = app.metadata.generation;
    let patch = json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Application", "status": status});
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
    Ok(requeue(&ctx.config))
}

/// An Application being deleted: with the resources finalizer, its tracked
/// resources are deleted first (cascade); then the finalizer goes.
async fn finalize(
    app: &Application,
    ctx: &Context,
    apps: &Api<Application>,
) -> Result<Action, ReconcileError> {
    let name = app.metadata.name.clone().unwrap_or_default();
    let finalizers = app.metadata.finalizers.clone().unwrap_or_default();
    if !finalizers
        .iter()
        .any(|f| f == crate::api::RESOURCES_FINALIZER)
    {
        return Ok(Action::await_change());
    }
    let options = SyncOptions {
        prune: true,
        manager: ctx.config.manager.clone(),
        ..SyncOptions::default()
    };
    let target = SyncApp {
        name: name.clone(),
        namespace: app.spec.destination.namespace.clone(),
    };
    match Engine::new(&ctx.cluster, target, options)
        .sync(Vec::new())
        .await
    {
        Ok(result) if result.outcome == Outcome::Succeeded => {
            tracing::info!(
                pruned = result.count(SyncAction::Pruned),
                "deleted the application's resources"
            );
        }
        Ok(result) => {
            tracing::warn!(message = %result.message, "could not delete every resource; retrying");
            return Ok(Action::requeue(Duration::from_secs(5)));
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not delete the application's resources; retrying");
            return Ok(Action::requeue(Duration::from_secs(5)));
        }
    }
    let remaining: Vec<String> = finalizers
        .into_iter()
        .filter(|f| f != crate::api::RESOURCES_FINALIZER)
        .collect();
    let patch = json!({"metadata": {"finalizers": remaining, "resourceVersion": app.metadata.resource_version}});
    apps.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| ReconcileError { app: name, source })?;
    Ok(Action::await_change())
}

/// The work; `Err` is the condition to record.
async fn run(
    app: &Application,
    ctx: &Context,
    status: &mut ApplicationStatus,
    span: &tracing::Span,
) -> Result<(), Stop> {
    let config = &ctx.config;
    let name = app.metadata.name.clone().unwrap_or_default();

    // Project rules, before anything else.
    let projects: Api<AppProject> = Api::namespaced(ctx.client.clone(), &config.namespace);
    let project = match projects.get_opt(&app.spec.project).await {
        Ok(Some(found)) => Project::new(&app.spec.project, found.spec),
        Ok(None) if app.spec.project == "default" => Project::new("default", project::permissive()),
        Ok(None) => {
            return Err(Stop::new(
                "InvalidSpec",
                "ProjectNotFound",
                format!("project {:?} does not exist", app.spec.project),
            ));
        }
        Err(e) => {
            return Err(Stop::new(
                "ComparisonError",
                "ProjectUnreadable",
                e.to_string(),
            ));
        }
    };
    project.admit(app).map_err(|v| {
        Stop::new(
            "ProjectViolation",
            "SourceOrDestinationNotAllowed",
            v.to_string(),
        )
    })?;
    if let Some(server) = &app.spec.destination.server
        && server != "https://kubernetes.default.svc"
    {
        return Err(Stop::new(
            "InvalidSpec",
            "UnknownDestination",
            format!(
                "destination server {server:?} is not registered (only https://kubernetes.default.svc, the controller's cluster, for now)"
            ),
        ));
    }

    // Revision.
    let url = RepoUrl::parse(&app.spec.source.repo_url).map_err(|e| {
        Stop::new(
            "InvalidSpec",
            "InvalidRepoURL",
            format!("spec.source.repoURL: {e}"),
        )
    })?;
    let revision = Revision::parse(&app.spec.source.target_revision);
    let tree = ctx
        .git
        .poll(&url, &revision)
        .await
        .map_err(|e| Stop::new("ComparisonError", "SourceUnavailable", format!("{e:#}")))?;
    let commit = tree.commit().to_string();
    span.record("revision", commit.as_str());

    // Render.
    let mut chain = Vec::new();
    for used in &app.spec.source.plugins {
        let (plugin, defaults) = load_plugin(ctx, &used.name, World::Renderer).await?;
        let mut params: BTreeMap<String, String> = defaults;
        params.extend(used.parameters.clone());
        chain.push(Step::Plugin {
            plugin,
            params: params.into_iter().collect(),
        });
    }
    let destination_namespace = app.spec.destination.namespace.clone().unwrap_or_default();
    let context = AppContext {
        name: name.clone(),
        namespace: destination_namespace.clone(),
        project: app.spec.project.clone(),
        repo_url: app.spec.source.repo_url.clone(),
        revision: commit.clone(),
        path: app
            .spec
            .source
            .path
            .trim_start_matches("./")
            .trim_matches('/')
            .trim_start_matches('.')
            .to_owned(),
    };
    let view: Arc<dyn SourceView> = Arc::new(tree);
    // What shapes the render besides the source: plugins, parameters, the
    // application's path and destination.
    let mut shape = vec![
        context.path.clone(),
        context.namespace.clone(),
        context.name.clone(),
        context.project.clone(),
        context.repo_url.clone(),
    ];
    for step in &chain {
        if let Step::Plugin { plugin, params } = step {
            shape.push(plugin.digest().to_string());
            shape.push(format!("{params:?}"));
        }
    }
    let key = super::cache::RenderCache::key(&shape.iter().map(String::as_str).collect::<Vec<_>>());
    let rendered_objects = match ctx.render_cache.get(&key, &*view) {
        Some(objects) => {
            tracing::debug!("render cache hit");
            objects
        }
        None => {
            let rendered = render::render(view.clone(), &context, &chain)
                .await
                .map_err(|e| Stop::new("ComparisonError", "RenderFailed", format!("{e:#}")))?;
            ctx.metrics.renders.inc();
            ctx.render_cache
                .put(key, rendered.read_set, rendered.objects.clone());
            rendered.objects
        }
    };

    // Policies: the project's (mandatory) and the application's own.
    let mut steps = Vec::new();
    for used in project.policies().iter().chain(&app.spec.policies) {
        steps.push(policy_step(ctx, used).await?);
    }
    let report = policy::evaluate(view, &context, rendered_objects.clone(), &steps).await;
    status.policy = Some(PolicyStatus {
        blocked: report.blocked(),
        findings: report
            .results
            .iter()
            .flat_map(|r| {
                let mut findings: Vec<PolicyFinding> = r
                    .findings
                    .iter()
                    .map(|f| PolicyFinding {
                        policy: r.policy.clone(),
                        mode: r.mode.to_string(),
                        severity: f.severity.to_string(),
                        object: f.object.as_ref().map(ToString::to_string),
                        field_path: f.field_path.clone(),
                        message: f.message.clone(),
                    })
                    .collect();
                if let Some(error) = &r.error {
                    findings.push(PolicyFinding {
                        policy: r.policy.clone(),
                        mode: r.mode.to_string(),
                        severity: "error".into(),
                        object: None,
                        field_path: None,
                        message: format!("the policy failed to run: {error}"),
                    });
                }
                findings
            })
            .collect(),
    });

    // Kinds allowed by the project.
    let objects: Vec<Value> = rendered_objects
        .iter()
        .map(|o| Value::Object(o.value().clone()))
        .collect();
    for object in &objects {
        let key = ObjectKey::of(object);
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let namespaced = match ctx.cluster.resolve(api_version, &key.kind).await {
            Ok(resolved) => resolved.namespaced,
            // Unknown kinds (a CRD in the same set) are checked as namespaced
            // when they carry a namespace.
            Err(_) => key.namespace.is_some() || !destination_namespace.is_empty(),
        };
        project
            .admit_object(&key, namespaced)
            .map_err(|v| Stop::new("ProjectViolation", "ResourceNotAllowed", v.to_string()))?;
    }

    // Diff.
    let sync_app = SyncApp {
        name: name.clone(),
        namespace: Some(destination_namespace).filter(|ns| !ns.is_empty()),
    };
    let mut options = SyncOptions {
        health_timeout: config.health_timeout,
        manager: config.manager.clone(),
        ..SyncOptions::default()
    };
    let policy = app.spec.sync_policy.clone().unwrap_or_default();
    for option in &policy.sync_options {
        options
            .set(option)
            .map_err(|e| Stop::new("InvalidSpec", "InvalidSyncOption", e.to_string()))?;
    }
    let automated = policy.automated.clone();
    options.prune = automated.as_ref().is_some_and(|a| a.prune);
    if let Some(retry) = &policy.retry {
        let backoff = retry.backoff.clone().unwrap_or_default();
        let parse = |text: Option<&String>, default: Duration| -> Result<Duration, Stop> {
            match text {
                None => Ok(default),
                Some(t) => crate::units::parse_duration(t).map_err(|_| {
                    Stop::new(
                        "InvalidSpec",
                        "InvalidRetry",
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
    let rules: Vec<crate::diff::IgnoreDifferences> =
        app.spec.ignore_differences.iter().map(Into::into).collect();
    let diff_options = DiffOptions {
        ignore: IgnoreRules::new(rules, crate::diff::ignore::DEFAULT_JQ_TIMEOUT)
            .map_err(|e| Stop::new("InvalidSpec", "InvalidIgnoreDifferences", e.to_string()))?,
        manager: config.manager.clone(),
        ..DiffOptions::default()
    };
    let engine = Engine::new(&ctx.cluster, sync_app, options);
    let diff = engine
        .diff(objects.clone(), &diff_options)
        .await
        .map_err(|e| Stop::new("ComparisonError", "DiffFailed", format!("{e:#}")))?;
    let in_sync = diff.in_sync();
    status.sync = Some(SyncInfo {
        status: if in_sync { "Synced" } else { "OutOfSync" }.into(),
        revision: Some(commit.clone()),
        compared_to: None,
    });
    status.resources = diff
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
    if report.blocked() {
        return Err(Stop::new(
            "PolicyBlocked",
            "EnforcedPolicyFailed",
            "an enforced policy failed; nothing was applied (see status.policy)",
        ));
    }

    // Sync, when automated and needed: a new revision, or drift with self-heal.
    let last_synced = status
        .operation_state
        .as_ref()
        .and_then(|o| o.revision.clone());
    let needs_sync = !in_sync
        && automated.as_ref().is_some_and(|a| {
            last_synced.as_deref() != Some(commit.as_str())
                || a.self_heal
                || diff.count(SyncStatus::Missing) > 0
        });
    let empty = objects.is_empty() && !automated.as_ref().is_some_and(|a| a.allow_empty);
    if needs_sync && !empty {
        let started = crate::units::now();
        let result = engine
            .sync(objects.clone())
            .await
            .map_err(|e| Stop::new("SyncError", "SyncFailed", format!("{e:#}")))?;
        let succeeded = result.outcome == Outcome::Succeeded;
        let outcome = if succeeded { "succeeded" } else { "failed" };
        ctx.metrics
            .syncs
            .get_or_create(&vec![("outcome".into(), outcome.into())])
            .inc();
        status.operation_state = Some(OperationState {
            phase: if succeeded { "Succeeded" } else { "Failed" }.into(),
            message: Some(result.message.clone()),
            revision: Some(commit.clone()),
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
        if !succeeded {
            return Err(Stop::new("SyncError", "SyncFailed", result.message));
        }
        let id = status.history.last().map_or(0, |h| h.id) + 1;
        status.history.push(HistoryEntry {
            id,
            revision: commit.clone(),
            deployed_at: crate::units::now(),
        });
        let excess = status.history.len().saturating_sub(config.history_limit);
        status.history.drain(..excess);
        let synced = result.count(SyncAction::Failed) == 0;
        status.sync = Some(SyncInfo {
            status: if synced { "Synced" } else { "OutOfSync" }.into(),
            revision: Some(commit.clone()),
            compared_to: None,
        });
        // Pruned objects are gone; extraneous ones stay reported otherwise.
        let pruned = automated.as_ref().is_some_and(|a| a.prune);
        status
            .resources
            .retain(|r| !(pruned && r.status == "Extraneous"));
        for resource in &mut status.resources {
            if resource.status != "Extraneous" {
                resource.status = "Synced".into();
            }
        }
    }

    // Health of what is live.
    let mut healths = Vec::new();
    for resource in &mut status.resources {
        let object = objects.iter().find(|o| {
            let key = ObjectKey::of(o);
            key.kind == resource.kind && key.name == resource.name && key.group == resource.group
        });
        let Some(object) = object else { continue };
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let health = match ctx.cluster.resolve(api_version, &resource.kind).await {
            Ok(resolved) => match ctx
                .cluster
                .api(&resolved, resource.namespace.as_deref())
                .get_opt(&resource.name)
                .await
            {
                Ok(Some(live)) => {
                    health::assess(&serde_json::to_value(live).unwrap_or_default()).status
                }
                Ok(None) => Health::Missing,
                Err(_) => Health::Unknown,
            },
            Err(_) => Health::Missing,
        };
        resource.health = Some(health.to_string());
        healths.push(health);
    }
    status.health = Some(HealthInfo {
        status: health::aggregate(healths).to_string(),
        message: None,
    });
    Ok(())
}

/// Loads a Plugin resource's component (compiled once per file and world).
async fn load_plugin(
    ctx: &Context,
    name: &str,
    world: World,
) -> Result<(Plugin, BTreeMap<String, String>), Stop> {
    let plugins: Api<PluginResource> = Api::namespaced(ctx.client.clone(), &ctx.config.namespace);
    let resource = plugins
        .get_opt(name)
        .await
        .map_err(|e| Stop::new("ComparisonError", "PluginUnreadable", e.to_string()))?
        .ok_or_else(|| {
            Stop::new(
                "InvalidSpec",
                "PluginNotFound",
                format!(
                    "plugin {name:?} is not in the catalog (no Plugin {name} in namespace {})",
                    ctx.config.namespace
                ),
            )
        })?;
    let expected = match world {
        World::Renderer => PluginKind::Renderer,
        _ => PluginKind::Policy,
    };
    if resource.spec.kind != expected {
        return Err(Stop::new(
            "InvalidSpec",
            "PluginKindMismatch",
            format!(
                "plugin {name:?} is a {:?}, used as a {expected:?}",
                resource.spec.kind
            ),
        ));
    }
    let reference = &resource.spec.reference;
    if reference.starts_with("oci://") || reference.starts_with("https://") {
        return Err(Stop::new(
            "InvalidSpec",
            "PluginReferenceNotSupported",
            format!(
                "plugin {name:?}: {reference:?}: OCI and HTTPS references are not supported by the controller yet; use a file path"
            ),
        ));
    }
    let limits = plugin_limits(ctx, name, resource.spec.limits.as_ref())?;
    let key = (PathBuf::from(reference), world, format!("{limits:?}"));
    let mut cache = ctx.plugins.lock().await;
    if let Some(plugin) = cache.get(&key) {
        return Ok((plugin.clone(), resource.spec.defaults.clone()));
    }
    let host = ctx.host.clone();
    let path = PathBuf::from(reference);
    let loaded = tokio::task::spawn_blocking(move || host.load_file(&path, world, Some(limits)))
        .await
        .map_err(|e| Stop::new("ComparisonError", "PluginLoadFailed", e.to_string()))?
        .map_err(|e| {
            Stop::new(
                "ComparisonError",
                "PluginLoadFailed",
                format!("plugin {name:?}: {e:#}"),
            )
        })?;
    cache.insert(key, loaded.clone());
    Ok((loaded, resource.spec.defaults.clone()))
}

fn plugin_limits(
    ctx: &Context,
    name: &str,
    limits: Option<&crate::api::PluginLimits>,
) -> Result<Limits, Stop> {
    let mut out = ctx.host.config().default_limits;
    let Some(limits) = limits else { return Ok(out) };
    let bad = |field: &str, text: &str| {
        Stop::new(
            "InvalidSpec",
            "InvalidPluginLimits",
            format!("plugin {name:?}: limits.{field} {text:?} is invalid"),
        )
    };
    if let Some(text) = &limits.memory {
        out.memory = crate::units::parse_size(text).map_err(|_| bad("memory", text))?;
    }
    if let Some(text) = &limits.timeout {
        out.timeout = crate::units::parse_duration(text).map_err(|_| bad("timeout", text))?;
    }
    if let Some(text) = &limits.output_size {
        out.output = crate::units::parse_size(text).map_err(|_| bad("outputSize", text))?;
    }
    Ok(out)
}

async fn policy_step(ctx: &Context, used: &PolicyUse) -> Result<PolicyStep, Stop> {
    let (plugin, defaults) = load_plugin(ctx, &used.name, World::Policy).await?;
    let mut settings = defaults;
    settings.extend(used.settings.clone());
    let mode = match used.mode.unwrap_or(PolicyMode::Enforce) {
        PolicyMode::Enforce => Mode::Enforce,
        PolicyMode::Warn => Mode::Warn,
        PolicyMode::Audit => Mode::Audit,
    };
    Ok(PolicyStep {
        plugin,
        settings: settings.into_iter().collect(),
        mode,
    })
}
