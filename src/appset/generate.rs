//! Running generators: each gives parameter sets, read from what
//! [`Sources`] hand out (a repository's tree, the registered clusters),
//! templated (generator values, a matrix's second generator) through the
//! [`Templater`].

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::params::{self, Params};
pub(super) use super::spec::PathPattern;
use super::spec::{self, Generator, GeneratorKind, Git};
use super::{AppSetError, Limits, TemplateRequest, Templater};
use crate::source::{EntryKind, SourcePath, SourceView};

/// A registered destination cluster, as the `clusters` generator sees it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClusterInfo {
    /// Its name.
    pub name: String,
    /// Its API server URL.
    pub server: String,
    /// Its project, if its Secret names one.
    pub project: Option<String>,
    /// Its Secret's labels.
    pub labels: BTreeMap<String, String>,
    /// Its Secret's annotations.
    pub annotations: BTreeMap<String, String>,
}

/// What generators read.
#[async_trait::async_trait]
pub trait Sources: Send + Sync {
    /// The tree of `repo_url` at `revision`.
    async fn tree(&self, repo_url: &str, revision: &str) -> Result<Arc<dyn SourceView>, String>;
    /// The registered destination clusters (not the controller's own,
    /// which the generator adds as `in-cluster`).
    async fn clusters(&self) -> Result<Vec<ClusterInfo>, String>;
}

/// The annotation `kubectl apply` writes: the whole object as applied.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// A repository's tree at a revision, walked once per generation.
struct Walked {
    tree: Arc<dyn SourceView>,
    directories: Vec<String>,
    files: Vec<String>,
}

/// What one evaluation shares: the dialect, the sources, the templater
/// and the bounds.
pub struct Run<'a> {
    /// Go templates (nested parameters) or `{{param}}` (flat strings).
    pub go: bool,
    /// `goTemplateOptions`.
    pub options: &'a [String],
    /// What generators read.
    pub sources: &'a dyn Sources,
    /// What renders templates.
    pub templater: &'a dyn Templater,
    /// Bounds.
    pub limits: Limits,
    /// Trees walked, by repository and revision (a templated matrix asks
    /// for the same tree once per set of its first generator).
    walked: tokio::sync::Mutex<BTreeMap<(String, String), Arc<Walked>>>,
    /// Bytes of git generator files read so far.
    read_bytes: std::sync::atomic::AtomicUsize,
}

impl<'a> Run<'a> {
    /// A run in `go` dialect (with `options`) over `sources` and `templater`.
    pub fn new(
        go: bool,
        options: &'a [String],
        sources: &'a dyn Sources,
        templater: &'a dyn Templater,
        limits: Limits,
    ) -> Self {
        Run {
            go,
            options,
            sources,
            templater,
            limits,
            walked: Default::default(),
            read_bytes: Default::default(),
        }
    }
}

type Sets<'a> = Pin<Box<dyn Future<Output = Result<Vec<Params>, AppSetError>> + Send + 'a>>;

