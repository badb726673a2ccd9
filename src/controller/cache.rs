//! The render cache: a render's output is reused as long as everything it
//! read still holds in the new commit's tree. The key is what shapes a
//! render besides the source — the plugins' digests, their parameters, the
//! application's path and destination; the entry keeps the render's read
//! set. A commit that touches nothing an application read costs a re-read
//! of those few files, not a render. Bounded in memory (least recently used
//! entries go first); deleting it changes nothing but time.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::digest::Digest;
use crate::manifest::Object;
use crate::source::{ReadSet, SourceView};

/// Cached renders.
pub struct RenderCache {
    entries: Mutex<HashMap<Digest, Entry>>,
    capacity: usize,
    hits: std::sync::atomic::AtomicU64,
    misses: std::sync::atomic::AtomicU64,
    clock: std::sync::atomic::AtomicU64,
}

struct Entry {
    read_set: ReadSet,
    objects: Vec<Object>,
    used: u64,
}

impl RenderCache {
    /// A cache of at most `capacity` renders.
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
            hits: Default::default(),
            misses: Default::default(),
            clock: Default::default(),
        }
    }

    /// The key of a render: everything but the source that shapes it.
    pub fn key(parts: &[&str]) -> Digest {
        let mut text = String::new();
        for part in parts {
            // Length-prefixed, so that parts cannot run into each other.
            text.push_str(&format!("{}:{part};", part.len()));
        }
        Digest::of(text.as_bytes())
    }

    /// The cached objects, when the entry's read set holds in `view`.
    pub fn get(&self, key: &Digest, view: &dyn SourceView) -> Option<Vec<Object>> {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let tick = self.tick();
        let hit = entries.get_mut(key).and_then(|entry| {
            entry.read_set.holds(view).then(|| {
                entry.used = tick;
                entry.objects.clone()
            })
        });
        let counter = if hit.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        hit
    }

    /// Stores a render.
    pub fn put(&self, key: Digest, read_set: ReadSet, objects: Vec<Object>) {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let used = self.tick();
        entries.insert(
            key,
            Entry {
                read_set,
                objects,
                used,
            },
        );
        while entries.len() > self.capacity {
            let Some(oldest) = entries.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| *k) else {
                break;
            };
            entries.remove(&oldest);
        }
    }

    /// `(hits, misses)` so far.
    pub fn stats(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.hits.load(Relaxed), self.misses.load(Relaxed))
    }

    fn tick(&self) -> u64 {
        self.clock
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}
