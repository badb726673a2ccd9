//! Live watches: the controller watches every kind it manages, on every
//! destination cluster, so that a change to a managed object (someone's
//! `kubectl edit`, a deletion, a status update that changes health) makes
//! the owning Application reconcile at once instead of at the next resync.
//! That is what makes self-heal immediate.
//!
//! A reconcile says which kinds its Application needs on its cluster
//! ([`LiveWatches::need`]: those it renders and those its status lists);
//! a watch is started the first time a kind is needed. When no Application
//! of this replica's shards needs a kind any more (deleted, no longer
//! rendering it, moved to another shard or cluster), its watch is stopped
//! and its cache freed after [`LiveConfig::grace`]
//! ([`LiveWatches::stop_unneeded`]), so that an Application that comes
//! back at once finds it warm.
//!
//! The caches share one byte budget ([`budget`]): a watch whose next
//! object would take them over it is dropped, and its kind is read from
//! the API server (per reconcile) until [`LiveConfig::retry_dropped`] has
//! passed and a reconcile needs it again.
//!
//! Events map to Applications by Kiln's tracking annotation. Changes whose
//! newest managed-fields entry is the controller's own apply are not
//! reported: they are the controller's own writes, and reporting them
//! would make every sync trigger another reconcile.

pub mod budget;
pub mod owners;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use kube::api::DynamicObject;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use serde_json::Value;
use tokio::sync::mpsc;

use self::budget::{Budget, Ledger};
use crate::api::Application;
use crate::cluster::{Cluster, Resolved};
use crate::manifest::ObjectKey;
use crate::sync::{APP_LABEL, Labelled, LiveState, TRACKING_ID};

/// How many triggers may wait before the watches slow down.
const QUEUE: usize = 1024;

/// Objects per page of a watch's list: a page is held whole while it is
/// decoded, before its objects are charged to the budget, so it bounds
/// what one list may take beyond the budget (objects are at most ~1.5 MiB
/// in etcd).
pub const LIST_PAGE: u32 = 100;

/// How long a watch no Application needs keeps running, by default: 5 min.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(300);

/// How long a kind whose cache went over the budget is read from the API
/// server before its watch is tried again, by default: 10 min.
pub const DEFAULT_RETRY_DROPPED: Duration = Duration::from_secs(600);

/// How the live watches are kept.
#[derive(Clone, Debug)]
pub struct LiveConfig {
    /// How long a watch no Application needs any more keeps running
    /// before it is stopped and its cache freed. Default: [`DEFAULT_GRACE`].
    pub grace: Duration,
    /// Bytes (JSON) of live objects all caches together hold at most.
    /// Default: [`budget::DEFAULT_CACHE_BYTES`].
    pub cache_bytes: u64,
    /// How long a kind dropped for the budget is read from the API server
    /// before a reconcile that needs it watches it again. Default:
    /// [`DEFAULT_RETRY_DROPPED`].
    pub retry_dropped: Duration,
}

impl Default for LiveConfig {
    fn default() -> Self {
        Self {
            grace: DEFAULT_GRACE,
            cache_bytes: budget::DEFAULT_CACHE_BYTES,
            retry_dropped: DEFAULT_RETRY_DROPPED,
        }
    }
}

type Labels = Vec<(String, String)>;

/// The live watches' metrics (registered by [`super::metrics::Metrics`]).
#[derive(Clone, Debug, Default)]
pub struct LiveMetrics {
    /// Watches running, by cluster (`kiln_live_watches`).
    pub watches: Family<Labels, Gauge>,
    /// Bytes the caches hold (`kiln_live_cache_bytes`).
    pub cache_bytes: Gauge,
    /// Caches dropped for the budget, by cluster and kind
    /// (`kiln_live_cache_dropped_total`).
    pub dropped: Family<Labels, Counter>,
}

/// A watched kind on a cluster: (server URL, `apiVersion/plural`).
type Key = (String, String);

/// One watched kind on one cluster.
struct Watched {
    resolved: Resolved,
    cache: Cache,
    /// The cache's objects by the Application that labelled them.
    owners: Arc<owners::Owners>,
    /// Which start of the watch this is (a stopped watch's task must not
    /// touch its successor).
    id: u64,
    /// Since when no Application needs it.
    unneeded_since: Option<Instant>,
}