impl Run<'_> {
    /// The parameter sets of `generator`, filtered by its selector.
    pub fn sets<'s>(&'s self, generator: &'s Generator, raw: &'s Value) -> Sets<'s> {
        Box::pin(async move {
            let at = &generator.at;
            let mut sets = match &generator.kind {
                GeneratorKind::List {
                    elements,
                    elements_yaml,
                } => self.list(elements, elements_yaml.as_deref(), at)?,
                GeneratorKind::Clusters { selector, values } => {
                    self.clusters(selector.as_ref(), values, at).await?
                }
                GeneratorKind::Git(git) => self.git(git, at).await?,
                GeneratorKind::Matrix(children) => self.matrix(children, raw, at).await?,
                GeneratorKind::Merge {
                    merge_keys,
                    generators,
                } => self.merge(merge_keys, generators, raw, at).await?,
            };
            if let Some(selector) = &generator.selector {
                sets.retain(|set| selector.matches(&params::flatten(set)));
            }
            self.bounded(sets.len(), at)?;
            Ok(sets)
        })
    }

    fn bounded(&self, count: usize, at: &str) -> Result<(), AppSetError> {
        if count > self.limits.max_applications {
            return Err(AppSetError::TooMany(format!(
                "{at}: more than {} parameter sets",
                self.limits.max_applications
            )));
        }
        Ok(())
    }

    fn generator_error(at: &str, message: impl std::fmt::Display) -> AppSetError {
        AppSetError::Generator(format!("{at}: {message}"))
    }

    fn list(
        &self,
        elements: &[Map<String, Value>],
        elements_yaml: Option<&str>,
        at: &str,
    ) -> Result<Vec<Params>, AppSetError> {
        let mut all: Vec<Map<String, Value>> = elements.to_vec();
        if let Some(text) = elements_yaml {
            if !self.go {
                return Err(Self::generator_error(
                    at,
                    "elementsYaml needs goTemplate: true",
                ));
            }
            let value = read_yaml(text, self.limits.max_file_bytes)
                .map_err(|e| Self::generator_error(&format!("{at}.list.elementsYaml"), e))?;
            let Value::Array(items) = value else {
                return Err(Self::generator_error(at, "elementsYaml is not a YAML list"));
            };
            for item in items {
                let Value::Object(map) = item else {
                    return Err(Self::generator_error(
                        at,
                        "elementsYaml holds an element that is not an object",
                    ));
                };
                all.push(map);
            }
        }
        self.bounded(all.len(), at)?;
        if self.go {
            return Ok(all);
        }
        all.into_iter()
            .map(|element| {
                let mut set = Params::new();
                for (key, value) in element {
                    match (key.as_str(), value) {
                        ("values", Value::Object(values)) => {
                            for (k, v) in values {
                                let Value::String(v) = v else {
                                    return Err(Self::generator_error(at, format!("element value values.{k} is not a string (write it quoted, or use goTemplate)")));
                                };
                                set.insert(format!("values.{k}"), v.into());
                            }
                        }
                        (_, Value::String(v)) => {
                            set.insert(key, v.into());
                        }
                        (_, _) => {
                            return Err(Self::generator_error(at, format!("element value {key} is not a string (write it quoted, or use goTemplate)")));
                        }
                    }
                }
                Ok(set)
            })
            .collect()
    }

    async fn clusters(
        &self,
        selector: Option<&super::selector::Selector>,
        values: &Map<String, Value>,
        at: &str,
    ) -> Result<Vec<Params>, AppSetError> {
        let mut clusters = self
            .sources
            .clusters()
            .await
            .map_err(|e| Self::generator_error(at, e))?;
        // The controller's own cluster, as Argo CD adds it: only without a
        // selector, and once.
        if selector.is_none()
            && !clusters
                .iter()
                .any(|c| c.server.trim_end_matches('/') == crate::api::IN_CLUSTER)
        {
            clusters.insert(0, ClusterInfo::in_cluster());
        }
        let mut sets = Vec::new();
        for mut cluster in clusters {
            if selector.is_some_and(|s| !s.matches(&cluster.labels)) {
                continue;
            }
            // What `kubectl apply` leaves on a Secret is the Secret itself,
            // credentials included: never a parameter.
            cluster.annotations.remove(LAST_APPLIED);
            let mut set = Params::new();
            set.insert("name".into(), cluster.name.clone().into());
            set.insert(
                "nameNormalized".into(),
                params::normalize(&cluster.name).into(),
            );
            set.insert("server".into(), cluster.server.clone().into());
            set.insert(
                "project".into(),
                cluster.project.clone().unwrap_or_default().into(),
            );
            if self.go {
                let map = |m: &BTreeMap<String, String>| {
                    Value::Object(
                        m.iter()
                            .map(|(k, v)| (k.clone(), v.clone().into()))
                            .collect(),
                    )
                };
                let mut metadata = Map::new();
                metadata.insert("labels".into(), map(&cluster.labels));
                metadata.insert("annotations".into(), map(&cluster.annotations));
                set.insert("metadata".into(), Value::Object(metadata));
            } else {
                for (k, v) in &cluster.labels {
                    set.insert(format!("metadata.labels.{k}"), v.clone().into());
                }
                for (k, v) in &cluster.annotations {
                    set.insert(format!("metadata.annotations.{k}"), v.clone().into());
                }
            }
            sets.push(set);
        }
        self.with_values(sets, values, at).await
    }

    /// Adds `values` (each a template, rendered with its set) to every set.
    async fn with_values(
        &self,
        mut sets: Vec<Params>,
        values: &Map<String, Value>,
        at: &str,
    ) -> Result<Vec<Params>, AppSetError> {
        if values.is_empty() || sets.is_empty() {
            return Ok(sets);
        }
        let rendered = self
            .templater
            .render(TemplateRequest {
                go: self.go,
                options: self.options.to_vec(),
                template: wrap(Value::Object(values.clone())),
                patch: None,
                sets: sets.clone(),
            })
            .await
            .map_err(|e| Self::generator_error(&format!("{at}.values"), e))?;
        for (set, rendered) in sets.iter_mut().zip(rendered) {
            let Some(Value::Object(values)) = unwrap(rendered) else {
                return Err(Self::generator_error(
                    at,
                    "values did not render to an object",
                ));
            };
            if self.go {
                set.insert("values".into(), Value::Object(values));
            } else {
                for (k, v) in values {
                    set.insert(format!("values.{k}"), v);
                }
            }
        }
        Ok(sets)
    }

    async fn git(&self, git: &Git, at: &str) -> Result<Vec<Params>, AppSetError> {
        let walked = self.walked(git, at).await?;
        let limits = self.limits;
        let go = self.go;
        let git_owned = git.clone();
        let at_owned = at.to_owned();
        let budget = limits
            .max_total_file_bytes
            .saturating_sub(self.read_bytes.load(std::sync::atomic::Ordering::Relaxed));
        // Reading files: off the async workers.
        let (sets, read) = tokio::task::spawn_blocking(move || {
            git_sets(&walked, &git_owned, go, limits, budget, &at_owned)
        })
        .await
        .map_err(|e| Self::generator_error(at, format!("the git generator failed: {e}")))??;
        self.read_bytes
            .fetch_add(read, std::sync::atomic::Ordering::Relaxed);
        self.with_values(sets, &git.values, at).await
    }

    /// The tree `git` names, walked (once per generation).
    async fn walked(&self, git: &Git, at: &str) -> Result<Arc<Walked>, AppSetError> {
        let key = (git.repo_url.clone(), git.revision.clone());
        let mut walked = self.walked.lock().await;
        if let Some(found) = walked.get(&key) {
            return Ok(found.clone());
        }
        let tree = self
            .sources
            .tree(&git.repo_url, &git.revision)
            .await
            .map_err(|e| Self::generator_error(at, e))?;
        let max = self.limits.max_tree_entries;
        let walking = tree.clone();
        let (directories, files) = tokio::task::spawn_blocking(move || walk(&*walking, max))
            .await
            .map_err(|e| Self::generator_error(at, format!("the git generator failed: {e}")))?
            .map_err(|e| Self::generator_error(at, format!("{}: {e}", git.repo_url)))?;
        let found = Arc::new(Walked {
            tree,
            directories,
            files,
        });
        walked.insert(key, found.clone());
        Ok(found)
    }

    async fn matrix(
        &self,
        children: &[Generator],
        raw: &Value,
        at: &str,
    ) -> Result<Vec<Params>, AppSetError> {
        let raws = nested_raws(raw, "matrix");
        let first = self.sets(&children[0], &raws[0]).await?;
        let second_raw = &raws[1];
        let templated = serde_json::to_string(second_raw).is_ok_and(|t| t.contains("{{"));
        let fixed = if templated {
            None
        } else {
            Some(self.sets(&children[1], second_raw).await?)
        };
        let mut out = Vec::new();
        for a in &first {
            let seconds = match &fixed {
                Some(sets) => sets.clone(),
                None => {
                    // The second generator, templated with this set.
                    let rendered = self
                        .templater
                        .render(TemplateRequest {
                            go: self.go,
                            options: self.options.to_vec(),
                            template: wrap(second_raw.clone()),
                            patch: None,
                            sets: vec![a.clone()],
                        })
                        .await
                        .map_err(|e| Self::generator_error(&children[1].at, e))?;
                    let raw = rendered
                        .into_iter()
                        .next()
                        .and_then(unwrap)
                        .unwrap_or_default();
                    let mut count = 0;
                    let generator = spec::generator(&raw, &children[1].at, 1, &mut count)?;
                    self.sets(&generator, &raw).await?
                }
            };
            for b in seconds {
                let mut set = a.clone();
                params::combine(&mut set, &b, self.go, true)
                    .map_err(|e| Self::generator_error(at, e))?;
                out.push(set);
                self.bounded(out.len(), at)?;
            }
        }
        Ok(out)
    }

    async fn merge(
        &self,
        keys: &[String],
        generators: &[Generator],
        raw: &Value,
        at: &str,
    ) -> Result<Vec<Params>, AppSetError> {
        let raws = nested_raws(raw, "merge");
        let mut base = self.sets(&generators[0], &raws[0]).await?;
        // A key a set lacks is null, as Argo CD reads it.
        let key_of = |set: &Params| -> Vec<Option<String>> {
            let flat = params::flatten(set);
            keys.iter().map(|k| flat.get(k).cloned()).collect()
        };
        let duplicate = |key: &[Option<String>], index: usize| {
            let shown: Vec<&str> = key.iter().map(|k| k.as_deref().unwrap_or("null")).collect();
            Self::generator_error(
                at,
                format!(
                    "two parameter sets of generator {index} have the merge key values [{}]",
                    shown.join(", ")
                ),
            )
        };
        let mut seen = std::collections::HashSet::new();
        for set in &base {
            let key = key_of(set);
            if !seen.insert(key.clone()) {
                return Err(duplicate(&key, 0));
            }
        }
        for (index, (generator, raw)) in generators.iter().zip(&raws).enumerate().skip(1) {
            let mut by_key: BTreeMap<Vec<Option<String>>, Params> = BTreeMap::new();
            for set in self.sets(generator, raw).await? {
                let key = key_of(&set);
                if by_key.insert(key.clone(), set).is_some() {
                    return Err(duplicate(&key, index));
                }
            }
            for set in &mut base {
                if let Some(other) = by_key.get(&key_of(set)) {
                    params::combine(set, other, self.go, false)
                        .map_err(|e| Self::generator_error(at, e))?;
                }
            }
        }
        Ok(base)
    }
}

