//! A source view served straight from a repository's object database: no
//! work tree, no checkout.

use std::collections::VecDeque;
use std::fmt;
use std::io;

use gix::ObjectId;
use gix::objs::tree::EntryMode;

use super::CommitId;
use crate::source::{
    DirEntry, EntryKind, Escape, Metadata, Result, SourceError, SourcePath, SourceView,
};

/// Symlinks followed while resolving one path, at most (as Linux's 40).
const MAX_SYMLINK_HOPS: usize = 40;

/// Default per-file read limit: 16 MiB.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 16 << 20;

/// The tree of one commit, read from the object database. Symlinks are
/// resolved inside the repository; one that leads outside its root (absolute,
/// or `..` above the root) is refused with [`SourceError::Denied`], naming
/// the path that went through it (the class of Argo CD CVE-2022-24348).
#[derive(Clone)]
pub struct GitTreeView {
    repo: gix::ThreadSafeRepository,
    commit: CommitId,
    root: ObjectId,
    time: Option<jiff::Timestamp>,
    max_file_size: u64,
}

impl fmt::Debug for GitTreeView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitTreeView")
            .field("commit", &self.commit)
            .finish_non_exhaustive()
    }
}

/// What a path resolves to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Resolved {
    kind: EntryKind,
    id: ObjectId,
}

impl GitTreeView {
    /// The view of `commit`, whose root tree is `root`.
    pub(super) fn new(
        repo: gix::ThreadSafeRepository,
        commit: CommitId,
        root: ObjectId,
        time: Option<jiff::Timestamp>,
    ) -> Self {
        GitTreeView {
            repo,
            commit,
            root,
            time,
            max_file_size: DEFAULT_MAX_FILE_SIZE,
        }
    }

    /// The commit this view shows.
    pub fn commit(&self) -> CommitId {
        self.commit
    }

    /// When the commit was made (its committer's time), if readable.
    pub fn commit_time(&self) -> Option<jiff::Timestamp> {
        self.time
    }

    /// The id of the tree or blob at `path` (after resolving symlinks), or
    /// `None` if nothing is there. Two commits whose ids agree for every path
    /// a render read render the same: this is how a render cache tells,
    /// without reading any content, that a commit changed nothing it used.
    pub fn entry_id(&self, path: &SourcePath) -> Result<Option<String>> {
        Ok(self.resolve(path)?.map(|r| r.id.to_string()))
    }

    fn io(path: &SourcePath, error: impl fmt::Display) -> SourceError {
        SourceError::Io {
            path: path.clone(),
            error: io::Error::other(error.to_string()),
        }
    }

    fn tree_entries(
        &self,
        repo: &gix::Repository,
        path: &SourcePath,
        id: ObjectId,
    ) -> Result<Vec<(String, EntryMode, ObjectId)>> {
        let object = repo.find_object(id).map_err(|e| Self::io(path, e))?;
        let tree = object.try_into_tree().map_err(|e| Self::io(path, e))?;
        let decoded = tree.decode().map_err(|e| Self::io(path, e))?;
        Ok(decoded
            .entries
            .iter()
            .filter_map(|e| {
                Some((
                    String::from_utf8(e.filename.to_vec()).ok()?,
                    e.mode,
                    e.oid.to_owned(),
                ))
            })
            .collect())
    }

    fn blob(&self, repo: &gix::Repository, path: &SourcePath, id: ObjectId) -> Result<Vec<u8>> {
        let header = repo.find_header(id).map_err(|e| Self::io(path, e))?;
        if header.size() > self.max_file_size {
            return Err(SourceError::TooLarge {
                path: path.clone(),
                size: header.size(),
                limit: self.max_file_size,
            });
        }
        let mut blob = repo.find_blob(id).map_err(|e| Self::io(path, e))?;
        Ok(blob.take_data())
    }

