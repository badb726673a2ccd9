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
    let value = crate::digest::stable_hash64(&[format!("{namespace}/{name}").as_bytes()]);
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
    /// When each shard's Lease was last taken or renewed, in milliseconds
    /// since `epoch`: ownership lapses a lease duration after it (a replica
    /// cut off from the API server stops on its own, before anyone may take
    /// its shards over).
    renewed: Vec<AtomicU64>,
    epoch: Instant,
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
            renewed: (0..shards).map(|_| AtomicU64::new(0)).collect(),
            epoch: Instant::now(),
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ShardingConfig {
        &self.config
    }

    /// Whether this replica owns `shard` now: it holds the shard and
    /// renewed its Lease less than a lease duration ago (one shard: always).
    pub fn owns(&self, shard: u32) -> bool {
        let held = self.owned.load(Ordering::SeqCst) & (1 << shard) != 0;
        held && (self.config.shards == 1 || self.fresh(shard))
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn fresh(&self, shard: u32) -> bool {
        let renewed = self.renewed[shard as usize].load(Ordering::SeqCst);
        let fence = u64::try_from(self.config.lease_duration.as_millis()).unwrap_or(u64::MAX);
        self.now_ms().saturating_sub(renewed) < fence
    }

    fn mark_renewed(&self, shard: u32) {
        self.renewed[shard as usize].store(self.now_ms(), Ordering::SeqCst);
    }

    fn held(&self, shard: u32) -> bool {
        self.owned.load(Ordering::SeqCst) & (1 << shard) != 0
    }

    /// Whether this replica owns the shard of the Application
    /// `namespace/name` now.
    pub fn owns_app(&self, namespace: &str, name: &str) -> bool {
        self.owns(shard_of(namespace, name, self.config.shards))
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
    /// Nothing here waits for reconciles: a shard handed back is released
    /// by a task of its own once its reconciles have finished, so the other
    /// shards' Leases keep being renewed meanwhile.
    pub async fn contend(
        self: Arc<Self>,
        client: kube::Client,
        namespace: String,
        gained: tokio::sync::mpsc::UnboundedSender<()>,
        shutdown: Arc<AtomicBool>,
    ) {
        let electors: Vec<Arc<Elector>> = (0..self.config.shards)
            .map(|shard| {
                Arc::new(Elector::new(
                    client.clone(),
                    &namespace,
                    LeaseConfig {
                        name: lease_name(shard),
                        identity: self.config.identity.clone(),
                        duration: self.config.lease_duration,
                        renew_every: self.config.renew_every,
                        retry_every: self.config.renew_every,
                    },
                ))
            })
            .collect();
        let mut state = ContendState::default();
        while !shutdown.load(Ordering::Relaxed) {
            for (shard, elector) in (0..self.config.shards).zip(&electors) {
                if self.clone().step(shard, elector, &mut state).await {
                    tracing::info!(shard, "took the shard's lease");
                    let _ = gained.send(());
                }
            }
            tokio::time::sleep(self.config.renew_every).await;
        }
        for (shard, elector) in (0..self.config.shards).zip(&electors) {
            if self.held(shard) {
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

    /// One round for one shard; true when the shard was taken (or its
    /// ownership, lapsed, came back with a renewal).
    async fn step(
        self: Arc<Self>,
        shard: u32,
        elector: &Arc<Elector>,
        state: &mut ContendState,
    ) -> bool {
        let preferred = shard == self.config.index;
        let view = match elector.peek().await {
            Ok(view) => view,
            Err(e) => {
                // Ownership lapses by itself a lease duration after the
                // last renewal ([`Shards::owns`]).
                tracing::warn!(shard, error = %e, "cannot read the shard's lease");
                return false;
            }
        };
        if self.held(shard) {
            let claimed = view
                .as_ref()
                .and_then(|v| v.claimed_by.as_deref())
                .is_some_and(|c| c != self.config.identity);
            if claimed && !preferred {
                tracing::info!(
                    shard,
                    "handing the shard back to the replica that claims it"
                );
                // No new reconcile of the shard from now; the Lease goes
                // once those running have finished.
                self.set(shard, false);
                let (shards, elector) = (self.clone(), elector.clone());
                let version = view.and_then(|v| v.resource_version);
                tokio::spawn(async move {
                    shards.drain(shard).await;
                    if let Err(e) = elector.release(version).await {
                        tracing::warn!(shard, error = %e, "cannot release the shard's lease");
                    }
                });
                return false;
            }
            let lapsed = !self.owns(shard);
            match elector.try_acquire_or_renew().await {
                Ok(true) => {
                    self.mark_renewed(shard);
                    return lapsed;
                }
                Ok(false) => {
                    tracing::warn!(shard, "lost the shard's lease to another replica");
                    self.set(shard, false);
                }
                Err(e) => {
                    tracing::warn!(shard, error = %e, "cannot renew the shard's lease");
                }
            }
            return false;
        }
        if !preferred && !self.may_take_over(shard, view.as_ref(), state) {
            return false;
        }
        // Not while a hand-back of this shard still drains.
        if self.running[shard as usize].load(Ordering::SeqCst) > 0 {
            return false;
        }
        match elector.try_acquire_or_renew().await {
            Ok(true) => {
                state.missing_since.remove(&shard);
                self.mark_renewed(shard);
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
}

/// What one replica remembers between rounds.
#[derive(Debug, Default)]
struct ContendState {
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
        shards.mark_renewed(1);
        let running = shards.enter("kiln", &name).unwrap();
        assert_eq!(shards.running[1].load(Ordering::SeqCst), 1);
        drop(running);
        assert_eq!(shards.owned(), vec![1]);
        assert_eq!(shards.running[1].load(Ordering::SeqCst), 0);
        assert_eq!(shards.owned(), vec![1]);
    }

    #[test]
    fn ownership_lapses_a_lease_duration_after_the_last_renewal() {
        let shards = Shards::new(ShardingConfig {
            shards: 2,
            lease_duration: Duration::from_millis(50),
            ..ShardingConfig::default()
        });
        shards.set(0, true);
        shards.mark_renewed(0);
        assert!(shards.owns(0));
        std::thread::sleep(Duration::from_millis(80));
        assert!(
            !shards.owns(0),
            "a replica that cannot renew stops by itself"
        );
        assert!(shards.held(0), "until it renews again or learns it lost");
        shards.mark_renewed(0);
        assert!(shards.owns(0));
    }

    #[test]
    fn one_shard_is_always_owned() {
        let shards = Shards::new(ShardingConfig::default());
        assert!(shards.enter("kiln", "anything").is_some());
    }
}