enum Cache {
    /// Watched; the cache fills once the first list is done.
    Watching {
        store: Store<DynamicObject>,
        task: tokio::task::AbortHandle,
    },
    /// Dropped for the budget at that time: read from the API server.
    Dropped(Instant),
}

type Table = Arc<Mutex<HashMap<Key, Watched>>>;

/// Per application: the fingerprint of each object's last comparison and
/// whether it was in sync.
type Predictions = HashMap<ObjectKey, (u64, bool)>;

/// The watches, their caches, and the stream of Applications they trigger.
pub struct LiveWatches {
    namespace: String,
    manager: String,
    config: LiveConfig,
    metrics: LiveMetrics,
    budget: Arc<Budget>,
    sender: mpsc::Sender<ObjectRef<Application>>,
    receiver: Mutex<Option<mpsc::Receiver<ObjectRef<Application>>>>,
    watched: Table,
    /// Per application: the watches it needs.
    needs: Mutex<HashMap<String, HashSet<Key>>>,
    predictions: Mutex<HashMap<String, Arc<Mutex<Predictions>>>>,
    starts: AtomicU64,
}

impl std::fmt::Debug for LiveWatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveWatches")
            .field("watched", &self.watched())
            .field("cache_bytes", &self.budget.used())
            .finish()
    }
}

impl Drop for LiveWatches {
    fn drop(&mut self) {
        if let Ok(watched) = self.watched.lock() {
            for w in watched.values() {
                if let Cache::Watching { task, .. } = &w.cache {
                    task.abort();
                }
            }
        }
    }
}

