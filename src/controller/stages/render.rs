//! Rendering: the planned request given to the controller's
//! [`Renderer`](super::super::renderer::Renderer) (here or on the render
//! server), counted, and what it read recorded.

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
