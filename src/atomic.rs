//! Files written so that a reader sees the whole new content or the old
//! one, never part of either: written aside under a name no other writer
//! uses, flushed, then renamed (or linked) into place. The one way Kiln
//! writes its caches' entries and keys.

use std::io::{self, Write as _};

use cap_std::fs::OpenOptionsExt as _;
use cap_std::fs::{Dir, OpenOptions};
use rand_core::RngCore as _;

/// A name beside `name` that no other writer, in this process or another,
/// picks: the process id and 64 random bits.
fn aside(name: &str) -> String {
    format!(
        ".{name}.{}.{:016x}.tmp",
        std::process::id(),
        rand_core::OsRng.next_u64()
    )
}

/// Writes `bytes` aside in `dir` (owner-only, flushed to disk) and returns
/// the name written; removes it again if writing fails.
fn write_aside(dir: &Dir, name: &str, bytes: &[u8]) -> io::Result<String> {
    let tmp = aside(name);
    let mut options = OpenOptions::new();
    options.write(true).create_new(true).mode(0o600);
    let written = dir.open_with(&tmp, &options).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    match written {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = dir.remove_file(&tmp);
            Err(e)
        }
    }
}

/// Writes `name` in `dir` with `bytes`, replacing what was there.
pub fn replace(dir: &Dir, name: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = write_aside(dir, name, bytes)?;
    dir.rename(&tmp, dir, name).inspect_err(|_| {
        let _ = dir.remove_file(&tmp);
    })
}

/// Writes every `(name, bytes)` of `files` in `dir`, replacing what was
/// there: all are written aside first, then each renamed into place, so a
/// failure while writing leaves the earlier set whole.
pub fn replace_all(dir: &Dir, files: &[(&str, &[u8])]) -> io::Result<()> {
    let mut written = Vec::with_capacity(files.len());
    for (name, bytes) in files {
        match write_aside(dir, name, bytes) {
            Ok(tmp) => written.push((tmp, *name)),
            Err(e) => {
                for (tmp, _) in &written {
                    let _ = dir.remove_file(tmp);
                }
                return Err(e);
            }
        }
    }
    for (tmp, name) in &written {
        dir.rename(tmp, dir, name)?;
    }
    Ok(())
}

/// Creates `name` in `dir` with `bytes` unless it exists: `Ok(false)` when
/// another writer created it first (then it is theirs, whole).
pub fn create(dir: &Dir, name: &str, bytes: &[u8]) -> io::Result<bool> {
    let tmp = write_aside(dir, name, bytes)?;
    let linked = dir.hard_link(&tmp, dir, name);
    let _ = dir.remove_file(&tmp);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn dir() -> (tempfile::TempDir, Dir) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        (tmp, dir)
    }

    fn names(dir: &Dir) -> Vec<String> {
        let mut names: Vec<String> = dir
            .entries()
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn replace_writes_whole_owner_only_files_and_leaves_nothing_aside() {
        let (tmp, dir) = dir();
        replace(&dir, "entry", b"first").unwrap();
        replace(&dir, "entry", b"second").unwrap();
        assert_eq!(dir.read("entry").unwrap(), b"second");
        assert_eq!(names(&dir), ["entry"]);
        let mode = std::fs::metadata(tmp.path().join("entry"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn create_keeps_the_first_writers_file() {
        let (_tmp, dir) = dir();
        assert!(create(&dir, "key", b"mine").unwrap());
        assert!(!create(&dir, "key", b"theirs").unwrap());
        assert_eq!(dir.read("key").unwrap(), b"mine");
        assert_eq!(names(&dir), ["key"]);
    }

    #[test]
    fn writers_racing_on_one_name_each_leave_a_whole_file() {
        let (_tmp, dir) = dir();
        let dir = std::sync::Arc::new(dir);
        let contents: Vec<Vec<u8>> = (0..8u8).map(|i| vec![i; 256 * 1024]).collect();
        std::thread::scope(|scope| {
            for content in &contents {
                let dir = dir.clone();
                scope.spawn(move || {
                    for _ in 0..8 {
                        replace(&dir, "entry", content).unwrap();
                    }
                });
            }
        });
        let read = dir.read("entry").unwrap();
        assert!(
            contents.contains(&read),
            "a torn entry of {} bytes",
            read.len()
        );
        assert_eq!(names(&dir), ["entry"]);
    }

    #[test]
    fn a_failed_write_leaves_nothing_behind() {
        let (_tmp, dir) = dir();
        dir.create_dir("entry").unwrap();
        dir.write("entry/inside", b"x").unwrap();
        // Renaming a file over a non-empty directory fails.
        assert!(replace(&dir, "entry", b"bytes").is_err());
        assert_eq!(names(&dir), ["entry"]);
    }
}