    /// Walks `path` from the root tree, following symlinks inside the tree.
    fn resolve(&self, path: &SourcePath) -> Result<Option<Resolved>> {
        let repo = self.repo.to_thread_local();
        let denied = || SourceError::Denied {
            path: path.to_string(),
            escape: Escape::Symlink,
        };
        // The directories walked so far, as tree ids; the root is first.
        let mut dirs: Vec<ObjectId> = vec![self.root];
        let mut pending: VecDeque<String> = path
            .as_str()
            .split('/')
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
            .collect();
        let mut hops = 0;
        let mut current = Resolved {
            kind: EntryKind::Directory,
            id: self.root,
        };
        while let Some(component) = pending.pop_front() {
            match component.as_str() {
                "." => continue,
                ".." => {
                    // Only symlink targets bring `..` here (paths are
                    // normalized): climbing above the root is an escape.
                    if dirs.len() == 1 {
                        return Err(denied());
                    }
                    dirs.pop();
                    current = Resolved {
                        kind: EntryKind::Directory,
                        id: *dirs.last().unwrap_or(&self.root),
                    };
                    continue;
                }
                _ => {}
            }
            if current.kind != EntryKind::Directory {
                return Ok(None);
            }
            let dir = *dirs.last().unwrap_or(&self.root);
            let Some((_, mode, id)) = self
                .tree_entries(&repo, path, dir)?
                .into_iter()
                .find(|(n, _, _)| *n == component)
            else {
                return Ok(None);
            };
            if mode.is_link() {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(Self::io(path, "too many levels of symbolic links"));
                }
                let target = String::from_utf8(self.blob(&repo, path, id)?)
                    .map_err(|_| Self::io(path, "symlink target is not UTF-8"))?;
                if target.starts_with('/') {
                    return Err(denied());
                }
                for part in target.split('/').rev() {
                    pending.push_front(part.to_owned());
                }
                current = Resolved {
                    kind: EntryKind::Directory,
                    id: dir,
                };
            } else if mode.is_tree() {
                dirs.push(id);
                current = Resolved {
                    kind: EntryKind::Directory,
                    id,
                };
            } else if mode.is_blob() {
                current = Resolved {
                    kind: EntryKind::File,
                    id,
                };
                if !pending.is_empty() {
                    // `file/child`: nothing there.
                    return Ok(None);
                }
            } else {
                // A submodule: its content is not in this repository.
                return Ok(None);
            }
        }
        Ok(Some(current))
    }
}

impl SourceView for GitTreeView {
    fn identity(&self) -> Option<String> {
        // The root tree's id hashes every file under it; the size limit
        // decides which of them can be read.
        Some(format!("git:{}:{}", self.root, self.max_file_size))
    }

    fn read_file(&self, path: &SourcePath) -> Result<Vec<u8>> {
        match self.resolve(path)? {
            None => Err(SourceError::NotFound(path.clone())),
            Some(Resolved {
                kind: EntryKind::Directory,
                ..
            }) => Err(SourceError::IsADirectory(path.clone())),
            Some(Resolved { id, .. }) => self.blob(&self.repo.to_thread_local(), path, id),
        }
    }

    fn read_dir(&self, path: &SourcePath) -> Result<Vec<DirEntry>> {
        let id = match self.resolve(path)? {
            None => return Err(SourceError::NotFound(path.clone())),
            Some(Resolved {
                kind: EntryKind::File,
                ..
            }) => return Err(SourceError::NotADirectory(path.clone())),
            Some(Resolved { id, .. }) => id,
        };
        let repo = self.repo.to_thread_local();
        let mut entries = Vec::new();
        for (name, mode, _) in self.tree_entries(&repo, path, id)? {
            let kind = if mode.is_tree() {
                EntryKind::Directory
            } else if mode.is_blob() {
                EntryKind::File
            } else if mode.is_link() {
                // Listed as what it resolves to; one that cannot be resolved
                // is listed as a file, so reading it reports the reason.
                match path.join(&name).ok().map(|p| self.resolve(&p)) {
                    Some(Ok(Some(Resolved {
                        kind: EntryKind::Directory,
                        ..
                    }))) => EntryKind::Directory,
                    _ => EntryKind::File,
                }
            } else {
                continue;
            };
            entries.push(DirEntry { name, kind });
        }
        entries.sort();
        Ok(entries)
    }

    fn stat(&self, path: &SourcePath) -> Result<Option<Metadata>> {
        match self.resolve(path)? {
            None => Ok(None),
            Some(Resolved {
                kind: EntryKind::Directory,
                ..
            }) => Ok(Some(Metadata {
                kind: EntryKind::Directory,
                size: 0,
            })),
            Some(Resolved { id, .. }) => {
                let header = self
                    .repo
                    .to_thread_local()
                    .find_header(id)
                    .map_err(|e| Self::io(path, e))?;
                Ok(Some(Metadata {
                    kind: EntryKind::File,
                    size: header.size(),
                }))
            }
        }
    }
}
