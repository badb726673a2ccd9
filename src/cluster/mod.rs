//! Talking to a cluster: a `kube::Client` from a kubeconfig, and the
//! discovery that turns an object's `apiVersion`/`kind` into the resource to
//! call — refreshed when a kind is unknown, so that custom resources whose
//! CRD was applied a moment ago (earlier in the same sync) resolve.

pub mod requests;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{Discovery, Scope};
use tokio::sync::RwLock;

/// Why the cluster could not be reached or asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig {
        /// Which file (or "default").
        path: String,
        /// What is wrong.
        message: String,
    },
    /// Discovery failed.
    #[error("cannot discover the cluster's API")]
    Discovery(#[source] kube::Error),
    /// The cluster serves no such kind.
    #[error("the cluster does not serve {kind} in {api_version} (is its CRD installed?)")]
    UnknownKind {
        /// The object's `apiVersion`.
        api_version: String,
        /// The object's `kind`.
        kind: String,
    },
}

/// A resolved kind: the resource to call and whether it is namespaced.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// Group, version, kind and plural.
    pub resource: ApiResource,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
}

/// A cluster and what it serves.
pub struct Cluster {
    client: kube::Client,
    kinds: RwLock<HashMap<(String, String), Resolved>>,
    all: RwLock<Arc<[Resolved]>>,
    /// When discovery last ran; held while it runs, so concurrent misses
    /// share one round ([`MIN_REFRESH_INTERVAL`]).
    refreshed: tokio::sync::Mutex<Option<(std::time::Instant, Option<String>)>>,
    rounds: std::sync::atomic::AtomicU64,
    /// The server's version (`/version`), asked once.
    version: tokio::sync::OnceCell<String>,
}

/// The shortest time between two discovery rounds caused by unknown kinds:
/// a render full of kinds the cluster does not serve costs one round per
/// interval, not one per object.
pub const MIN_REFRESH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// The longest one discovery round may take: lookups queue behind it.
pub const DISCOVERY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").finish_non_exhaustive()
    }
}

impl Cluster {
    /// Connects with a kubeconfig file (or the default: `KUBECONFIG`,
    /// `~/.kube/config`, in-cluster), optionally picking a context; requests
    /// are paced and counted with the default [`requests::ClientOptions`].
    pub async fn connect(
        kubeconfig: Option<&Path>,
        context: Option<&str>,
    ) -> Result<Self, ClusterError> {
        Self::connect_with(kubeconfig, context, &requests::ClientOptions::default()).await
    }

    /// [`Cluster::connect`] with requests paced and counted as `options` say.
    pub async fn connect_with(
        kubeconfig: Option<&Path>,
        context: Option<&str>,
        client_options: &requests::ClientOptions,
    ) -> Result<Self, ClusterError> {
        let options = kube::config::KubeConfigOptions {
            context: context.map(str::to_owned),
            ..Default::default()
        };
        let named = kubeconfig.map_or_else(|| "default".to_owned(), |p| p.display().to_string());
        let fail = |message: String| ClusterError::Kubeconfig {
            path: named.clone(),
            message,
        };
        let config = match kubeconfig {
            Some(path) => {
                let file =
                    kube::config::Kubeconfig::read_from(path).map_err(|e| fail(e.to_string()))?;
                kube::Config::from_custom_kubeconfig(file, &options)
                    .await
                    .map_err(|e| fail(e.to_string()))?
            }
            None => kube::Config::from_kubeconfig(&options)
                .await
                .map_err(|e| fail(e.to_string()))?,
        };
        let client = requests::client(config, client_options).map_err(|e| fail(e.to_string()))?;
        Ok(Self::new(client))
    }

