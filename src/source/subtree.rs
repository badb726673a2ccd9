//! A directory of a tree served as a tree of its own.

use std::sync::Arc;

use super::{DirEntry, Metadata, Result, SourceError, SourcePath, SourceView};

/// The directory `root` of `inner`, seen as a whole tree: a path is joined
/// under `root` after it has been normalized on its own, so `..` cannot
/// climb above `root` (it is refused as it is at any source root). Symlinks
/// are resolved by `inner`, within its own root. Errors name the path in
/// `inner` (the repository-relative path a person can look up).
#[derive(Debug, Clone)]
pub struct Subtree {
    inner: Arc<dyn SourceView>,
    root: SourcePath,
}

impl Subtree {
    /// The directory `root` of `inner` (the root itself when `root` is the
    /// root: then this view is `inner`).
    pub fn new(inner: Arc<dyn SourceView>, root: SourcePath) -> Self {
        Subtree { inner, root }
    }

    /// `inner` cut to `root` when `root` is not the root, else `inner`.
    pub fn of(inner: Arc<dyn SourceView>, root: SourcePath) -> Arc<dyn SourceView> {
        if root.is_root() {
            inner
        } else {
            Arc::new(Subtree::new(inner, root))
        }
    }

    fn inner_path(&self, path: &SourcePath) -> Result<SourcePath> {
        if path.is_root() {
            return Ok(self.root.clone());
        }
        // Both are normalized and `path` has no `..` left: plain joining.
        SourcePath::parse(&format!("{}/{}", self.root.as_str(), path.as_str()))
            .map_err(SourceError::from)
    }
}

impl SourceView for Subtree {
    fn read_file(&self, path: &SourcePath) -> Result<Vec<u8>> {
        self.inner.read_file(&self.inner_path(path)?)
    }

    fn read_dir(&self, path: &SourcePath) -> Result<Vec<DirEntry>> {
        self.inner.read_dir(&self.inner_path(path)?)
    }

    fn identity(&self) -> Option<String> {
        // Length-prefixed, so that the two parts cannot run into each other.
        let root = self.root.to_string();
        Some(format!("{}:{root}:{}", root.len(), self.inner.identity()?))
    }

    fn stat(&self, path: &SourcePath) -> Result<Option<Metadata>> {
        self.inner.stat(&self.inner_path(path)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::LocalDir;

    #[test]
    fn a_subtree_serves_its_directory_and_nothing_above_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("policies/templates")).unwrap();
        std::fs::write(dir.path().join("policies/templates/t.yaml"), "t").unwrap();
        std::fs::write(dir.path().join("secret.yaml"), "s").unwrap();
        let repo: Arc<dyn SourceView> = Arc::new(LocalDir::open(dir.path()).unwrap());
        let view = Subtree::of(repo, SourcePath::parse("policies").unwrap());
        let path = |p: &str| SourcePath::parse(p);
        assert_eq!(
            view.read_file(&path("templates/t.yaml").unwrap()).unwrap(),
            b"t"
        );
        assert_eq!(view.read_dir(&SourcePath::root()).unwrap().len(), 1);
        assert!(matches!(
            view.read_file(&path("secret.yaml").unwrap()),
            Err(SourceError::NotFound(p)) if p.as_str() == "policies/secret.yaml"
        ));
        // `..` above the subtree's root is refused before the view is asked.
        assert!(path("../secret.yaml").is_err());
        assert!(path("templates/../../secret.yaml").is_err());
    }
}
