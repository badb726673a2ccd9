//! The render cache: a render's output is reused as long as everything it
//! read still holds in the new commit's tree. The key is what shapes a
//! render besides the source — the plugins' digests, their parameters, the
//! application's path and destination; the entry keeps the render's read
//! set. A commit that touches nothing an application read costs a re-read
//! of those few files, not a render. Bounded in memory (least recently used
//! entries go first) and, when given a directory, on disk so that a restart
//! does not render the world again; deleting it changes nothing but time.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

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
    dir: Option<PathBuf>,
}

/// The on-disk form of an entry.
#[derive(serde::Serialize, serde::Deserialize)]
struct Stored {
    read_set: ReadSet,
    objects: Vec<(Map<String, Value>, Option<String>)>,
}

/// A render served from the cache.
#[derive(Debug, Clone, PartialEq)]
pub struct Cached {
    /// The rendered objects.
    pub objects: Vec<Object>,
    /// What the render read.
    pub read_set: ReadSet,
}

/// What each Application's last render read, by Application name: the
/// webhook refreshes an Application when a push changes something under
/// these paths (repository-relative), not only under its own path. Kept in
/// memory; until an Application's first render after a start, nothing is
/// known of it.
#[derive(Debug, Default)]
pub struct ReadPaths {
    apps: Mutex<HashMap<String, Arc<BTreeSet<String>>>>,
}

impl ReadPaths {
    /// Records what the latest render of `app` read.
    pub fn record(&self, app: &str, read_set: &ReadSet) {
        let paths: BTreeSet<String> = read_set
            .iter()
            .map(|(path, _)| path.as_str().to_owned())
            .collect();
        self.lock().insert(app.to_owned(), Arc::new(paths));
    }

    /// What the latest render of `app` read, if one ran since the start.
    pub fn get(&self, app: &str) -> Option<Arc<BTreeSet<String>>> {
        self.lock().get(app).cloned()
    }

    /// Forgets a deleted Application.
    pub fn forget(&self, app: &str) {
        self.lock().remove(app);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<BTreeSet<String>>>> {
        // Each update is a single insert or remove: still consistent.
        self.apps
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
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
            dir: None,
        }
    }

    /// Also keeps entries as files in `dir` (created if missing): a new
    /// process finds the renders of the previous one.
    pub fn with_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        if let Err(e) = std::fs::create_dir_all(&dir) {
            tracing::warn!(dir = %dir.display(), error = %e, "the render cache stays in memory");
        } else {
            self.dir = Some(dir);
        }
        self
    }

    fn file(&self, key: &Digest) -> Option<PathBuf> {
        let name = key.to_string().replace("sha256:", "");
        self.dir
            .as_ref()
            .map(|dir| dir.join(format!("{name}.json")))
    }

    fn load(&self, key: &Digest) -> Option<Entry> {
        let text = std::fs::read(self.file(key)?).ok()?;
        // A damaged file is a miss: it is rewritten after the next render.
        let stored: Stored = serde_json::from_slice(&text).ok()?;
        Some(Entry {
            read_set: stored.read_set,
            objects: stored
                .objects
                .into_iter()
                .map(|(value, source)| Object::new(value, source))
                .collect(),
            used: 0,
        })
    }

    fn store(&self, key: &Digest, read_set: &ReadSet, objects: &[Object]) {
        let Some(path) = self.file(key) else { return };
        let stored = Stored {
            read_set: read_set.clone(),
            objects: objects
                .iter()
                .map(|o| (o.value().clone(), o.source().map(str::to_owned)))
                .collect(),
        };
        let write = || -> std::io::Result<()> {
            let dir = path.parent().unwrap_or(std::path::Path::new("."));
            // The directory may have been deleted under us.
            std::fs::create_dir_all(dir)?;
            let mut file = tempfile::NamedTempFile::new_in(dir)?;
            serde_json::to_writer(&mut file, &stored)?;
            file.persist(&path).map_err(|e| e.error)?;
            Ok(())
        };
        if let Err(e) = write() {
            tracing::warn!(path = %path.display(), error = %e, "cannot write a render cache entry");
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

    /// The cached render, when the entry's read set holds in `view`.
    pub fn get(&self, key: &Digest, view: &dyn SourceView) -> Option<Cached> {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let tick = self.tick();
        if !entries.contains_key(key)
            && let Some(entry) = self.load(key)
        {
            entries.insert(*key, entry);
        }
        let hit = entries.get_mut(key).and_then(|entry| {
            entry.read_set.holds(view).then(|| {
                entry.used = tick;
                Cached {
                    objects: entry.objects.clone(),
                    read_set: entry.read_set.clone(),
                }
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
        self.store(&key, &read_set, &objects);
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::render::{self, Step};
    use crate::source::LocalDir;

    #[tokio::test]
    async fn entries_survive_a_restart_and_a_change_invalidates_them() {
        let source = tempfile::tempdir().unwrap();
        std::fs::create_dir(source.path().join("app")).unwrap();
        std::fs::write(
            source.path().join("app/cm.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
        )
        .unwrap();
        std::fs::write(source.path().join("README.md"), "docs").unwrap();
        let view: Arc<dyn SourceView> = Arc::new(LocalDir::open(source.path()).unwrap());
        let context = crate::plugin::AppContext {
            path: "app".into(),
            ..Default::default()
        };
        let rendered = render::render(view.clone(), &context, &Vec::<Step>::new())
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let key = RenderCache::key(&["app"]);
        RenderCache::new(8).with_dir(dir.path()).put(
            key,
            rendered.read_set.clone(),
            rendered.objects.clone(),
        );

        // A new process: found on disk.
        let restarted = RenderCache::new(8).with_dir(dir.path());
        let cached = restarted.get(&key, &*view).unwrap();
        assert_eq!(cached.objects, rendered.objects);
        assert_eq!(cached.read_set, rendered.read_set);
        // Outside what was read: still valid. Inside: invalid.
        std::fs::write(source.path().join("README.md"), "more docs").unwrap();
        assert!(restarted.get(&key, &*view).is_some());
        std::fs::write(
            source.path().join("app/cm.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
        )
        .unwrap();
        assert!(restarted.get(&key, &*view).is_none());
        assert_eq!(restarted.stats(), (2, 1));
    }
}