    /// Wraps a client.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            kinds: RwLock::new(HashMap::new()),
            all: RwLock::new(Arc::from(Vec::new())),
            refreshed: tokio::sync::Mutex::new(None),
            rounds: std::sync::atomic::AtomicU64::new(0),
            version: tokio::sync::OnceCell::new(),
        }
    }

    /// The client.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Discovery rounds so far (metrics, tests).
    pub fn discovery_rounds(&self) -> u64 {
        self.rounds.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// What Helm's `.Capabilities` should see of this cluster: its version
    /// (`/version`'s `gitVersion`, asked once per process) and the
    /// group/versions and `group/version/Kind`s it serves (from discovery,
    /// run now if it never ran), sorted.
    pub async fn facts(&self) -> Result<crate::api::helm::ClusterFacts, ClusterError> {
        let version = self
            .version
            .get_or_try_init(|| async {
                self.client
                    .apiserver_version()
                    .await
                    .map(|info| info.git_version)
                    .map_err(ClusterError::Discovery)
            })
            .await?
            .clone();
        if self.kinds.read().await.is_empty() {
            self.refresh().await?;
        }
        let mut api_versions = std::collections::BTreeSet::new();
        for (api_version, kind) in self.kinds.read().await.keys() {
            api_versions.insert(api_version.clone());
            api_versions.insert(format!("{api_version}/{kind}"));
        }
        Ok(crate::api::helm::ClusterFacts {
            kube_version: Some(version),
            api_versions: api_versions.into_iter().collect(),
        })
    }

    async fn refresh(&self) -> Result<(), ClusterError> {
        self.rounds
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let discovery = match Discovery::new(self.client.clone()).run_aggregated().await {
            Ok(discovery) => discovery,
            // Servers before 1.26 have no aggregated discovery.
            Err(_) => Discovery::new(self.client.clone())
                .run()
                .await
                .map_err(ClusterError::Discovery)?,
        };
        let mut kinds = HashMap::new();
        let mut all = Vec::new();
        for group in discovery.groups() {
            for (resource, caps) in group.recommended_resources() {
                let resolved = Resolved {
                    namespaced: caps.scope == Scope::Namespaced,
                    resource: resource.clone(),
                };
                if caps.supports_operation(kube::discovery::verbs::LIST)
                    && caps.supports_operation(kube::discovery::verbs::DELETE)
                {
                    all.push(resolved.clone());
                }
            }
            for version in group.versions() {
                for (resource, caps) in group.versioned_resources(version) {
                    let resolved = Resolved {
                        namespaced: caps.scope == Scope::Namespaced,
                        resource: resource.clone(),
                    };
                    kinds.insert(
                        (resource.api_version.clone(), resource.kind.clone()),
                        resolved,
                    );
                }
            }
        }
        *self.kinds.write().await = kinds;
        *self.all.write().await = all.into();
        Ok(())
    }

    /// Resolves `apiVersion`/`kind`, refreshing discovery once on a miss.
    pub async fn resolve(&self, api_version: &str, kind: &str) -> Result<Resolved, ClusterError> {
        let key = (api_version.to_owned(), kind.to_owned());
        if let Some(found) = self.kinds.read().await.get(&key) {
            return Ok(found.clone());
        }
        {
            let mut refreshed = self.refreshed.lock().await;
            // Someone refreshed while we waited, or just before: no new round
            // (a failed round counts too: its error stands for the interval).
            let recent = refreshed
                .as_ref()
                .filter(|(at, _)| at.elapsed() < MIN_REFRESH_INTERVAL);
            match recent {
                Some((_, Some(error))) => {
                    return Err(ClusterError::Discovery(kube::Error::Service(
                        error.clone().into(),
                    )));
                }
                Some((_, None)) => {}
                None if self.kinds.read().await.contains_key(&key) => {}
                None => {
                    let round = tokio::time::timeout(DISCOVERY_TIMEOUT, self.refresh()).await;
                    let error = match round {
                        Ok(Ok(())) => None,
                        Ok(Err(e)) => Some(crate::text::chain(&e)),
                        Err(_) => Some(format!("discovery took longer than {DISCOVERY_TIMEOUT:?}")),
                    };
                    *refreshed = Some((std::time::Instant::now(), error.clone()));
                    if let Some(error) = error {
                        return Err(ClusterError::Discovery(kube::Error::Service(error.into())));
                    }
                }
            }
        }
        self.kinds
            .read()
            .await
            .get(&key)
            .cloned()
            .ok_or_else(|| ClusterError::UnknownKind {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            })
    }

    /// Every listable and deletable kind, at its preferred version (for
    /// finding what to prune).
    pub async fn all_kinds(&self) -> Result<Arc<[Resolved]>, ClusterError> {
        if self.all.read().await.is_empty() {
            self.refresh().await?;
        }
        Ok(self.all.read().await.clone())
    }

    /// A kind by group and kind, at its preferred version.
    pub async fn resolve_group_kind(
        &self,
        group: &str,
        kind: &str,
    ) -> Result<Resolved, ClusterError> {
        self.all_kinds()
            .await?
            .iter()
            .find(|r| r.resource.group == group && r.resource.kind == kind)
            .cloned()
            .ok_or_else(|| ClusterError::UnknownKind {
                api_version: group.to_owned(),
                kind: kind.to_owned(),
            })
    }

    /// The dynamic API of a resolved kind in `namespace` (ignored for
    /// cluster-scoped kinds; `None` lists across namespaces).
    pub fn api(&self, resolved: &Resolved, namespace: Option<&str>) -> Api<DynamicObject> {
        match (resolved.namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &resolved.resource),
            _ => Api::all_with(self.client.clone(), &resolved.resource),
        }
    }
}

/// The group-version-kind of `apiVersion` + `kind`.
pub fn gvk(api_version: &str, kind: &str) -> GroupVersionKind {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    GroupVersionKind::gvk(group, version, kind)
}
