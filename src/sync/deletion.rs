//! Deleting an application, as Argo CD does: its PreDelete hooks (Argo CD's
//! `PreDelete`, Helm's `pre-delete`) first; then its tracked objects,
//! leaving those that say `Delete=false` (Kiln's or Argo CD's sync option)
//! or Helm's `helm.sh/resource-policy: keep`; then, once they are gone, its
//! PostDelete hooks (Argo CD's `PostDelete`, Helm's `post-delete`). Hooks
//! are created, judged by their health as a sync judges its hooks (a failed
//! one is deleted, to be run again by the next round, as Argo CD 3 does),
//! and deleted as their delete policies say once every one completed (those
//! without a policy too, as Argo CD does).
//!
//! Nothing here waits: each call does one round of work and says where
//! things stand, so that a hook that never completes holds its own
//! application only, and for at most the timeout given (the controller
//! calls again later).
//!
//! Kept objects are left exactly as they are, Kiln's tracking label and
//! annotation included, as Argo CD leaves its own: an application created
//! again under the same name takes them over (a kept volume claim survives
//! a re-install), and no other application prunes them (their tracking
//! annotation names another application).

use std::time::Duration;

use kube::api::{DeleteParams, DynamicObject, PostParams};
use serde_json::Value;

use super::plan::{self, DeletePolicy, DeletionHook};
use super::{Action, Engine, ObjectResult, Result, SyncError, api_error};
use crate::health::{self, Health};
use crate::manifest::ObjectKey;

/// What one round of deleting an application's objects did.
#[derive(Clone, Debug, Default)]
pub struct Deletion {
    /// Per object: `Pruned` (deleted, or being deleted), `Kept` (it says
    /// `Delete=false` or `helm.sh/resource-policy: keep`), `PruneSkipped`
    /// (the prune guard refused it) or `Failed`.
    pub objects: Vec<ObjectResult>,
    /// How many objects to delete were still in the cluster at the end of
    /// the round (being deleted, or their delete failed): the objects are
    /// gone when a round finds none.
    pub remaining: usize,
}

impl Deletion {
    /// How many objects ended with `action`.
    pub fn count(&self, action: Action) -> usize {
        self.objects.iter().filter(|o| o.action == action).count()
    }
}

/// Where an application's PreDelete or PostDelete hooks stand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookRound {
    /// It has none.
    None,
    /// Some were just created, or are still running; the text says which.
    Running(String),
    /// Every one completed (is healthy).
    Succeeded,
    /// At least one failed (is degraded), ran longer than the timeout,
    /// could not be created, or its name is taken by an object this
    /// application does not track; the text names each and says why. Those that
    /// ran were deleted, so that the next round runs them again.
    Failed(String),
}

