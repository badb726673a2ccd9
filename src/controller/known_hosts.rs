//! The SSH known hosts the controller trusts: the ConfigMap
//! `kiln-ssh-known-hosts` of its namespace, key `ssh_known_hosts`
//! (OpenSSH `known_hosts` lines, the format of Argo CD's
//! `argocd-ssh-known-hosts-cm`). While it exists with at least one entry,
//! SSH host keys are checked against it only; without it, hosts are
//! trusted on first use ([`GitConfig::ssh_known_hosts_store`]). Kept
//! current by a watch: an edit applies to the next connection.
//!
//! [`GitConfig::ssh_known_hosts_store`]: crate::source::git::GitConfig::ssh_known_hosts_store

use std::sync::Arc;

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};

use super::secrets::{AbortOnDrop, fixed_store};
use crate::source::git::KnownHostsSource;

/// The ConfigMap's name.
pub const CONFIGMAP: &str = "kiln-ssh-known-hosts";
/// The key holding the known-hosts lines.
pub const KEY: &str = "ssh_known_hosts";

/// The configured known hosts, watched.
#[derive(Clone)]
pub struct SshKnownHosts {
    store: Store<ConfigMap>,
    _watch: Option<Arc<AbortOnDrop>>,
}

impl std::fmt::Debug for SshKnownHosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshKnownHosts")
            .field("configured", &self.known_hosts().is_some())
            .finish()
    }
}

impl SshKnownHosts {
    /// Watches the ConfigMap in `namespace` (a background task that
    /// retries with backoff; it stops with the last clone).
    pub fn watch(client: kube::Client, namespace: &str) -> Self {
        let api: Api<ConfigMap> = Api::namespaced(client, namespace);
        let (store, writer) = reflector::store();
        let config = watcher::Config::default().fields(&format!("metadata.name={CONFIGMAP}"));
        let task = tokio::spawn(async move {
            watcher(api, config)
                .default_backoff()
                .reflect(writer)
                .for_each(|event| async move {
                    if let Err(error) = event {
                        tracing::warn!(%error, configmap = CONFIGMAP, "watching the SSH known hosts");
                    }
                })
                .await;
        });
        Self {
            store,
            _watch: Some(Arc::new(AbortOnDrop(task.abort_handle()))),
        }
    }

    /// A fixed ConfigMap, or none (tests, one-off reads).
    pub fn fixed(configmap: Option<ConfigMap>) -> Self {
        Self {
            store: fixed_store(configmap),
            _watch: None,
        }
    }

    /// Reads the ConfigMap of `namespace` once.
    pub async fn read(client: kube::Client, namespace: &str) -> Result<Self, kube::Error> {
        let api: Api<ConfigMap> = Api::namespaced(client, namespace);
        Ok(Self::fixed(api.get_opt(CONFIGMAP).await?))
    }

    /// Waits until the first list has arrived: a connection before it
    /// would trust on first use a host the list may pin.
    pub async fn ready(&self) {
        let _ = self.store.wait_until_ready().await;
    }
}

impl KnownHostsSource for SshKnownHosts {
    fn known_hosts(&self) -> Option<String> {
        self.store
            .state()
            .into_iter()
            .filter(|cm| cm.metadata.name.as_deref() == Some(CONFIGMAP))
            .find_map(|cm| cm.data.as_ref()?.get(KEY).cloned())
            .filter(|text| {
                text.lines()
                    .map(str::trim)
                    .any(|line| !line.is_empty() && !line.starts_with('#'))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configmap(name: &str, text: &str) -> ConfigMap {
        ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            data: Some([(KEY.to_owned(), text.to_owned())].into()),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn only_the_named_configmap_with_entries_configures_hosts() {
        let line = "github.com ssh-ed25519 AAAA";
        assert_eq!(
            SshKnownHosts::fixed(Some(configmap(CONFIGMAP, line))).known_hosts(),
            Some(line.to_owned())
        );
        assert_eq!(SshKnownHosts::fixed(None).known_hosts(), None);
        assert_eq!(
            SshKnownHosts::fixed(Some(configmap(CONFIGMAP, "# nothing yet\n"))).known_hosts(),
            None
        );
        assert_eq!(
            SshKnownHosts::fixed(Some(configmap("other", line))).known_hosts(),
            None
        );
    }
}
