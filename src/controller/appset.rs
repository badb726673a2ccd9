//! The ApplicationSet controller: keeps each set's Applications equal to
//! what its generators and template give ([`crate::appset::generate`]),
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
/// How often a set is generated again without a change (Argo CD's
/// default `requeueAfterSeconds`).
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(180);
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
    let Some(_running) = ctx
        .shards
        .enter(&namespace, &format!("applicationset/{name}"))
    else {
        return Ok(Action::await_change());
    };
    if set.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let span = tracing::info_span!("reconcile", applicationset = %name);
    let outcome = tracing::Instrument::instrument(state.generate(&set), span.clone()).await;
    let mut status = ApplicationSetStatus::default();
    match outcome {
        Ok(generated) => {
            let applied = tracing::Instrument::instrument(
                state.apply(&set, &namespace, &generated.applications),
                span,
            )
            .await?;
            status.application_count =
                u32::try_from(generated.applications.len()).unwrap_or(u32::MAX);
            status.applications = generated
                .applications
                .iter()
                .take(MAX_LISTED)
                .filter_map(|a| a.metadata.name.clone())
                .collect();
            status.conditions = vec![
                condition(
                    "ErrorOccurred",
                    applied.error.is_some(),
                    applied.error.as_ref().map(|_| "ApplicationNotOwned"),
                    applied.error.clone(),
                ),
                condition(
                    "ParametersGenerated",
                    true,
                    Some("ParametersGenerated"),
                    Some(format!("{} parameter sets", generated.applications.len())),
                ),
                condition(
                    "ResourcesUpToDate",
                    applied.error.is_none(),
                    Some("ApplicationSetUpToDate"),
                    Some(applied.summary()),
                ),
            ];
        }
        Err(error) => {
            tracing::warn!(set = %name, %error, "generation failed; Applications left as they are");
            let previous = set.status.clone().unwrap_or_default();
            status.application_count = previous.application_count;
            status.applications = previous.applications;
            status.conditions = vec![
                condition(
                    "ErrorOccurred",
                    true,
                    Some(error.reason()),
                    Some(error.to_string()),
                ),
                condition(
                    "ParametersGenerated",
                    false,
                    Some(error.reason()),
                    Some(error.to_string()),
                ),
                condition(
                    "ResourcesUpToDate",
                    false,
                    Some(error.reason()),
                    Some("the Applications were left as they are".into()),
                ),
            ];
        }
    }
    write_status(ctx, &namespace, &name, set.status.as_ref(), status).await?;
    Ok(Action::requeue(state.resync))
}

fn condition(kind: &str, status: bool, reason: Option<&str>, message: Option<String>) -> Condition {
    Condition {
        type_: kind.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: reason.map(str::to_owned),
        message: message.map(|m| crate::text::bounded(&m, 4096)),
        last_transition_time: Some(crate::units::now()),
    }
}

/// Writes `status` unless only its transition times changed.
async fn write_status(
    ctx: &Context,
    namespace: &str,
    name: &str,
    previous: Option<&ApplicationSetStatus>,
    mut status: ApplicationSetStatus,
) -> Result<(), kube::Error> {
    if let Some(previous) = previous {
        for condition in &mut status.conditions {
            if let Some(before) = previous.conditions.iter().find(|c| {
                c.type_ == condition.type_
                    && c.status == condition.status
                    && c.reason == condition.reason
                    && c.message == condition.message
            }) {
                condition.last_transition_time = before.last_transition_time.clone();
            }
        }
        if *previous == status {
            return Ok(());
        }
    }
    let sets: Api<ApplicationSet> = Api::namespaced(ctx.client.clone(), namespace);
    sets.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
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
    /// An Application the set could not write (not its own).
    error: Option<String>,
}

impl Applied {
    fn summary(&self) -> String {
        format!(
            "{} created, {} updated, {} deleted",
            self.created, self.updated, self.deleted
        )
    }
}

/// `applicationsSync`: what a set may do to its Applications.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Allowed {
    update: bool,
    delete: bool,
}

