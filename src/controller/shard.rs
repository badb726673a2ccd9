//! Controller sharding: Applications split over N controller replicas.
//!
//! Each Application belongs to shard `hash(namespace/name) mod N`
//! ([`shard_of`]); each shard has a Lease (`kiln-controller-shard-I`) and
//! only the replica holding it reconciles that shard's Applications. Replica
//! `I` (`--shard-index`, or its StatefulSet ordinal) prefers shard `I`: it
//! takes that Lease as soon as it is free. When a shard's Lease has been
//! expired (or absent) for one more lease duration, any replica takes it
//! over, so the Applications of a dead replica keep syncing. When the
//! preferred replica comes back it marks the Lease claimed
//! ([`super::leader::CLAIM_ANNOTATION`]); the replica holding it stops
//! starting reconciles of that shard, waits for those running to finish,
//! and deletes the Lease, which the preferred replica then takes.
//!
//! Every replica watches every Application (as Argo CD's shards do); one
//! that is not its shard's costs nothing but the watch.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

use super::leader::{Elector, LeaseConfig, LeaseView};

/// Most shards (one bit each in the ownership mask).
pub const MAX_SHARDS: u32 = 64;

/// How the Applications are split. Default: one shard (no sharding; the
/// single `kiln-controller` leader election applies).
#[derive(Clone, Debug)]
pub struct ShardingConfig {
    /// Number of shards, 1 to [`MAX_SHARDS`].
    pub shards: u32,
    /// The shard this replica prefers.
    pub index: u32,
    /// This replica's identity in the Leases.
    pub identity: String,
    /// How long a shard Lease is valid without renewal. Default: 15 s.
    pub lease_duration: Duration,
    /// How often Leases are renewed and free ones looked for. Default: 5 s.
    pub renew_every: Duration,
}

impl Default for ShardingConfig {
    fn default() -> Self {
        let lease = LeaseConfig::default();
        Self {
            shards: 1,
            index: 0,
            identity: lease.identity,
            lease_duration: lease.duration,
            renew_every: lease.renew_every,
        }
    }
}

/// The shard of an Application: the first 8 bytes of
/// SHA-256(`namespace/name`) modulo `shards` (stable across replicas,
/// restarts and releases).
pub fn shard_of(namespace: &str, name: &str, shards: u32) -> u32 {
    let digest = Sha256::digest(format!("{namespace}/{name}").as_bytes());
    let value = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
    u32::try_from(value % u64::from(shards.max(1))).expect("below shards")
}

/// The name of shard `index`'s Lease.
pub fn lease_name(index: u32) -> String {
    format!("kiln-controller-shard-{index}")
}

/// The shards this replica owns now, and the reconciles running in each.
#[derive(Debug)]
pub struct Shards {
    config: ShardingConfig,
    owned: AtomicU64,
    running: Vec<AtomicUsize>,
}

/// A reconcile of an owned shard, counted while it runs.
#[derive(Debug)]
pub struct Running {
    shards: Arc<Shards>,
    shard: u32,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shards.running[self.shard as usize].fetch_sub(1, Ordering::SeqCst);
    }
}

