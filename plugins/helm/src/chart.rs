//! Loading a chart directory (and the subcharts in its `charts/`) through
//! a [`Source`]: metadata, default values, templates, CRDs and files.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::archive::{ArchiveLimits, Budget};
use crate::convert::{from_values_yaml, from_yaml};
use crate::value::{Map, Value};

/// Where chart files come from: the host's source view in the plugin, a
/// directory natively.
pub trait Source {
    /// A file's bytes (`path` relative to the render root, `/`-separated).
    fn read(&self, path: &str) -> Result<Vec<u8>, String>;
    /// A directory's entries: (name, is a directory). None when `path` is
    /// not a directory.
    fn list(&self, path: &str) -> Option<Vec<(String, bool)>>;
}

/// A directory of the local file system as a [`Source`].
#[derive(Debug, Clone)]
pub struct DirSource(pub PathBuf);

impl Source for DirSource {
    fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        std::fs::read(self.0.join(path)).map_err(|e| format!("{path}: {e}"))
    }

    fn list(&self, path: &str) -> Option<Vec<(String, bool)>> {
        let mut out: Vec<(String, bool)> = std::fs::read_dir(self.0.join(path))
            .ok()?
            .filter_map(|e| {
                let e = e.ok()?;
                Some((
                    e.file_name().to_string_lossy().into_owned(),
                    e.file_type().ok()?.is_dir(),
                ))
            })
            .collect();
        out.sort();
        Some(out)
    }
}

/// A chart that cannot be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// A file is missing or unreadable.
    #[error("{0}")]
    Read(String),
    /// A YAML file does not parse.
    #[error("{file}: {message}")]
    Yaml {
        /// The file.
        file: String,
        /// The parser's message.
        message: String,
    },
    /// A packaged subchart (`charts/*.tgz`) is refused.
    #[error(transparent)]
    Archive(#[from] crate::archive::ArchiveError),
    /// A packaged subchart unpacks but does not load.
    #[error("{archive}: {error}")]
    InArchive {
        /// The archive.
        archive: String,
        /// What is wrong inside.
        error: Box<LoadError>,
    },
    /// Something the plugin does not support yet.
    #[error("{file}: {message}")]
    Unsupported {
        /// The file.
        file: String,
        /// What.
        message: String,
    },
}

/// One dependency of `Chart.yaml`.
#[derive(Debug, Clone, Default)]
pub struct Dependency {
    /// Chart name.
    pub name: String,
    /// `alias`.
    pub alias: Option<String>,
    /// `version`: the semver constraint a chart in `charts/` must meet to
    /// be this dependency ("" if none, which none meets).
    pub version: String,
    /// `condition` (comma-separated value paths).
    pub condition: Option<String>,
    /// `tags`.
    pub tags: Vec<String>,
    /// `import-values`, in order.
    pub import_values: Vec<ImportValue>,
    /// The entry as written (`.Chart.Dependencies` shows it).
    pub raw: Map,
}

/// One entry of a dependency's `import-values`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportValue {
    /// `- data`: the child's `exports.data` merged at the parent's top.
    Exports(String),
    /// `- child: a.b` / `parent: c.d`: the child's table at the parent's path.
    Path {
        /// Path in the child's values.
        child: String,
        /// Path in the parent's values.
        parent: String,
    },
}

/// A loaded chart.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Directory (relative to the render root).
    pub dir: String,
    /// `Chart.yaml` as `.Chart` shows it (Go field names).
    pub metadata: Map,
    /// `values.yaml`.
    pub values: Map,
    /// `templates/…` files: (path under the chart, text).
    pub templates: Vec<(String, String)>,
    /// `crds/…` files: (path under the chart, text).
    pub crds: Vec<(String, String)>,
    /// Other files (`.Files`).
    pub files: BTreeMap<String, Vec<u8>>,
    /// Charts under `charts/`.
    pub subcharts: Vec<Chart>,
    /// `dependencies` of `Chart.yaml`.
    pub dependencies: Vec<Dependency>,
    /// `values.schema.json`: (its path, its text).
    pub schema: Option<(String, Vec<u8>)>,
}

