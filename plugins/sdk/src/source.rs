//! Read-only access to the Application's source tree, through the host.
//!
//! Paths are relative to the source root (not to the Application's path; use
//! [`AppContext::join`](crate::AppContext::join)). Every read is recorded by the
//! host: read what you need, nothing more, and renders stay cacheable.

use crate::bindings::kiln::plugin::source as wit;

pub use wit::{DirEntry, EntryKind, Metadata, SourceError};

/// Reads a whole file.
pub fn read(path: &str) -> Result<Vec<u8>, SourceError> {
    wit::read_file(path)
}

/// Reads a whole file as UTF-8 text.
pub fn read_to_string(path: &str) -> Result<String, SourceError> {
    let bytes = read(path)?;
    String::from_utf8(bytes).map_err(|_| SourceError::Io(format!("{path}: not valid UTF-8")))
}

/// Lists a directory, sorted by name.
pub fn read_dir(path: &str) -> Result<Vec<DirEntry>, SourceError> {
    wit::read_dir(path)
}

/// What exists at `path`, if anything.
pub fn stat(path: &str) -> Result<Option<Metadata>, SourceError> {
    wit::stat(path)
}

/// Lists the files under `dir` whose name ends with one of `extensions`
/// (e.g. `[".yaml", ".yml"]`), sorted by path; with `recursive`, descends into
/// subdirectories (depth-first, in name order).
pub fn files(dir: &str, extensions: &[&str], recursive: bool) -> Result<Vec<String>, SourceError> {
    let mut out = Vec::new();
    collect(dir, extensions, recursive, &mut out)?;
    Ok(out)
}

fn collect(
    dir: &str,
    extensions: &[&str],
    recursive: bool,
    out: &mut Vec<String>,
) -> Result<(), SourceError> {
    for entry in read_dir(dir)? {
        let path = join(dir, &entry.name);
        match entry.kind {
            EntryKind::File if extensions.iter().any(|e| entry.name.ends_with(e)) => out.push(path),
            EntryKind::Directory if recursive => collect(&path, extensions, recursive, out)?,
            _ => {}
        }
    }
    Ok(())
}

/// The manifest files a setting names: the file itself, or every `.yaml`,
/// `.yml` and `.json` file below a directory (sorted, depth-first); `None`
/// when nothing is at `path`.
pub fn manifest_files(path: &str) -> Result<Option<Vec<String>>, SourceError> {
    Ok(match stat(path)? {
        None => None,
        Some(meta) if meta.kind == EntryKind::Directory => {
            Some(files(path, &[".yaml", ".yml", ".json"], true)?)
        }
        Some(_) => Some(vec![path.to_owned()]),
    })
}

/// Joins two `/`-separated relative paths; `.` and empty bases are the root.
/// `..` is kept: the host resolves it (and refuses it above the root).
pub fn join(base: &str, relative: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.is_empty() || base == "." {
        relative.to_owned()
    } else if relative.is_empty() || relative == "." {
        base.to_owned()
    } else {
        format!("{base}/{relative}")
    }
}

/// A one-line, human description of a source error.
pub fn describe(error: &SourceError) -> String {
    match error {
        SourceError::NotFound(p) => format!("{p}: no such file or directory"),
        SourceError::IsADirectory(p) => format!("{p}: is a directory"),
        SourceError::NotADirectory(p) => format!("{p}: not a directory"),
        SourceError::Denied(p) => format!("{p}: outside the source tree"),
        SourceError::TooLarge(p) => format!("{p}: file too large"),
        SourceError::Io(m) => m.clone(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn join_paths() {
        assert_eq!(super::join("", "a.yaml"), "a.yaml");
        assert_eq!(super::join(".", "a.yaml"), "a.yaml");
        assert_eq!(super::join("app/", "a.yaml"), "app/a.yaml");
        assert_eq!(super::join("app", "."), "app");
    }
}