/// The raw JSON of a matrix's or merge's child generators.
fn nested_raws(raw: &Value, kind: &str) -> Vec<Value> {
    raw[kind]["generators"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// A JSON value as an object the templater accepts (it returns objects).
fn wrap(value: Value) -> Value {
    serde_json::json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Fragment",
        "metadata": {"name": "fragment"}, "spec": value})
}

fn unwrap(mut object: Value) -> Option<Value> {
    object.get_mut("spec").map(Value::take)
}

/// A YAML text of at most `max` bytes, aliases and nesting bounded.
fn read_yaml(text: &str, max: usize) -> Result<Value, String> {
    if text.len() > max {
        return Err(format!("{} bytes, more than {max}", text.len()));
    }
    kiln_yaml_limits::check(text, &kiln_yaml_limits::YamlLimits::default())
        .map_err(|e| e.to_string())?;
    serde_yaml::from_str(text).map_err(|e| format!("invalid YAML: {e}"))
}

/// The sets of a git generator over a walked tree, and the bytes of the
/// files it read (at most `budget`).
fn git_sets(
    walked: &Walked,
    git: &Git,
    go: bool,
    limits: Limits,
    budget: usize,
    at: &str,
) -> Result<(Vec<Params>, usize), AppSetError> {
    let failed = |e: String| AppSetError::Generator(format!("{at}: {}: {e}", git.repo_url));
    let (tree, directories, files) = (&*walked.tree, &walked.directories, &walked.files);
    let mut read = 0usize;
    let mut sets = Vec::new();
    if !git.directories.is_empty() {
        let matcher = Matcher::new(&git.directories).map_err(failed)?;
        for dir in directories.iter().filter(|d| matcher.selects(d)) {
            let mut set = Params::new();
            params::add_path(&mut set, dir, None, &git.path_param_prefix, go);
            sets.push(set);
        }
    } else {
        let matcher = Matcher::new(&git.files).map_err(failed)?;
        for file in files.iter().filter(|f| matcher.selects(f)) {
            let path = SourcePath::parse(file).map_err(|e| failed(e.to_string()))?;
            let bytes = tree.read_file(&path).map_err(|e| failed(e.to_string()))?;
            read += bytes.len();
            if read > budget {
                return Err(AppSetError::TooMany(format!(
                    "{at}: the files git generators read pass {} bytes",
                    limits.max_total_file_bytes
                )));
            }
            let text =
                String::from_utf8(bytes).map_err(|_| failed(format!("{file}: not UTF-8")))?;
            let value = read_yaml(&text, limits.max_file_bytes)
                .map_err(|e| failed(format!("{file}: {e}")))?;
            let objects = match value {
                Value::Array(items) => items,
                Value::Null => Vec::new(),
                other => vec![other],
            };
            let (dir, name) = match file.rsplit_once('/') {
                Some((dir, name)) => (dir, name),
                None => (".", file.as_str()),
            };
            for object in objects {
                let Value::Object(content) = object else {
                    return Err(failed(format!(
                        "{file}: holds a value that is not an object"
                    )));
                };
                let mut set = if go {
                    content
                } else {
                    params::flatten(&content)
                        .into_iter()
                        .map(|(k, v)| (k, Value::String(v)))
                        .collect()
                };
                params::add_path(&mut set, dir, Some(name), &git.path_param_prefix, go);
                sets.push(set);
                if sets.len() > limits.max_applications {
                    return Err(AppSetError::TooMany(format!(
                        "{at}: more than {} parameter sets",
                        limits.max_applications
                    )));
                }
            }
        }
    }
    Ok((sets, read))
}