impl Chart {
    /// The chart's name (`.Chart.Name`).
    pub fn name(&self) -> String {
        self.metadata
            .get("Name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    }

    /// The chart's version (`.Chart.Version`).
    pub fn version(&self) -> &str {
        self.metadata
            .get("Version")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
}

impl Dependency {
    /// Whether `chart` is this dependency (Helm's `getAliasDependency`):
    /// its name, and a version within the constraint (Helm's
    /// `IsCompatibleRange`: a chart whose version is outside it, or a
    /// dependency without one, is not).
    pub fn is(&self, chart: &Chart) -> bool {
        chart.name() == self.name && crate::semver::compatible_range(&self.version, chart.version())
    }

    /// The name the dependency's chart takes: its alias, else its name.
    pub fn effective_name(&self) -> &str {
        self.alias.as_deref().unwrap_or(&self.name)
    }

    /// The dependency as `.Chart.Dependencies` shows an enabled one (Go's
    /// `chart.Dependency` fields): its name replaced by its alias, as
    /// Helm's processing leaves it.
    pub fn go_fields(&self) -> Map {
        let text = |key: &str| {
            Value::str(
                self.raw
                    .get(key)
                    .map(crate::funcs::strval)
                    .unwrap_or_default(),
            )
        };
        let list = |key: &str| {
            self.raw
                .get(key)
                .filter(|v| matches!(v, Value::List(_)))
                .cloned()
                .unwrap_or_else(|| Value::list(Vec::new()))
        };
        let mut m = Map::new();
        m.insert("Name".into(), Value::str(self.effective_name()));
        m.insert("Version".into(), text("version"));
        m.insert("Repository".into(), text("repository"));
        m.insert("Condition".into(), text("condition"));
        m.insert("Tags".into(), list("tags"));
        m.insert("Enabled".into(), Value::Bool(true));
        m.insert("ImportValues".into(), list("import-values"));
        m.insert("Alias".into(), text("alias"));
        m
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() || dir == "." {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

fn text(src: &dyn Source, path: &str) -> Result<String, LoadError> {
    let bytes = src.read(path).map_err(LoadError::Read)?;
    String::from_utf8(bytes).map_err(|_| LoadError::Unsupported {
        file: path.to_owned(),
        message: "not UTF-8".into(),
    })
}

/// Go field names of `Chart.yaml` keys.
const METADATA: &[(&str, &str)] = &[
    ("apiVersion", "APIVersion"),
    ("name", "Name"),
    ("version", "Version"),
    ("kubeVersion", "KubeVersion"),
    ("description", "Description"),
    ("type", "Type"),
    ("keywords", "Keywords"),
    ("home", "Home"),
    ("sources", "Sources"),
    ("dependencies", "Dependencies"),
    ("maintainers", "Maintainers"),
    ("icon", "Icon"),
    ("appVersion", "AppVersion"),
    ("deprecated", "Deprecated"),
    ("annotations", "Annotations"),
    ("condition", "Condition"),
    ("tags", "Tags"),
];

fn metadata(raw: &Map) -> Map {
    let mut m = Map::new();
    for (yaml, go) in METADATA {
        let default = match *go {
            "Keywords" | "Sources" | "Dependencies" | "Maintainers" => Value::list(Vec::new()),
            "Annotations" => Value::map(Map::new()),
            "Deprecated" => Value::Bool(false),
            _ => Value::str(""),
        };
        let v = match raw.get(*yaml) {
            Some(Value::Float(f)) => Value::str(crate::value::format_float_g(*f)),
            Some(Value::Nil) | None => default,
            Some(v) => v.clone(),
        };
        m.insert((*go).to_owned(), v);
    }
    m.insert("IsRoot".into(), Value::Bool(true));
    m
}

/// Loads the chart at `dir` with the default [`ArchiveLimits`].
pub fn load(src: &dyn Source, dir: &str) -> Result<Chart, LoadError> {
    load_with(src, dir, &Budget::new(ArchiveLimits::default()))
}

/// Loads the chart at `dir`, packaged subcharts within `budget`.
pub fn load_with(src: &dyn Source, dir: &str, budget: &Budget) -> Result<Chart, LoadError> {
    load_chart(src, dir, budget, false, None)
}

/// Loads the chart at `dir`; a `packaged` one (from an archive) ignores
/// `.helmignore`, as Helm's archive loader does.
/// The `.helmignore` rules a chart directory is loaded under: its own, or
/// (a subchart directory under `charts/`) the top chart's, matched against
/// paths from the top chart's root, as Helm's `LoadDir` walks the whole
/// tree with the top chart's rules alone.
#[derive(Clone, Copy)]
struct Outer<'a> {
    rules: &'a crate::ignore::Rules,
    /// The chart's path from the top chart's root, ending in `/`.
    prefix: &'a str,
}

fn load_chart(
    src: &dyn Source,
    dir: &str,
    budget: &Budget,
    packaged: bool,
    outer: Option<Outer<'_>>,
) -> Result<Chart, LoadError> {
    let chart_yaml = join(dir, "Chart.yaml");
    let raw = from_yaml(&text(src, &chart_yaml)?).map_err(|message| LoadError::Yaml {
        file: chart_yaml.clone(),
        message,
    })?;
    let mut raw = raw.map_clone().unwrap_or_default();
    // An apiVersion v1 chart declares its dependencies in
    // `requirements.yaml`: Helm reads it over `Chart.yaml` (any chart's,
    // warning for v2), its keys replacing theirs.
    let requirements = join(dir, "requirements.yaml");
    if let Ok(bytes) = src.read(&requirements) {
        let text = String::from_utf8(bytes).map_err(|_| LoadError::Unsupported {
            file: requirements.clone(),
            message: "not UTF-8".into(),
        })?;
        let over = from_yaml(&text).map_err(|message| LoadError::Yaml {
            file: requirements.clone(),
            message: format!("cannot load requirements.yaml: {message}"),
        })?;
        for (key, value) in over.map_clone().unwrap_or_default() {
            raw.insert(key, value);
        }
    }
    let metadata = metadata(&raw);
    if metadata
        .get("Name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        return Err(LoadError::Unsupported {
            file: chart_yaml,
            message: "validation: chart.metadata.name is required".into(),
        });
    }
    let dependencies = raw
        .get("dependencies")
        .and_then(Value::as_list)
        .unwrap_or(&[])
        .iter()
        .filter_map(Value::as_map)
        .map(|d| Dependency {
            name: d
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            alias: d.get("alias").and_then(Value::as_str).map(str::to_owned),
            version: d
                .get("version")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            condition: d
                .get("condition")
                .and_then(Value::as_str)
                .map(str::to_owned),
            tags: d
                .get("tags")
                .and_then(Value::as_list)
                .unwrap_or(&[])
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            import_values: d
                .get("import-values")
                .and_then(Value::as_list)
                .unwrap_or(&[])
                .iter()
                .filter_map(import_value)
                .collect(),
            raw: d.clone(),
        })
        .collect();
    let values_path = join(dir, "values.yaml");
    let values = match src.read(&values_path) {
        Ok(bytes) => {
            let t = String::from_utf8_lossy(&bytes);
            from_values_yaml(&t, &mut crate::yaml11::Budget::for_text(t.len()))
                .map_err(|message| LoadError::Yaml {
                    file: values_path.clone(),
                    message,
                })?
                .map_clone()
                .unwrap_or_default()
        }
        Err(_) => Map::new(),
    };
    let mut chart = Chart {
        dir: dir.to_owned(),
        metadata,
        values,
        templates: Vec::new(),
        crds: Vec::new(),
        files: BTreeMap::new(),
        subcharts: Vec::new(),
        dependencies,
        schema: None,
    };
    let schema_path = join(dir, "values.schema.json");
    if let Ok(bytes) = src.read(&schema_path) {
        chart.schema = Some((schema_path, bytes));
    }
    let own;
    let outer = match outer {
        Some(outer) if !packaged => outer,
        _ => {
            own = match src.read(&join(dir, ".helmignore")) {
                _ if packaged => crate::ignore::Rules::none(),
                Ok(bytes) => crate::ignore::Rules::parse(&String::from_utf8_lossy(&bytes)),
                Err(_) => crate::ignore::Rules::defaults(),
            };
            Outer {
                rules: &own,
                prefix: "",
            }
        }
    };
    walk(src, dir, "", &mut chart, outer, budget, packaged)?;
    Ok(chart)
}

/// An `import-values` entry as Helm reads it (`fmt.Sprintf("%v")` of a
/// map's `child` and `parent`).
fn import_value(v: &Value) -> Option<ImportValue> {
    match v {
        Value::Map(m) => {
            let m = m.borrow();
            let text = |k: &str| match m.get(k) {
                Some(v) => crate::gofmt::sprintf("%v", std::slice::from_ref(v)),
                None => "<nil>".to_owned(),
            };
            Some(ImportValue::Path {
                child: text("child"),
                parent: text("parent"),
            })
        }
        Value::Str(s) => Some(ImportValue::Exports(s.to_string())),
        _ => None,
    }
}

const SKIPPED: &[&str] = &[
    "Chart.yaml",
    "Chart.lock",
    "values.yaml",
    "values.schema.json",
    "requirements.yaml",
    "requirements.lock",
];

fn walk(
    src: &dyn Source,
    root: &str,
    rel: &str,
    chart: &mut Chart,
    outer: Outer<'_>,
    budget: &Budget,
    packaged: bool,
) -> Result<(), LoadError> {
    let ignored = |path: &str, is_dir: bool| {
        outer
            .rules
            .ignored(&format!("{}{path}", outer.prefix), is_dir)
    };
    let here = join(root, rel);
    let Some(entries) = src.list(&here) else {
        return Ok(());
    };
    for (name, is_dir) in entries {
        let path = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        if ignored(&path, is_dir) {
            continue;
        }
        if rel.is_empty() && name == "charts" && is_dir {
            for (sub, sub_is_dir) in src.list(&join(root, "charts")).unwrap_or_default() {
                let sub_path = join(&join(root, "charts"), &sub);
                if ignored(&format!("charts/{sub}"), sub_is_dir) {
                    continue;
                }
                if sub_is_dir {
                    let prefix = format!("{}charts/{sub}/", outer.prefix);
                    let within = Outer {
                        rules: outer.rules,
                        prefix: &prefix,
                    };
                    chart.subcharts.push(load_chart(
                        src,
                        &sub_path,
                        budget,
                        packaged,
                        Some(within),
                    )?);
                } else if sub.ends_with(".tgz") {
                    chart.subcharts.push(load_archive(src, &sub_path, budget)?);
                } else if sub.ends_with(".prov") {
                    let bytes = src.read(&sub_path).map_err(LoadError::Read)?;
                    chart.files.insert(format!("charts/{sub}"), bytes);
                } else {
                    // Helm takes any other file in `charts/` for a chart and
                    // fails; one the source view will not serve (a symlink
                    // leading out of the tree) is refused for that reason.
                    src.read(&sub_path).map_err(LoadError::Read)?;
                    return Err(LoadError::Unsupported {
                        file: sub_path,
                        message: format!(
                            "error unpacking subchart {sub} in {}: Chart.yaml file is missing",
                            chart.name()
                        ),
                    });
                }
            }
            continue;
        }
        if is_dir {
            walk(src, root, &path, chart, outer, budget, packaged)?;
            continue;
        }
        if rel.is_empty() && SKIPPED.contains(&name.as_str()) {
            continue;
        }
        let full = join(root, &path);
        if let Some(t) = path.strip_prefix("templates/") {
            let _ = t;
            // A template's text is a Go string: a private-range character
            // in it is carried as its bytes (`crate::gostr`).
            let template = text(src, &full)?;
            let template = crate::gostr::from_bytes(template.as_bytes()).into_owned();
            chart.templates.push((path.clone(), template));
        } else if path.starts_with("crds/") {
            // A CRD is also one of the chart's files (`.Files.Glob "crds/*"`),
            // as in Helm, where the CRDs are read from the files.
            let crd = text(src, &full)?;
            chart.files.insert(path.clone(), crd.clone().into_bytes());
            chart.crds.push((path.clone(), crd));
        } else {
            chart
                .files
                .insert(path, src.read(&full).map_err(LoadError::Read)?);
        }
    }
    Ok(())
}

/// Loads the packaged chart `path` (a `.tgz` under `charts/`).
fn load_archive(src: &dyn Source, path: &str, budget: &Budget) -> Result<Chart, LoadError> {
    let bytes = src.read(path).map_err(LoadError::Read)?;
    let files = crate::archive::unpack(path, &bytes, budget)?;
    let mut chart =
        load_chart(&files, "", budget, true, None).map_err(|error| LoadError::InArchive {
            archive: path.to_owned(),
            error: Box::new(error),
        })?;
    chart.dir = path.to_owned();
    Ok(chart)
}
