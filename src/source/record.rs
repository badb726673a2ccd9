//! Recording what a render observed of its source tree.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use sha2::{Digest as _, Sha256};

use super::{DirEntry, EntryKind, Metadata, Result, SourceError, SourcePath, SourceView};
use crate::digest::Digest;

/// What a render learned about one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "observed", rename_all = "lowercase")]
pub enum Observation {
    /// The file's whole content was read.
    File {
        /// Digest of the content.
        digest: Digest,
    },
    /// The directory was listed.
    Directory {
        /// Digest of the listing (names and kinds, in order).
        digest: Digest,
    },
    /// Only the path's kind and size were asked for.
    Metadata {
        /// File or directory.
        kind: EntryKind,
        /// Size of a file.
        size: u64,
    },
    /// The path was looked up and did not exist.
    Absent,
}

impl Observation {
    /// Content observations outrank metadata, which outranks absence: a
    /// path stat'ed and then read is recorded as read.
    fn rank(&self) -> u8 {
        match self {
            Observation::File { .. } | Observation::Directory { .. } => 2,
            Observation::Metadata { .. } => 1,
            Observation::Absent => 0,
        }
    }
}

/// Every path a render observed, with what it saw: exactly what the render's
/// output can depend on. Two renders with equal plugins and parameters whose
/// read sets still hold produce the same output.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct ReadSet(BTreeMap<SourcePath, Observation>);

impl ReadSet {
    /// Observations in path order.
    pub fn iter(&self) -> impl Iterator<Item = (&SourcePath, &Observation)> {
        self.0.iter()
    }

    /// The observation recorded for `path`.
    pub fn get(&self, path: &SourcePath) -> Option<&Observation> {
        self.0.get(path)
    }

    /// How many paths were observed.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether nothing was observed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True when `view` still shows every observation: a render that read
    /// exactly this would read the same from `view`, so its output holds.
    /// Re-reads the files (hashing them) and listings; reading from a Git
    /// tree is far cheaper than rendering.
    pub fn holds(&self, view: &dyn SourceView) -> bool {
        self.0.iter().all(|(path, observation)| match observation {
            Observation::File { digest } => view
                .read_file(path)
                .is_ok_and(|bytes| Digest::of(&bytes) == *digest),
            Observation::Directory { digest } => view
                .read_dir(path)
                .is_ok_and(|entries| listing_digest(&entries) == *digest),
            Observation::Metadata { kind, size } => {
                matches!(view.stat(path), Ok(Some(m)) if m.kind == *kind && m.size == *size)
            }
            Observation::Absent => matches!(view.stat(path), Ok(None)),
        })
    }

    fn record(&mut self, path: &SourcePath, observation: Observation) {
        match self.0.get(path) {
            Some(existing) if existing.rank() > observation.rank() => {}
            _ => {
                self.0.insert(path.clone(), observation);
            }
        }
    }
}

/// A [`SourceView`] that records every successful observation into a
/// [`ReadSet`]. One is made per render and shared by every step of it.
#[derive(Debug)]
pub struct RecordingView {
    inner: Arc<dyn SourceView>,
    reads: Mutex<ReadSet>,
    /// Bytes of the paths in `reads` (kept beside it: summing them per read
    /// would be quadratic).
    path_bytes: std::sync::atomic::AtomicUsize,
}

