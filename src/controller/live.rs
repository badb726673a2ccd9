//! Live watches: the controller watches every kind it manages, on every
//! destination cluster, so that a change to a managed object (someone's
//! `kubectl edit`, a deletion, a status update that changes health) makes
//! the owning Application reconcile at once instead of at the next resync.
//! That is what makes self-heal immediate.
//!
//! A watch is started the first time a reconcile meets a kind on a cluster
//! and runs until the controller stops. Events map to Applications by
//! Kiln's tracking annotation. Changes whose newest managed-fields entry
//! is the controller's own apply are not reported: they are the
//! controller's own writes, and reporting them would make every sync
//! trigger another reconcile.

pub mod owners;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt as _;
use kube::api::DynamicObject;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::api::Application;
use crate::cluster::{Cluster, Resolved};
use crate::manifest::ObjectKey;
use crate::sync::{APP_LABEL, Labelled, LiveState, TRACKING_ID};

/// How many triggers may wait before the watches slow down.
const QUEUE: usize = 1024;

/// One watched kind on one cluster.
struct Watched {
    resolved: Resolved,
    store: Store<DynamicObject>,
    /// The cache's objects by the Application that labelled them.
    owners: Arc<owners::Owners>,
}

/// Per application: the fingerprint of each object's last comparison and
/// whether it was in sync.
type Predictions = HashMap<ObjectKey, (u64, bool)>;

/// The watches, their caches, and the stream of Applications they trigger.
pub struct LiveWatches {
    namespace: String,
    manager: String,
    sender: mpsc::Sender<ObjectRef<Application>>,
    receiver: Mutex<Option<mpsc::Receiver<ObjectRef<Application>>>>,
    watched: Arc<Mutex<HashMap<(String, String), Watched>>>,
    predictions: Mutex<HashMap<String, Arc<Mutex<Predictions>>>>,
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
}

impl std::fmt::Debug for LiveWatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveWatches")
            .field("watched", &self.watched())
            .finish()
    }
}

impl Drop for LiveWatches {
    fn drop(&mut self) {
        if let Ok(tasks) = self.tasks.lock() {
            for task in tasks.iter() {
                task.abort();
            }
        }
    }
}

impl LiveWatches {
    /// Watches reporting Applications of `namespace`; `manager` is the
    /// controller's field manager (whose own writes are not reported).
    pub fn new(namespace: &str, manager: &str) -> Self {
        let (sender, receiver) = mpsc::channel(QUEUE);
        Self {
            namespace: namespace.to_owned(),
            manager: manager.to_owned(),
            sender,
            receiver: Mutex::new(Some(receiver)),
            watched: Arc::new(Mutex::new(HashMap::new())),
            predictions: Mutex::new(HashMap::new()),
            tasks: Mutex::new(Vec::new()),
        }
    }

    /// The Applications to reconcile because something they manage
    /// changed. There is one such stream; a second call gets none.
    pub fn triggers(
        &self,
    ) -> Option<impl futures_util::Stream<Item = ObjectRef<Application>> + use<>> {
        let receiver = self.receiver.lock().ok()?.take()?;
        Some(tokio_stream::wrappers::ReceiverStream::new(receiver))
    }

    /// How many kinds are watched (over all clusters).
    pub fn watched(&self) -> usize {
        self.watched.lock().map(|w| w.len()).unwrap_or(0)
    }

