//! Planning: what the render will run — the plugin chain and the
//! policies as the catalog describes them, the Helm step, the chart — as
//! one [`RenderRequest`].

use std::collections::BTreeMap;

use super::super::cluster_view;
use super::super::context::Context;
use super::super::destination::Target;
use super::super::plugins;
use super::super::project::{HELM_PLUGIN, Project};
use super::admit::Admitted;
use crate::api::{Application, PolicyMode};
use crate::condition::{Reason, Stop};
use crate::plugin::World;
use crate::policy::Mode;
use crate::render::remote::{
    AppRef, ChartSourceRef, HelmHostWork, PolicySourceRef, PolicyStepRef, RenderRequest,
    RenderStep, WireSecret,
};
use crate::source::git::RepoUrl;
use crate::source::helm::ChartRef;

/// What the render will run.
pub struct Planned {
    /// The request (sent to a render server as it is, or worked here).
    pub request: RenderRequest,
    /// Plugins (and policies) that run unverified.
    pub insecure: Vec<String>,
    /// The repositories of the policies' sources, in the order of the
    /// request's policies that have one.
    pub policy_urls: Vec<RepoUrl>,
    /// The chart, parsed, when the source is one.
    pub chart: Option<(ChartRef, ChartSourceRef)>,
}

/// Plans the render of `app` at `revision`.
pub async fn plan(
    app: &Application,
    ctx: &Context,
    admitted: &Admitted,
    revision: String,
) -> Result<Planned, Stop> {
    let project = &admitted.project;
    let mut insecure = Vec::new();
    let mut chain = chain(app, ctx, project, &mut insecure).await?;
    let helm = helm_step(
        app,
        ctx,
        project,
        &admitted.target,
        &mut chain,
        &mut insecure,
    )
    .await?;
    let (policies, policy_urls) = policies(app, ctx, project, &mut insecure).await?;
    // The chart, parsed here (after sourceRepos), with its repository's
    // credentials and nobody else's.
    let chart = match &admitted.chart {
        Some(chart) => Some(
            crate::controller::chart_source::chart_source(
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
            name: admitted.name.clone(),
            namespace: admitted.destination_namespace.clone(),
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
        cluster: None,
    };
    if !request.policies.is_empty() {
        request.scopes = Some(super::admit::kind_scopes(&admitted.target).await?);
        let remembered = ctx.cluster_reads.get(&admitted.name).unwrap_or_default();
        request.cluster = Some(cluster_view::prepare(app, &admitted.reach(), &remembered).await);
    }
    // Checked here, so that a malformed Secret is named in the condition.
    plugins::controller_registry_credentials(ctx)?;
    request.registry_credentials = plugins::registry_secrets(ctx)
        .into_iter()
        .map(WireSecret)
        .collect();
    Ok(Planned {
        request,
        insecure,
        policy_urls,
        chart,
    })
}

/// The Application's plugins as the catalog describes them, each with its
/// defaults under the Application's parameters.
async fn chain(
    app: &Application,
    ctx: &Context,
    project: &Project,
    insecure: &mut Vec<String>,
) -> Result<Vec<RenderStep>, Stop> {
    let mut chain = Vec::new();
    for used in &app.spec.source.plugins {
        let described = plugins::describe(ctx, project, &used.name, World::Renderer).await?;
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
    Ok(chain)
}

/// The project's policies, then the Application's, as the catalog
/// describes them; and the repositories of their sources.
async fn policies(
    app: &Application,
    ctx: &Context,
    project: &Project,
    insecure: &mut Vec<String>,
) -> Result<(Vec<PolicyStepRef>, Vec<RepoUrl>), Stop> {
    let mut policies = Vec::new();
    let mut policy_urls = Vec::new();
    for used in project.policies().iter().chain(&app.spec.policies) {
        let source = match &used.source {
            Some(source) => {
                let url = policy_repository(&used.name, &source.repo_url, &ctx.config)?;
                policy_urls.push(url);
                Some(PolicySourceRef {
                    repo_url: source.repo_url.clone(),
                    revision: source.target_revision.clone(),
                    // Parsed where the work is done (`..` out of the
                    // repository is refused there).
                    path: source.path.trim_start_matches('/').to_owned(),
                    refresh: false,
                    credentials: None,
                })
            }
            None => None,
        };
        let described = plugins::describe(ctx, project, &used.name, World::Policy).await?;
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
    Ok((policies, policy_urls))
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

/// The repository of a policy's own source, if the controller may fetch
/// it. Policy sources are set by whoever may edit the AppProject (or, for
/// an Application's own policies, held to its project's `sourceRepos` by
/// [`Project::admit`]); either way a repository on the controller's
/// filesystem is refused unless
/// [`ControllerConfig::allow_file_repositories`] is set, as for
/// Applications.
///
/// [`ControllerConfig::allow_file_repositories`]: crate::controller::ControllerConfig::allow_file_repositories
fn policy_repository(
    policy: &str,
    raw: &str,
    config: &crate::controller::ControllerConfig,
) -> Result<RepoUrl, Stop> {
    crate::render::engine::access::repository(
        raw,
        crate::render::engine::access::RepositoryField::PolicySource(policy),
        config.allow_file_repositories,
    )
}

/// A path of a spec as the request carries it: no `./`, no slashes at
/// either end, empty for the root.
fn normalized_path(path: &str) -> String {
    path.trim_start_matches("./")
        .trim_matches('/')
        .trim_start_matches('.')
        .to_owned()
}
