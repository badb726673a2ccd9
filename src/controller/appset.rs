//! The ApplicationSet controller: keeps each set's Applications equal to
//! what its generators and template give ([`crate::appset::generate()`]),
//! within its `syncPolicy`, on a timer and whenever the set changes.
//!
//! A reconcile generates first and changes nothing until generation has
//! succeeded: a generator or template error leaves every Application as
//! it is and says why in the set's `ErrorOccurred` condition. Generated
//! Applications carry the label [`SET_LABEL`] and an owner reference to
//! their set (deleting the set deletes them, through the API server's
//! garbage collector); an Application of the same name that another set
//! or a person made is never taken over. Templates are rendered by the
//! `appset` Plugin, in the controller's own sandbox. Sets are sharded as
//! Applications are.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::context::Context;
use super::project::Project;
use super::secrets::{self, SecretType};
use crate::api::RESOURCES_FINALIZER;
use crate::api::appset::{ApplicationSet, ApplicationSetStatus};
use crate::api::{Application, Condition};
use crate::appset::{self, AppSetError, ClusterInfo, Sources, TemplateRequest, Templater};
use crate::plugin::World;
use crate::render::engine::Catalog;
use crate::source::SourceView;

/// The label naming the set that generated an Application.
pub const SET_LABEL: &str = "kiln.dev/application-set";
/// The Plugin that renders templates.
pub const APPSET_PLUGIN: &str = "appset";
/// The field manager of the set's writes to its Applications.
const MANAGER: &str = "kiln-applicationset";
/// Sets generated at once.
const CONCURRENCY: u16 = 4;
/// Names listed in a set's status.
const MAX_LISTED: usize = 1000;

/// What the ApplicationSet controller holds besides the Application
/// controller's [`Context`].
pub struct AppSets {
    ctx: Arc<Context>,
    catalog: Catalog,
    resync: Duration,
}

/// Runs the ApplicationSet controller until the controller stops.
pub async fn run(ctx: Arc<Context>, resync: Duration) {
    let sets: Api<ApplicationSet> = Api::namespaced(ctx.client.clone(), &ctx.config.namespace);
    let state = Arc::new(AppSets {
        catalog: Catalog::new(ctx.config.catalog.clone()),
        ctx: ctx.clone(),
        resync,
    });
    let stop = ctx.shutdown.clone();
    Controller::new(sets, watcher::Config::default())
        .with_config(kube::runtime::controller::Config::default().concurrency(CONCURRENCY))
        .graceful_shutdown_on(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
        .run(reconcile, error_policy, state)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "applicationset controller event");
            }
        })
        .await;
}

fn error_policy(set: Arc<ApplicationSet>, error: &kube::Error, _: Arc<AppSets>) -> Action {
    tracing::warn!(set = %set.name_any(), %error, "applicationset reconcile failed; retrying in 10s");
    Action::requeue(Duration::from_secs(10))
}

/// The finalizer a set holds until its Applications are let go as its
/// policy says (orphaned, or without their resources finalizer).
pub const SET_FINALIZER: &str = "kiln.dev/applicationset";

/// Annotations of a generated Application that people and tools write
/// and a set keeps (a refresh asked for, an operation requested).
const KEPT_ANNOTATIONS: [&str; 2] = [
    crate::api::REFRESH_ANNOTATION,
    crate::api::OPERATION_ANNOTATION,
];

/// The finalizers the Application controller adds itself (its hooks'),
/// which a set keeps.
const CONTROLLER_FINALIZERS: [&str; 4] = [
    crate::api::PRE_DELETE_FINALIZER,
    crate::api::PRE_DELETE_CLEANUP_FINALIZER,
    crate::api::POST_DELETE_FINALIZER,
    crate::api::POST_DELETE_CLEANUP_FINALIZER,
];

