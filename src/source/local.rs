//! A source view over a local directory, through `cap-std`.

use std::io;
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use super::{DirEntry, EntryKind, Escape, Metadata, Result, SourceError, SourcePath, SourceView};

/// Default per-file read limit: 16 MiB.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 16 << 20;

/// Serves a local directory. Every access goes through a `cap_std` [`Dir`]
/// opened on the root, so neither `..` nor a symlink can ever reach a file
/// outside it: such accesses are refused with [`SourceError::Denied`].
#[derive(Debug)]
pub struct LocalDir {
    root: PathBuf,
    dir: Dir,
    max_file_size: u64,
}

impl LocalDir {
    /// Opens `root` (which must be a directory).
    pub fn open(root: impl AsRef<Path>) -> io::Result<Self> {
        let root = root.as_ref().to_path_buf();
        let dir = Dir::open_ambient_dir(&root, ambient_authority())?;
        Ok(LocalDir {
            root,
            dir,
            max_file_size: DEFAULT_MAX_FILE_SIZE,
        })
    }

    /// Sets the per-file read limit (default `DEFAULT_MAX_FILE_SIZE`, 16 MiB).
    pub fn with_max_file_size(mut self, bytes: u64) -> Self {
        self.max_file_size = bytes;
        self
    }

    /// The directory served.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Maps an I/O error of `path` to a [`SourceError`]. cap-std reports an
    /// escape through a symlink as "permission denied"; tell it apart from a
    /// real permission problem by checking where the path resolves.
    fn error(&self, path: &SourcePath, error: io::Error) -> SourceError {
        match error.kind() {
            io::ErrorKind::NotFound => SourceError::NotFound(path.clone()),
            io::ErrorKind::PermissionDenied if self.escapes(path) => SourceError::Denied {
                path: path.to_string(),
                escape: Escape::Symlink,
            },
            _ => SourceError::Io {
                path: path.clone(),
                error,
            },
        }
    }

    fn escapes(&self, path: &SourcePath) -> bool {
        let Ok(root) = self.root.canonicalize() else {
            return false;
        };
        // Walk the path one component at a time: the first component that
        // resolves outside the root (or cannot resolve) betrays the escape.
        let mut current = self.root.clone();
        for part in path.as_str().split('/') {
            current.push(part);
            match current.canonicalize() {
                Ok(resolved) if !resolved.starts_with(&root) => return true,
                Ok(resolved) => current = resolved,
                Err(_) => return std::fs::symlink_metadata(&current).is_ok_and(|m| m.is_symlink()),
            }
        }
        false
    }
}

impl SourceView for LocalDir {
    fn read_file(&self, path: &SourcePath) -> Result<Vec<u8>> {
        let metadata = self
            .dir
            .metadata(path.as_fs_path())
            .map_err(|e| self.error(path, e))?;
        if metadata.is_dir() {
            return Err(SourceError::IsADirectory(path.clone()));
        }
        if !metadata.is_file() {
            // A FIFO or device would block or never end: only regular files
            // (or symlinks inside the tree resolving to one) are served.
            return Err(SourceError::Io {
                path: path.clone(),
                error: io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"),
            });
        }
        if metadata.len() > self.max_file_size {
            return Err(SourceError::TooLarge {
                path: path.clone(),
                size: metadata.len(),
                limit: self.max_file_size,
            });
        }
        self.dir
            .read(path.as_fs_path())
            .map_err(|e| self.error(path, e))
    }

