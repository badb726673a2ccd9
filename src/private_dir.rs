//! Directories only their owner may write: where Kiln keeps what it later
//! loads without asking again (compiled plugins, fetched components,
//! renders). Anyone who can write such a directory can plant an entry, so
//! Kiln creates them `0700` and refuses one owned by another user or
//! writable by group or others.

use std::io;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

use cap_std::fs::Dir;

/// The mode Kiln creates its cache directories with: owner only.
pub const MODE: u32 = 0o700;

/// A directory Kiln will not keep trusted data in.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrivateDirError {
    /// It could not be created or opened.
    #[error("cannot create or open {}: {source}", path.display())]
    Io {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// It is not a directory.
    #[error("{} is not a directory", path.display())]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// Another user owns it.
    #[error(
        "{} is owned by uid {owner}, not by this user (uid {user}): its owner could plant entries Kiln would load; use a directory of your own",
        path.display()
    )]
    NotOwned {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The user Kiln runs as.
        user: u32,
    },
    /// Group or others may write it.
    #[error(
        "{} is writable by {who} (mode {mode:04o}): they could plant entries Kiln would load; `chmod go-w` it or use another directory",
        path.display()
    )]
    Writable {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
        /// `group`, `others` or `group and others`.
        who: &'static str,
    },
}

/// Creates `path` (and missing parents) with mode `0700`, checks that it is
/// owned by this user and not writable by group or others, and opens it.
/// The checks are made on the opened directory, so a directory swapped in
/// after the check is never used.
pub fn open(path: &Path) -> Result<Dir, PrivateDirError> {
    let io = |source| PrivateDirError::Io {
        path: path.to_path_buf(),
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(MODE)
        .create(path)
        .map_err(io)?;
    let file = std::fs::File::open(path).map_err(io)?;
    let metadata = file.metadata().map_err(io)?;
    if !metadata.is_dir() {
        return Err(PrivateDirError::NotADirectory {
            path: path.to_path_buf(),
        });
    }
    check(
        path,
        metadata.uid(),
        metadata.mode(),
        rustix::process::geteuid().as_raw(),
    )?;
    Ok(Dir::from_std_file(file))
}

/// Creates `path` like [`open`] and checks it, for callers that address
/// the directory by path.
pub fn ensure(path: &Path) -> Result<(), PrivateDirError> {
    open(path).map(drop)
}

/// Whether a directory owned by `owner` with permission bits `mode` may be
/// used by `user`.
fn check(path: &Path, owner: u32, mode: u32, user: u32) -> Result<(), PrivateDirError> {
    if owner != user {
        return Err(PrivateDirError::NotOwned {
            path: path.to_path_buf(),
            owner,
            user,
        });
    }
    let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
        (false, false) => return Ok(()),
        (true, false) => "group",
        (false, true) => "others",
        (true, true) => "group and others",
    };
    Err(PrivateDirError::Writable {
        path: path.to_path_buf(),
        mode: mode & 0o7777,
        who,
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn created_directories_are_owner_only() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("a/b");
        open(&path).unwrap();
        assert_eq!(mode(&tmp.path().join("a")), 0o700);
        assert_eq!(mode(&path), 0o700);
    }

    #[test]
    fn shared_directories_are_refused_with_the_reason() {
        let tmp = tempfile::tempdir().unwrap();
        for (bits, who) in [
            (0o777, "group and others"),
            (0o1777, "group and others"),
            (0o757, "others"),
            (0o770, "group"),
        ] {
            std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(bits)).unwrap();
            let err = open(tmp.path()).unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("{} is writable by {who} ", tmp.path().display())),
                "{bits:o}: {err}"
            );
        }
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        open(tmp.path()).unwrap();
    }

    #[test]
    fn a_directory_of_another_user_is_refused() {
        let err = check(Path::new("/cache"), 1000, 0o700, 1001)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "/cache is owned by uid 1000, not by this user (uid 1001): its owner could plant entries Kiln would load; use a directory of your own"
        );
        assert!(check(Path::new("/cache"), 1001, 0o755, 1001).is_ok());
    }

    #[test]
    fn a_file_is_not_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        std::fs::write(&file, "").unwrap();
        assert!(open(&file).is_err());
    }
}