/// One pass over one set.
pub async fn reconcile(
    set: Arc<ApplicationSet>,
    state: Arc<AppSets>,
) -> Result<Action, kube::Error> {
    let ctx = &state.ctx;
    let name = set.name_any();
    let namespace = set
        .namespace()
        .unwrap_or_else(|| ctx.config.namespace.clone());
    // Another replica's shard: looked at again at the next resync (a
    // shard this replica takes over is then generated here).
    let Some(_running) = ctx
        .shards
        .enter(&namespace, &format!("applicationset/{name}"))
    else {
        return Ok(Action::requeue(state.resync));
    };
    let span = tracing::info_span!("reconcile", applicationset = %name);
    let sets: Api<ApplicationSet> = Api::namespaced(ctx.client.clone(), &namespace);
    if set.metadata.deletion_timestamp.is_some() {
        tracing::Instrument::instrument(state.release(&set, &namespace, &sets), span).await?;
        return Ok(Action::await_change());
    }
    ensure_finalizer(&set, &sets).await?;
    let outcome = tracing::Instrument::instrument(state.generate(&set), span.clone()).await;
    let status = match outcome {
        Ok(generated) => {
            let applied = tracing::Instrument::instrument(
                state.apply(&set, &namespace, &generated.applications),
                span,
            )
            .await?;
            applied_status(&generated.applications, &applied)
        }
        Err(error) => {
            tracing::warn!(set = %name, %error, "generation failed; Applications left as they are");
            failed_status(set.status.as_ref(), &error)
        }
    };
    write_status(&sets, &name, set.status.as_ref(), status).await?;
    Ok(Action::requeue(state.resync))
}

/// The status of a set whose Applications were applied.
fn applied_status(applications: &[Application], applied: &Applied) -> ApplicationSetStatus {
    let errors = (!applied.errors.is_empty()).then(|| applied.errors.join("; "));
    ApplicationSetStatus {
        application_count: u32::try_from(applications.len()).unwrap_or(u32::MAX),
        applications: applications
            .iter()
            .take(MAX_LISTED)
            .filter_map(|a| a.metadata.name.clone())
            .collect(),
        conditions: vec![
            condition(
                "ErrorOccurred",
                errors.is_some(),
                if errors.is_some() {
                    "ApplicationsNotApplied"
                } else {
                    "ApplicationSetUpToDate"
                },
                errors.clone(),
            ),
            condition(
                "ParametersGenerated",
                true,
                "ParametersGenerated",
                Some(format!("{} parameter sets", applications.len())),
            ),
            condition(
                "ResourcesUpToDate",
                errors.is_none(),
                if errors.is_none() {
                    "ApplicationSetUpToDate"
                } else {
                    "ApplicationsNotApplied"
                },
                Some(applied.summary()),
            ),
        ],
    }
}

/// The status of a set whose generation failed: its Applications as they
/// were, and why.
fn failed_status(
    previous: Option<&ApplicationSetStatus>,
    error: &AppSetError,
) -> ApplicationSetStatus {
    let previous = previous.cloned().unwrap_or_default();
    let (reason, message) = (error.reason(), error.to_string());
    ApplicationSetStatus {
        application_count: previous.application_count,
        applications: previous.applications,
        conditions: vec![
            condition("ErrorOccurred", true, reason, Some(message.clone())),
            condition("ParametersGenerated", false, reason, Some(message)),
            condition(
                "ResourcesUpToDate",
                false,
                reason,
                Some("the Applications were left as they are".into()),
            ),
        ],
    }
}

fn condition(kind: &str, status: bool, reason: &str, message: Option<String>) -> Condition {
    Condition {
        type_: kind.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: Some(reason.to_owned()),
        message: message.map(|m| crate::text::bounded(&m, 4096)),
        last_transition_time: Some(crate::units::now()),
    }
}

/// Writes `status` unless only its transition times changed (a write that
/// changes nothing would only wake the set again).
async fn write_status(
    sets: &Api<ApplicationSet>,
    name: &str,
    previous: Option<&ApplicationSetStatus>,
    mut status: ApplicationSetStatus,
) -> Result<(), kube::Error> {
    if let Some(previous) = previous {
        for condition in &mut status.conditions {
            let unchanged = previous.conditions.iter().find(|c| {
                c.type_ == condition.type_
                    && c.status == condition.status
                    && c.reason == condition.reason
                    && c.message == condition.message
            });
            if let Some(before) = unchanged {
                condition.last_transition_time = before.last_transition_time.clone();
            }
        }
        if *previous == status {
            return Ok(());
        }
    }
    // Every field written, an empty list included (a merge patch leaves
    // out what it does not name).
    let body = json!({"status": {
        "conditions": status.conditions,
        "applicationCount": status.application_count,
        "applications": status.applications,
    }});
    sets.patch_status(name, &PatchParams::default(), &Patch::Merge(body))
        .await?;
    Ok(())
}

/// Adds [`SET_FINALIZER`] to `set` if it lacks it.
async fn ensure_finalizer(
    set: &ApplicationSet,
    sets: &Api<ApplicationSet>,
) -> Result<(), kube::Error> {
    if set.finalizers().iter().any(|f| f == SET_FINALIZER) {
        return Ok(());
    }
    let mut finalizers = set.finalizers().to_vec();
    finalizers.push(SET_FINALIZER.to_owned());
    write_finalizers(sets, set, &finalizers).await
}

