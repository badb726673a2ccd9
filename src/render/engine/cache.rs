//! The render cache: a render's output is reused as long as everything it
//! read still holds in the new commit's tree. The key is what shapes a
//! render besides the source — the plugins' digests, their parameters, the
//! application's path and destination; the entry keeps the render's read
//! set. A commit that touches nothing an application read costs a re-read
//! of those few files, not a render.
//!
//! Entries are held serialized, so the cache is bounded in bytes exactly
//! ([`RenderCache::new`]): least recently used entries go first. Given a
//! directory, entries are also files there, so that a restart does not
//! render the world again; an entry leaving memory leaves the disk too, and
//! opening the directory trims it to the same bound. Deleting it changes
//! nothing but time. No lock is held across disk I/O or the read-set check
//! (which reads Git objects): those run on the blocking pool.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use clru::{CLruCache, CLruCacheConfig, WeightScale};
use serde_json::{Map, Value};

use crate::digest::Digest;
use crate::manifest::Object;
use crate::source::{ReadSet, SourceView};

/// The default bound of the render cache: 256 MiB of serialized renders.
pub const DEFAULT_CAPACITY: u64 = 256 << 20;

/// Cached renders.
pub struct RenderCache {
    entries: Mutex<CLruCache<Digest, Arc<Entry>, std::hash::RandomState, BySize>>,
    capacity: usize,
    hits: AtomicU64,
    misses: AtomicU64,
    dir: Option<PathBuf>,
}

/// The stored form of an entry, in memory and on disk.
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

/// An entry: its read set (to check), and the whole entry serialized (what
/// counts against the bound, and what a hit decodes).
struct Entry {
    read_set: ReadSet,
    stored: Vec<u8>,
    /// The identity of the last view the read set was found to hold in
    /// ([`SourceView::identity`]): a view with the same identity reads
    /// alike, so it need not be read again (every resync of an unchanged
    /// commit).
    held_in: Mutex<Option<String>>,
}

impl Entry {
    fn new(read_set: ReadSet, stored: Vec<u8>) -> Self {
        Entry {
            read_set,
            stored,
            held_in: Mutex::new(None),
        }
    }

    /// Whether the read set holds in `view`, reading it only when no view
    /// of the same identity was checked last.
    fn holds(&self, view: &dyn SourceView) -> bool {
        let identity = view.identity();
        let mut held_in = self.held_in.lock().unwrap_or_else(PoisonError::into_inner);
        if identity.is_some() && *held_in == identity {
            return true;
        }
        // Not held across the reads: another lookup may check meanwhile.
        drop(held_in);
        let holds = self.read_set.holds(view);
        held_in = self.held_in.lock().unwrap_or_else(PoisonError::into_inner);
        *held_in = identity.filter(|_| holds);
        holds
    }
}

/// Weighs entries by their serialized size.
struct BySize;

impl WeightScale<Digest, Arc<Entry>> for BySize {
    fn weight(&self, _key: &Digest, entry: &Arc<Entry>) -> usize {
        entry.stored.len()
    }
}

impl Entry {
    fn decode(stored: Vec<u8>) -> Option<Entry> {
        // A damaged entry is a miss: it is rewritten after the next render.
        let Stored { read_set, .. } = serde_json::from_slice(&stored).ok()?;
        Some(Entry::new(read_set, stored))
    }

    fn cached(&self) -> Option<Cached> {
        let stored: Stored = serde_json::from_slice(&self.stored).ok()?;
        Some(Cached {
            objects: stored
                .objects
                .into_iter()
                .map(|(value, source)| Object::new(value, source))
                .collect(),
            read_set: stored.read_set,
        })
    }
}

