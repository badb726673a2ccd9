//! The files a build reads: the host's source view in the component, a
//! directory natively (tests, benchmarks). Paths are `/`-separated and
//! relative to the source root.

use std::collections::BTreeMap;

/// What a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A file.
    File,
    /// A directory.
    Directory,
}

/// Read-only access to the source tree.
pub trait Files {
    /// A file's text.
    fn read(&self, path: &str) -> Result<String, String>;
    /// A file's bytes, UTF-8 or not (generator files: kustomize stores a
    /// non-UTF-8 file as `binaryData`).
    fn read_bytes(&self, path: &str) -> Result<Vec<u8>, String>;
    /// What exists at `path`, if anything.
    fn kind(&self, path: &str) -> Option<Kind>;
}

/// Files in memory (tests).
#[derive(Debug, Default, Clone)]
pub struct MemoryFiles(pub BTreeMap<String, String>);

impl Files for MemoryFiles {
    fn read(&self, path: &str) -> Result<String, String> {
        self.0
            .get(path)
            .cloned()
            .ok_or_else(|| format!("{path}: no such file"))
    }

    fn read_bytes(&self, path: &str) -> Result<Vec<u8>, String> {
        self.read(path).map(String::into_bytes)
    }

    fn kind(&self, path: &str) -> Option<Kind> {
        if self.0.contains_key(path) {
            return Some(Kind::File);
        }
        let prefix = if path.is_empty() {
            String::new()
        } else {
            format!("{path}/")
        };
        self.0
            .keys()
            .any(|k| k.starts_with(&prefix))
            .then_some(Kind::Directory)
    }
}

/// A directory of the host's filesystem (native builds only).
#[cfg(not(target_arch = "wasm32"))]
#[derive(Debug, Clone)]
pub struct DirFiles(pub std::path::PathBuf);

#[cfg(not(target_arch = "wasm32"))]
impl Files for DirFiles {
    fn read(&self, path: &str) -> Result<String, String> {
        std::fs::read_to_string(self.0.join(path)).map_err(|e| format!("{path}: {e}"))
    }

    fn read_bytes(&self, path: &str) -> Result<Vec<u8>, String> {
        std::fs::read(self.0.join(path)).map_err(|e| format!("{path}: {e}"))
    }

    fn kind(&self, path: &str) -> Option<Kind> {
        let meta = std::fs::metadata(self.0.join(path)).ok()?;
        Some(if meta.is_dir() {
            Kind::Directory
        } else {
            Kind::File
        })
    }
}

/// Joins `relative` to `base` and resolves `.` and `..` lexically; `None`
/// when the result would climb above the root.
pub fn join(base: &str, relative: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for part in base.split('/').chain(relative.split('/')) {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn join_resolves_dots_and_refuses_escapes() {
        assert_eq!(super::join("a/b", "../c").as_deref(), Some("a/c"));
        assert_eq!(super::join("", "./x.yaml").as_deref(), Some("x.yaml"));
        assert_eq!(super::join("a", "../../x"), None);
    }
}
