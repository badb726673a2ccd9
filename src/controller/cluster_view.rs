//! What policies may read of an Application's destination: the
//! [`ClusterView`] sent with its render request. The controller builds it
//! from the objects the Application's last review read (remembered here,
//! by Application, and read again from the destination) and from what its
//! status lists as existing; objects a review asked for that the view did
//! not hold are read, and the review runs again ([`ROUNDS`] at most: the
//! render itself is a cache hit). The render server, which holds no
//! cluster credentials, reads nothing but this view.
//!
//! Only Namespaces (their name and labels) and ConfigMaps are read
//! ([`ClusterKey::readable`]), and only in namespaces the Application's
//! project lets it deploy to ([`Reach`]): a policy from the application's
//! own repository reads nothing the application could not write. Reads
//! run [`READ_CONCURRENCY`] at once under one deadline per round; each
//! object is held up to [`MAX_OBJECT_BYTES`] and a view up to
//! [`MAX_VIEW_BYTES`] (as the request carries them); an object beyond
//! either, or not read in time, is `Unreadable`, which a policy fails
//! closed on.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use serde::Serialize;

use crate::api::Application;
use crate::cluster::Cluster;
use crate::plugin::cluster::{ClusterKey, ClusterView, Observed};

/// Reviews of one render, the first included: a review asking for objects
/// the view lacks runs again with them, at most this many times in all.
pub const ROUNDS: usize = 3;
/// Bytes of one object a view holds, as the render request carries it
/// (a ConfigMap holds at most 1 MiB of data).
pub const MAX_OBJECT_BYTES: usize = 2 * 1024 * 1024;
/// Bytes of objects one view holds, as the render request carries them
/// (well under the render server's request bound).
pub const MAX_VIEW_BYTES: usize = 4 * 1024 * 1024;
/// Objects read for one round of a review; more are `Unreadable`.
pub const MAX_READS_PER_ROUND: usize = 256;
/// Objects remembered per Application (read again before its next review).
pub const MAX_REMEMBERED: usize = 256;
/// Reads of the destination running at once for one review.
pub const READ_CONCURRENCY: usize = 8;
/// How long one round of reads may take.
pub const ROUND_TIMEOUT: Duration = Duration::from_secs(30);

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

    /// Forgets every Application but those `keep` names (deleted ones,
    /// and those of shards this replica no longer owns).
    pub fn retain(&self, keep: &HashSet<String>) {
        self.lock().retain(|app, _| keep.contains(app));
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<[ClusterKey]>>> {
        // Each update is a single insert or remove: still consistent.
        self.apps.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Why an Application may not deploy to a namespace, if it may not.
pub type Forbidden<'a> = Box<dyn Fn(&str) -> Option<String> + Send + Sync + 'a>;

/// Where a review may read: the destination, and the namespaces there its
/// Application may deploy to.
pub struct Reach<'a> {
    /// The destination cluster.
    pub cluster: &'a Cluster,
    /// Why the Application may not deploy to a namespace, if it may not.
    pub forbidden: Forbidden<'a>,
}

/// The view for a review of `app`: the objects its status lists as
/// existing, and `remembered` read from the destination.
pub async fn prepare(
    app: &Application,
    reach: &Reach<'_>,
    remembered: &[ClusterKey],
) -> ClusterView {
    let mut view = ClusterView::new();
    for key in existing(app) {
        view.insert_existing(key);
    }
    read(reach, remembered, &mut view).await;
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
            // Only the group counts in a key.
            let api_version = format!("{}/v1", resource.group);
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
/// [`MAX_READS_PER_ROUND`]) from the destination into `view`, within
/// [`ROUND_TIMEOUT`].
pub async fn read(reach: &Reach<'_>, keys: &[ClusterKey], view: &mut ClusterView) {
    let mut wanted: Vec<&ClusterKey> = keys
        .iter()
        .filter(|key| key.readable() && !view.holds(key))
        .collect();
    wanted.dedup();
    let beyond = wanted.split_off(wanted.len().min(MAX_READS_PER_ROUND));
    for key in beyond {
        view.insert(
            key.clone(),
            unreadable(format!(
                "more than {MAX_READS_PER_ROUND} objects of the cluster asked for at once"
            )),
        );
    }
    let mut held: usize = view.objects().map(|(_, o)| wire_bytes(o)).sum();
    // The reads made first (a stream mapping references through a closure
    // is not `Send` for every lifetime, as a controller's future must be).
    let futures: Vec<_> = wanted
        .iter()
        .map(|key| {
            let key = (*key).clone();
            async move {
                let observed = read_one(reach, &key).await;
                (key, observed)
            }
        })
        .collect();
    let mut reads = futures_util::stream::iter(futures).buffer_unordered(READ_CONCURRENCY);
    let deadline = tokio::time::Instant::now() + ROUND_TIMEOUT;
    let mut done: HashSet<ClusterKey> = HashSet::new();
    let mut unread = 0usize;
    while let Ok(Some((key, observed))) = tokio::time::timeout_at(deadline, reads.next()).await {
        let bytes = wire_bytes(&observed);
        let observed = if held + bytes > MAX_VIEW_BYTES {
            unreadable(format!(
                "the objects read from the cluster for this review would pass {MAX_VIEW_BYTES} bytes"
            ))
        } else {
            held += bytes;
            observed
        };
        unread += usize::from(matches!(observed, Observed::Unreadable { .. }));
        view.insert(key.clone(), observed);
        done.insert(key);
    }
    drop(reads);
    for key in wanted.into_iter().filter(|key| !done.contains(*key)) {
        unread += 1;
        view.insert(
            key.clone(),
            unreadable(format!("not read within {ROUND_TIMEOUT:?}")),
        );
    }
    if unread > 0 {
        tracing::warn!(
            unread,
            "objects policies asked for could not be read from the destination"
        );
    }
}

fn unreadable(reason: String) -> Observed {
    Observed::Unreadable { reason }
}

/// The bytes `observed` takes in a render request (its JSON text, escaped).
fn wire_bytes(observed: &Observed) -> usize {
    serde_json::to_string(observed).map_or(usize::MAX / 2, |text| text.len())
}

/// Reads one readable object, if its namespace is one the Application may
/// deploy to.
async fn read_one(reach: &Reach<'_>, key: &ClusterKey) -> Observed {
    if let Some(namespace) = key.namespace_of()
        && let Some(why) = (reach.forbidden)(namespace)
    {
        return unreadable(format!(
            "{key} is outside the namespaces this Application may deploy to: {why}"
        ));
    }
    let client = reach.cluster.client().clone();
    let read = async {
        match (key.kind(), key.namespace()) {
            ("Namespace", None) => {
                let got = Api::<Namespace>::all(client).get_opt(key.name()).await;
                // Its name and labels: what a selector reads, nothing more.
                json(got.map(|found| {
                    found.map(|namespace| Namespace {
                        metadata: kube::api::ObjectMeta {
                            name: namespace.metadata.name,
                            labels: namespace.metadata.labels,
                            ..Default::default()
                        },
                        ..Default::default()
                    })
                }))
            }
            ("ConfigMap", Some(namespace)) => json(
                Api::<ConfigMap>::namespaced(client, namespace)
                    .get_opt(key.name())
                    .await,
            ),
            _ => unreadable(format!("{key} may not be read by a policy")),
        }
    };
    tokio::time::timeout(ROUND_TIMEOUT, read)
        .await
        .unwrap_or_else(|_| unreadable(format!("not read within {ROUND_TIMEOUT:?}")))
}

/// An answer of the API server as the view holds it: the object's JSON,
/// without its managed fields, up to [`MAX_OBJECT_BYTES`] as the request
/// carries it.
fn json<K: Serialize + kube::Resource>(got: kube::Result<Option<K>>) -> Observed {
    match got {
        Ok(None) => Observed::Absent,
        Ok(Some(mut object)) => {
            object.meta_mut().managed_fields = None;
            match serde_json::to_string(&object) {
                Ok(object) => {
                    let observed = Observed::Present { object };
                    let bytes = wire_bytes(&observed);
                    if bytes > MAX_OBJECT_BYTES {
                        unreadable(format!(
                            "it takes {bytes} bytes, more than the {MAX_OBJECT_BYTES} a policy may read"
                        ))
                    } else {
                        observed
                    }
                }
                Err(e) => unreadable(e.to_string()),
            }
        }
        Err(e) => unreadable(crate::text::chain(&e)),
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
        memory.record("a", &many[..1]);
        memory.record("b", &many[..1]);
        memory.retain(&HashSet::from(["b".to_owned()]));
        assert!(memory.get("a").is_none() && memory.get("b").is_some());
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

    #[tokio::test]
    async fn attack_a_policy_reads_only_namespaces_its_application_may_deploy_to() {
        // A destination nothing listens at: a read that is attempted fails.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let cluster = Cluster::new(kube::Client::try_from(config).unwrap());
        let reach = Reach {
            cluster: &cluster,
            forbidden: Box::new(|namespace| {
                (namespace != "shop").then(|| format!("namespace {namespace} is not a destination"))
            }),
        };
        let secret_settings = ClusterKey::new("v1", "ConfigMap", Some("kube-system"), "x").unwrap();
        let other_namespace = key("kube-system");
        let own = ClusterKey::new("v1", "ConfigMap", Some("shop"), "x").unwrap();
        let secret = ClusterKey::new("v1", "Secret", Some("shop"), "x").unwrap();
        let mut view = ClusterView::new();
        read(
            &reach,
            &[
                secret_settings.clone(),
                other_namespace.clone(),
                own.clone(),
                secret.clone(),
            ],
            &mut view,
        )
        .await;
        let reason = |key: &ClusterKey| match view.objects().find(|(k, _)| *k == key) {
            Some((_, Observed::Unreadable { reason })) => reason.clone(),
            other => panic!("{key}: {other:?}"),
        };
        assert!(reason(&secret_settings).contains("outside the namespaces"));
        assert!(reason(&other_namespace).contains("outside the namespaces"));
        // Its own namespace is read (here the destination does not answer).
        assert!(!reason(&own).contains("outside"));
        // A Secret is never read, nor recorded.
        assert!(!view.holds(&secret));
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