impl RenderCache {
    /// A cache of at most `capacity` bytes of serialized renders (a render
    /// larger than that is not cached).
    pub fn new(capacity: u64) -> Self {
        let capacity = usize::try_from(capacity).unwrap_or(usize::MAX).max(2);
        let config = CLruCacheConfig::new(NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN))
            .with_scale(BySize);
        Self {
            entries: Mutex::new(CLruCache::with_config(config)),
            capacity,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            dir: None,
        }
    }

    /// Also keeps entries as files in `dir` (created `0700` if missing): a
    /// new process finds the renders of the previous one. Files beyond the
    /// cache's bound are removed, oldest first. A directory another user
    /// could write (see [`crate::private_dir`]) is not used: its entries are
    /// manifests that would be applied to the cluster.
    pub fn with_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        let opened = crate::private_dir::ensure(&dir)
            .map_err(std::io::Error::other)
            .and_then(|()| trim(&dir, self.capacity as u64));
        match opened {
            Ok(()) => self.dir = Some(dir),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "the render cache stays in memory")
            }
        }
        self
    }

    fn file(&self, key: &Digest) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|dir| dir.join(format!("{}.json", key.hex())))
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, CLruCache<Digest, Arc<Entry>, std::hash::RandomState, BySize>>
    {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
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
    pub async fn get(&self, key: &Digest, view: Arc<dyn SourceView>) -> Option<Cached> {
        let hit = self.lookup(key, view).await;
        let counter = if hit.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        hit
    }

    async fn lookup(&self, key: &Digest, view: Arc<dyn SourceView>) -> Option<Cached> {
        let cached = self.lock().get(key).cloned();
        let entry = match cached {
            Some(entry) => entry,
            None => {
                let file = self.file(key)?;
                let entry = blocking(move || Entry::decode(std::fs::read(file).ok()?)).await?;
                let entry = Arc::new(entry);
                let _ = self.lock().put_with_weight(*key, entry.clone());
                entry
            }
        };
        blocking(move || entry.holds(&*view).then(|| entry.cached()).flatten()).await
    }

    /// Stores a render.
    pub async fn put(&self, key: Digest, read_set: ReadSet, objects: &[Object]) {
        let stored = Stored {
            read_set: read_set.clone(),
            objects: objects
                .iter()
                .map(|o| (o.value().clone(), o.source().map(str::to_owned)))
                .collect(),
        };
        let Some(stored) = blocking(move || serde_json::to_vec(&stored).ok()).await else {
            return;
        };
        if stored.len() >= self.capacity {
            tracing::debug!(
                bytes = stored.len(),
                "a render larger than the render cache is not cached"
            );
            return;
        }
        let entry = Arc::new(Entry::new(read_set, stored));
        let evicted = {
            let mut entries = self.lock();
            let mut evicted = Vec::new();
            while entries.weight() + entries.len() + entry.stored.len() + 1 > self.capacity {
                match entries.pop_back() {
                    Some((old, _)) if old != key => evicted.push(old),
                    Some(_) => {}
                    None => break,
                }
            }
            let _ = entries.put_with_weight(key, entry.clone());
            evicted
        };
        let Some(dir) = self.dir.clone() else { return };
        let path = self.file(&key);
        blocking(move || {
            for old in evicted {
                let _ = std::fs::remove_file(dir.join(format!("{}.json", old.hex())));
            }
            if let Some(path) = path
                && let Err(e) = write_atomically(&dir, &path, &entry.stored)
            {
                tracing::warn!(path = %path.display(), error = %e, "cannot write a render cache entry");
            }
            Some(())
        })
        .await;
    }

    /// `(hits, misses)` so far.
    pub fn stats(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }

    /// Bytes of serialized renders held in memory.
    pub fn size(&self) -> u64 {
        self.lock().weight() as u64
    }
}

/// Runs `work` on the blocking pool; `None` if it panicked.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Option<T> + Send + 'static,
) -> Option<T> {
    tokio::task::spawn_blocking(work).await.ok().flatten()
}

fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    // The directory may have been deleted under us.
    crate::private_dir::ensure(dir).map_err(std::io::Error::other)?;
    let dir = cap_std::fs::Dir::open_ambient_dir(dir, cap_std::ambient_authority())?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| std::io::Error::other(format!("{}: not a file name", path.display())))?;
    crate::atomic::replace(&dir, name, bytes)
}

