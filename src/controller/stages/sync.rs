//! The sync: a comparison's objects applied to its destination, and the
//! operation recorded in the status (result, history, sync status).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use serde_json::Value;

use super::super::metrics::Metrics;
use super::compare::Comparison;
use super::trigger::Trigger;
use crate::api::{
    ApplicationStatus, HistoryEntry, Operation, OperationState, ResourceResult, SyncInfo,
};
use crate::condition::{Reason, Stop};
use crate::manifest::ObjectKey;
use crate::sync::{Action as SyncAction, Outcome, SyncResult};

/// What a sync may touch besides the comparison: the controller's
/// shutdown flag (a sync stops between waves), its metrics and how much
/// history to keep.
pub struct SyncContext<'a> {
    /// Set when the controller stops.
    pub shutdown: &'a Arc<AtomicBool>,
    /// Where the sync is counted.
    pub metrics: &'a Metrics,
    /// How many history entries the status keeps.
    pub history_limit: usize,
}

/// Syncs a comparison and records the operation in the status; returns
/// what the sync wrote, by object.
pub async fn sync(
    ctx: SyncContext<'_>,
    status: &mut ApplicationStatus,
    cmp: &Comparison,
    trigger: Trigger,
    operation: Option<&Operation>,
) -> Result<HashMap<ObjectKey, Value>, Stop> {
    let mut options = cmp.options.clone();
    if let Some(op) = operation {
        options.prune = op.sync.prune;
        options.dry_run = op.sync.dry_run;
    }
    let (dry_run, prune) = (options.dry_run, options.prune);
    tracing::info!(?trigger, dry_run, "syncing");
    let started = crate::units::now();
    let result = cmp
        .engine(options)
        .with_interrupt(ctx.shutdown.clone())
        .sync(cmp.objects.clone())
        .await
        .map_err(|e| Stop::new(Reason::SyncFailed, crate::text::chain(&e)))?;
    let phase = match result.outcome {
        Outcome::Succeeded => "Succeeded",
        Outcome::Terminated => "Terminated",
        _ => "Failed",
    };
    ctx.metrics
        .syncs
        .get_or_create(&vec![("outcome".into(), phase.to_lowercase())])
        .inc();
    status.operation_state = Some(operation_state(
        phase, &result, cmp, operation, dry_run, started,
    ));
    match result.outcome {
        Outcome::Succeeded => {}
        Outcome::Terminated => {
            return Err(Stop::new(
                Reason::SyncTerminated,
                format!(
                    "the controller stopped during the sync: {}; the next reconcile syncs again",
                    result.message
                ),
            ));
        }
        _ => return Err(Stop::new(Reason::SyncFailed, result.message)),
    }
    if dry_run {
        return Ok(HashMap::new());
    }
    record_synced(status, &result, &cmp.commit, prune, ctx.history_limit);
    Ok(result.written.0)
}

/// The operation's result as the status records it.
fn operation_state(
    phase: &str,
    result: &SyncResult,
    cmp: &Comparison,
    operation: Option<&Operation>,
    dry_run: bool,
    started: String,
) -> OperationState {
    OperationState {
        phase: phase.into(),
        id: operation.map(|op| op.id.clone()),
        initiated_by: Some(match operation {
            Some(op) => op.initiated_by.clone().unwrap_or_else(|| "user".into()),
            None => "automated".into(),
        }),
        dry_run,
        message: Some(result.message.clone()),
        revision: Some(cmp.commit.clone()),
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
    }
}

/// A sync that succeeded: a history entry (at most `history_limit` kept),
/// the sync status, and every object synced (pruned ones gone).
fn record_synced(
    status: &mut ApplicationStatus,
    result: &SyncResult,
    commit: &str,
    prune: bool,
    history_limit: usize,
) {
    let id = status.history.last().map_or(0, |h| h.id) + 1;
    status.history.push(HistoryEntry {
        id,
        revision: commit.to_string(),
        deployed_at: crate::units::now(),
    });
    let excess = status.history.len().saturating_sub(history_limit);
    status.history.drain(..excess);
    let synced = result.count(SyncAction::Failed) == 0;
    status.sync = Some(SyncInfo {
        status: if synced { "Synced" } else { "OutOfSync" }.into(),
        revision: Some(commit.to_string()),
        compared_to: None,
    });
    // Pruned objects are gone; extraneous ones stay reported otherwise.
    status
        .resources
        .retain(|r| !(prune && r.status == "Extraneous"));
    for resource in &mut status.resources {
        if resource.status != "Extraneous" {
            resource.status = "Synced".into();
        }
    }
}
