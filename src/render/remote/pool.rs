//! Several render servers: every render of a repository goes to the same
//! replica, chosen by rendezvous (highest random weight) hashing of the
//! repository over the replicas, so that replica's Git cache, render cache
//! and single flight stay warm for it; when that replica cannot be reached
//! the render goes to the next one in the repository's order, and the
//! unreachable replica is passed over for a while ([`PoolConfig::cooldown`]).
//!
//! Rendezvous hashing moves only the repositories of a replica that comes or
//! goes (1/N of them), like a consistent-hash ring, without a ring to keep.
//!
//! Replicas are either listed (`--render-server` repeated) or discovered:
//! with [`Discovery`], the host of one URL (a headless Service) is resolved
//! every [`PoolConfig::refresh`] and each address is one replica, reached
//! by address and checked against the URL's host name.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use super::Limits;
use super::client::{Client, ClientError};
use super::protocol::{RenderRequest, RenderResponse};
use super::tls::Identity;

/// Default time an unreachable replica is passed over: 30 s.
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(30);
/// Default interval between two resolutions of a discovered Service: 30 s.
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(30);
/// Most replicas one pool holds (a resolution answering more keeps the
/// first ones, by address order): 64.
pub const MAX_REPLICAS: usize = 64;

/// How a pool routes and fails over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    /// How long a replica that could not be reached is passed over (it is
    /// still tried when every replica is). Default: [`DEFAULT_COOLDOWN`].
    pub cooldown: Duration,
    /// Interval between resolutions of a discovered Service. Default:
    /// [`DEFAULT_REFRESH`].
    pub refresh: Duration,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            cooldown: DEFAULT_COOLDOWN,
            refresh: DEFAULT_REFRESH,
        }
    }
}

/// One replica and when it may be tried again.
#[derive(Debug)]
struct Replica {
    client: Client,
    down_until: Mutex<Option<Instant>>,
}

impl Replica {
    fn new(client: Client) -> Self {
        Self {
            client,
            down_until: Mutex::new(None),
        }
    }

    fn is_down(&self, now: Instant) -> bool {
        self.down_until
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some_and(|until| until > now)
    }

    fn set_down(&self, until: Option<Instant>) {
        *self.down_until.lock().unwrap_or_else(|e| e.into_inner()) = until;
    }

    /// The replica's weight for `key`: the first 8 bytes of
    /// SHA-256(replica, key), stable across processes and releases.
    fn weight(&self, key: &str) -> u64 {
        crate::digest::stable_hash64(&[self.client.url().as_bytes(), key.as_bytes()])
    }
}

/// A render routed to a replica.
#[derive(Debug)]
pub struct Routed {
    /// The answer.
    pub response: RenderResponse,
    /// The replica that answered.
    pub server: String,
    /// Replicas tried before it, which could not be reached.
    pub failed_over: Vec<String>,
}

/// No replica could render.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PoolError {
    /// The pool has no replica (a discovered Service with no address yet).
    #[error("no render server replica is known for {0}")]
    Empty(String),
    /// The last replica tried failed (or refused: a condition).
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// Render servers, one of which renders each repository.
#[derive(Debug)]
pub struct Pool {
    name: String,
    replicas: RwLock<Arc<[Arc<Replica>]>>,
    config: PoolConfig,
}

impl Pool {
    /// A pool of the given replicas (`name` says what it is in messages:
    /// the URLs it was made from).
    pub fn new(name: impl Into<String>, clients: Vec<Client>, config: PoolConfig) -> Self {
        let replicas: Vec<Arc<Replica>> = clients
            .into_iter()
            .take(MAX_REPLICAS)
            .map(|c| Arc::new(Replica::new(c)))
            .collect();
        Self {
            name: name.into(),
            replicas: RwLock::new(replicas.into()),
            config,
        }
    }

    /// What the pool was made from (its URLs).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The replicas' names, in no particular order.
    pub fn servers(&self) -> Vec<String> {
        self.snapshot()
            .iter()
            .map(|r| r.client.url().to_owned())
            .collect()
    }