/// Writes `set`'s finalizers, holding the resource version it was read at.
async fn write_finalizers(
    sets: &Api<ApplicationSet>,
    set: &ApplicationSet,
    finalizers: &[String],
) -> Result<(), kube::Error> {
    let body =
        json!({"metadata": {"finalizers": finalizers, "resourceVersion": set.resource_version()}});
    sets.patch(
        &set.name_any(),
        &PatchParams::default(),
        &Patch::Merge(body),
    )
    .await?;
    Ok(())
}

/// What applying a set's Applications did.
#[derive(Debug, Default)]
struct Applied {
    created: usize,
    updated: usize,
    deleted: usize,
    /// Applications the set could not write, each with why.
    errors: Vec<String>,
}

impl Applied {
    fn summary(&self) -> String {
        format!(
            "{} created, {} updated, {} deleted",
            self.created, self.updated, self.deleted
        )
    }

    /// Records that `app` could not be written; the others go on.
    fn failed(&mut self, app: &str, error: impl std::fmt::Display) {
        if self.errors.len() < MAX_ERRORS {
            self.errors.push(format!("Application {app}: {error}"));
        }
    }
}

/// Errors of one pass listed in the set's condition.
const MAX_ERRORS: usize = 10;

impl AppSets {
    async fn generate(&self, set: &ApplicationSet) -> Result<appset::Generated, AppSetError> {
        let projects = self.projects(set).await?;
        let sources = ControllerSources {
            ctx: &self.ctx,
            projects,
        };
        let templater = PluginTemplater { sets: self };
        appset::generate(set, &sources, &templater, appset::Limits::default()).await
    }

    /// Creates, updates and deletes `set`'s Applications to match
    /// `desired`, as its sync policy allows. An Application that cannot
    /// be written is recorded and the others go on.
    async fn apply(
        &self,
        set: &ApplicationSet,
        namespace: &str,
        desired: &[Application],
    ) -> Result<Applied, kube::Error> {
        let apps: Api<Application> = Api::namespaced(self.ctx.client.clone(), namespace);
        let policy = appset::Policy::of(set).unwrap_or(appset::Policy {
            update: false,
            delete: false,
            preserve_resources: true,
        });
        let owned = owned_applications(&apps, set).await?;
        let mut applied = Applied::default();
        for app in desired {
            let app = owned_copy(app, set);
            let app_name = app.name_any();
            match owned.get(&app_name) {
                None => create(&apps, &app, &mut applied).await,
                Some(live) if policy.update => update(&apps, live, &app, &mut applied).await,
                Some(_) => {}
            }
        }
        if policy.delete {
            let wanted: std::collections::HashSet<String> =
                desired.iter().map(|a| a.name_any()).collect();
            for (app_name, live) in owned.iter().filter(|(n, _)| !wanted.contains(*n)) {
                match delete(&apps, live, policy.preserve_resources).await {
                    Ok(()) => applied.deleted += 1,
                    Err(e) => applied.failed(app_name, crate::text::chain(&e)),
                }
            }
        }
        Ok(applied)
    }

    /// A set being deleted: its Applications let go as its policy says
    /// (orphaned when it may not delete them; without their resources
    /// finalizer when it preserves resources), then its finalizer removed
    /// (the garbage collector deletes the Applications it still owns).
    async fn release(
        &self,
        set: &ApplicationSet,
        namespace: &str,
        sets: &Api<ApplicationSet>,
    ) -> Result<(), kube::Error> {
        if !set.finalizers().iter().any(|f| f == SET_FINALIZER) {
            return Ok(());
        }
        let apps: Api<Application> = Api::namespaced(self.ctx.client.clone(), namespace);
        let policy = appset::Policy::of(set).unwrap_or(appset::Policy {
            update: false,
            delete: false,
            preserve_resources: true,
        });
        for live in owned_applications(&apps, set).await?.into_values() {
            let mut kept = live.clone();
            if !policy.delete {
                kept.metadata.owner_references = None;
            } else if policy.preserve_resources {
                kept.metadata
                    .finalizers
                    .get_or_insert_with(Vec::new)
                    .retain(|f| f != RESOURCES_FINALIZER);
            } else {
                continue;
            }
            if kept.metadata != live.metadata {
                apps.replace(&live.name_any(), &PostParams::default(), &kept)
                    .await?;
            }
        }
        let finalizers: Vec<String> = set
            .finalizers()
            .iter()
            .filter(|f| *f != SET_FINALIZER)
            .cloned()
            .collect();
        write_finalizers(sets, set, &finalizers).await
    }
}

