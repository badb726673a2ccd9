//! The byte budget of the live caches. Every object a watch would keep is
//! measured (its JSON size) and charged to one budget shared by every
//! watch of the controller before it is stored; an object that would take
//! the caches over the budget is not stored, and the watch that met it is
//! dropped ([`super::LiveWatches`] then reads that kind from the API
//! server). A tenant who creates many large labelled objects thus costs
//! the controller API requests, never unbounded memory.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kube::api::DynamicObject;
use kube::runtime::watcher;
use prometheus_client::metrics::gauge::Gauge;

/// Bytes (JSON) of live objects the caches hold at most, by default:
/// 512 MiB. Decoded objects take a small multiple of their JSON size in
/// memory.
pub const DEFAULT_CACHE_BYTES: u64 = 512 * 1024 * 1024;

/// The bytes every live cache together may hold, and those held now.
#[derive(Debug)]
pub struct Budget {
    limit: u64,
    used: AtomicU64,
    gauge: Gauge,
}

/// An object did not fit in the budget.
#[derive(Debug, thiserror::Error)]
#[error(
    "object {object} ({size} bytes) does not fit in the live caches' budget of {limit} bytes ({used} held)"
)]
pub struct OverBudget {
    /// `namespace/name` of the object.
    pub object: String,
    /// Its JSON size.
    pub size: u64,
    /// The budget.
    pub limit: u64,
    /// What the caches held when it came.
    pub used: u64,
}

impl Budget {
    /// A budget of `limit` bytes; `gauge` is kept at the bytes held.
    pub fn new(limit: u64, gauge: Gauge) -> Arc<Self> {
        Arc::new(Self {
            limit,
            used: AtomicU64::new(0),
            gauge,
        })
    }

    /// The bytes held now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::SeqCst)
    }

    /// The budget.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Takes `bytes` if they fit; the held bytes never exceed the limit.
    fn charge(&self, bytes: u64) -> Result<(), u64> {
        let result = self
            .used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.limit)
            });
        self.publish();
        result.map(|_| ())
    }

    fn release(&self, bytes: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                Some(used.saturating_sub(bytes))
            });
        self.publish();
    }

    fn publish(&self) {
        self.gauge
            .set(i64::try_from(self.used()).unwrap_or(i64::MAX));
    }
}

/// An object's place in a cache.
type Key = (Option<String>, String);

/// What one watch's cache holds, charged to the budget (released when
/// the ledger is dropped, with the watch).
#[derive(Debug)]
pub struct Ledger {
    budget: Arc<Budget>,
    current: HashMap<Key, u64>,
    /// A list under way: the reflector buffers it beside the current
    /// objects until it ends.
    pending: Option<HashMap<Key, u64>>,
}

impl Ledger {
    /// An empty ledger charging `budget`.
    pub fn new(budget: Arc<Budget>) -> Self {
        Self {
            budget,
            current: HashMap::new(),
            pending: None,
        }
    }

    /// Charges what `event` makes the cache hold (before it is applied);
    /// `Err` when it does not fit, and then nothing of it is charged.
    pub fn account(&mut self, event: &watcher::Event<DynamicObject>) -> Result<(), OverBudget> {
        match event {
            watcher::Event::Init => {
                if let Some(abandoned) = self.pending.replace(HashMap::new()) {
                    self.budget.release(abandoned.values().sum());
                }
                Ok(())
            }
            watcher::Event::InitApply(object) => {
                let pending = self.pending.get_or_insert_with(HashMap::new);
                put(&self.budget, pending, object)
            }
            watcher::Event::InitDone => {
                let listed = self.pending.take().unwrap_or_default();
                let replaced = std::mem::replace(&mut self.current, listed);
                self.budget.release(replaced.values().sum());
                Ok(())
            }
            watcher::Event::Apply(object) => put(&self.budget, &mut self.current, object),
            watcher::Event::Delete(object) => {
                if let Some(size) = self.current.remove(&key(object)) {
                    self.budget.release(size);
                }
                Ok(())
            }
        }
    }

    /// The bytes this cache holds.
    pub fn held(&self) -> u64 {
        self.current.values().sum::<u64>()
            + self.pending.iter().flatten().map(|(_, s)| s).sum::<u64>()
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        self.budget.release(self.held());
    }
}

fn key(object: &DynamicObject) -> Key {
    (
        object.metadata.namespace.clone(),
        object.metadata.name.clone().unwrap_or_default(),
    )
}

/// Charges `object` in place of what `map` held under its key.
fn put(
    budget: &Budget,
    map: &mut HashMap<Key, u64>,
    object: &DynamicObject,
) -> Result<(), OverBudget> {
    let key = key(object);
    let size = json_size(object);
    let old = map.get(&key).copied().unwrap_or(0);
    if size > old {
        budget.charge(size - old).map_err(|used| OverBudget {
            object: format!("{}/{}", key.0.as_deref().unwrap_or_default(), key.1),
            size,
            limit: budget.limit(),
            used,
        })?;
    } else {
        budget.release(old - size);
    }
    map.insert(key, size);
    Ok(())
}

/// The length of `object`'s JSON, counted without building it.
pub fn json_size(object: &DynamicObject) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len() as u64;
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing into a counter cannot fail; an object that cannot be
    // serialized counts as what was written of it.
    let _ = serde_json::to_writer(&mut count, object);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str, data: &str) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "t"},
            "data": {"x": data}
        }))
        .unwrap()
    }

    #[test]
    fn the_budget_is_never_exceeded_and_everything_is_released() {
        let small = object("a", "x");
        let size = json_size(&small);
        let budget = Budget::new(size * 3, Gauge::default());
        let mut ledger = Ledger::new(budget.clone());
        ledger.account(&watcher::Event::Init).unwrap();
        ledger
            .account(&watcher::Event::InitApply(small.clone()))
            .unwrap();
        ledger.account(&watcher::Event::InitDone).unwrap();
        assert_eq!(budget.used(), size);
        // An update replaces what the object held.
        ledger
            .account(&watcher::Event::Apply(small.clone()))
            .unwrap();
        assert_eq!(budget.used(), size);
        let big = object("b", &"y".repeat(4 * size as usize));
        let over = ledger.account(&watcher::Event::Apply(big)).unwrap_err();
        assert_eq!(over.object, "t/b");
        assert_eq!(budget.used(), size);
        // A relist holds the old and the new objects until it ends.
        ledger.account(&watcher::Event::Init).unwrap();
        ledger
            .account(&watcher::Event::InitApply(small.clone()))
            .unwrap();
        assert_eq!(budget.used(), 2 * size);
        ledger.account(&watcher::Event::InitDone).unwrap();
        assert_eq!(budget.used(), size);
        ledger.account(&watcher::Event::Delete(small)).unwrap();
        assert_eq!(budget.used(), 0);
        ledger
            .account(&watcher::Event::Apply(object("c", "z")))
            .unwrap();
        drop(ledger);
        assert_eq!(budget.used(), 0);
    }
}