/// Directory depth a walk descends to (a symlink to a parent would loop).
const MAX_DEPTH: usize = 64;

/// Every directory and file of `tree` (not `.git`), sorted, at most
/// `max` entries and [`MAX_DEPTH`] levels.
fn walk(tree: &dyn SourceView, max: usize) -> Result<(Vec<String>, Vec<String>), String> {
    let (mut dirs, mut files) = (Vec::new(), Vec::new());
    let mut pending = vec![SourcePath::root()];
    while let Some(dir) = pending.pop() {
        let entries = tree.read_dir(&dir).map_err(|e| e.to_string())?;
        for entry in entries {
            if dir.is_root() && entry.name == ".git" {
                continue;
            }
            let path = dir.join(&entry.name).map_err(|e| e.to_string())?;
            if dirs.len() + files.len() >= max {
                return Err(format!("more than {max} files and directories"));
            }
            match entry.kind {
                EntryKind::Directory => {
                    if path.as_str().split('/').count() > MAX_DEPTH {
                        return Err(format!(
                            "{}: deeper than {MAX_DEPTH} directories (a symlink loop?)",
                            path.as_str()
                        ));
                    }
                    dirs.push(path.as_str().to_owned());
                    pending.push(path);
                }
                _ => files.push(path.as_str().to_owned()),
            }
        }
    }
    dirs.sort();
    files.sort();
    Ok((dirs, files))
}

