//! A source view with other views mounted at some of its directories: a
//! chart with the dependencies the host fetched placed at `charts/NAME`,
//! without copying or changing the chart's own (content-addressed) files.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::source::{DirEntry, EntryKind, Metadata, Result, SourceError, SourcePath, SourceView};

/// `base`, with each mount's view served at its path (which hides whatever
/// `base` has there).
#[derive(Debug, Clone)]
pub struct MountView {
    base: Arc<dyn SourceView>,
    mounts: BTreeMap<String, Arc<dyn SourceView>>,
}

impl MountView {
    /// `base` with nothing mounted.
    pub fn new(base: Arc<dyn SourceView>) -> Self {
        MountView {
            base,
            mounts: BTreeMap::new(),
        }
    }

    /// Mounts `view` at `at` (not the root).
    pub fn mount(&mut self, at: &SourcePath, view: Arc<dyn SourceView>) {
        self.mounts.insert(at.as_str().to_owned(), view);
    }

    /// The mounted views' paths.
    pub fn mount_points(&self) -> impl Iterator<Item = &str> {
        self.mounts.keys().map(String::as_str)
    }

    /// The view serving `path`, and the path inside it.
    fn route(&self, path: &SourcePath) -> Option<(&Arc<dyn SourceView>, SourcePath)> {
        let p = path.as_str();
        self.mounts.iter().find_map(|(at, view)| {
            if p == at {
                Some((view, SourcePath::root()))
            } else {
                let rest = p.strip_prefix(at.as_str())?.strip_prefix('/')?;
                Some((view, SourcePath::parse(rest).ok()?))
            }
        })
    }

    /// Names of the mount points directly inside `dir`.
    fn mounted_children(&self, dir: &SourcePath) -> Vec<String> {
        self.mounts
            .keys()
            .filter_map(|at| {
                let rest = if dir.is_root() {
                    at.as_str()
                } else {
                    at.strip_prefix(dir.as_str())?.strip_prefix('/')?
                };
                Some(rest.split('/').next()?.to_owned())
            })
            .collect()
    }
}

impl SourceView for MountView {
    fn read_file(&self, path: &SourcePath) -> Result<Vec<u8>> {
        match self.route(path) {
            Some((view, inner)) => view.read_file(&inner).map_err(|e| rebase(e, path, &inner)),
            None if !self.mounted_children(path).is_empty() => {
                Err(SourceError::IsADirectory(path.clone()))
            }
            None => self.base.read_file(path),
        }
    }

    fn read_dir(&self, path: &SourcePath) -> Result<Vec<DirEntry>> {
        if let Some((view, inner)) = self.route(path) {
            return view.read_dir(&inner).map_err(|e| rebase(e, path, &inner));
        }
        let children = self.mounted_children(path);
        let mut entries = match self.base.read_dir(path) {
            Ok(entries) => entries,
            Err(SourceError::NotFound(_)) if !children.is_empty() => Vec::new(),
            Err(e) => return Err(e),
        };
        entries.retain(|e| !children.contains(&e.name));
        entries.extend(children.into_iter().map(|name| DirEntry {
            name,
            kind: EntryKind::Directory,
        }));
        entries.sort();
        entries.dedup();
        Ok(entries)
    }

    fn stat(&self, path: &SourcePath) -> Result<Option<Metadata>> {
        if let Some((view, inner)) = self.route(path) {
            return view.stat(&inner).map_err(|e| rebase(e, path, &inner));
        }
        if !self.mounted_children(path).is_empty() {
            return Ok(Some(Metadata {
                kind: EntryKind::Directory,
                size: 0,
            }));
        }
        self.base.stat(path)
    }
}

/// `base` with one more file at `at` (hiding whatever `base` has there):
/// the inline values of Argo CD's `spec.source.helm` block, which the
/// plugin reads like any value file.
#[derive(Debug, Clone)]
pub struct FileOverlay {
    base: Arc<dyn SourceView>,
    at: SourcePath,
    bytes: Arc<[u8]>,
}

impl FileOverlay {
    /// `base` with `bytes` served at `at` (not the root).
    pub fn new(base: Arc<dyn SourceView>, at: SourcePath, bytes: impl Into<Arc<[u8]>>) -> Self {
        FileOverlay {
            base,
            at,
            bytes: bytes.into(),
        }
    }

    /// The overlay's directory and file name.
    fn split(&self) -> (&str, &str) {
        self.at
            .as_str()
            .rsplit_once('/')
            .unwrap_or(("", self.at.as_str()))
    }
}