    /// Makes sure `kind` is watched on `cluster` (named by its server URL):
    /// the objects Kiln labelled (`kiln.dev/app`), kept in a cache.
    pub fn ensure(&self, server: &str, cluster: &Cluster, kind: &Resolved) {
        let key = (server.to_owned(), kind_key(kind));
        let Ok(mut watched) = self.watched.lock() else {
            return;
        };
        if watched.contains_key(&key) {
            return;
        }
        let api = cluster.api(kind, None);
        let writer = reflector::store::Writer::new(kind.resource.clone());
        let store = writer.as_reader();
        let owners = Arc::new(owners::Owners::default());
        watched.insert(
            key,
            Watched {
                resolved: kind.clone(),
                store,
                owners: owners.clone(),
            },
        );
        drop(watched);
        let sender = self.sender.clone();
        let namespace = self.namespace.clone();
        let manager = self.manager.clone();
        let what = format!("{} on {server}", kind.resource.plural);
        tracing::debug!(kind = %what, "watching a managed kind");
        let config = watcher::Config::default().labels(APP_LABEL);
        let task = tokio::spawn(async move {
            let mut events = watcher(api, config)
                .default_backoff()
                .reflect(writer)
                .boxed();
            while let Some(event) = events.next().await {
                if let Ok(event) = &event {
                    owners.apply(event);
                }
                let object = match event {
                    // The first list is the state the last reconcile saw.
                    Ok(watcher::Event::Apply(object)) if !written_by(&object, &manager) => object,
                    Ok(watcher::Event::Delete(object)) => object,
                    Ok(_) => continue,
                    Err(error) => {
                        tracing::debug!(kind = %what, %error, "live watch");
                        continue;
                    }
                };
                if let Some(app) = owner(&object) {
                    let target = ObjectRef::new(app).within(&namespace);
                    if sender.send(target).await.is_err() {
                        return;
                    }
                }
            }
        });
        if let Ok(mut tasks) = self.tasks.lock() {
            tasks.push(task.abort_handle());
        }
    }

    /// The cached live object `key` of `kind` on `server`, once the watch
    /// has listed; `None` when the cache does not hold it (not watched,
    /// not listed in time, or not labelled by Kiln): ask the API server.
    pub async fn get(&self, server: &str, kind: &Resolved, key: &ObjectKey) -> Option<Value> {
        let store = self
            .watched
            .lock()
            .ok()?
            .get(&(server.to_owned(), kind_key(kind)))?
            .store
            .clone();
        ready(&store)?;
        let mut reference = ObjectRef::new_with(&key.name, kind.resource.clone());
        if let Some(namespace) = key.namespace.as_deref().filter(|_| kind.namespaced) {
            reference = reference.within(namespace);
        }
        let object = store.get(&reference)?;
        serde_json::to_value(object.as_ref()).ok()
    }

    /// What a comparison of application `app` on `server` reads instead of
    /// the API server. `generation` is the Application's: a new spec makes
    /// every earlier prediction stale.
    pub fn state(&self, server: &str, app: &str, generation: i64) -> Arc<dyn LiveState> {
        let predictions = self
            .predictions
            .lock()
            .map(|mut all| all.entry(app.to_owned()).or_default().clone())
            .unwrap_or_default();
        Arc::new(CachedState {
            server: server.to_owned(),
            watched: self.watched.clone(),
            predictions,
            generation,
        })
    }

    /// Forgets what was remembered of application `app` (it was deleted).
    pub fn forget(&self, app: &str) {
        if let Ok(mut all) = self.predictions.lock() {
            all.remove(app);
        }
    }
}

/// The key of a kind in the watch table.
fn kind_key(kind: &Resolved) -> String {
    format!("{}/{}", kind.resource.api_version, kind.resource.plural)
}

/// Whether `store` has had its first list (never waits: a kind that
/// cannot be listed, or not yet, is read from the API server instead).
fn ready(store: &Store<DynamicObject>) -> Option<()> {
    use futures_util::FutureExt as _;
    store.wait_until_ready().now_or_never()?.ok()
}

/// The cached live state of one cluster, for one application.
struct CachedState {
    server: String,
    watched: Arc<Mutex<HashMap<(String, String), Watched>>>,
    predictions: Arc<Mutex<Predictions>>,
    generation: i64,
}