    fn snapshot(&self) -> Arc<[Arc<Replica>]> {
        self.replicas
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the replicas by `clients`; a replica of the same name keeps
    /// its state (passed over or not).
    pub fn replace(&self, clients: Vec<Client>) {
        let old = self.snapshot();
        let replicas: Vec<Arc<Replica>> = clients
            .into_iter()
            .take(MAX_REPLICAS)
            .map(|client| {
                old.iter()
                    .find(|r| r.client.url() == client.url())
                    .cloned()
                    .unwrap_or_else(|| Arc::new(Replica::new(client)))
            })
            .collect();
        *self.replicas.write().unwrap_or_else(|e| e.into_inner()) = replicas.into();
    }

    /// The replicas in the order `key` tries them: by weight, the ones
    /// not passed over first.
    fn order(&self, key: &str, now: Instant) -> Vec<Arc<Replica>> {
        let mut replicas: Vec<(bool, u64, Arc<Replica>)> = self
            .snapshot()
            .iter()
            .map(|r| (r.is_down(now), r.weight(key), r.clone()))
            .collect();
        replicas.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        replicas.into_iter().map(|(_, _, r)| r).collect()
    }

    /// The replica `key` goes to now.
    pub fn owner(&self, key: &str) -> Option<String> {
        self.order(key, Instant::now())
            .first()
            .map(|r| r.client.url().to_owned())
    }

    /// Renders `request` on the replica of `key` (the repository), failing
    /// over to the next replicas when it cannot be reached. A replica that
    /// answered (even a refusal) ends the search; one that did not answer
    /// within the deadline is passed over next time but the render is not
    /// sent again (it already took a whole deadline).
    pub async fn render(&self, key: &str, request: &RenderRequest) -> Result<Routed, PoolError> {
        let mut failed_over = Vec::new();
        let mut last = None;
        for replica in self.order(key, Instant::now()) {
            match replica.client.render(request).await {
                Ok(response) => {
                    replica.set_down(None);
                    return Ok(Routed {
                        response,
                        server: replica.client.url().to_owned(),
                        failed_over,
                    });
                }
                Err(error) if is_unreachable(&error) => {
                    tracing::warn!(server = replica.client.url(), error = %crate::text::chain(&error),
                        "render server replica unreachable, trying the next");
                    replica.set_down(Some(Instant::now() + self.config.cooldown));
                    failed_over.push(replica.client.url().to_owned());
                    last = Some(error);
                }
                Err(error @ ClientError::DeadlineExceeded { .. }) => {
                    replica.set_down(Some(Instant::now() + self.config.cooldown));
                    return Err(error.into());
                }
                Err(error) => return Err(error.into()),
            }
        }
        Err(match last {
            Some(error) => error.into(),
            None => PoolError::Empty(self.name.clone()),
        })
    }
}

/// Whether `error` says the replica is not there (so another may render).
fn is_unreachable(error: &ClientError) -> bool {
    match error {
        ClientError::Unreachable { .. } => true,
        // A proxy or a replica shutting down.
        ClientError::Status { status, .. } => matches!(status, 502..=504),
        _ => false,
    }
}

/// Replicas found by resolving one URL's host: every address is a replica.
#[derive(Clone, Debug)]
pub struct Discovery {
    /// The URL (`https://kiln-render-server.kiln.svc:8443`).
    pub url: String,
    /// The controller's client identity.
    pub identity: Arc<Identity>,
    /// Protocol bounds.
    pub limits: Limits,
}

/// The URL could not be resolved into replicas.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoveryError {
    /// The URL has no host and port.
    #[error("render server URL {0} has no host or port")]
    Url(String),
    /// Resolution failed.
    #[error("cannot resolve the render server {url}")]
    Resolve {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A client could not be built.
    #[error(transparent)]
    Client(#[from] ClientError),
}

impl Discovery {
    /// One client per address the URL's host resolves to now, by address.
    pub async fn resolve(&self) -> Result<Vec<Client>, DiscoveryError> {
        let parsed =
            reqwest::Url::parse(&self.url).map_err(|_| DiscoveryError::Url(self.url.clone()))?;
        let (Some(host), Some(port)) = (parsed.host_str(), parsed.port_or_known_default()) else {
            return Err(DiscoveryError::Url(self.url.clone()));
        };
        let mut addresses: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|source| DiscoveryError::Resolve {
                url: self.url.clone(),
                source,
            })?
            .collect();
        addresses.sort();
        addresses.dedup();
        addresses.truncate(MAX_REPLICAS);
        addresses
            .into_iter()
            .map(|address| {
                Client::at(&self.url, Some(address), &self.identity, self.limits)
                    .map_err(DiscoveryError::from)
            })
            .collect()
    }

    /// Resolves the URL every `pool`'s refresh interval and replaces the
    /// pool's replicas with the answer, until `shutdown` is set. A failed or
    /// empty resolution keeps the replicas known.
    pub async fn follow(self, pool: Arc<Pool>, shutdown: Arc<std::sync::atomic::AtomicBool>) {
        let mut tick = tokio::time::interval(pool.config.refresh);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while !shutdown.load(std::sync::atomic::Ordering::Relaxed) {
            tick.tick().await;
            match self.resolve().await {
                Ok(clients) if !clients.is_empty() => {
                    let before = pool.servers().len();
                    pool.replace(clients);
                    let after = pool.servers().len();
                    if before != after {
                        tracing::info!(url = %self.url, replicas = after, "render server replicas changed");
                    }
                }
                Ok(_) => {
                    tracing::warn!(url = %self.url, "the render server resolved to no address; keeping the replicas known");
                }
                Err(e) => {
                    tracing::warn!(error = %crate::text::chain(&e), "keeping the render server replicas known");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(n: usize) -> Pool {
        let issued = super::super::tls::Issued::new(&["localhost".to_owned()]).unwrap();
        let identity = issued.client_identity();
        let clients = (0..n)
            .map(|i| {
                Client::new(
                    &format!("https://127.0.0.1:{}", 10_000 + i),
                    &identity,
                    Limits::default(),
                )
                .unwrap()
            })
            .collect();
        Pool::new("test", clients, PoolConfig::default())
    }

    fn owners(pool: &Pool, keys: usize) -> Vec<String> {
        (0..keys)
            .map(|i| {
                pool.owner(&format!("https://git.example/repo-{i}"))
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn each_repository_has_one_owner_and_load_is_spread() {
        let pool = pool(3);
        let owners = owners(&pool, 3_000);
        assert_eq!(owners, super::tests::owners(&pool, 3_000), "stable");
        for server in pool.servers() {
            let n = owners.iter().filter(|o| **o == server).count();
            assert!((800..1_200).contains(&n), "{server}: {n} of 3000");
        }
    }

    #[test]
    fn a_replica_leaving_moves_only_its_own_repositories() {
        let three = pool(3);
        let before = owners(&three, 3_000);
        let gone = three.servers()[1].clone();
        let two = pool(3);
        let kept: Vec<Client> = two
            .snapshot()
            .iter()
            .filter(|r| r.client.url() != gone)
            .map(|r| r.client.clone())
            .collect();
        two.replace(kept);
        let after = owners(&two, 3_000);
        for (b, a) in before.iter().zip(&after) {
            if *b != gone {
                assert_eq!(a, b, "a repository of a replica that stayed moved");
            } else {
                assert_ne!(a, &gone);
            }
        }
    }

    #[test]
    fn a_replica_passed_over_is_tried_last_and_comes_back() {
        let pool = pool(2);
        let key = "https://git.example/a";
        let first = pool.owner(key).unwrap();
        let replica = pool
            .snapshot()
            .iter()
            .find(|r| r.client.url() == first)
            .cloned()
            .unwrap();
        replica.set_down(Some(Instant::now() + Duration::from_secs(60)));
        let order = pool.order(key, Instant::now());
        assert_eq!(order.len(), 2);
        assert_ne!(order[0].client.url(), first);
        assert_eq!(order[1].client.url(), first, "still tried when all fail");
        // After the cooldown it owns the repository again.
        let later = pool.order(key, Instant::now() + Duration::from_secs(61));
        assert_eq!(later[0].client.url(), first);
    }

    #[tokio::test]
    async fn an_empty_pool_says_so() {
        let pool = pool(0);
        let request = RenderRequest {
            app: super::super::AppRef {
                name: "a".into(),
                namespace: "kiln".into(),
                project: "default".into(),
                repo_url: "https://git.example/a".into(),
                path: String::new(),
            },
            revision: "HEAD".into(),
            chain: Vec::new(),
            policies: Vec::new(),
            refresh: false,
            repository_credentials: None,
            registry_credentials: Vec::new(),
            ssh_known_hosts: None,
            chart: None,
            helm: None,
            scopes: None,
            cluster: None,
        };
        let error = pool.render("k", &request).await.unwrap_err();
        assert!(
            error.to_string().contains("no render server replica"),
            "{error}"
        );
    }
}