impl SourceView for FileOverlay {
    fn read_file(&self, path: &SourcePath) -> Result<Vec<u8>> {
        if path == &self.at {
            return Ok(self.bytes.to_vec());
        }
        self.base.read_file(path)
    }

    fn read_dir(&self, path: &SourcePath) -> Result<Vec<DirEntry>> {
        let (dir, name) = self.split();
        if path.as_str() != dir {
            return self.base.read_dir(path);
        }
        let mut entries = match self.base.read_dir(path) {
            Ok(entries) => entries,
            Err(SourceError::NotFound(_)) => Vec::new(),
            Err(e) => return Err(e),
        };
        entries.retain(|e| e.name != name);
        entries.push(DirEntry {
            name: name.to_owned(),
            kind: EntryKind::File,
        });
        entries.sort();
        Ok(entries)
    }

    fn stat(&self, path: &SourcePath) -> Result<Option<Metadata>> {
        if path == &self.at {
            return Ok(Some(Metadata {
                kind: EntryKind::File,
                size: self.bytes.len() as u64,
            }));
        }
        if self.split().0 == path.as_str() {
            return Ok(Some(Metadata {
                kind: EntryKind::Directory,
                size: 0,
            }));
        }
        self.base.stat(path)
    }
}

/// An error of a mounted view names the path as the renderer asked for it.
fn rebase(error: SourceError, outer: &SourcePath, inner: &SourcePath) -> SourceError {
    let same = |p: &SourcePath| p == inner;
    match error {
        SourceError::NotFound(p) if same(&p) => SourceError::NotFound(outer.clone()),
        SourceError::IsADirectory(p) if same(&p) => SourceError::IsADirectory(outer.clone()),
        SourceError::NotADirectory(p) if same(&p) => SourceError::NotADirectory(outer.clone()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::LocalDir;

    fn dir(files: &[(&str, &str)]) -> (tempfile::TempDir, Arc<dyn SourceView>) {
        let tmp = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = tmp.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let view = Arc::new(LocalDir::open(tmp.path()).unwrap());
        (tmp, view)
    }

    #[test]
    fn mounted_views_appear_under_their_path() {
        let (_a, base) = dir(&[
            ("Chart.yaml", "name: web"),
            ("charts/local/Chart.yaml", "x"),
        ]);
        let (_b, dep) = dir(&[("Chart.yaml", "name: redis"), ("templates/a.yaml", "a")]);
        let mut view = MountView::new(base);
        view.mount(&SourcePath::parse("charts/redis").unwrap(), dep);
        let p = |s: &str| SourcePath::parse(s).unwrap();
        assert_eq!(
            view.read_file(&p("charts/redis/Chart.yaml")).unwrap(),
            b"name: redis"
        );
        assert_eq!(view.read_file(&p("Chart.yaml")).unwrap(), b"name: web");
        let names: Vec<_> = view
            .read_dir(&p("charts"))
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["local", "redis"]);
        assert_eq!(
            view.stat(&p("charts/redis")).unwrap().unwrap().kind,
            EntryKind::Directory
        );
        let err = view.read_file(&p("charts/redis/nope")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "charts/redis/nope: no such file or directory"
        );
    }

    #[test]
    fn an_overlaid_file_is_listed_and_read() {
        let (_a, base) = dir(&[("web/Chart.yaml", "name: web"), ("web/.v", "old")]);
        let p = |s: &str| SourcePath::parse(s).unwrap();
        let view = FileOverlay::new(base, p("web/.v"), b"replicas: 3\n".to_vec());
        assert_eq!(view.read_file(&p("web/.v")).unwrap(), b"replicas: 3\n");
        assert_eq!(view.read_file(&p("web/Chart.yaml")).unwrap(), b"name: web");
        let names: Vec<_> = view
            .read_dir(&p("web"))
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, [".v", "Chart.yaml"]);
        assert_eq!(view.stat(&p("web/.v")).unwrap().unwrap().size, 12);
    }

    #[test]
    fn a_mount_where_the_base_has_no_directory() {
        let (_a, base) = dir(&[("Chart.yaml", "name: web")]);
        let (_b, dep) = dir(&[("Chart.yaml", "name: redis")]);
        let mut view = MountView::new(base);
        view.mount(&SourcePath::parse("charts/redis").unwrap(), dep);
        let names: Vec<_> = view
            .read_dir(&SourcePath::root())
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["Chart.yaml", "charts"]);
    }
}
