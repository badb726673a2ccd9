//! Rendering: the planned request worked in this process, or on the
//! render server (the controller's Secrets go with it only as the request
//! grants them).

use super::super::context::Context;
use super::admit::Admitted;
use super::plan::Planned;
use crate::condition::{Reason, Stop};
use crate::plugin::World;
use crate::render::remote::{Pool, RenderResponse};
use crate::source::git::CredentialProvider as _;

/// Renders the planned request, here or on the render server; counts it
/// and records what it read.
pub async fn render(
    ctx: &Context,
    admitted: &Admitted,
    planned: &mut Planned,
) -> Result<RenderResponse, Stop> {
    let rendered = match &ctx.render_server {
        Some(server) => remote(ctx, server, admitted, planned).await?,
        None => local(ctx, admitted, planned).await?,
    };
    if !rendered.cached {
        ctx.metrics.renders.inc();
    }
    ctx.read_paths.record(&admitted.name, &rendered.read_set);
    tracing::Span::current().record("revision", rendered.commit.as_str());
    Ok(rendered)
}

/// On the render server: the repository's and the policy sources'
/// credentials go with the request; a chart's dependency repositories are
/// granted as the server names them, each checked against the project.
async fn remote(
    ctx: &Context,
    server: &Pool,
    admitted: &Admitted,
    planned: &mut Planned,
) -> Result<RenderResponse, Stop> {
    let request = &mut planned.request;
    request.ssh_known_hosts = ctx.ssh_known_hosts.as_ref().and_then(|k| k.known_hosts());
    // Requests of one repository (Git, or the chart's) go to one replica,
    // whose caches hold it.
    let route = match (&admitted.url, &planned.chart) {
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
        .zip(&planned.policy_urls)
    {
        step.refresh = ctx.take_forget(url);
        step.credentials = credentials.credentials(url).map(Into::into);
    }
    let mut round = 0;
    let routed = loop {
        match server.render(&route, request).await {
            Ok(routed) => break routed,
            Err(e) => {
                let stop = remote_stop(server.name(), e);
                crate::controller::chart_access::grant(
                    &admitted.project,
                    &ctx.secrets,
                    request,
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
    Ok(routed.response)
}

/// In this process: the render engine with the controller's Git, plugins,
/// caches and the project's chart access.
async fn local(
    ctx: &Context,
    admitted: &Admitted,
    planned: &Planned,
) -> Result<RenderResponse, Stop> {
    let charts = match &planned.chart {
        Some(_) => Some(
            ctx.charts(crate::controller::plugins::controller_registry_credentials(
                ctx,
            )?)
            .await
            .map_err(|e| Stop::new(Reason::ChartCacheUnavailable, crate::text::chain(&e)))?,
        ),
        None => None,
    };
    let chart_access =
        crate::controller::chart_access::for_project(&admitted.project, &ctx.secrets);
    let shop = crate::render::engine::work::Workshop {
        charts,
        chart_access: Some(&chart_access),
        git: &ctx.git,
        host: &ctx.host,
        catalog: &ctx.catalog,
        cache: &ctx.render_cache,
        reviews: &ctx.review_cache,
        allow_file_repositories: ctx.config.allow_file_repositories,
    };
    let worked = crate::render::engine::work::work(shop, &planned.request).await?;
    for (plugin, world, took) in &worked.timings {
        ctx.metrics
            .plugin_call_seconds
            .get_or_create(&vec![
                ("plugin".into(), plugin.clone()),
                ("world".into(), world_label(*world).into()),
            ])
            .observe(took.as_secs_f64());
    }
    Ok(worked.response)
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