impl CachedState {
    fn stores(&self) -> Vec<(Resolved, Store<DynamicObject>, Arc<owners::Owners>)> {
        self.watched
            .lock()
            .map(|watched| {
                watched
                    .iter()
                    .filter(|((server, _), _)| *server == self.server)
                    .map(|(_, w)| (w.resolved.clone(), w.store.clone(), w.owners.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn salted(&self, fingerprint: u64) -> u64 {
        fingerprint ^ (self.generation as u64).rotate_left(17)
    }
}

#[async_trait::async_trait]
impl LiveState for CachedState {
    async fn get(&self, resolved: &Resolved, key: &ObjectKey) -> Option<Option<Value>> {
        let store = self
            .watched
            .lock()
            .ok()?
            .get(&(self.server.clone(), kind_key(resolved)))?
            .store
            .clone();
        ready(&store)?;
        let mut reference = ObjectRef::new_with(&key.name, resolved.resource.clone());
        if let Some(namespace) = key.namespace.as_deref().filter(|_| resolved.namespaced) {
            reference = reference.within(namespace);
        }
        // Not cached: perhaps there but not labelled by Kiln; the API
        // server says.
        let object = store.get(&reference)?;
        Some(serde_json::to_value(object.as_ref()).ok())
    }

    async fn labelled(&self, app: &str) -> Option<Labelled> {
        let mut labelled = Labelled::default();
        for (resolved, store, owners) in self.stores() {
            if ready(&store).is_none() {
                labelled.unknown.push(resolved);
                continue;
            }
            // The index, not a scan of every object of the kind.
            for reference in owners.of(app, &resolved.resource) {
                let Some(object) = store.get(&reference) else {
                    continue;
                };
                let mine = object
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(APP_LABEL))
                    .is_some_and(|v| v == app);
                if mine && let Ok(value) = serde_json::to_value(object.as_ref()) {
                    labelled.objects.push((resolved.clone(), value));
                }
            }
        }
        Some(labelled)
    }

    fn still_in_sync(&self, key: &ObjectKey, fingerprint: u64) -> bool {
        let salted = self.salted(fingerprint);
        self.predictions
            .lock()
            .map(|p| p.get(key) == Some(&(salted, true)))
            .unwrap_or(false)
    }

    fn compared(&self, key: &ObjectKey, fingerprint: u64, in_sync: bool) {
        let salted = self.salted(fingerprint);
        if let Ok(mut p) = self.predictions.lock() {
            p.insert(key.clone(), (salted, in_sync));
        }
    }

    fn keep_only(&self, keys: &std::collections::BTreeSet<ObjectKey>) {
        if let Ok(mut p) = self.predictions.lock() {
            p.retain(|key, _| keys.contains(key));
        }
    }
}

/// The Application named by an object's tracking annotation.
fn owner(object: &DynamicObject) -> Option<&str> {
    let id = object.metadata.annotations.as_ref()?.get(TRACKING_ID)?;
    id.split(':').next().filter(|name| !name.is_empty())
}

/// Whether the newest write to `object` is `manager`'s own apply (ties
/// count as someone else's: reporting too much costs one reconcile,
/// reporting too little leaves drift until the next resync).
fn written_by(object: &DynamicObject, manager: &str) -> bool {
    let Some(entries) = object.metadata.managed_fields.as_ref() else {
        return false;
    };
    let newest = entries.iter().filter_map(|e| e.time.as_ref()).max();
    let Some(newest) = newest else { return false };
    let latest: Vec<_> = entries
        .iter()
        .filter(|e| e.time.as_ref() == Some(newest))
        .collect();
    latest.iter().all(|e| {
        e.manager.as_deref() == Some(manager)
            && e.operation.as_deref() == Some("Apply")
            && e.subresource.is_none()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(entries: serde_json::Value) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "annotations": {TRACKING_ID: "guestbook:/ConfigMap:web/x"},
                "managedFields": entries}
        }))
        .unwrap()
    }

    #[test]
    fn the_newest_write_decides_and_ties_are_someone_elses() {
        let ours =
            |time: &str| serde_json::json!({"manager": "kiln", "operation": "Apply", "time": time});
        let theirs = |time: &str| serde_json::json!({"manager": "kubectl-edit", "operation": "Update", "time": time});
        let t1 = "2026-12-01T10:00:00Z";
        let t2 = "2026-12-01T10:00:05Z";
        assert!(written_by(
            &object(serde_json::json!([ours(t2), theirs(t1)])),
            "kiln"
        ));
        assert!(!written_by(
            &object(serde_json::json!([ours(t1), theirs(t2)])),
            "kiln"
        ));
        assert!(!written_by(
            &object(serde_json::json!([ours(t1), theirs(t1)])),
            "kiln"
        ));
        assert!(!written_by(&object(serde_json::json!([])), "kiln"));
        assert_eq!(owner(&object(serde_json::json!([]))), Some("guestbook"));
    }
}