/// The Applications `set` generated (its label and an owner reference to
/// it), by name.
async fn owned_applications(
    apps: &Api<Application>,
    set: &ApplicationSet,
) -> Result<HashMap<String, Application>, kube::Error> {
    let uid = set.uid().unwrap_or_default();
    Ok(apps
        .list(&ListParams::default().labels(&format!("{SET_LABEL}={}", set.name_any())))
        .await?
        .into_iter()
        .filter(|a| {
            a.owner_references()
                .iter()
                .any(|o| o.kind == "ApplicationSet" && o.uid == uid)
        })
        .map(|a| (a.name_any(), a))
        .collect())
}

/// `app` as the set writes it: its label and an owner reference to it.
fn owned_copy(app: &Application, set: &ApplicationSet) -> Application {
    let mut app = app.clone();
    app.status = None;
    app.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(SET_LABEL.to_owned(), set.name_any());
    app.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "kiln.dev/v1alpha1".to_owned(),
        kind: "ApplicationSet".to_owned(),
        name: set.name_any(),
        uid: set.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    app
}

/// Creates `app`; one of that name that exists is someone else's and is
/// left as it is.
async fn create(apps: &Api<Application>, app: &Application, applied: &mut Applied) {
    let params = PostParams {
        field_manager: Some(MANAGER.to_owned()),
        ..PostParams::default()
    };
    match apps.create(&params, app).await {
        Ok(_) => applied.created += 1,
        Err(kube::Error::Api(e)) if e.code == 409 => applied.failed(
            &app.name_any(),
            "exists and was not generated by this ApplicationSet: it is left as it is",
        ),
        Err(e) => applied.failed(&app.name_any(), crate::text::chain(&e)),
    }
}

/// Replaces what the set owns of `live` (spec, labels, annotations,
/// finalizers) with `app`'s when they differ: a field the template no
/// longer gives goes. Annotations people write ([`KEPT_ANNOTATIONS`]) and
/// the finalizers the Application controller adds stay. The write holds
/// `live`'s resource version: a change made meanwhile waits for the next
/// pass.
async fn update(
    apps: &Api<Application>,
    live: &Application,
    app: &Application,
    applied: &mut Applied,
) {
    let mut next = live.clone();
    next.spec = app.spec.clone();
    next.metadata.labels = app.metadata.labels.clone();
    let mut annotations = app.metadata.annotations.clone().unwrap_or_default();
    for key in KEPT_ANNOTATIONS {
        if let Some(value) = live.annotations().get(key) {
            annotations.insert(key.to_owned(), value.clone());
        }
    }
    next.metadata.annotations = (!annotations.is_empty()).then_some(annotations);
    let mut finalizers = app.metadata.finalizers.clone().unwrap_or_default();
    let own: Vec<String> = live
        .finalizers()
        .iter()
        .filter(|f| CONTROLLER_FINALIZERS.contains(&f.as_str()) && !finalizers.contains(f))
        .cloned()
        .collect();
    finalizers.extend(own);
    next.metadata.finalizers = (!finalizers.is_empty()).then_some(finalizers);
    next.metadata.owner_references = app.metadata.owner_references.clone();
    if next.metadata == live.metadata && next.spec == live.spec {
        return;
    }
    let params = PostParams {
        field_manager: Some(MANAGER.to_owned()),
        ..PostParams::default()
    };
    match apps.replace(&live.name_any(), &params, &next).await {
        Ok(_) => applied.updated += 1,
        Err(e) => applied.failed(&live.name_any(), crate::text::chain(&e)),
    }
}

/// Deletes `live` (that very object: its UID is a precondition), first
/// without its resources finalizer when resources are preserved.
async fn delete(
    apps: &Api<Application>,
    live: &Application,
    preserve: bool,
) -> Result<(), kube::Error> {
    let name = live.name_any();
    if preserve && live.finalizers().iter().any(|f| f == RESOURCES_FINALIZER) {
        let mut kept = live.clone();
        kept.metadata
            .finalizers
            .get_or_insert_with(Vec::new)
            .retain(|f| f != RESOURCES_FINALIZER);
        apps.replace(&name, &PostParams::default(), &kept).await?;
    }
    let params = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: live.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    apps.delete(&name, &params).await?;
    Ok(())
}