/// Include and exclude globs: `*` within a path segment, `**` across
/// them, as Argo CD matches paths.
pub(super) struct Matcher {
    include: globset::GlobSet,
    exclude: globset::GlobSet,
}

impl Matcher {
    pub(super) fn new(patterns: &[PathPattern]) -> Result<Matcher, String> {
        let (mut include, mut exclude) = (
            globset::GlobSetBuilder::new(),
            globset::GlobSetBuilder::new(),
        );
        for pattern in patterns {
            let glob = globset::GlobBuilder::new(&pattern.path)
                .literal_separator(true)
                .build()
                .map_err(|e| format!("path {:?}: {e}", pattern.path))?;
            if pattern.exclude {
                exclude.add(glob);
            } else {
                include.add(glob);
            }
        }
        Ok(Matcher {
            include: include.build().map_err(|e| e.to_string())?,
            exclude: exclude.build().map_err(|e| e.to_string())?,
        })
    }

    pub(super) fn selects(&self, path: &str) -> bool {
        self.include.is_match(path) && !self.exclude.is_match(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walked(files: &[(&str, String)]) -> (tempfile::TempDir, Walked) {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let tree: Arc<dyn SourceView> =
            Arc::new(crate::source::LocalDir::open(dir.path()).unwrap());
        let (directories, files) = walk(&*tree, 1000).unwrap();
        (
            dir,
            Walked {
                tree,
                directories,
                files,
            },
        )
    }

    fn files_generator(path: &str) -> Git {
        Git {
            repo_url: "https://example.com/r.git".into(),
            revision: "HEAD".into(),
            directories: Vec::new(),
            files: vec![PathPattern {
                path: path.into(),
                exclude: false,
            }],
            path_param_prefix: String::new(),
            values: Map::new(),
        }
    }

    #[test]
    fn attack_git_files_past_their_bounds_are_refused() {
        let limits = Limits::default();
        let big = format!("a: {}\n", "x".repeat(limits.max_file_bytes));
        let (_dir, tree) = walked(&[("envs/big.yaml", big), ("envs/ok.yaml", "a: 1\n".into())]);
        let error = git_sets(
            &tree,
            &files_generator("envs/big.yaml"),
            false,
            limits,
            usize::MAX,
            "g",
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("more than 1048576"), "{error}");
        // The bytes of all files together are bounded too.
        let error = git_sets(
            &tree,
            &files_generator("envs/*.yaml"),
            false,
            limits,
            3,
            "g",
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("the files git generators read pass"),
            "{error}"
        );
        let (sets, read) = git_sets(
            &tree,
            &files_generator("envs/ok.yaml"),
            false,
            limits,
            usize::MAX,
            "g",
        )
        .unwrap();
        assert_eq!((sets.len(), read), (1, 5));
    }

    #[test]
    fn attack_walks_are_bounded_in_entries_and_depth() {
        let deep = (0..70)
            .map(|i| format!("d{i}"))
            .collect::<Vec<_>>()
            .join("/");
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(&deep)).unwrap();
        let tree = crate::source::LocalDir::open(dir.path()).unwrap();
        assert!(walk(&tree, 10_000).unwrap_err().contains("deeper than 64"));
        assert!(
            walk(&tree, 10)
                .unwrap_err()
                .contains("more than 10 files and directories")
        );
    }
}
