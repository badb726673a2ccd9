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

use std::collections::HashSet;
use std::sync::Mutex;

use futures_util::StreamExt as _;
use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt as _, watcher};
use tokio::sync::mpsc;

use crate::api::Application;
use crate::cluster::{Cluster, Resolved};
use crate::sync::TRACKING_ID;

/// How many triggers may wait before the watches slow down.
const QUEUE: usize = 1024;

/// The watches, and the stream of Applications they trigger.
pub struct LiveWatches {
    namespace: String,
    manager: String,
    sender: mpsc::Sender<ObjectRef<Application>>,
    receiver: Mutex<Option<mpsc::Receiver<ObjectRef<Application>>>>,
    watched: Mutex<HashSet<(String, String)>>,
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
}

impl std::fmt::Debug for LiveWatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveWatches")
            .field(
                "watched",
                &self.watched.lock().map(|w| w.len()).unwrap_or(0),
            )
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
            watched: Mutex::new(HashSet::new()),
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

    /// Makes sure `kind` is watched on `cluster` (named by its server URL).
    pub fn ensure(&self, server: &str, cluster: &Cluster, kind: &Resolved) {
        let key = (
            server.to_owned(),
            format!("{}/{}", kind.resource.api_version, kind.resource.plural),
        );
        let Ok(mut watched) = self.watched.lock() else {
            return;
        };
        if !watched.insert(key) {
            return;
        }
        let api = cluster.api(kind, None);
        let sender = self.sender.clone();
        let namespace = self.namespace.clone();
        let manager = self.manager.clone();
        let what = format!("{} on {server}", kind.resource.plural);
        tracing::debug!(kind = %what, "watching a managed kind");
        let task = tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(event) = events.next().await {
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
