//! What policies may read of an Application's destination: the
//! [`ClusterView`] sent with its render request. The controller builds it
//! from the objects the Application's last review read (remembered here,
//! by Application, and read again from the destination) and from what its
//! status lists as existing; objects a review asked for that the view did
//! not hold are read, and the review runs again ([`ROUNDS`] at most: the
//! render itself is a cache hit). The render server, which holds no
//! cluster credentials, reads nothing but this view.
//!
//! Only Namespaces and ConfigMaps are read ([`ClusterKey::readable`]),
//! each up to [`MAX_OBJECT_BYTES`] and a view up to [`MAX_VIEW_BYTES`]; an
//! object beyond either is `Unreadable`, which a policy fails closed on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use serde::Serialize;

use crate::api::Application;
use crate::cluster::Cluster;
use crate::plugin::cluster::{ClusterKey, ClusterView, Observed};

/// Reviews of one render, the first included: a review asking for objects
/// the view lacks runs again with them, at most this many times in all.
pub const ROUNDS: usize = 3;
/// Bytes of one object's JSON a view holds (a ConfigMap holds at most
/// 1 MiB of data).
pub const MAX_OBJECT_BYTES: usize = 2 * 1024 * 1024;
/// Bytes of objects one view holds.
pub const MAX_VIEW_BYTES: usize = 16 * 1024 * 1024;
/// Objects read for one round of a review; more are `Unreadable`.
pub const MAX_READS_PER_ROUND: usize = 256;
/// Objects remembered per Application (read again before its next review).
pub const MAX_REMEMBERED: usize = 256;
/// How long one read of the destination may take.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The objects each Application's last review read whole.
#[derive(Debug, Default)]
pub struct ClusterMemory {
    apps: Mutex<HashMap<String, Arc<[ClusterKey]>>>,
}

impl ClusterMemory {
    /// Records what the latest review of `app` read (at most
    /// [`MAX_REMEMBERED`] objects).
    pub fn record(&self, app: &str, read: &[ClusterKey]) {
        let mut apps = self.lock();
        if read.is_empty() {
            apps.remove(app);
        } else {
            let kept: Arc<[ClusterKey]> = read.iter().take(MAX_REMEMBERED).cloned().collect();
            apps.insert(app.to_owned(), kept);
        }
    }

    /// What the latest review of `app` read, if it read anything.
    pub fn get(&self, app: &str) -> Option<Arc<[ClusterKey]>> {
        self.lock().get(app).cloned()
    }

