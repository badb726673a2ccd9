//! The controller's own resources read from watches rather than requests:
//! AppProjects and Plugins of its namespace, each kept in a cache by one
//! watch. A reconcile reads the cache once it has listed; a name the cache
//! does not hold is read from the API server (a resource created a moment
//! ago may not have reached the watch yet).

use std::fmt::Debug;
use std::sync::Arc;

use futures_util::{FutureExt as _, StreamExt as _};
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde::de::DeserializeOwned;

/// One kind of the controller's namespace, cached by a watch.
pub struct Cached<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    api: Api<K>,
    store: Store<K>,
    /// The watch; `None` when every read asks the API server.
    task: Option<tokio::task::AbortHandle>,
}

impl<K> Debug for Cached<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cached").finish_non_exhaustive()
    }
}

impl<K> Drop for Cached<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

impl<K> Cached<K>
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    /// Starts watching `K` in `namespace` (must run inside a Tokio runtime).
    pub fn watch(client: kube::Client, namespace: &str) -> Self {
        let api: Api<K> = Api::namespaced(client, namespace);
        let (store, writer) = reflector::store();
        let stream = watcher(api.clone(), watcher::Config::default())
            .default_backoff()
            .reflect(writer);
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                if let Err(error) = event {
                    tracing::debug!(%error, "watch of the controller's resources");
                }
            }
        });
        Self {
            api,
            store,
            task: Some(task.abort_handle()),
        }
    }

    /// No cache: every read asks the API server (one comparison, where a
    /// watch would cost more than it saves).
    pub fn direct(client: kube::Client, namespace: &str) -> Self {
        let (store, _writer) = reflector::store();
        Self {
            api: Api::namespaced(client, namespace),
            store,
            task: None,
        }
    }

    /// What the cache says of `name` once it has listed: `Some(None)` when
    /// it holds no such resource; `None` before the first list.
    pub fn cached(&self, name: &str) -> Option<Option<K>> {
        let ready = self
            .store
            .wait_until_ready()
            .now_or_never()
            .is_some_and(|r| r.is_ok());
        if !ready {
            return None;
        }
        let namespace = self.api.namespace().unwrap_or_default().to_owned();
        Some(
            self.store
                .get(&ObjectRef::new(name).within(&namespace))
                .map(Arc::unwrap_or_clone),
        )
    }

    /// The resource `name`: from the cache when it has listed and holds it,
    /// else from the API server.
    pub async fn get_opt(&self, name: &str) -> Result<Option<K>, kube::Error> {
        let ready = self
            .store
            .wait_until_ready()
            .now_or_never()
            .is_some_and(|r| r.is_ok());
        if ready {
            let namespace = self.api.namespace().unwrap_or_default().to_owned();
            if let Some(found) = self.store.get(&ObjectRef::new(name).within(&namespace)) {
                return Ok(Some(Arc::unwrap_or_clone(found)));
            }
        }
        self.api.get_opt(name).await
    }
}
