//! The status: what a comparison found and what stopped a reconcile,
//! written to the Application only when it says something new.

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::compare::Comparison;
use crate::api::{
    Application, ApplicationStatus, Condition, Operation, OperationState, PolicyStatus,
    ResourceStatus, SyncInfo,
};
use crate::condition::{Reason, Stop};

/// The condition a [`Stop`] records.
pub fn condition(stop: &Stop) -> Condition {
    Condition {
        type_: stop.condition().to_string(),
        status: "True".into(),
        reason: Some(stop.reason.to_string()),
        message: Some(stop.message.clone()),
        last_transition_time: Some(crate::units::now()),
    }
}

/// Records what a comparison found: policy results, plugins that ran
/// unverified, the sync status at the compared commit and every object's.
pub fn record_comparison(status: &mut ApplicationStatus, cmp: &Comparison) {
    status.policy = Some(cmp.policy.clone());
    for plugin in &cmp.insecure_plugins {
        // Visible wherever it is used, not only in the controller's log.
        status.conditions.push(Condition {
            type_: Reason::VerificationDisabled.condition().to_string(),
            status: "True".into(),
            reason: Some(Reason::VerificationDisabled.to_string()),
            message: Some(format!(
                "plugin {plugin:?} runs unverified (its spec.verify says insecure: true); for development only"
            )),
            last_transition_time: Some(crate::units::now()),
        });
    }
    status.sync = Some(SyncInfo {
        status: if cmp.diff.in_sync() {
            "Synced"
        } else {
            "OutOfSync"
        }
        .into(),
        revision: Some(cmp.commit.clone()),
        compared_to: None,
    });
    status.resources = cmp
        .diff
        .objects
        .iter()
        .map(|o| ResourceStatus {
            group: o.key.group.clone(),
            kind: o.key.kind.clone(),
            namespace: o.key.namespace.clone(),
            name: o.key.name.clone(),
            status: o.status.to_string(),
            health: None,
        })
        .collect();
}

/// The condition of a comparison an enforced policy blocked: the first
/// thing that blocks, so that the condition alone says what to fix (a
/// finding, or why a policy could not run: its source's repository
/// unreachable, its settings invalid...).
pub fn blocked(policy: &PolicyStatus) -> Stop {
    let first = policy
        .findings
        .iter()
        .find(|f| f.mode == "enforce" && f.severity == "error")
        .map(|f| match &f.object {
            Some(object) => format!(": {}: {object}: {}", f.policy, f.message),
            None => format!(": {}: {}", f.policy, f.message),
        })
        .unwrap_or_default();
    Stop::new(
        Reason::EnforcedPolicyFailed,
        format!("an enforced policy failed; nothing was applied (see status.policy){first}"),
    )
}

/// Records the condition that stopped a reconcile. A requested operation
/// that could not even start still gets its result, so that whoever asked
/// is not left waiting.
pub fn record_stop(status: &mut ApplicationStatus, stop: &Stop, operation: Option<&Operation>) {
    status.conditions.push(condition(stop));
    if status.sync.is_none() {
        status.sync = Some(SyncInfo {
            status: "Unknown".into(),
            ..SyncInfo::default()
        });
    }
    if let Some(op) = operation
        && !carried_out(status, op)
    {
        let now = crate::units::now();
        status.operation_state = Some(OperationState {
            phase: "Failed".into(),
            id: Some(op.id.clone()),
            initiated_by: op.initiated_by.clone(),
            dry_run: op.sync.dry_run,
            message: Some(stop.to_string()),
            started_at: Some(now.clone()),
            finished_at: Some(now),
            ..OperationState::default()
        });
    }
}

/// Whether `status` records `op` as already carried out (its annotation
/// outlived it).
pub fn carried_out(status: &ApplicationStatus, op: &Operation) -> bool {
    status
        .operation_state
        .as_ref()
        .and_then(|s| s.id.as_deref())
        == Some(op.id.as_str())
}

/// Writes `status` over `stored` unless it says what the stored one says
/// (a resync at rest costs no request); `reconciledAt` is refreshed at
/// least every `heartbeat`. Conditions that were already there keep the
/// time they appeared.
pub async fn write(
    apps: &Api<Application>,
    name: &str,
    mut status: ApplicationStatus,
    stored: Option<&ApplicationStatus>,
    heartbeat: Duration,
) -> Result<(), kube::Error> {
    keep_transition_times(&mut status, stored);
    if !needs_write(&status, stored, heartbeat) {
        return Ok(());
    }
    status.reconciled_at = Some(crate::units::now());
    let patch = json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Application", "status": status});
    apps.patch_status(
        name,
        &PatchParams::apply("kiln-controller").force(),
        &Patch::Apply(&patch),
    )
    .await
    .map(drop)
}

/// Conditions that were already there keep the time they appeared (a
/// condition's `lastTransitionTime` says when it became true).
fn keep_transition_times(status: &mut ApplicationStatus, stored: Option<&ApplicationStatus>) {
    let Some(stored) = stored else { return };
    for condition in &mut status.conditions {
        if let Some(earlier) = stored.conditions.iter().find(|c| {
            c.type_ == condition.type_
                && c.status == condition.status
                && c.reason == condition.reason
                && c.message == condition.message
        }) {
            condition.last_transition_time = earlier.last_transition_time.clone();
        }
    }
}

/// Whether `status` must be written over `stored`: it says something else,
/// or the stored `reconciledAt` is older than `heartbeat` (or unreadable).
fn needs_write(
    status: &ApplicationStatus,
    stored: Option<&ApplicationStatus>,
    heartbeat: Duration,
) -> bool {
    let Some(stored) = stored else { return true };
    let same = ApplicationStatus {
        reconciled_at: stored.reconciled_at.clone(),
        ..status.clone()
    } == *stored;
    let fresh = stored
        .reconciled_at
        .as_deref()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .is_some_and(|at| jiff::Timestamp::now().duration_since(at).unsigned_abs() < heartbeat);
    !(same && fresh)
}