    fn read_dir(&self, path: &SourcePath) -> Result<Vec<DirEntry>> {
        let metadata = self
            .dir
            .metadata(path.as_fs_path())
            .map_err(|e| self.error(path, e))?;
        if !metadata.is_dir() {
            return Err(SourceError::NotADirectory(path.clone()));
        }
        let mut entries = Vec::new();
        for entry in self
            .dir
            .read_dir(path.as_fs_path())
            .map_err(|e| self.error(path, e))?
        {
            let entry = entry.map_err(|e| self.error(path, e))?;
            let Ok(name) = entry.file_name().into_string() else {
                // Kubernetes manifests have UTF-8 names; others are skipped.
                continue;
            };
            // Follow symlinks inside the tree. One that cannot be followed
            // (dangling, or leading outside) is listed as a file, so that
            // reading it reports the precise reason.
            let child = path.join(&name).map_err(SourceError::from)?;
            let kind = match self.dir.metadata(child.as_fs_path()) {
                Ok(m) if m.is_dir() => EntryKind::Directory,
                _ => EntryKind::File,
            };
            entries.push(DirEntry { name, kind });
        }
        entries.sort();
        Ok(entries)
    }

    fn stat(&self, path: &SourcePath) -> Result<Option<Metadata>> {
        match self.dir.metadata(path.as_fs_path()) {
            Ok(m) if m.is_dir() => Ok(Some(Metadata {
                kind: EntryKind::Directory,
                size: 0,
            })),
            Ok(m) => Ok(Some(Metadata {
                kind: EntryKind::File,
                size: m.len(),
            })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.error(path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, LocalDir) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("repo");
        std::fs::create_dir_all(root.join("app/sub")).unwrap();
        std::fs::write(root.join("app/a.yaml"), "a: 1").unwrap();
        std::fs::write(root.join("app/sub/b.yaml"), "b: 2").unwrap();
        std::fs::write(tmp.path().join("secret"), "s3cret").unwrap();
        std::os::unix::fs::symlink("../../secret", root.join("app/out")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("app/etc")).unwrap();
        std::os::unix::fs::symlink("sub/b.yaml", root.join("app/in")).unwrap();
        let view = LocalDir::open(&root).unwrap();
        (tmp, view)
    }

    fn p(s: &str) -> SourcePath {
        SourcePath::parse(s).unwrap()
    }

    #[test]
    fn reads_and_lists() {
        let (_tmp, view) = tree();
        assert_eq!(view.read_file(&p("app/a.yaml")).unwrap(), b"a: 1");
        assert_eq!(
            view.read_file(&p("app/in")).unwrap(),
            b"b: 2",
            "symlink inside the tree"
        );
        let names: Vec<_> = view
            .read_dir(&p("app"))
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["a.yaml", "etc", "in", "out", "sub"]);
        assert_eq!(view.stat(&p("app/nope")).unwrap(), None);
        assert_eq!(
            view.stat(&p("app/sub")).unwrap().unwrap().kind,
            EntryKind::Directory
        );
        assert!(matches!(
            view.read_file(&p("app")),
            Err(SourceError::IsADirectory(_))
        ));
        assert!(matches!(
            view.read_dir(&p("app/a.yaml")),
            Err(SourceError::NotADirectory(_))
        ));
        assert!(matches!(
            view.read_file(&p("app/x")),
            Err(SourceError::NotFound(_))
        ));
    }

    #[test]
    fn symlinks_out_of_the_root_are_denied() {
        let (_tmp, view) = tree();
        for path in ["app/out", "app/etc/passwd"] {
            match view.read_file(&p(path)) {
                Err(SourceError::Denied {
                    escape: Escape::Symlink,
                    ..
                }) => {}
                other => panic!("{path}: {other:?}"),
            }
        }
    }

    #[test]
    fn special_files_are_not_read() {
        let (tmp, view) = tree();
        let fifo = tmp.path().join("repo/app/fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        match view.read_file(&p("app/fifo")) {
            Err(SourceError::Io { error, .. }) => {
                assert_eq!(error.to_string(), "not a regular file")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn file_size_limit() {
        let (_tmp, view) = tree();
        let view = view.with_max_file_size(2);
        assert!(matches!(
            view.read_file(&p("app/a.yaml")),
            Err(SourceError::TooLarge { size: 4, .. })
        ));
    }
}