/// Removes the oldest entry files of `dir` until the rest fit in `capacity`.
fn trim(dir: &Path, capacity: u64) -> std::io::Result<()> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let metadata = entry.metadata()?;
        if metadata.is_file() {
            let modified = metadata.modified().unwrap_or(std::time::UNIX_EPOCH);
            files.push((modified, metadata.len(), entry.path()));
        }
    }
    files.sort_by_key(|b| std::cmp::Reverse(b.0));
    let mut kept = 0u64;
    for (_, len, path) in files {
        kept = kept.saturating_add(len);
        if kept > capacity {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::render::{self, Step};
    use crate::source::LocalDir;

    async fn render_dir(source: &Path, app: &str) -> render::Rendered {
        let view: Arc<dyn SourceView> = Arc::new(LocalDir::open(source).unwrap());
        let context = crate::plugin::AppContext {
            path: app.into(),
            ..Default::default()
        };
        render::render(view, &context, &Vec::<Step>::new())
            .await
            .unwrap()
    }

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
        let rendered = render_dir(source.path(), "app").await;
        let dir = tempfile::tempdir().unwrap();
        let key = RenderCache::key(&["app"]);
        RenderCache::new(1 << 20)
            .with_dir(dir.path())
            .put(key, rendered.read_set.clone(), &rendered.objects)
            .await;

        // A new process: found on disk.
        let restarted = RenderCache::new(1 << 20).with_dir(dir.path());
        let cached = restarted.get(&key, view.clone()).await.unwrap();
        assert_eq!(cached.objects, rendered.objects);
        assert_eq!(cached.read_set, rendered.read_set);
        // Outside what was read: still valid. Inside: invalid.
        std::fs::write(source.path().join("README.md"), "more docs").unwrap();
        assert!(restarted.get(&key, view.clone()).await.is_some());
        std::fs::write(
            source.path().join("app/cm.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
        )
        .unwrap();
        assert!(restarted.get(&key, view).await.is_none());
        assert_eq!(restarted.stats(), (2, 1));
    }

    /// A view that counts its reads and says it has `identity`.
    #[derive(Debug)]
    struct Counted {
        inner: LocalDir,
        identity: &'static str,
        reads: std::sync::atomic::AtomicUsize,
    }

    impl SourceView for Counted {
        fn read_file(&self, path: &crate::source::SourcePath) -> crate::source::Result<Vec<u8>> {
            self.reads.fetch_add(1, Ordering::Relaxed);
            self.inner.read_file(path)
        }
        fn read_dir(
            &self,
            path: &crate::source::SourcePath,
        ) -> crate::source::Result<Vec<crate::source::DirEntry>> {
            self.reads.fetch_add(1, Ordering::Relaxed);
            self.inner.read_dir(path)
        }
        fn stat(
            &self,
            path: &crate::source::SourcePath,
        ) -> crate::source::Result<Option<crate::source::Metadata>> {
            self.reads.fetch_add(1, Ordering::Relaxed);
            self.inner.stat(path)
        }
        fn identity(&self) -> Option<String> {
            Some(self.identity.to_owned())
        }
    }

    #[tokio::test]
    async fn a_view_already_checked_is_not_read_again_and_another_one_is() {
        let source = tempfile::tempdir().unwrap();
        std::fs::create_dir(source.path().join("app")).unwrap();
        std::fs::write(
            source.path().join("app/cm.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
        )
        .unwrap();
        let rendered = render_dir(source.path(), "app").await;
        let cache = RenderCache::new(1 << 20);
        let key = RenderCache::key(&["app"]);
        cache
            .put(key, rendered.read_set.clone(), &rendered.objects)
            .await;
        let view = |identity| {
            Arc::new(Counted {
                inner: LocalDir::open(source.path()).unwrap(),
                identity,
                reads: Default::default(),
            })
        };
        // The first hit in a tree checks what the render read.
        let first = view("tree-1");
        assert!(cache.get(&key, first.clone()).await.is_some());
        assert!(first.reads.load(Ordering::Relaxed) > 0);
        // The same tree again (every resync of an unchanged commit): a
        // hit without reading it.
        let again = view("tree-1");
        let hit = cache.get(&key, again.clone()).await.unwrap();
        assert_eq!(hit.objects, rendered.objects);
        assert_eq!(again.reads.load(Ordering::Relaxed), 0);
        // Another tree whose file changed: read, and a miss.
        std::fs::write(
            source.path().join("app/cm.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
        )
        .unwrap();
        let changed = view("tree-2");
        assert!(cache.get(&key, changed.clone()).await.is_none());
        assert!(changed.reads.load(Ordering::Relaxed) > 0);
        // And the first tree is still not trusted for the second.
        assert!(cache.get(&key, view("tree-2")).await.is_none());
    }

    #[tokio::test]
    async fn the_directory_is_owner_only_and_a_shared_one_is_not_used() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("kiln/renders");
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let key = RenderCache::key(&["app"]);
        RenderCache::new(1 << 20)
            .with_dir(&dir)
            .put(key, ReadSet::default(), &[])
            .await;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&tmp.path().join("kiln")), 0o700);

        // Someone else may write it: a planted entry is not read.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let cache = RenderCache::new(1 << 20).with_dir(&dir);
        let view: Arc<dyn SourceView> = Arc::new(LocalDir::open(tmp.path()).unwrap());
        assert!(cache.get(&key, view).await.is_none());
    }

    #[tokio::test]
    async fn the_cache_is_bounded_in_bytes_in_memory_and_on_disk() {
        let source = tempfile::tempdir().unwrap();
        std::fs::create_dir(source.path().join("app")).unwrap();
        let big = "x".repeat(4000);
        std::fs::write(
            source.path().join("app/cm.yaml"),
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a}}\ndata: {{big: {big}}}\n"
            ),
        )
        .unwrap();
        let view: Arc<dyn SourceView> = Arc::new(LocalDir::open(source.path()).unwrap());
        let rendered = render_dir(source.path(), "app").await;
        let dir = tempfile::tempdir().unwrap();
        // Room for two renders of ~4 KB, not three.
        let cache = RenderCache::new(10_000).with_dir(dir.path());
        let keys: Vec<Digest> = (0..3)
            .map(|i| RenderCache::key(&[&i.to_string()]))
            .collect();
        for key in &keys {
            cache
                .put(*key, rendered.read_set.clone(), &rendered.objects)
                .await;
            assert!(cache.size() <= 10_000, "{}", cache.size());
        }
        assert!(
            cache.get(&keys[0], view.clone()).await.is_none(),
            "the oldest went"
        );
        assert!(cache.get(&keys[2], view.clone()).await.is_some());
        let on_disk: u64 = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert!(on_disk <= 10_000, "{on_disk} bytes on disk");
        // A render larger than the whole cache is not kept at all.
        let tiny = RenderCache::new(100);
        tiny.put(keys[0], rendered.read_set.clone(), &rendered.objects)
            .await;
        assert_eq!(tiny.size(), 0);
        // Reopening trims a directory that grew past the bound.
        std::fs::write(dir.path().join("planted.json"), vec![b' '; 20_000]).unwrap();
        let _reopened = RenderCache::new(10_000).with_dir(dir.path());
        let on_disk: u64 = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert!(on_disk <= 10_000, "{on_disk} bytes on disk after reopening");
    }
}
