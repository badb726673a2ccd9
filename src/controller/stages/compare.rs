//! The comparison half of a reconcile: project rules → destination →
//! revision → render → policy → kinds → diff. It changes nothing anywhere,
//! so `kiln app diff` runs exactly what the controller runs.

use std::sync::Arc;

use serde_json::Value;

use super::super::context::Context;
use super::super::destination::Target;
use crate::api::{Application, PolicyStatus};
use crate::condition::Stop;
use crate::diff::Report;
use crate::sync::{Application as SyncApp, Engine, PruneGuard, SyncOptions};

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
    /// there); `None` when it read the API server.
    pub live_state: Option<Arc<dyn crate::sync::LiveState>>,
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
        let engine = Engine::new(&self.target.cluster, self.sync_app.clone(), options)
            .with_prune_guard(self.prune_guard.clone())
            .with_known_live(known);
        match &self.live_state {
            Some(state) => engine.with_live_state(state.clone()),
            None => engine,
        }
    }
}

/// Compares one Application with its destination: the stages in order
/// ([`super`]).
pub async fn compare(app: &Application, ctx: &Context, to: &CompareTo) -> Result<Comparison, Stop> {
    let admitted = super::admit::admit(app, ctx).await?;
    let revision = to
        .revision
        .clone()
        .unwrap_or_else(|| app.spec.source.target_revision.clone());
    let mut planned = super::plan::plan(app, ctx, &admitted, revision).await?;
    let rendered = super::render::render(ctx, &admitted, &mut planned).await?;
    let objects: Vec<Value> = rendered
        .objects
        .into_iter()
        .map(|o| Value::Object(o.value))
        .collect();
    super::admit::admit_objects(
        &admitted.project,
        &admitted.target,
        &objects,
        &admitted.destination_namespace,
        &ctx.config,
    )
    .await?;
    let diffed = super::diff::diff(app, ctx, &admitted, &objects).await?;
    let target = admitted.target;
    let prune_guard = super::admit::prune_guard(
        admitted.project,
        &target.server,
        &target.name,
        &ctx.config.namespace,
    );
    Ok(Comparison {
        commit: rendered.commit,
        target,
        objects,
        blocked: rendered.blocked,
        policy: rendered.policy,
        diff: diffed.diff,
        sync_app: diffed.sync_app,
        options: diffed.options,
        insecure_plugins: planned.insecure,
        prune_guard,
        live_state: diffed.live_state,
    })
}