    /// Forgets a deleted Application.
    pub fn forget(&self, app: &str) {
        self.lock().remove(app);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<[ClusterKey]>>> {
        // Each update is a single insert or remove: still consistent.
        self.apps.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The view for a review of `app`: the objects its status lists as
/// existing, and `remembered` read from `cluster`.
pub async fn prepare(
    app: &Application,
    cluster: &Cluster,
    remembered: &[ClusterKey],
) -> ClusterView {
    let mut view = ClusterView::new();
    for key in existing(app) {
        view.insert_existing(key);
    }
    read(cluster, remembered, &mut view).await;
    view
}

/// The objects `app`'s status lists that exist on its destination (not
/// `Missing`): a review of one of them is an update, not a creation.
fn existing(app: &Application) -> impl Iterator<Item = ClusterKey> + '_ {
    app.status
        .iter()
        .flat_map(|status| &status.resources)
        .filter(|resource| resource.status != "Missing")
        .filter_map(|resource| {
            let api_version = match resource.group.as_str() {
                "" => "v1".to_owned(),
                group => format!("{group}/v1"),
            };
            ClusterKey::new(
                &api_version,
                &resource.kind,
                resource.namespace.as_deref(),
                &resource.name,
            )
            .ok()
        })
}

/// Reads `keys` (those `view` does not hold yet, readable ones, at most
/// [`MAX_READS_PER_ROUND`]) from `cluster` into `view`.
pub async fn read(cluster: &Cluster, keys: &[ClusterKey], view: &mut ClusterView) {
    let mut held: usize = view.objects().map(|(_, o)| observed_bytes(o)).sum();
    let wanted: Vec<&ClusterKey> = keys
        .iter()
        .filter(|key| key.readable() && !view.holds(key))
        .collect();
    for (index, key) in wanted.into_iter().enumerate() {
        let observed = if index >= MAX_READS_PER_ROUND {
            Observed::Unreadable {
                reason: format!(
                    "more than {MAX_READS_PER_ROUND} objects of the cluster asked for at once"
                ),
            }
        } else {
            match read_one(cluster, key).await {
                Observed::Present { object } if held + object.len() > MAX_VIEW_BYTES => {
                    Observed::Unreadable {
                        reason: format!(
                            "the objects read from the cluster for this review would pass {MAX_VIEW_BYTES} bytes"
                        ),
                    }
                }
                observed => observed,
            }
        };
        held += observed_bytes(&observed);
        view.insert(key.clone(), observed);
    }
}

fn observed_bytes(observed: &Observed) -> usize {
    match observed {
        Observed::Present { object } => object.len(),
        _ => 0,
    }
}

/// Reads one readable object.
async fn read_one(cluster: &Cluster, key: &ClusterKey) -> Observed {
    let client = cluster.client().clone();
    let read = async {
        match (key.kind.as_str(), &key.namespace) {
            ("Namespace", None) => json(Api::<Namespace>::all(client).get_opt(&key.name).await),
            ("ConfigMap", Some(namespace)) => json(
                Api::<ConfigMap>::namespaced(client, namespace)
                    .get_opt(&key.name)
                    .await,
            ),
            _ => Observed::Unreadable {
                reason: format!("{key} may not be read by a policy"),
            },
        }
    };
    let observed = tokio::time::timeout(READ_TIMEOUT, read)
        .await
        .unwrap_or_else(|_| Observed::Unreadable {
            reason: format!("reading {key} took more than {READ_TIMEOUT:?}"),
        });
    if let Observed::Unreadable { reason } = &observed {
        tracing::warn!(%key, reason, "cannot read an object a policy asked for");
    }
    observed
}

/// An answer of the API server as the view holds it: the object's JSON,
/// without its managed fields, up to [`MAX_OBJECT_BYTES`].
fn json<K: Serialize + kube::Resource>(got: kube::Result<Option<K>>) -> Observed {
    match got {
        Ok(None) => Observed::Absent,
        Ok(Some(mut object)) => {
            object.meta_mut().managed_fields = None;
            match serde_json::to_string(&object) {
                Ok(text) if text.len() > MAX_OBJECT_BYTES => Observed::Unreadable {
                    reason: format!(
                        "its JSON is {} bytes, more than the {MAX_OBJECT_BYTES} a policy may read",
                        text.len()
                    ),
                },
                Ok(object) => Observed::Present { object },
                Err(e) => Observed::Unreadable {
                    reason: e.to_string(),
                },
            }
        }
        Err(e) => Observed::Unreadable {
            reason: crate::text::chain(&e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ClusterKey {
        ClusterKey::new("v1", "Namespace", None, name).unwrap()
    }

    #[test]
    fn memory_is_bounded_per_application_and_forgets() {
        let memory = ClusterMemory::default();
        let many: Vec<ClusterKey> = (0..1000).map(|i| key(&format!("n{i}"))).collect();
        memory.record("app", &many);
        assert_eq!(memory.get("app").unwrap().len(), MAX_REMEMBERED);
        memory.record("app", &[]);
        assert!(memory.get("app").is_none());
        memory.record("app", &many[..1]);
        memory.forget("app");
        assert!(memory.get("app").is_none());
    }

    #[test]
    fn existing_objects_are_those_the_status_does_not_list_missing() {
        let app: Application = serde_json::from_value(serde_json::json!({
            "apiVersion": "kiln.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": "a"},
            "spec": {"source": {"repoURL": "r"}, "destination": {}},
            "status": {"resources": [
                {"group": "apps", "kind": "Deployment", "namespace": "prod", "name": "web", "status": "Synced"},
                {"kind": "ConfigMap", "namespace": "prod", "name": "new", "status": "Missing"},
                {"kind": "Namespace", "name": "prod", "status": "OutOfSync"},
            ]}
        }))
        .unwrap();
        let found: Vec<String> = existing(&app).map(|k| k.to_string()).collect();
        assert_eq!(found, ["Deployment.apps prod/web", "Namespace prod"]);
    }

    #[test]
    fn an_object_beyond_the_bound_is_unreadable() {
        let big = ConfigMap {
            data: Some([("k".to_owned(), "x".repeat(MAX_OBJECT_BYTES))].into()),
            ..Default::default()
        };
        assert!(
            matches!(json(Ok(Some(big))), Observed::Unreadable { reason } if reason.contains("more than"))
        );
        assert_eq!(json::<ConfigMap>(Ok(None)), Observed::Absent);
    }
}
