//! The comparison half of a reconcile: project rules → destination →
//! revision → render → policy → kinds → diff. It changes nothing anywhere,
//! so `kiln app diff` runs exactly what the controller runs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kube::api::Api;
use serde_json::Value;

use super::destination::Target;
use super::plugins;
use super::project::{self, Placement, Project};
use super::reconcile::Context;
use crate::api::{AppProject, Application, PolicyFinding, PolicyStatus};
use crate::diff::{DiffOptions, IgnoreRules, Report};
use crate::manifest::ObjectKey;
use crate::plugin::{AppContext, World};
use crate::policy;
use crate::render::{self, Step};
use crate::source::SourceView;
use crate::source::git::{RepoUrl, Revision};
use crate::sync::{Application as SyncApp, DefinedScopes, Engine, RetryPolicy, SyncOptions};

/// Why a comparison (or a sync) stopped: recorded as a condition of the
/// Application with a reason a person can act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stop {
    /// The condition type, e.g. `ProjectViolation`.
    pub kind: &'static str,
    /// The reason, e.g. `PluginNotFound`.
    pub reason: &'static str,
    /// What happened, naming the file, object or plugin.
    pub message: String,
}

impl Stop {
    /// A stop. The message is bounded ([`crate::text::MAX_MESSAGE`]): it is stored in
    /// the Application's status.
    pub fn new(kind: &'static str, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            kind,
            reason,
            message: crate::text::bounded(&message.into(), crate::text::MAX_MESSAGE),
        }
    }
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.kind, self.reason, self.message)
    }
}

impl std::error::Error for Stop {}

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
}

impl Comparison {
    /// A sync engine for this comparison's destination.
    pub fn engine(&self, options: SyncOptions) -> Engine<'_> {
        Engine::new(&self.target.cluster, self.sync_app.clone(), options)
    }
}

/// Compares one Application with its destination.
pub async fn compare(app: &Application, ctx: &Context, to: &CompareTo) -> Result<Comparison, Stop> {
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
                crate::text::chain(&e),
            ));
        }
    };
    let url = repository(app, config)?;
    project.admit(app).map_err(|v| {
        Stop::new(
            "ProjectViolation",
            "SourceOrDestinationNotAllowed",
            v.to_string(),
        )
    })?;
    let target = ctx
        .destinations
        .resolve(&app.spec.destination)
        .await
        .map_err(|e| {
            let reason = match e {
                super::destination::DestinationError::NotRegistered { .. } => "UnknownDestination",
                _ => "InvalidDestination",
            };
            Stop::new("InvalidSpec", reason, crate::text::chain(&e))
        })?;
    let destination_namespace = app.spec.destination.namespace.clone().unwrap_or_default();
    project
        .admit_destination(&target.server, &target.name, &destination_namespace)
        .map_err(|v| {
            Stop::new(
                "ProjectViolation",
                "SourceOrDestinationNotAllowed",
                v.to_string(),
            )
        })?;

    // Revision.
    let revision = Revision::parse(
        to.revision
            .as_deref()
            .unwrap_or(&app.spec.source.target_revision),
    );
    let tree = ctx.git.poll(&url, &revision).await.map_err(|e| {
        Stop::new(
            "ComparisonError",
            "SourceUnavailable",
            crate::text::chain(&e),
        )
    })?;
    let commit = tree.commit().to_string();
    tracing::Span::current().record("revision", commit.as_str());

    // Render.
    let mut chain = Vec::new();
    let mut insecure = Vec::new();
    for used in &app.spec.source.plugins {
        let loaded = plugins::load(ctx, &project, &used.name, World::Renderer).await?;
        if loaded.insecure {
            insecure.push(used.name.clone());
        }
        let mut params: BTreeMap<String, String> = loaded.defaults;
        params.extend(used.parameters.clone());
        chain.push(Step::Plugin {
            plugin: loaded.plugin,
            params: params.into_iter().collect(),
        });
    }
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
    let rendered_objects = match ctx.render_cache.get(&key, view.clone()).await {
        Some(cached) => {
            tracing::debug!("render cache hit");
            ctx.read_paths.record(&name, &cached.read_set);
            cached.objects
        }
        None => {
            let rendered = render::render(view.clone(), &context, &chain)
                .await
                .map_err(|e| {
                    Stop::new("ComparisonError", "RenderFailed", crate::text::chain(&e))
                })?;
            ctx.metrics.renders.inc();
            for (plugin, took) in &rendered.timings {
                ctx.metrics
                    .plugin_call_seconds
                    .get_or_create(&vec![
                        ("plugin".into(), plugin.clone()),
                        ("world".into(), "renderer".into()),
                    ])
                    .observe(took.as_secs_f64());
            }
            ctx.read_paths.record(&name, &rendered.read_set);
            ctx.render_cache
                .put(key, rendered.read_set, &rendered.objects)
                .await;
            rendered.objects
        }
    };

    // Policies: the project's (mandatory) and the application's own.
    let mut steps = Vec::new();
    for used in project.policies().iter().chain(&app.spec.policies) {
        let (step, unverified) = plugins::policy_step(ctx, &project, used).await?;
        if unverified {
            insecure.push(used.name.clone());
        }
        steps.push(step);
    }
    let report = policy::evaluate(view, &context, rendered_objects.clone(), &steps).await;
    for result in &report.results {
        ctx.metrics
            .plugin_call_seconds
            .get_or_create(&vec![
                ("plugin".into(), result.policy.clone()),
                ("world".into(), "policy".into()),
            ])
            .observe(result.duration.as_secs_f64());
    }
    let policy = policy_status(&report);

    // Kinds and namespaces allowed by the project.
    let objects: Vec<Value> = rendered_objects
        .iter()
        .map(|o| Value::Object(o.value().clone()))
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
        ignore: IgnoreRules::new(rules, &ctx.jq).await.map_err(|e| {
            Stop::new(
                "InvalidSpec",
                "InvalidIgnoreDifferences",
                crate::text::chain(&e),
            )
        })?,
        manager: config.manager.clone(),
        ..DiffOptions::default()
    };
    let diff = Engine::new(&target.cluster, sync_app.clone(), options.clone())
        .diff(objects.clone(), &diff_options)
        .await
        .map_err(|e| Stop::new("ComparisonError", "DiffFailed", crate::text::chain(&e)))?;
    Ok(Comparison {
        commit,
        target,
        objects,
        blocked: report.blocked(),
        policy,
        diff,
        sync_app,
        options,
        insecure_plugins: insecure,
    })
}