impl RecordingView {
    /// Wraps a view.
    pub fn new(inner: Arc<dyn SourceView>) -> Self {
        RecordingView {
            inner,
            reads: Mutex::new(ReadSet::default()),
            path_bytes: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// What has been observed so far.
    pub fn read_set(&self) -> ReadSet {
        self.lock().clone()
    }

    /// A path that turned out not to exist is an observation too: creating
    /// it later must invalidate the render.
    fn absent_on_not_found<T>(&self, path: &SourcePath, result: Result<T>) -> Result<T> {
        if let Err(SourceError::NotFound(_)) = &result {
            self.record(path, Observation::Absent);
        }
        result
    }

    /// Records an observation, counting the bytes of a path new to the set.
    fn record(&self, path: &SourcePath, observation: Observation) {
        let mut reads = self.lock();
        if !reads.0.contains_key(path) {
            self.path_bytes
                .fetch_add(path.as_str().len(), std::sync::atomic::Ordering::Relaxed);
        }
        reads.record(path, observation);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ReadSet> {
        // The set stays consistent even if a holder panicked: each update is
        // a single insert.
        self.reads.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn listing_digest(entries: &[DirEntry]) -> Digest {
    let mut hasher = Sha256::new();
    for entry in entries {
        hasher.update(entry.name.as_bytes());
        hasher.update(match entry.kind {
            EntryKind::File => b"\0f\n",
            EntryKind::Directory => b"\0d\n",
        });
    }
    Digest::from(<[u8; 32]>::from(hasher.finalize()))
}

/// Distinct paths one render may observe: a renderer asking for more is
/// refused (its read set would grow without bound in the host's memory,
/// outside the plugin's memory cap).
pub const MAX_READS: usize = 100_000;
/// Bytes of distinct paths one render may observe, together.
pub const MAX_READ_PATH_BYTES: usize = 16 << 20;

impl RecordingView {
    /// Refuses a path the read set has no room for: a new path when the
    /// set is full, in entries or in bytes of paths.
    fn admit(&self, path: &SourcePath) -> Result<()> {
        let reads = self.lock();
        if reads.0.contains_key(path) {
            return Ok(());
        }
        let bytes = self.path_bytes.load(std::sync::atomic::Ordering::Relaxed);
        if reads.len() >= MAX_READS || bytes + path.as_str().len() > MAX_READ_PATH_BYTES {
            return Err(SourceError::TooManyReads {
                reads: MAX_READS,
                bytes: MAX_READ_PATH_BYTES,
            });
        }
        Ok(())
    }
}

impl SourceView for RecordingView {
    fn read_file(&self, path: &SourcePath) -> Result<Vec<u8>> {
        self.admit(path)?;
        let bytes = self.absent_on_not_found(path, self.inner.read_file(path))?;
        self.record(
            path,
            Observation::File {
                digest: Digest::of(&bytes),
            },
        );
        Ok(bytes)
    }

    fn read_dir(&self, path: &SourcePath) -> Result<Vec<DirEntry>> {
        self.admit(path)?;
        let entries = self.absent_on_not_found(path, self.inner.read_dir(path))?;
        self.record(
            path,
            Observation::Directory {
                digest: listing_digest(&entries),
            },
        );
        Ok(entries)
    }

    fn stat(&self, path: &SourcePath) -> Result<Option<Metadata>> {
        self.admit(path)?;
        let metadata = self.inner.stat(path)?;
        let observation = match metadata {
            Some(m) => Observation::Metadata {
                kind: m.kind,
                size: m.size,
            },
            None => Observation::Absent,
        };
        self.record(path, observation);
        Ok(metadata)
    }
}

#[cfg(test)]
mod limit_tests {
    use super::*;

    #[test]
    fn a_render_cannot_record_paths_without_bound() {
        let view = RecordingView::new(Arc::new(crate::source::EmptyView));
        let long = "a".repeat(1 << 20);
        let mut refused = None;
        for i in 0..64 {
            let path = SourcePath::parse(&format!("{long}{i}")).unwrap();
            if let Err(e) = view.stat(&path) {
                refused = Some(e);
                break;
            }
        }
        let error = refused.expect("16 MiB of paths is the most a render may record");
        assert!(matches!(error, SourceError::TooManyReads { .. }), "{error}");
        let recorded: usize = view.read_set().iter().map(|(p, _)| p.as_str().len()).sum();
        assert!(recorded <= MAX_READ_PATH_BYTES);
    }
}
