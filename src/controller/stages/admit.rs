//! Admission: the Application's project, its source and destination, and
//! (after the render) every object it renders, held to the project.

use std::sync::Arc;

use serde_json::Value;

use super::super::cluster_view::Reach;
use super::super::context::Context;
use super::super::destination::Target;
use super::super::project::{self, Placement, Project};
use crate::api::Application;
use crate::condition::{Reason, Stop};
use crate::manifest::ObjectKey;
use crate::policy::placement::{KindScope, KindScopes};
use crate::source::git::RepoUrl;
use crate::sync::{DefinedScopes, PruneGuard};

/// What admission found of an Application.
pub struct Admitted {
    /// The Application's name.
    pub name: String,
    /// Its project.
    pub project: Project,
    /// Its Git repository (None: a chart source, whose repository is
    /// checked where the chart is fetched).
    pub url: Option<RepoUrl>,
    /// Its chart (`spec.source.chart`), if any.
    pub chart: Option<String>,
    /// Its destination.
    pub target: Target,
    /// Its destination namespace ("" when it names none).
    pub destination_namespace: String,
}

impl Admitted {
    /// Where its policies may read the destination: the namespaces its
    /// project lets it deploy to.
    pub fn reach(&self) -> Reach<'_> {
        Reach {
            cluster: &self.target.cluster,
            forbidden: Box::new(|namespace| {
                self.project
                    .admit_destination(&self.target.server, &self.target.name, namespace)
                    .err()
                    .map(|violation| violation.to_string())
            }),
        }
    }
}

/// Admits `app`: project rules (source, destination) before anything else.
pub async fn admit(app: &Application, ctx: &Context) -> Result<Admitted, Stop> {
    let name = app.metadata.name.clone().unwrap_or_default();
    let project = load_project(app, ctx).await?;
    let chart = app.spec.source.chart.clone().filter(|c| !c.is_empty());
    let url = match &chart {
        Some(_) => None,
        None => Some(repository(app, &ctx.config)?),
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
                crate::controller::destination::DestinationError::NotRegistered { .. } => {
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
    Ok(Admitted {
        name,
        project,
        url,
        chart,
        target,
        destination_namespace,
    })
}

/// The Application's project (the implicit `default` one when no AppProject
/// of that name exists).
pub async fn load_project(app: &Application, ctx: &Context) -> Result<Project, Stop> {
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

/// The Application's repository, if the controller may fetch it: a
/// repository on the controller's own filesystem (`file://`, a plain path)
/// would let any Application read whatever the controller can read, so it
/// is refused unless [`ControllerConfig::allow_file_repositories`] is set.
///
/// [`ControllerConfig::allow_file_repositories`]: crate::controller::ControllerConfig::allow_file_repositories
fn repository(
    app: &Application,
    config: &crate::controller::ControllerConfig,
) -> Result<RepoUrl, Stop> {
    crate::render::engine::access::repository(
        &app.spec.source.repo_url,
        crate::render::engine::access::RepositoryField::Application,
        config.allow_file_repositories,
    )
}

/// What a sync of `project`'s application may prune on `target`: only what
/// the project would let it write there.
pub fn prune_guard(
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
pub async fn kind_scopes(target: &Target) -> Result<KindScopes, Stop> {
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
pub async fn admit_objects(
    project: &Project,
    target: &Target,
    objects: &[Value],
    destination_namespace: &str,
    config: &crate::controller::ControllerConfig,
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