fn allowed(set: &ApplicationSet) -> Allowed {
    let policy = set
        .spec
        .sync_policy
        .as_ref()
        .and_then(|p| p.applications_sync.as_deref())
        .unwrap_or("sync");
    match policy {
        "create-only" => Allowed {
            update: false,
            delete: false,
        },
        "create-update" => Allowed {
            update: true,
            delete: false,
        },
        "create-delete" => Allowed {
            update: false,
            delete: true,
        },
        _ => Allowed {
            update: true,
            delete: true,
        },
    }
}

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
    /// `desired`, as its sync policy allows.
    async fn apply(
        &self,
        set: &ApplicationSet,
        namespace: &str,
        desired: &[Application],
    ) -> Result<Applied, kube::Error> {
        let apps: Api<Application> = Api::namespaced(self.ctx.client.clone(), namespace);
        let name = set.name_any();
        let uid = set.uid().unwrap_or_default();
        let allowed = allowed(set);
        let mut applied = Applied::default();
        let owned: HashMap<String, Application> = apps
            .list(&ListParams::default().labels(&format!("{SET_LABEL}={name}")))
            .await?
            .into_iter()
            .filter(|a| owned_by(a, &uid))
            .map(|a| (a.name_any(), a))
            .collect();
        for app in desired {
            let app_name = app.name_any();
            let mut object = serde_json::to_value(app).unwrap_or_default();
            object["metadata"]["labels"][SET_LABEL] = json!(name);
            object["metadata"]["ownerReferences"] = json!([{
                "apiVersion": "kiln.dev/v1alpha1", "kind": "ApplicationSet",
                "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true}]);
            if let Some(map) = object.as_object_mut() {
                map.remove("status");
            }
            match owned.get(&app_name) {
                Some(existing) => {
                    if !allowed.update || up_to_date(existing, &object) {
                        continue;
                    }
                    apps.patch(
                        &app_name,
                        &PatchParams::apply(MANAGER).force(),
                        &Patch::Apply(&object),
                    )
                    .await?;
                    applied.updated += 1;
                }
                None => {
                    let created: Result<Application, _> = match serde_json::from_value(object) {
                        Ok(app) => apps.create(&PostParams::default(), &app).await,
                        Err(e) => {
                            applied.error = Some(format!("Application {app_name}: {e}"));
                            continue;
                        }
                    };
                    match created {
                        Ok(_) => applied.created += 1,
                        Err(kube::Error::Api(e)) if e.code == 409 => {
                            applied.error = Some(format!(
                                "Application {app_name} exists and was not generated by this ApplicationSet: it is left as it is"
                            ));
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        if allowed.delete {
            let preserve = set
                .spec
                .sync_policy
                .as_ref()
                .is_some_and(|p| p.preserve_resources_on_deletion);
            let wanted: std::collections::HashSet<String> =
                desired.iter().map(|a| a.name_any()).collect();
            for (app_name, existing) in &owned {
                if wanted.contains(app_name) {
                    continue;
                }
                if preserve
                    && existing
                        .finalizers()
                        .iter()
                        .any(|f| f == RESOURCES_FINALIZER)
                {
                    let kept: Vec<&String> = existing
                        .finalizers()
                        .iter()
                        .filter(|f| *f != RESOURCES_FINALIZER)
                        .collect();
                    apps.patch(
                        app_name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"metadata": {"finalizers": kept}})),
                    )
                    .await?;
                }
                apps.delete(app_name, &DeleteParams::default()).await?;
                applied.deleted += 1;
            }
        }
        Ok(applied)
    }
}

/// Whether `app` has an owner reference to the set of `uid`.
fn owned_by(app: &Application, uid: &str) -> bool {
    app.owner_references()
        .iter()
        .any(|o| o.kind == "ApplicationSet" && o.uid == uid)
}

/// Whether `existing` already holds what `object` sets (labels,
/// annotations, finalizers and spec as generated).
fn up_to_date(existing: &Application, object: &Value) -> bool {
    let Ok(live) = serde_json::to_value(existing) else {
        return false;
    };
    let same = |pointer: &str| {
        let wanted = object.pointer(pointer);
        wanted.is_none_or(|w| contains(live.pointer(pointer), w))
    };
    same("/spec")
        && same("/metadata/labels")
        && same("/metadata/annotations")
        && same("/metadata/finalizers")
}

/// Whether `live` holds everything of `wanted` (maps may hold more).
fn contains(live: Option<&Value>, wanted: &Value) -> bool {
    match (live, wanted) {
        (Some(Value::Object(live)), Value::Object(wanted)) => {
            wanted.iter().all(|(k, w)| contains(live.get(k), w))
        }
        (live, wanted) => live == Some(wanted),
    }
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
            crate::render::engine::access::RepositoryField::Application,
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
        let mut out = vec![ClusterInfo {
            name: super::destination::IN_CLUSTER_NAME.to_owned(),
            server: crate::api::IN_CLUSTER.to_owned(),
            ..ClusterInfo::default()
        }];
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
        let project = super::project::Project::new("default", super::project::permissive());
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