impl LiveWatches {
    /// Watches reporting Applications of `namespace`; `manager` is the
    /// controller's field manager (whose own writes are not reported).
    pub fn new(namespace: &str, manager: &str, config: LiveConfig, metrics: LiveMetrics) -> Self {
        let (sender, receiver) = mpsc::channel(QUEUE);
        Self {
            namespace: namespace.to_owned(),
            manager: manager.to_owned(),
            budget: Budget::new(config.cache_bytes, metrics.cache_bytes.clone()),
            config,
            metrics,
            sender,
            receiver: Mutex::new(Some(receiver)),
            watched: Arc::new(Mutex::new(HashMap::new())),
            needs: Mutex::new(HashMap::new()),
            predictions: Mutex::new(HashMap::new()),
            starts: AtomicU64::new(0),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LiveConfig {
        &self.config
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
        self.watching().len()
    }

    /// The kinds watched now: (cluster server URL, `apiVersion/plural`).
    pub fn watching(&self) -> Vec<(String, String)> {
        let mut keys: Vec<Key> = self
            .watched
            .lock()
            .map(|w| {
                w.iter()
                    .filter(|(_, w)| matches!(w.cache, Cache::Watching { .. }))
                    .map(|(key, _)| key.clone())
                    .collect()
            })
            .unwrap_or_default();
        keys.sort();
        keys
    }

    /// The bytes (JSON) the caches hold now.
    pub fn cache_bytes(&self) -> u64 {
        self.budget.used()
    }

    /// Application `app` needs `kinds` on `cluster` (named by its server
    /// URL), and no other watch: each is watched (the objects Kiln
    /// labelled, `kiln.dev/app`, kept in a cache) unless dropped for the
    /// budget lately.
    pub fn need(&self, app: &str, server: &str, cluster: &Cluster, kinds: &[Resolved]) {
        let keys: HashSet<Key> = kinds
            .iter()
            .map(|kind| (server.to_owned(), kind_key(kind)))
            .collect();
        // Recorded first: a sweep in between must not find them unneeded.
        if let Ok(mut needs) = self.needs.lock() {
            needs.insert(app.to_owned(), keys);
        }
        for kind in kinds {
            self.ensure(server, cluster, kind);
        }
    }

    /// Application `app` needs no watch any more (it left this replica,
    /// or its cluster is gone).
    pub fn release(&self, app: &str) {
        if let Ok(mut needs) = self.needs.lock() {
            needs.remove(app);
        }
    }

    /// Keeps the needs and memories of the Applications `keep` says are
    /// still this replica's, and forgets the others'.
    pub fn retain_apps(&self, keep: impl Fn(&str) -> bool) {
        if let Ok(mut needs) = self.needs.lock() {
            needs.retain(|app, _| keep(app));
        }
        if let Ok(mut all) = self.predictions.lock() {
            all.retain(|app, _| keep(app));
        }
    }

    /// Stops the watches no Application has needed for `grace` (and
    /// forgets kinds dropped for the budget that nobody needs); returns
    /// those stopped.
    pub fn stop_unneeded(&self, grace: Duration) -> Vec<(String, String)> {
        let needed: HashSet<Key> = self
            .needs
            .lock()
            .map(|needs| needs.values().flatten().cloned().collect())
            .unwrap_or_default();
        let now = Instant::now();
        let mut stopped = Vec::new();
        let Ok(mut watched) = self.watched.lock() else {
            return stopped;
        };
        watched.retain(|key, w| {
            if needed.contains(key) {
                w.unneeded_since = None;
                return true;
            }
            let since = *w.unneeded_since.get_or_insert(now);
            if now.saturating_duration_since(since) < grace {
                return true;
            }
            if let Cache::Watching { task, .. } = &w.cache {
                task.abort();
                stopped.push(key.clone());
            }
            false
        });
        for (server, kind) in &stopped {
            tracing::debug!(
                kind,
                cluster = server,
                "no Application needs the kind: watch stopped"
            );
            publish_count(&watched, &self.metrics, server);
        }
        stopped
    }

    /// Makes sure `kind` is watched on `cluster` (named by its server URL).
    fn ensure(&self, server: &str, cluster: &Cluster, kind: &Resolved) {
        let key = (server.to_owned(), kind_key(kind));
        let Ok(mut watched) = self.watched.lock() else {
            return;
        };
        match watched.get_mut(&key) {
            Some(w) if matches!(w.cache, Cache::Watching { .. }) => {
                w.unneeded_since = None;
                return;
            }
            Some(Watched {
                cache: Cache::Dropped(at),
                ..
            }) if at.elapsed() < self.config.retry_dropped => return,
            _ => {}
        }
        let id = self.starts.fetch_add(1, Ordering::Relaxed);
        let api = cluster.api(kind, None);
        let writer = reflector::store::Writer::new(kind.resource.clone());
        let store = writer.as_reader();
        let owners = Arc::new(owners::Owners::default());
        let run = WatchTask {
            key: key.clone(),
            id,
            table: self.watched.clone(),
            budget: self.budget.clone(),
            metrics: self.metrics.clone(),
            sender: self.sender.clone(),
            namespace: self.namespace.clone(),
            manager: self.manager.clone(),
            owners: owners.clone(),
        };
        tracing::debug!(kind = %key.1, cluster = server, "watching a managed kind");
        let task = tokio::spawn(run.run(api, writer)).abort_handle();
        watched.insert(
            key,
            Watched {
                resolved: kind.clone(),
                cache: Cache::Watching { store, task },
                id,
                unneeded_since: None,
                owners,
            },
        );
        publish_count(&watched, &self.metrics, server);
    }

    /// The cached live object `key` of `kind` on `server`, once the watch
    /// has listed; `None` when the cache does not hold it (not watched,
    /// not listed in time, dropped for the budget, or not labelled by
    /// Kiln): ask the API server.
    pub async fn get(&self, server: &str, kind: &Resolved, key: &ObjectKey) -> Option<Value> {
        let object = cached(&self.watched, server, kind, key)?;
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

    /// Forgets what was remembered of application `app` (it was deleted),
    /// and that it needed watches.
    pub fn forget(&self, app: &str) {
        self.release(app);
        if let Ok(mut all) = self.predictions.lock() {
            all.remove(app);
        }
    }
}

/// Sets `kiln_live_watches{cluster=server}` to the watches running there.
fn publish_count(watched: &HashMap<Key, Watched>, metrics: &LiveMetrics, server: &str) {
    let count = watched
        .iter()
        .filter(|((s, _), w)| s == server && matches!(w.cache, Cache::Watching { .. }))
        .count();
    metrics
        .watches
        .get_or_create(&vec![("cluster".to_owned(), server.to_owned())])
        .set(i64::try_from(count).unwrap_or(i64::MAX));
}

/// One watch's task: keeps its cache within the budget and reports the
/// Applications whose objects changed.
struct WatchTask {
    key: Key,
    id: u64,
    table: Table,
    budget: Arc<Budget>,
    metrics: LiveMetrics,
    sender: mpsc::Sender<ObjectRef<Application>>,
    namespace: String,
    manager: String,
    owners: Arc<owners::Owners>,
}

impl WatchTask {
    async fn run(
        self,
        api: kube::Api<DynamicObject>,
        mut writer: reflector::store::Writer<DynamicObject>,
    ) {
        let config = watcher::Config::default()
            .labels(APP_LABEL)
            .page_size(LIST_PAGE);
        let mut events = watcher(api, config).default_backoff().boxed();
        let mut ledger = Ledger::new(self.budget.clone());
        let (server, kind) = (&self.key.0, &self.key.1);
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(error) => {
                    tracing::debug!(kind, cluster = server, %error, "live watch");
                    continue;
                }
            };
            if let Err(over) = ledger.account(&event) {
                tracing::warn!(kind, cluster = server, error = %over,
                    "live cache dropped: the kind is read from the API server");
                self.metrics
                    .dropped
                    .get_or_create(&vec![
                        ("cluster".to_owned(), server.clone()),
                        ("kind".to_owned(), kind.clone()),
                    ])
                    .inc();
                self.drop_cache();
                return;
            }
            writer.apply_watcher_event(&event);
            self.owners.apply(&event);
            let object = match event {
                // The first list is the state the last reconcile saw.
                watcher::Event::Apply(object) if !written_by(&object, &self.manager) => object,
                watcher::Event::Delete(object) => object,
                _ => continue,
            };
            if let Some(app) = owner(&object) {
                let target = ObjectRef::new(app).within(&self.namespace);
                if self.sender.send(target).await.is_err() {
                    return;
                }
            }
        }
    }

    /// Replaces this watch's cache by "read from the API server".
    fn drop_cache(&self) {
        let Ok(mut watched) = self.table.lock() else {
            return;
        };
        if let Some(w) = watched.get_mut(&self.key)
            && w.id == self.id
        {
            w.cache = Cache::Dropped(Instant::now());
        }
        publish_count(&watched, &self.metrics, &self.key.0);
    }
}

/// The key of a kind in the watch table.
fn kind_key(kind: &Resolved) -> String {
    format!("{}/{}", kind.resource.api_version, kind.resource.plural)
}

/// The cached object `key` of `kind` on `server`, once its watch has
/// listed.
fn cached(
    table: &Table,
    server: &str,
    kind: &Resolved,
    key: &ObjectKey,
) -> Option<Arc<DynamicObject>> {
    let store = store_of(table, server, kind)?;
    ready(&store)?;
    store.get(&reference(kind, key))
}

/// The cache of `kind` on `server`, if it is watched.
fn store_of(table: &Table, server: &str, kind: &Resolved) -> Option<Store<DynamicObject>> {
    let watched = table.lock().ok()?;
    match &watched.get(&(server.to_owned(), kind_key(kind)))?.cache {
        Cache::Watching { store, .. } => Some(store.clone()),
        Cache::Dropped(_) => None,
    }
}

/// Where object `key` of `kind` is in a cache.
fn reference(kind: &Resolved, key: &ObjectKey) -> ObjectRef<DynamicObject> {
    let mut reference = ObjectRef::new_with(&key.name, kind.resource.clone());
    if let Some(namespace) = key.namespace.as_deref().filter(|_| kind.namespaced) {
        reference = reference.within(namespace);
    }
    reference
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
    watched: Table,
    predictions: Arc<Mutex<Predictions>>,
    generation: i64,
}

impl CachedState {
    /// The kinds watched on this cluster, with their caches (`None`:
    /// dropped for the budget) and the index of their objects' owners.
    #[allow(clippy::type_complexity)]
    fn stores(&self) -> Vec<(Resolved, Option<Store<DynamicObject>>, Arc<owners::Owners>)> {
        self.watched
            .lock()
            .map(|watched| {
                watched
                    .iter()
                    .filter(|((server, _), _)| *server == self.server)
                    .map(|(_, w)| {
                        let store = match &w.cache {
                            Cache::Watching { store, .. } => Some(store.clone()),
                            Cache::Dropped(_) => None,
                        };
                        (w.resolved.clone(), store, w.owners.clone())
                    })
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
        // Not cached: perhaps there but not labelled by Kiln; the API
        // server says.
        let object = cached(&self.watched, &self.server, resolved, key)?;
        Some(serde_json::to_value(object.as_ref()).ok())
    }

    async fn labelled(&self, app: &str) -> Option<Labelled> {
        let mut labelled = Labelled::default();
        for (resolved, store, owners) in self.stores() {
            let Some(store) = store.filter(|s| ready(s).is_some()) else {
                labelled.unknown.push(resolved);
                continue;
            };
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
