//! Rendering: the planned request given to the controller's
//! [`Renderer`](super::super::renderer::Renderer) (here or on the render
//! server), counted, and what it read recorded: of the source, and of the
//! destination by its policies (objects they asked for that the request's
//! [cluster view](super::super::cluster_view) lacked are read, and the
//! request sent again).

use super::super::cluster_view;
use super::super::context::Context;
use super::super::renderer::Job;
use super::admit::Admitted;
use super::plan::Planned;
use crate::condition::Stop;
use crate::render::remote::RenderResponse;

/// Renders the planned request; counts it and records what it read.
pub async fn render(
    ctx: &Context,
    admitted: &Admitted,
    planned: &mut Planned,
) -> Result<RenderResponse, Stop> {
    let rendered = render_once(ctx, admitted, planned).await?;
    let rendered = review_with_pending(ctx, admitted, planned, rendered).await;
    ctx.cluster_reads
        .record(&admitted.name, &rendered.cluster_reads);
    Ok(rendered)
}

/// While policies asked for objects of the destination the request's view
/// lacked, and rounds are left: reads them and renders again (a render
/// cache hit; the review runs again). A later round that fails leaves the
/// earlier answer.
async fn review_with_pending(
    ctx: &Context,
    admitted: &Admitted,
    planned: &mut Planned,
    mut rendered: RenderResponse,
) -> RenderResponse {
    for _ in 1..cluster_view::ROUNDS {
        let Some(view) = planned.request.cluster.as_mut() else {
            break;
        };
        if rendered.cluster_pending.is_empty() {
            break;
        }
        tracing::debug!(
            objects = rendered.cluster_pending.len(),
            "policies asked for objects of the destination: reviewing again with them"
        );
        cluster_view::read(&admitted.reach(), &rendered.cluster_pending, view).await;
        match render_once(ctx, admitted, planned).await {
            Ok(again) => rendered = again,
            Err(stop) => {
                tracing::warn!(error = %stop, "reviewing again with the objects read failed");
                break;
            }
        }
    }
    rendered
}

/// One request to the renderer.
async fn render_once(
    ctx: &Context,
    admitted: &Admitted,
    planned: &mut Planned,
) -> Result<RenderResponse, Stop> {
    let job = Job {
        request: &mut planned.request,
        repository: admitted.url.as_ref(),
        chart: planned.chart.as_ref().map(|(reference, _)| reference),
        policy_urls: &planned.policy_urls,
        project: &admitted.project,
        secrets: &ctx.secrets,
        metrics: &ctx.metrics,
    };
    let rendered = ctx.renderer.render(job).await?;
    if !rendered.cached {
        ctx.metrics.renders.inc();
    }
    ctx.read_paths.record(&admitted.name, &rendered.read_set);
    tracing::Span::current().record("revision", rendered.commit.as_str());
    Ok(rendered)
}