impl Shards {
    /// The shards of `config`; with one shard, this replica owns it (the
    /// controller-wide leader election decides whether it runs at all).
    pub fn new(config: ShardingConfig) -> Arc<Self> {
        let shards = config.shards.clamp(1, MAX_SHARDS);
        let config = ShardingConfig { shards, ..config };
        Arc::new(Self {
            owned: AtomicU64::new(u64::from(shards == 1)),
            running: (0..shards).map(|_| AtomicUsize::new(0)).collect(),
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ShardingConfig {
        &self.config
    }

    /// Whether this replica owns `shard` now.
    pub fn owns(&self, shard: u32) -> bool {
        self.owned.load(Ordering::SeqCst) & (1 << shard) != 0
    }

    /// The shards owned now.
    pub fn owned(&self) -> Vec<u32> {
        (0..self.config.shards).filter(|s| self.owns(*s)).collect()
    }

    fn set(&self, shard: u32, owned: bool) {
        if owned {
            self.owned.fetch_or(1 << shard, Ordering::SeqCst);
        } else {
            self.owned.fetch_and(!(1 << shard), Ordering::SeqCst);
        }
    }

    /// Starts a reconcile of the Application `namespace/name` if this
    /// replica owns its shard; `None` otherwise (another replica does).
    pub fn enter(self: &Arc<Self>, namespace: &str, name: &str) -> Option<Running> {
        let shard = shard_of(namespace, name, self.config.shards);
        // Counted before the ownership check, so a shard handed back is
        // never released while a reconcile that saw it owned still runs.
        self.running[shard as usize].fetch_add(1, Ordering::SeqCst);
        let running = Running {
            shards: self.clone(),
            shard,
        };
        self.owns(shard).then_some(running)
    }

    /// Stops starting reconciles of `shard` and waits for those running.
    async fn drain(&self, shard: u32) {
        self.set(shard, false);
        while self.running[shard as usize].load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Holds the Leases of the shards this replica owns and takes those it
    /// may (its preferred shard when free, any shard whose Lease has been
    /// expired for a lease duration), until `shutdown`; then deletes the
    /// Leases it holds so that others take them at once. `gained` is told
    /// each time a shard is taken (its Applications are reconciled then).
    pub async fn contend(
        self: Arc<Self>,
        client: kube::Client,
        namespace: String,
        gained: tokio::sync::mpsc::UnboundedSender<()>,
        shutdown: Arc<AtomicBool>,
    ) {
        let electors: Vec<Elector> = (0..self.config.shards)
            .map(|shard| {
                Elector::new(
                    client.clone(),
                    &namespace,
                    LeaseConfig {
                        name: lease_name(shard),
                        identity: self.config.identity.clone(),
                        duration: self.config.lease_duration,
                        renew_every: self.config.renew_every,
                        retry_every: self.config.renew_every,
                    },
                )
            })
            .collect();
        let mut state = ContendState::default();
        while !shutdown.load(Ordering::Relaxed) {
            for (shard, elector) in (0..self.config.shards).zip(&electors) {
                if self.step(shard, elector, &mut state).await {
                    tracing::info!(shard, "took the shard's lease");
                    let _ = gained.send(());
                }
            }
            tokio::time::sleep(self.config.renew_every).await;
        }
        for (shard, elector) in (0..self.config.shards).zip(&electors) {
            if self.owns(shard) {
                self.drain(shard).await;
                let version = elector.peek().await.ok().flatten();
                let version = version
                    .filter(|v| v.holder == self.config.identity)
                    .and_then(|v| v.resource_version);
                if let Err(e) = elector.release(version).await {
                    tracing::warn!(shard, error = %e, "cannot release the shard's lease");
                }
            }
        }
    }

    /// One round for one shard; true when the shard was taken.
    async fn step(&self, shard: u32, elector: &Elector, state: &mut ContendState) -> bool {
        let preferred = shard == self.config.index;
        let view = match elector.peek().await {
            Ok(view) => view,
            Err(e) => {
                tracing::warn!(shard, error = %e, "cannot read the shard's lease");
                self.expire_if_stale(shard, state);
                return false;
            }
        };
        if self.owns(shard) {
            let claimed = view
                .as_ref()
                .and_then(|v| v.claimed_by.as_deref())
                .is_some_and(|c| c != self.config.identity);
            if claimed && !preferred {
                tracing::info!(
                    shard,
                    "handing the shard back to the replica that claims it"
                );
                self.drain(shard).await;
                if let Err(e) = elector.release(view.and_then(|v| v.resource_version)).await {
                    tracing::warn!(shard, error = %e, "cannot release the shard's lease");
                }
                return false;
            }
            match elector.try_acquire_or_renew().await {
                Ok(true) => {
                    state.renewed.insert(shard, Instant::now());
                }
                Ok(false) => {
                    tracing::warn!(shard, "lost the shard's lease to another replica");
                    self.drain(shard).await;
                }
                Err(e) => {
                    tracing::warn!(shard, error = %e, "cannot renew the shard's lease");
                    self.expire_if_stale(shard, state);
                }
            }
            return false;
        }
        if !preferred && !self.may_take_over(shard, view.as_ref(), state) {
            return false;
        }
        match elector.try_acquire_or_renew().await {
            Ok(true) => {
                state.renewed.insert(shard, Instant::now());
                state.missing_since.remove(&shard);
                self.set(shard, true);
                true
            }
            Ok(false) => {
                // The preferred replica asks for its shard back.
                if preferred
                    && view.is_some_and(|v| {
                        v.claimed_by.as_deref() != Some(self.config.identity.as_str())
                    })
                    && let Err(e) = elector.claim().await
                {
                    tracing::warn!(shard, error = %e, "cannot claim the shard's lease");
                }
                false
            }
            Err(e) => {
                tracing::warn!(shard, error = %e, "cannot take the shard's lease");
                false
            }
        }
    }

    /// Whether a replica that does not prefer `shard` may take it: its
    /// Lease has been expired, or absent, for one more lease duration.
    fn may_take_over(
        &self,
        shard: u32,
        view: Option<&LeaseView>,
        state: &mut ContendState,
    ) -> bool {
        let grace = self.config.lease_duration;
        match view {
            Some(view) => {
                state.missing_since.remove(&shard);
                view.expired_for.is_some_and(|over| over >= grace)
            }
            None => {
                let since = *state
                    .missing_since
                    .entry(shard)
                    .or_insert_with(Instant::now);
                since.elapsed() >= grace
            }
        }
    }

    /// Gives up a shard whose Lease could not be renewed for its duration.
    fn expire_if_stale(&self, shard: u32, state: &ContendState) {
        if self.owns(shard)
            && state
                .renewed
                .get(&shard)
                .is_none_or(|t| t.elapsed() >= self.config.lease_duration)
        {
            tracing::warn!(shard, "the shard's lease expired; stopping its reconciles");
            self.set(shard, false);
        }
    }
}

/// What one replica remembers between rounds.
#[derive(Debug, Default)]
struct ContendState {
    renewed: HashMap<u32, Instant>,
    missing_since: HashMap<u32, Instant>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applications_spread_over_the_shards_stably() {
        let mut counts = [0u32; 3];
        for i in 0..3_000 {
            let shard = shard_of("kiln", &format!("app-{i}"), 3);
            assert_eq!(shard, shard_of("kiln", &format!("app-{i}"), 3));
            counts[shard as usize] += 1;
        }
        assert!(
            counts.iter().all(|c| (850..1_150).contains(c)),
            "{counts:?}"
        );
        assert_eq!(shard_of("kiln", "x", 1), 0);
    }

    #[test]
    fn a_shard_is_entered_only_while_owned_and_counts_its_reconciles() {
        let shards = Shards::new(ShardingConfig {
            shards: 2,
            ..ShardingConfig::default()
        });
        let name = (0..)
            .map(|i| format!("a{i}"))
            .find(|n| shard_of("kiln", n, 2) == 1)
            .unwrap();
        assert!(shards.enter("kiln", &name).is_none());
        assert_eq!(shards.running[1].load(Ordering::SeqCst), 0);
        shards.set(1, true);
        let running = shards.enter("kiln", &name).unwrap();
        assert_eq!(shards.running[1].load(Ordering::SeqCst), 1);
        drop(running);
        assert_eq!(shards.running[1].load(Ordering::SeqCst), 0);
        assert_eq!(shards.owned(), vec![1]);
    }

    #[test]
    fn one_shard_is_always_owned() {
        let shards = Shards::new(ShardingConfig::default());
        assert!(shards.enter("kiln", "anything").is_some());
    }
}
