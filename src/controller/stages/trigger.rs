//! The trigger: whether a reconcile syncs, and why — a person asked, or
//! the Application is automated and a new revision or drift calls for it,
//! with self-heal held back when the same drift keeps coming back.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::super::context::{Reverts, SelfHealBackoff};
use super::super::metrics::Metrics;
use crate::api::{Application, ApplicationStatus, Automated, Operation};
use crate::condition::{Reason, Stop};
use crate::diff::{Report, SyncStatus};

/// Why a sync is about to happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// A person asked (`kiln app sync`, `kiln app rollback`).
    Operation,
    /// Automated sync of a revision not synced yet.
    NewRevision,
    /// Automated sync of drift at the revision already synced.
    SelfHeal,
}

/// The revision an operation asks for, refused when automated sync follows
/// another one.
pub fn wanted_revision(
    app: &Application,
    operation: Option<&Operation>,
) -> Result<Option<String>, Stop> {
    let wanted = operation.and_then(|op| op.sync.revision.clone());
    if let Some(revision) = &wanted
        && automated(app).is_some()
        && *revision != app.spec.source.target_revision
    {
        return Err(Stop::new(
            Reason::AutomatedSyncEnabled,
            format!(
                "cannot sync to revision {revision:?}: automated sync is enabled and follows targetRevision {:?}; disable spec.syncPolicy.automated first",
                app.spec.source.target_revision
            ),
        ));
    }
    Ok(wanted)
}

/// The Application's automated sync policy, if any.
pub fn automated(app: &Application) -> Option<&Automated> {
    app.spec
        .sync_policy
        .as_ref()
        .and_then(|p| p.automated.as_ref())
}

/// Whether to sync `commit` after a comparison that found `diff` and
/// rendered `objects` objects: when asked, or when automated and needed (a
/// new revision, or drift with self-heal). A sync abandoned at shutdown is
/// not an attempt; an automated sync of nothing needs `allowEmpty`.
pub fn decide(
    app: &Application,
    status: &ApplicationStatus,
    operation: Option<&Operation>,
    commit: &str,
    diff: &Report,
    objects: usize,
) -> Option<Trigger> {
    if operation.is_some() {
        return Some(Trigger::Operation);
    }
    let automated = automated(app)?;
    if diff.in_sync() || (objects == 0 && !automated.allow_empty) {
        return None;
    }
    let last_attempt = status
        .operation_state
        .as_ref()
        .filter(|o| o.phase != "Terminated")
        .and_then(|o| o.revision.as_deref());
    if last_attempt != Some(commit) {
        Some(Trigger::NewRevision)
    } else if automated.self_heal || diff.count(SyncStatus::Missing) > 0 {
        Some(Trigger::SelfHeal)
    } else {
        None
    }
}

/// `Ok` when `trigger` may sync `app` now; otherwise how long to wait (the
/// same drift came back soon after a revert). Any other trigger starts the
/// self-heal count over.
pub(crate) fn admit(
    reverts: &Mutex<HashMap<String, Reverts>>,
    backoff: &SelfHealBackoff,
    metrics: &Metrics,
    app: &str,
    trigger: Trigger,
) -> Result<(), Duration> {
    let mut reverts = reverts.lock().unwrap_or_else(|e| e.into_inner());
    if trigger != Trigger::SelfHeal {
        reverts.remove(app);
        return Ok(());
    }
    let admitted = reverts
        .entry(app.to_string())
        .or_default()
        .admit(backoff, Instant::now());
    let result = if admitted.is_ok() {
        "synced"
    } else {
        "backed_off"
    };
    metrics
        .self_heals
        .get_or_create(&vec![("result".into(), result.into())])
        .inc();
    admitted
}
