//! Normalized paths inside a source tree.

use std::fmt;

use super::Escape;

/// A normalized, `/`-separated path relative to a source root.
///
/// Parsing resolves `.`, `..` and repeated separators lexically and refuses
/// absolute paths and anything climbing above the root, so a `SourcePath`
/// can never name something outside the tree by itself (symlinks are the
/// view's business). The root is the empty path, displayed as `.`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SourcePath(String);

/// A path that cannot name anything inside the source root.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {escape}")]
pub struct PathError {
    path: String,
    escape: Escape,
}

impl PathError {
    /// How the path tried to leave the root.
    pub fn escape(&self) -> Escape {
        self.escape
    }

    /// The path as given.
    pub fn into_path(self) -> String {
        self.path
    }
}

impl SourcePath {
    /// The root of the tree.
    pub fn root() -> Self {
        SourcePath(String::new())
    }

    /// Parses and normalizes a path relative to the root.
    pub fn parse(raw: &str) -> Result<Self, PathError> {
        let fail = |escape| PathError {
            path: raw.to_owned(),
            escape,
        };
        if raw.starts_with('/') || raw.contains('\0') {
            return Err(fail(Escape::Absolute));
        }
        let mut parts: Vec<&str> = Vec::new();
        for part in raw.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    parts.pop().ok_or_else(|| fail(Escape::Traversal))?;
                }
                part => parts.push(part),
            }
        }
        Ok(SourcePath(parts.join("/")))
    }

    /// Joins a relative path (which may use `..`, within the root).
    pub fn join(&self, relative: &str) -> Result<Self, PathError> {
        if relative.starts_with('/') || self.is_root() {
            return Self::parse(relative);
        }
        Self::parse(&format!("{}/{relative}", self.0))
    }

    /// The path as text; empty for the root.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the root.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The last component, if any.
    pub fn file_name(&self) -> Option<&str> {
        self.0.rsplit('/').next().filter(|n| !n.is_empty())
    }

    /// The path in a form a filesystem API accepts (`.` for the root).
    pub(crate) fn as_fs_path(&self) -> &str {
        if self.0.is_empty() { "." } else { &self.0 }
    }
}

impl fmt::Display for SourcePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_fs_path())
    }
}

impl fmt::Debug for SourcePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_fs_path())
    }
}

impl serde::Serialize for SourcePath {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_fs_path())
    }
}

impl<'de> serde::Deserialize<'de> for SourcePath {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        SourcePath::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes() {
        for (raw, want) in [
            ("a/./b", "a/b"),
            ("a//b/", "a/b"),
            ("a/x/../b", "a/b"),
            ("", ""),
            (".", ""),
            ("a/..", ""),
        ] {
            assert_eq!(SourcePath::parse(raw).unwrap().as_str(), want, "{raw}");
        }
    }

    #[test]
    fn refuses_escapes() {
        assert_eq!(
            SourcePath::parse("/etc/passwd").unwrap_err().escape(),
            Escape::Absolute
        );
        assert_eq!(
            SourcePath::parse("..").unwrap_err().escape(),
            Escape::Traversal
        );
        assert_eq!(
            SourcePath::parse("a/../../b").unwrap_err().escape(),
            Escape::Traversal
        );
        let app = SourcePath::parse("apps/web").unwrap();
        assert_eq!(app.join("../base").unwrap().as_str(), "apps/base");
        assert!(app.join("../../../x").is_err());
        assert_eq!(
            SourcePath::root().join("a.yaml").unwrap().as_str(),
            "a.yaml"
        );
        assert!(SourcePath::root().join("/etc").is_err());
    }
}