fn being_deleted(object: &Value) -> bool {
    object
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

/// How long ago `object` was created, by its `creationTimestamp`.
fn age(object: &Value) -> Option<Duration> {
    let created: jiff::Timestamp = object
        .pointer("/metadata/creationTimestamp")?
        .as_str()?
        .parse()
        .ok()?;
    Duration::try_from(jiff::Timestamp::now().duration_since(created)).ok()
}

impl Engine<'_> {
    /// Deletes the application's tracked objects (one round), except its
    /// PostDelete hooks, the objects that say `Delete=false` or
    /// `helm.sh/resource-policy: keep` (reported `Kept`) and those the
    /// prune guard refuses (reported `PruneSkipped`). Objects already being
    /// deleted are not deleted again; [`Deletion::remaining`] counts them.
    pub async fn delete_objects(&self) -> Result<Deletion> {
        let mut deletion = Deletion::default();
        for (resolved, live) in self.tracked_now().await? {
            if plan::is_post_delete(&live) {
                // The deletion's own, run once the rest is gone.
                continue;
            }
            let key = ObjectKey::of(&live);
            let (action, message) = if let Some(why) = plan::kept_on_delete(&live) {
                (Action::Kept, format!("the object says {why}"))
            } else if let Some(Err(why)) = self
                .prune_guard
                .as_ref()
                .map(|guard| guard(&key, resolved.namespaced))
            {
                (Action::PruneSkipped, format!("not deleted: {why}"))
            } else if being_deleted(&live) {
                deletion.remaining += 1;
                (Action::Pruned, "being deleted".to_owned())
            } else {
                let api = self.cluster.api(&resolved, key.namespace.as_deref());
                match api.delete(&key.name, &self.prune_params()).await {
                    Ok(answer) => {
                        // The object itself: still there (finalizers,
                        // foreground deletion of its dependents).
                        if answer.is_left() {
                            deletion.remaining += 1;
                        }
                        (Action::Pruned, String::new())
                    }
                    Err(kube::Error::Api(status)) if status.code == 404 => {
                        (Action::Pruned, "already gone".to_owned())
                    }
                    Err(e) => {
                        deletion.remaining += 1;
                        (Action::Failed, format!("delete failed: {}", api_error(&e)))
                    }
                }
            };
            tracing::info!(object = %key, %action, "delete");
            deletion.objects.push(ObjectResult {
                key,
                phase: None,
                wave: None,
                action,
                message,
            });
        }
        Ok(deletion)
    }

    /// One round of the `hook` hooks among `rendered` (the application's
    /// rendered objects, already held to its project): each one not in the
    /// cluster is created, each one there is judged by its health. A hook
    /// still running `timeout` after its creation has failed; a failed hook
    /// is deleted, so that the next round creates it again. An object at a
    /// hook's name that this application does not track (another's, or
    /// nobody's) is neither judged nor deleted: the round fails, naming it.
    pub async fn run_deletion_hooks(
        &self,
        hook: DeletionHook,
        rendered: Vec<Value>,
        timeout: Duration,
    ) -> Result<HookRound> {
        let hooks: Vec<Value> = self
            .prepare(rendered)
            .await
            .into_iter()
            .filter(|object| plan::is_deletion_hook(object, hook))
            .collect();
        if hooks.is_empty() {
            return Ok(HookRound::None);
        }
        let mut running = Vec::new();
        let mut failed = Vec::new();
        for object in &hooks {
            plan::delete_policies(object)?;
            let key = ObjectKey::of(object);
            let resolved = match self.resolve(object).await {
                Ok(resolved) => resolved,
                Err(e) => {
                    failed.push(format!("{key}: {e}"));
                    continue;
                }
            };
            let api = self.cluster.api(&resolved, key.namespace.as_deref());
            let live = match self.live(&resolved, &key).await {
                Ok(live) => live,
                Err(e) => {
                    failed.push(format!("{key}: {}", api_error(&e)));
                    continue;
                }
            };
            let Some(live) = live else {
                let created: DynamicObject = match serde_json::from_value(object.clone()) {
                    Ok(created) => created,
                    Err(e) => {
                        failed.push(format!("{key}: {e}"));
                        continue;
                    }
                };
                let params = PostParams {
                    dry_run: false,
                    field_manager: Some(self.options.manager.clone()),
                };
                match api.create(&params, &created).await {
                    Ok(_) => {
                        tracing::info!(%hook, object = %key, "created the hook");
                        running.push(format!("{key}: created"));
                    }
                    Err(e) => failed.push(format!("{key}: cannot create it: {}", api_error(&e))),
                }
                continue;
            };
            if !self.tracks(&live) {
                // Someone else's object at the hook's name (another
                // team's failed Job, say): neither judged nor deleted.
                failed.push(format!("{key} exists and is not this application's hook"));
                continue;
            }
            if being_deleted(&live) {
                running.push(format!("{key}: being deleted"));
                continue;
            }
            let assessment = health::assess(&live);
            let failure = match assessment.status {
                Health::Healthy => continue,
                Health::Degraded => format!("{key} failed: {}", assessment.message),
                _ if age(&live).is_some_and(|age| age > timeout) => format!(
                    "{key} did not complete within {timeout:?}: {}",
                    assessment.message
                ),
                _ => {
                    running.push(format!("{key}: {}", assessment.message));
                    continue;
                }
            };
            // Deleted so that the next round runs it again (a fixed
            // revision's, or the same, after a passing fault).
            match api.delete(&key.name, &DeleteParams::background()).await {
                Ok(_) => failed.push(format!("{failure} (deleted, to be run again)")),
                Err(kube::Error::Api(status)) if status.code == 404 => failed.push(failure),
                Err(e) => failed.push(format!(
                    "{failure} (and cannot be deleted: {})",
                    api_error(&e)
                )),
            }
        }
        Ok(if !failed.is_empty() {
            HookRound::Failed(failed.join("; "))
        } else if !running.is_empty() {
            HookRound::Running(running.join("; "))
        } else {
            HookRound::Succeeded
        })
    }

    /// Deletes the application's `hook` hooks as their delete policies say,
    /// judged on their health together (as Argo CD does): `HookSucceeded`
    /// ones when every hook is healthy, `HookFailed` ones when any is
    /// degraded, and those that set no policy at all (or one that no longer
    /// parses: someone edited the live hook). Returns how many it deleted.
    pub async fn cleanup_deletion_hooks(&self, hook: DeletionHook) -> Result<usize> {
        let hooks: Vec<_> = self
            .tracked_now()
            .await?
            .into_iter()
            .filter(|(_, live)| plan::is_deletion_hook(live, hook))
            .collect();
        let healths: Vec<Health> = hooks
            .iter()
            .map(|(_, live)| health::assess(live).status)
            .collect();
        let succeeded = healths.iter().all(|h| *h == Health::Healthy);
        let failed = healths.contains(&Health::Degraded);
        let mut deleted = 0;
        for (resolved, live) in &hooks {
            let key = ObjectKey::of(live);
            // A live policy someone made unreadable counts as none (the
            // hook is cleaned up) rather than holding the finalizer forever.
            let policies = plan::delete_policies(live).unwrap_or_else(|e| {
                tracing::warn!(%hook, object = %key, error = %e, "invalid delete policy; cleaned up as a hook without one");
                Vec::new()
            });
            let doomed = !plan::has_delete_policy(live)
                || policies.is_empty()
                || (succeeded && policies.contains(&DeletePolicy::HookSucceeded))
                || (failed && policies.contains(&DeletePolicy::HookFailed));
            if !doomed || being_deleted(live) {
                continue;
            }
            if let Some(Err(why)) = self
                .prune_guard
                .as_ref()
                .map(|guard| guard(&key, resolved.namespaced))
            {
                tracing::warn!(%hook, object = %key, reason = %why, "hook left in place");
                continue;
            }
            let api = self.cluster.api(resolved, key.namespace.as_deref());
            match api.delete(&key.name, &DeleteParams::background()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(source) => {
                    return Err(SyncError::Delete {
                        object: key.to_string(),
                        source,
                    });
                }
            }
            tracing::info!(%hook, object = %key, "deleted the hook");
            deleted += 1;
        }
        Ok(deleted)
    }
}