impl AppSets {
    /// The AppProjects `set`'s Applications may name (those that exist;
    /// the implicit `default` one when it is among them and does not).
    async fn projects(&self, set: &ApplicationSet) -> Result<Vec<Project>, AppSetError> {
        let allowed = appset::Projects::of(set)?;
        let unreadable = |e: kube::Error| {
            AppSetError::Generator(format!(
                "cannot read the AppProjects: {}",
                crate::text::chain(&e)
            ))
        };
        let api: Api<crate::api::AppProject> =
            Api::namespaced(self.ctx.client.clone(), &self.ctx.config.namespace);
        let mut projects: Vec<Project> = api
            .list(&ListParams::default())
            .await
            .map_err(unreadable)?
            .into_iter()
            .filter(|p| allowed.allows(&p.name_any()))
            .map(|p| Project::new(p.name_any(), p.spec))
            .collect();
        if allowed.allows("default") && !projects.iter().any(|p| p.name() == "default") {
            projects.push(Project::new("default", super::project::permissive()));
        }
        Ok(projects)
    }
}

/// Generators' sources in the controller: its Git engine (with its
/// repository credentials), for the repositories the set's projects let
/// it use, and its cluster Secrets.
struct ControllerSources<'a> {
    ctx: &'a Context,
    /// The projects the set's Applications may name: a git generator reads
    /// only a repository one of them allows (`sourceRepos`).
    projects: Vec<Project>,
}

#[async_trait::async_trait]
impl Sources for ControllerSources<'_> {
    async fn tree(&self, repo_url: &str, revision: &str) -> Result<Arc<dyn SourceView>, String> {
        if !self
            .projects
            .iter()
            .any(|p| p.admit_repository(repo_url).is_ok())
        {
            let names: Vec<&str> = self.projects.iter().map(Project::name).collect();
            return Err(format!(
                "repository {repo_url:?} is in the sourceRepos of none of the projects this ApplicationSet may use ({})",
                if names.is_empty() {
                    "none exists".to_owned()
                } else {
                    names.join(", ")
                }
            ));
        }
        let url = crate::render::engine::access::repository(
            repo_url,
            crate::render::engine::access::RepositoryField::Generator,
            self.ctx.config.allow_file_repositories,
        )
        .map_err(|stop| stop.to_string())?;
        let revision = crate::source::git::Revision::parse(revision);
        let view = self
            .ctx
            .git
            .poll(&url, &revision)
            .await
            .map_err(|e| crate::text::chain(&e))?;
        Ok(Arc::new(view))
    }

    async fn clusters(&self) -> Result<Vec<ClusterInfo>, String> {
        let mut out = Vec::new();
        for secret in self.ctx.secrets.of_type(SecretType::Cluster) {
            let Some(server) = secrets::value(&secret, "server") else {
                continue;
            };
            let map = |m: &Option<BTreeMap<String, String>>| m.clone().unwrap_or_default();
            out.push(ClusterInfo {
                name: secrets::value(&secret, "name").unwrap_or_else(|| server.clone()),
                server,
                project: secrets::value(&secret, "project"),
                labels: map(&secret.metadata.labels),
                annotations: map(&secret.metadata.annotations),
            });
        }
        Ok(out)
    }
}

/// The `appset` Plugin of the catalog, run in the controller's sandbox.
struct PluginTemplater<'a> {
    sets: &'a AppSets,
}

#[async_trait::async_trait]
impl Templater for PluginTemplater<'_> {
    async fn render(&self, request: TemplateRequest) -> Result<Vec<Value>, String> {
        let ctx = &self.sets.ctx;
        // The plugin is the controller's, checked as the `default` project
        // checks plugins (its pluginVerification, if it sets one).
        let project = match ctx.projects.get_opt("default").await {
            Ok(Some(found)) => Project::new("default", found.spec),
            Ok(None) => Project::new("default", super::project::permissive()),
            Err(e) => {
                return Err(format!(
                    "cannot read AppProject default: {}",
                    crate::text::chain(&e)
                ));
            }
        };
        let described = super::plugins::describe(ctx, &project, APPSET_PLUGIN, World::Renderer)
            .await
            .map_err(|stop| stop.to_string())?;
        let registry =
            super::plugins::controller_registry_credentials(ctx).map_err(|s| s.to_string())?;
        let plugin = self
            .sets
            .catalog
            .materialize(&ctx.host, &registry, &described.description)
            .await
            .map_err(|stop| stop.to_string())?;
        appset::render_with(&plugin, &request).await
    }
}