/// Findings an Application's status keeps; the rest are counted in
/// `status.policy.omitted`.
pub const MAX_FINDINGS: usize = 100;
/// The longest finding message kept, in bytes.
pub const MAX_FINDING_MESSAGE: usize = 1024;

/// The policy part of an Application's status: every finding once (a
/// policy reporting the same thing twice is shown once), at most
/// [`MAX_FINDINGS`] of them, each message bounded, and a count of what was
/// left out.
fn policy_status(report: &policy::Report) -> PolicyStatus {
    let mut findings: Vec<PolicyFinding> = Vec::new();
    let mut omitted = 0u32;
    let mut seen = std::collections::HashSet::new();
    for result in &report.results {
        let failure = result.error.as_ref().map(|error| PolicyFinding {
            policy: result.policy.clone(),
            mode: result.mode.to_string(),
            severity: "error".into(),
            object: None,
            field_path: None,
            message: format!("the policy failed to run: {error}"),
        });
        let reported = result.findings.iter().map(|f| PolicyFinding {
            policy: result.policy.clone(),
            mode: result.mode.to_string(),
            severity: f.severity.to_string(),
            object: f.object.as_ref().map(ToString::to_string),
            field_path: f.field_path.clone(),
            message: f.message.clone(),
        });
        for mut finding in reported.chain(failure) {
            finding.message = crate::text::bounded(&finding.message, MAX_FINDING_MESSAGE);
            if !seen.insert(finding.clone()) {
                continue;
            }
            if findings.len() < MAX_FINDINGS {
                findings.push(finding);
            } else {
                omitted = omitted.saturating_add(1);
            }
        }
    }
    PolicyStatus {
        blocked: report.blocked(),
        findings,
        omitted,
    }
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
                    "ComparisonError",
                    "DiscoveryFailed",
                    format!("{key}: {}", crate::text::chain(&e)),
                ));
            }
        };
        if namespaced && key.namespace.is_none() && !destination_namespace.is_empty() {
            key.namespace = Some(destination_namespace.to_owned());
        }
        project
            .admit_object(&key, namespaced, &at)
            .map_err(|v| Stop::new("ProjectViolation", "ResourceNotAllowed", v.to_string()))?;
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
    let url = RepoUrl::parse(&app.spec.source.repo_url).map_err(|e| {
        Stop::new(
            "InvalidSpec",
            "InvalidRepoURL",
            format!("spec.source.repoURL: {e}"),
        )
    })?;
    if url.is_local() && !config.allow_file_repositories {
        return Err(Stop::new(
            "InvalidSpec",
            "FileRepositoryNotAllowed",
            format!(
                "spec.source.repoURL {url}: repositories on the controller's filesystem are refused; \
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
            .map_err(|e| Stop::new("InvalidSpec", "InvalidSyncOption", e.to_string()))?;
    }
    options.prune = policy.automated.as_ref().is_some_and(|a| a.prune);
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
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::{Finding, ObjectRef, Severity};
    use crate::policy::{Mode, PolicyResult, Report};

    fn finding(name: &str, path: &str, message: &str) -> Finding {
        Finding {
            object: Some(ObjectRef {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: None,
                name: name.into(),
            }),
            field_path: Some(path.into()),
            message: message.into(),
            severity: Severity::Error,
        }
    }

    #[test]
    fn findings_in_the_status_are_unique_bounded_and_counted() {
        let mut findings = vec![
            finding("a", "metadata.labels", "missing label x"),
            finding("a", "metadata.labels", "missing label x"),
            finding("a", "spec.template.metadata.labels", "missing label x"),
            finding("b", "metadata.labels", &"long ".repeat(1000)),
        ];
        findings.extend((0..200).map(|i| finding(&format!("n{i}"), "metadata", "m")));
        let report = Report {
            results: vec![PolicyResult {
                policy: "required-labels".into(),
                mode: Mode::Enforce,
                findings,
                error: None,
                duration: std::time::Duration::ZERO,
            }],
        };
        let status = policy_status(&report);
        assert_eq!(status.findings.len(), MAX_FINDINGS);
        // 204 findings, one repeated: 203 distinct, 100 kept.
        assert_eq!(status.omitted, 103);
        assert_eq!(
            status.findings[1].field_path.as_deref(),
            Some("spec.template.metadata.labels"),
            "the same message at another field is another finding"
        );
        assert!(status.findings[2].message.len() <= MAX_FINDING_MESSAGE + 40);
        assert!(status.findings[2].message.ends_with("bytes cut)"));
    }
}
