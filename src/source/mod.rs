//! Source views: read-only access to an Application's source tree.
//!
//! Renderers never see a filesystem. They read through a [`SourceView`], a
//! small trait with three operations (read a file, list a directory, stat a
//! path) over [`SourcePath`]s, which are relative, normalized and can never
//! name anything above the source root. The first implementation,
//! [`LocalDir`], serves a local directory through `cap-std`; the git engine
//! will serve trees straight from the object database.
//!
//! [`RecordingView`] wraps any view and records what was observed: the
//! [`ReadSet`] of a render, on which the render cache keys.

pub mod git;
pub mod helm;
mod local;
mod path;
mod record;
mod subtree;

pub use local::LocalDir;
pub use path::{PathError, SourcePath};
pub use record::{Observation, ReadSet, RecordingView};
pub use subtree::Subtree;

use std::fmt;

/// What a path names.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// A regular file (or a symlink inside the tree resolving to one).
    File,
    /// A directory (or a symlink inside the tree resolving to one).
    Directory,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DirEntry {
    /// The name inside its directory.
    pub name: String,
    /// File or directory.
    pub kind: EntryKind,
}

/// What [`SourceView::stat`] tells about an existing path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metadata {
    /// File or directory.
    pub kind: EntryKind,
    /// Size in bytes of a file; 0 for a directory.
    pub size: u64,
}

/// How a path tried to leave the source root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Escape {
    /// An absolute path such as `/etc/passwd`.
    Absolute,
    /// `..` climbing above the root.
    Traversal,
    /// A symlink inside the tree pointing outside it.
    Symlink,
}

impl fmt::Display for Escape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Escape::Absolute => "absolute path",
            Escape::Traversal => "`..` climbs above the source root",
            Escape::Symlink => "symlink leads outside the source root",
        })
    }
}

/// A source operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// Nothing exists at the path.
    #[error("{0}: no such file or directory")]
    NotFound(SourcePath),
    /// A file was expected.
    #[error("{0}: is a directory")]
    IsADirectory(SourcePath),
    /// A directory was expected.
    #[error("{0}: not a directory")]
    NotADirectory(SourcePath),
    /// The path leaves the source root.
    #[error("{path}: denied: {escape}")]
    Denied {
        /// The path as requested.
        path: String,
        /// How it tried to leave.
        escape: Escape,
    },
    /// The file exceeds the per-file read limit.
    #[error("{path}: {size} bytes is more than the {limit}-byte limit for one file")]
    TooLarge {
        /// The file.
        path: SourcePath,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The render observed more distinct paths than a read set may hold.
    #[error(
        "a render may observe at most {reads} paths ({bytes} bytes of paths); this one asked for more"
    )]
    TooManyReads {
        /// The limit on paths.
        reads: usize,
        /// The limit on bytes of paths.
        bytes: usize,
    },
    /// Any other I/O failure.
    #[error("{path}: {error}")]
    Io {
        /// The path.
        path: SourcePath,
        /// The underlying error (printed, not chained: the message says it).
        error: std::io::Error,
    },
}

impl From<PathError> for SourceError {
    fn from(error: PathError) -> Self {
        SourceError::Denied {
            escape: error.escape(),
            path: error.into_path(),
        }
    }
}

/// A `Result` with [`SourceError`].
pub type Result<T, E = SourceError> = std::result::Result<T, E>;

/// Read-only access to one source tree.
///
/// Implementations must never serve anything outside their root, whatever
/// the path and whatever symlinks the tree holds. They are shared by
/// concurrent renders.
pub trait SourceView: Send + Sync + fmt::Debug {
    /// Reads a whole file.
    fn read_file(&self, path: &SourcePath) -> Result<Vec<u8>>;
    /// Lists a directory, sorted by name.
    fn read_dir(&self, path: &SourcePath) -> Result<Vec<DirEntry>>;
    /// What exists at `path`; `None` if nothing does.
    fn stat(&self, path: &SourcePath) -> Result<Option<Metadata>>;

    /// What names the whole content of this view, when something does:
    /// two views with the same identity read alike (a Git tree is named by
    /// the hash of its content). `None` (the default): nothing does.
    fn identity(&self) -> Option<String> {
        None
    }
}

/// A view of an empty tree, for calls that have no source (a policy's
/// settings validation).
#[derive(Debug, Clone, Copy, Default)]
pub struct EmptyView;

impl SourceView for EmptyView {
    fn read_file(&self, path: &SourcePath) -> Result<Vec<u8>> {
        Err(SourceError::NotFound(path.clone()))
    }

    fn read_dir(&self, path: &SourcePath) -> Result<Vec<DirEntry>> {
        if path.is_root() {
            Ok(Vec::new())
        } else {
            Err(SourceError::NotFound(path.clone()))
        }
    }

    fn stat(&self, path: &SourcePath) -> Result<Option<Metadata>> {
        Ok(path.is_root().then_some(Metadata {
            kind: EntryKind::Directory,
            size: 0,
        }))
    }
}
