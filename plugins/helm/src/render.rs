//! `helm template`: values coalesced over the chart and its subcharts,
//! dependency conditions and tags, every template rendered, the output
//! split into documents and sorted in Helm's install order.

use std::rc::Rc;

use chrono::{DateTime, Utc};

use crate::archive::{ArchiveLimits, Budget};
use crate::chart::{Chart, Dependency, ImportValue, LoadError, Source, load_with};
use crate::convert::{from_values_yaml, map_of};
use crate::exec::{ExecError, Limits, Runtime};
use crate::files::Files;
use crate::parse::{ParseError, Trees, parse};
use crate::schema::SchemaError;
use crate::strvals::{self, SetError};
use crate::value::{Map, MapCell, Value};

/// What `helm template` takes on its command line.
#[derive(Debug, Clone)]
pub struct Options {
    /// Release name (`.Release.Name`). Default `release-name`.
    pub release_name: String,
    /// Namespace (`.Release.Namespace`). Default `default`.
    pub namespace: String,
    /// Value files, in order, relative to the chart directory.
    pub value_files: Vec<String>,
    /// `--set` expressions, in order.
    pub set: Vec<String>,
    /// `--set-string` expressions, in order.
    pub set_string: Vec<String>,
    /// `--kube-version`; default [`DEFAULT_KUBE_VERSION`].
    pub kube_version: Option<String>,
    /// `--api-versions`, added to the default set.
    pub api_versions: Vec<String>,
    /// Leave `crds/` out.
    pub skip_crds: bool,
    /// Budgets.
    pub limits: Limits,
    /// Budgets of packaged subcharts (`charts/*.tgz`).
    pub archive: ArchiveLimits,
    /// The render's clock (`now`, certificates' validity): a render is a
    /// pure function of its inputs, so the host passes the time it wants
    /// (the controller: the source revision's commit time). Default: the
    /// Unix epoch.
    pub now: DateTime<Utc>,
    /// A secret the host mixes into the seed of the random functions
    /// (`randAlphaNum`, `genCA`, ...), so that their output cannot be
    /// predicted from the chart and the release alone. Never printed.
    pub random_seed: Option<String>,
    /// Free what the render built (the chart, its values, the parsed
    /// templates, the executor's caches) before returning. Default: true.
    /// A caller that throws its whole memory away after the render sets it
    /// to false and saves the frees: the plugin, whose host starts a fresh
    /// instance for every call (a few percent of a render's instructions;
    /// `docs/benchmarks.md`, "helm plugin"). It is freed all the same when
    /// a document is left for the caller to read into JSON
    /// ([`Document::json`] is `None`): that reading allocates, and must
    /// not raise the peak memory of the render.
    pub free_memory: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            release_name: "release-name".into(),
            namespace: "default".into(),
            value_files: Vec::new(),
            set: Vec::new(),
            set_string: Vec::new(),
            kube_version: None,
            api_versions: Vec::new(),
            skip_crds: false,
            limits: Limits::default(),
            archive: ArchiveLimits::default(),
            now: DateTime::UNIX_EPOCH,
            random_seed: None,
            free_memory: true,
        }
    }
}

/// The Kubernetes version Helm v4.2.3 assumes without `--kube-version`.
pub const DEFAULT_KUBE_VERSION: &str = "v1.36.0";

/// The API versions Helm v4.2.3 assumes (`chartutil.DefaultVersionSet`).
pub const DEFAULT_API_VERSIONS: &[&str] = &[
    "v1",
    "admissionregistration.k8s.io/v1",
    "admissionregistration.k8s.io/v1alpha1",
    "admissionregistration.k8s.io/v1beta1",
    "internal.apiserver.k8s.io/v1alpha1",
    "apps/v1",
    "apps/v1beta1",
    "apps/v1beta2",
    "authentication.k8s.io/v1",
    "authentication.k8s.io/v1alpha1",
    "authentication.k8s.io/v1beta1",
    "authorization.k8s.io/v1",
    "authorization.k8s.io/v1beta1",
    "autoscaling/v1",
    "autoscaling/v2",
    "batch/v1",
    "batch/v1beta1",
    "certificates.k8s.io/v1",
    "certificates.k8s.io/v1beta1",
    "certificates.k8s.io/v1alpha1",
    "coordination.k8s.io/v1alpha2",
    "coordination.k8s.io/v1beta1",
    "coordination.k8s.io/v1",
    "discovery.k8s.io/v1",
    "discovery.k8s.io/v1beta1",
    "events.k8s.io/v1",
    "events.k8s.io/v1beta1",
    "extensions/v1beta1",
    "flowcontrol.apiserver.k8s.io/v1",
    "flowcontrol.apiserver.k8s.io/v1beta1",
    "flowcontrol.apiserver.k8s.io/v1beta2",
    "flowcontrol.apiserver.k8s.io/v1beta3",
    "networking.k8s.io/v1",
    "networking.k8s.io/v1beta1",
    "node.k8s.io/v1",
    "node.k8s.io/v1alpha1",
    "node.k8s.io/v1beta1",
    "policy/v1",
    "policy/v1beta1",
    "rbac.authorization.k8s.io/v1",
    "rbac.authorization.k8s.io/v1beta1",
    "rbac.authorization.k8s.io/v1alpha1",
    "resource.k8s.io/v1",
    "resource.k8s.io/v1beta2",
    "resource.k8s.io/v1beta1",
    "resource.k8s.io/v1alpha3",
    "scheduling.k8s.io/v1alpha2",
    "scheduling.k8s.io/v1beta1",
    "scheduling.k8s.io/v1",
    "storage.k8s.io/v1beta1",
    "storage.k8s.io/v1",
    "storage.k8s.io/v1alpha1",
    "storagemigration.k8s.io/v1beta1",
    "apiextensions.k8s.io/v1beta1",
    "apiextensions.k8s.io/v1",
];

/// Helm's install order of kinds (`releaseutil.InstallOrder`); other kinds
/// follow, alphabetically.
pub const INSTALL_ORDER: &[&str] = &[
    "PriorityClass",
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "SecretList",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleList",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    "Role",
    "RoleList",
    "RoleBinding",
    "RoleBindingList",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// Hook events Helm knows; a document with another is dropped, as Helm does.
const HOOK_EVENTS: &[&str] = &[
    "pre-install",
    "post-install",
    "pre-delete",
    "post-delete",
    "pre-upgrade",
    "post-upgrade",
    "pre-rollback",
    "post-rollback",
    "test",
    "test-success",
];

/// One document of the output.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// The template (or CRD file) it came from, as `# Source:` names it.
    pub source: String,
    /// Its YAML text.
    pub text: String,
    /// Whether it is a hook (`helm.sh/hook`).
    pub hook: bool,
    /// The text as `helm template` prints it (followed by a newline), read
    /// into JSON text when the install-order sort read it (one parse for
    /// both); None when it must be read from [`text`](Self::text).
    pub json: Option<String>,
}

/// A render failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The chart does not load.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A value file is missing or is not YAML.
    #[error("{file}: {message}")]
    Values {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// A `--set` expression.
    #[error(transparent)]
    Set(#[from] SetError),
    /// A template does not parse.
    #[error("parse error at ({}:{}): {}", .0.name, .0.line, .0.message)]
    Parse(#[from] ParseError),
    /// A template fails.
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// `dependencies` of `Chart.yaml` that `charts/` does not hold.
    #[error(
        "An error occurred while checking for chart dependencies. You may need to run `helm dependency build` to fetch missing dependencies: found in Chart.yaml, but missing in charts/ directory: {}",
        .names.join(", ")
    )]
    MissingDependencies {
        /// `Chart.yaml`.
        file: String,
        /// The dependencies missing.
        names: Vec<String>,
    },
    /// The chart's `kubeVersion` excludes the Kubernetes version rendered for.
    #[error(
        "chart requires kubeVersion: {required} which is incompatible with Kubernetes {actual}"
    )]
    KubeVersion {
        /// `Chart.yaml`.
        file: String,
        /// The chart's constraint.
        required: String,
        /// The version rendered for.
        actual: String,
    },
    /// `values.schema.json` refuses the values (or is not a schema).
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// A rendered document is not YAML.
    #[error("YAML parse error on {source_name}: {message}")]
    Yaml {
        /// The template.
        source_name: String,
        /// The parser's message.
        message: String,
    },
}

impl RenderError {
    /// The file (template or values) the error is in, and its line.
    pub fn location(&self) -> (Option<String>, Option<u32>) {
        let line = |l: usize| u32::try_from(l).ok();
        match self {
            RenderError::Load(
                LoadError::Yaml { file, .. }
                | LoadError::Unsupported { file, .. }
                | LoadError::InArchive { archive: file, .. },
            ) => (Some(file.clone()), None),
            RenderError::Load(LoadError::Archive(a)) => (Some(a.archive().to_owned()), None),
            RenderError::KubeVersion { file, .. }
            | RenderError::MissingDependencies { file, .. }
            | RenderError::Schema(
                SchemaError::Invalid { file, .. } | SchemaError::Violations { file, .. },
            ) => (Some(file.clone()), None),
            RenderError::Values { file, .. } => (Some(file.clone()), None),
            RenderError::Parse(p) => (Some(p.name.clone()), line(p.line)),
            RenderError::Exec(
                ExecError::Go { name, line: l, .. }
                | ExecError::Helm { name, line: l, .. }
                | ExecError::Limit { name, line: l, .. },
            ) => (Some(name.clone()), line(*l)),
            RenderError::Yaml { source_name, .. } => (Some(source_name.clone()), None),
            _ => (None, None),
        }
    }
}

/// Normalizes `a/b/../c` (None when it climbs above the root).
fn normalize(path: &str) -> Option<String> {
    let mut out: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            p => out.push(p),
        }
    }
    Some(out.join("/"))
}

fn user_values(src: &dyn Source, chart_dir: &str, opts: &Options) -> Result<Map, RenderError> {
    let mut vals = Map::new();
    for f in &opts.value_files {
        let joined = if chart_dir.is_empty() {
            f.clone()
        } else {
            format!("{chart_dir}/{f}")
        };
        let path = normalize(&joined).ok_or_else(|| RenderError::Values {
            file: f.clone(),
            message: "the value file is outside the render root".into(),
        })?;
        let bytes = src.read(&path).map_err(|message| RenderError::Values {
            file: f.clone(),
            message,
        })?;
        let text = String::from_utf8_lossy(&bytes);
        // The file's documents share its budget of nodes.
        let mut budget = crate::yaml11::Budget::for_text(text.len());
        for doc in split_value_documents(&text) {
            let v = from_values_yaml(doc, &mut budget).map_err(|message| RenderError::Values {
                file: f.clone(),
                message,
            })?;
            if let Value::Map(m) = v {
                vals = merge_maps(vals, &m.borrow());
            }
        }
    }
    for s in &opts.set {
        strvals::apply(s, &mut vals, false)?;
    }
    for s in &opts.set_string {
        strvals::apply(s, &mut vals, true)?;
    }
    Ok(vals)
}

/// Documents of a value file (a `---` line ends one).
fn split_value_documents(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("---") {
            let rest = rest.trim();
            if rest.is_empty() || rest.starts_with('#') {
                out.push(&text[start..pos]);
                start = pos + line.len();
            }
        }
        pos += line.len();
    }
    out.push(&text[start..]);
    out
}

/// Helm's `MergeMaps`: `b` wins, maps merge recursively.
fn merge_maps(mut a: Map, b: &Map) -> Map {
    for (k, v) in b {
        if let (Some(Value::Map(x)), Value::Map(y)) = (a.get(k), v) {
            let merged = merge_maps(x.borrow().clone(), &y.borrow());
            a.insert(k.clone(), Value::map(merged));
        } else {
            a.insert(k.clone(), v.clone());
        }
    }
    a
}

/// How values meet defaults: Helm's `CoalesceValues` (a null deletes the
/// default) or `MergeValues` (nulls are kept, for a later coalescing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Coalesce,
    Merge,
}

/// `coalesceTables`: `dst` (the user's) over `src` (defaults); a null in
/// `dst` deletes the default (when coalescing).
fn coalesce_tables(mut dst: Map, src: &Map, mode: Mode) -> Map {
    for (k, sv) in src {
        match dst.get(k) {
            Some(Value::Nil) => {
                if mode == Mode::Coalesce {
                    dst.remove(k);
                }
            }
            Some(Value::Map(d)) => {
                if let Value::Map(s) = sv {
                    let merged = coalesce_tables(d.borrow().clone(), &s.borrow(), mode);
                    dst.insert(k.clone(), Value::map(merged));
                }
            }
            Some(_) => {}
            None => {
                if let Some(default) = default_for(sv, mode) {
                    dst.insert(k.clone(), default);
                }
            }
        }
    }
    dst
}

/// `coalesceValues`: the chart's values under `dst`; the table of a
/// subchart is merged (its nulls kept for the subchart's own coalescing,
/// Helm's `childChartMergeTrue`).
fn coalesce_values(chart: &Chart, mut dst: Map, mode: Mode) -> Map {
    for (k, sv) in &chart.values {
        match dst.get(k) {
            Some(Value::Nil) => {
                if mode == Mode::Coalesce {
                    dst.remove(k);
                }
            }
            Some(Value::Map(d)) => {
                if let Value::Map(s) = sv {
                    let child = chart.subcharts.iter().any(|c| &c.name() == k);
                    let mode = if child { Mode::Merge } else { mode };
                    let merged = coalesce_tables(d.borrow().clone(), &s.borrow(), mode);
                    dst.insert(k.clone(), Value::map(merged));
                }
            }
            Some(_) => {}
            None => {
                if let Some(default) = default_for(sv, mode) {
                    dst.insert(k.clone(), default);
                }
            }
        }
    }
    dst
}

/// Parent globals over the subchart's (`coalesceGlobals`).
fn coalesce_globals(mut dest: Map, parent: &Map, mode: Mode) -> Map {
    let mut dg = dest
        .get("global")
        .and_then(Value::map_clone)
        .unwrap_or_default();
    if let Some(sg) = parent.get("global").and_then(Value::as_map) {
        for (k, v) in sg.iter() {
            match (v, dg.get(k)) {
                (Value::Map(pv), Some(Value::Map(dv))) => {
                    let merged = coalesce_tables(pv.borrow().clone(), &dv.borrow(), mode);
                    dg.insert(k.clone(), Value::map(merged));
                }
                (Value::Map(_), Some(_)) => {}
                (_, Some(Value::Map(_))) => {}
                _ => {
                    dg.insert(k.clone(), v.clone());
                }
            }
        }
    }
    dest.insert("global".into(), Value::map(dg));
    dest
}

/// `CoalesceValues` of `chart` under `vals`.
fn coalesce(chart: &Chart, vals: Map) -> Map {
    coalesce_with(chart, vals, Mode::Coalesce)
}

/// `CoalesceValues` or `MergeValues` of `chart` under `vals`.
fn coalesce_with(chart: &Chart, vals: Map, mode: Mode) -> Map {
    let mut v = coalesce_values(chart, vals, mode);
    for sub in &chart.subcharts {
        let name = sub.name();
        let dv = match v.get(&name) {
            Some(Value::Map(m)) => m.borrow().clone(),
            Some(Value::Nil) | None => Map::new(),
            Some(_) => continue,
        };
        let dv = coalesce_globals(dv, &v, mode);
        let dv = coalesce_with(sub, dv, mode);
        v.insert(name, Value::map(dv));
    }
    v
}

/// A default taken where the values have no such key: as it is when
/// merging; when coalescing, without its nulls (Helm drops a chart's null
/// defaults, at any depth, and keeps the nulls the user wrote where the
/// chart has no default).
fn default_for(default: &Value, mode: Mode) -> Option<Value> {
    match (default, mode) {
        (_, Mode::Merge) => Some(default.clone()),
        (Value::Nil, Mode::Coalesce) => None,
        (Value::Map(m), Mode::Coalesce) => Some(Value::map(without_nulls(&m.borrow()))),
        (other, Mode::Coalesce) => Some(other.clone()),
    }
}

/// A copy of `m` without null entries, at any depth.
fn without_nulls(m: &Map) -> Map {
    m.iter()
        .filter(|(_, v)| !matches!(v, Value::Nil))
        .map(|(k, v)| match v {
            Value::Map(inner) => (k.clone(), Value::map(without_nulls(&inner.borrow()))),
            other => (k.clone(), other.clone()),
        })
        .collect()
}

/// The values with every map in them a new one (templates may change
/// them). Nulls stay: coalescing deleted those that override a default,
/// and Helm keeps the others (`cpu: null` where the chart has no `cpu`).
fn fresh_maps(m: Map) -> Map {
    m.into_iter()
        .map(|(k, v)| match v {
            Value::Map(inner) => (k, Value::map(copy_maps(&inner.borrow()))),
            other => (k, other),
        })
        .collect()
}

/// [`fresh_maps`] of a map that stays as it is.
fn copy_maps(m: &Map) -> Map {
    m.iter()
        .map(|(k, v)| match v {
            Value::Map(inner) => (k.clone(), Value::map(copy_maps(&inner.borrow()))),
            other => (k.clone(), other.clone()),
        })
        .collect()
}

/// Looks `path` (`a.b.c`) up in `vals`.
fn lookup_path(vals: &Map, path: &str) -> Option<Value> {
    let mut parts = path.split('.');
    let mut cur = vals.get(parts.next()?)?.clone();
    for p in parts {
        let next = cur.as_map()?.get(p)?.clone();
        cur = next;
    }
    Some(cur)
}

/// Helm's `ProcessDependencyEnabled`, recursively: the subcharts as the
/// declared dependencies take them ([`dependency_charts`]), less those
/// whose tags or condition disable them (read from `vals`, the level
/// above's values, coalesced with this chart's).
fn process_dependencies(chart: &mut Chart, vals: &Map, prefix: &str) {
    if chart.dependencies.is_empty() {
        // Helm stops here: a chart that declares no dependency keeps the
        // charts it vendors, and their own are not processed.
        mark_not_root(&mut chart.subcharts);
        return;
    }
    chart.subcharts = dependency_charts(chart);
    // The values the conditions read, coalesced now that the subcharts
    // carry their aliases (Helm's `CoalesceValues(c, v)` at each level,
    // `v` the level above's): a subchart's defaults are under its alias.
    let cvals = &coalesce(chart, vals.clone());
    let tags = cvals
        .get("tags")
        .and_then(Value::map_clone)
        .unwrap_or_default();
    // The names of the disabled dependencies (aliases where given): the
    // charts of those names are dropped, whichever way they came.
    let disabled: Vec<&str> = chart
        .dependencies
        .iter()
        .filter(|dep| !dependency_enabled(dep, &tags, cvals, prefix))
        .map(Dependency::effective_name)
        .collect();
    chart
        .subcharts
        .retain(|sub| !disabled.contains(&sub.name().as_str()));
    let enabled: Vec<Value> = chart
        .dependencies
        .iter()
        .filter(|dep| !disabled.contains(&dep.effective_name()))
        .map(|dep| Value::map(dep.go_fields()))
        .collect();
    chart
        .metadata
        .insert("Dependencies".into(), Value::list(enabled));
    for sub in &mut chart.subcharts {
        sub.metadata.insert("IsRoot".into(), Value::Bool(false));
        let p = format!("{prefix}{}.", sub.name());
        process_dependencies(sub, cvals, &p);
    }
}

/// Helm's `processDependencyEnabled`, its charts: the vendored charts that
/// are none of the declared dependencies (another name, or a version
/// outside every constraint of theirs) as they are, then for each declared
/// dependency a copy of the first chart that is it ([`Dependency::is`]),
/// named by its alias. So a chart aliased twice renders twice, and a
/// dependency whose chart is not within its constraint has none.
fn dependency_charts(chart: &Chart) -> Vec<Chart> {
    let mut out: Vec<Chart> = chart
        .subcharts
        .iter()
        .filter(|sub| !chart.dependencies.iter().any(|dep| dep.is(sub)))
        .cloned()
        .collect();
    for dep in &chart.dependencies {
        if let Some(sub) = chart.subcharts.iter().find(|sub| dep.is(sub)) {
            let mut copy = sub.clone();
            if let Some(alias) = &dep.alias {
                copy.metadata.insert("Name".into(), Value::str(alias));
            }
            out.push(copy);
        }
    }
    out
}

/// Whether a dependency is enabled: by its tags (any true, or none set
/// false), then by the first of its conditions that is a boolean.
fn dependency_enabled(dep: &Dependency, tags: &Map, cvals: &Map, prefix: &str) -> bool {
    let mut enabled = true;
    let mut tag_vals = dep.tags.iter().filter_map(|t| match tags.get(t) {
        Some(Value::Bool(b)) => Some(*b),
        _ => None,
    });
    if let Some(first) = tag_vals.next() {
        enabled = first || tag_vals.any(|b| b);
    }
    if let Some(cond) = &dep.condition {
        for c in cond.split(',').map(str::trim) {
            if let Some(Value::Bool(b)) = lookup_path(cvals, &format!("{prefix}{c}")) {
                enabled = b;
                break;
            }
        }
    }
    enabled
}

/// Marks charts (and theirs) as subcharts (`.Chart.IsRoot` false).
fn mark_not_root(charts: &mut [Chart]) {
    for sub in charts {
        sub.metadata.insert("IsRoot".into(), Value::Bool(false));
        mark_not_root(&mut sub.subcharts);
    }
}

/// The Kubernetes version rendered for, as `.Capabilities.KubeVersion`
/// prints it (`v1.30.0`).
fn kube_version(opts: &Options) -> String {
    let version = opts
        .kube_version
        .clone()
        .unwrap_or_else(|| DEFAULT_KUBE_VERSION.to_owned());
    if version.starts_with('v') {
        version
    } else {
        format!("v{version}")
    }
}

/// `Chart.yaml` of `chart`.
fn chart_yaml(chart: &Chart) -> String {
    if chart.dir.is_empty() || chart.dir == "." {
        "Chart.yaml".to_owned()
    } else {
        format!("{}/Chart.yaml", chart.dir)
    }
}

/// Every dependency of the top chart is in its `charts/` (by chart name,
/// before aliases), as `helm template` checks (`CheckDependencies`).
fn check_dependencies(chart: &Chart) -> Result<(), RenderError> {
    let names: Vec<String> = chart
        .dependencies
        .iter()
        .filter(|d| !chart.subcharts.iter().any(|s| s.name() == d.name))
        .map(|d| d.name.clone())
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    Err(RenderError::MissingDependencies {
        file: chart_yaml(chart),
        names,
    })
}

/// The chart's `kubeVersion` constraint against the version rendered for
/// (Helm checks the top chart only; a constraint that does not parse
/// fails it too, as Helm's `IsCompatibleRange` does).
fn check_kube_version(chart: &Chart, opts: &Options) -> Result<(), RenderError> {
    let required = chart
        .metadata
        .get("KubeVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if required.is_empty() {
        return Ok(());
    }
    let actual = kube_version(opts);
    if crate::semver::matches(required, &actual).unwrap_or(false) {
        return Ok(());
    }
    Err(RenderError::KubeVersion {
        file: chart_yaml(chart),
        required: required.to_owned(),
        actual,
    })
}

/// Helm's `MergeTables`: `dst` wins, `src` fills what it lacks, maps merge.
fn merge_tables(mut dst: Map, src: &Map) -> Map {
    for (k, sv) in src {
        match (dst.get(k), sv) {
            (Some(Value::Map(d)), Value::Map(s)) => {
                let merged = merge_tables(d.borrow().clone(), &s.borrow());
                dst.insert(k.clone(), Value::map(merged));
            }
            (Some(_), _) => {}
            (None, _) => {
                dst.insert(k.clone(), sv.clone());
            }
        }
    }
    dst
}

/// The table at `path` (`a.b.c`), if it is one.
fn table(vals: &Map, path: &str) -> Option<Map> {
    match lookup_path(vals, path)? {
        Value::Map(m) => Some(m.borrow().clone()),
        _ => None,
    }
}

/// `{a: {b: data}}` for the path `a.b` (`.`: the data itself).
fn path_to_map(path: &str, data: Map) -> Map {
    if path == "." {
        return data;
    }
    let mut cur = data;
    for part in path.rsplit('.') {
        let mut m = Map::new();
        m.insert(part.to_owned(), Value::map(cur));
        cur = m;
    }
    cur
}

/// `import-values` (`processDependencyImportValues`), deepest charts
/// first: each chart's values become its coalesced values (its enabled
/// subcharts' included) under the tables imported from them, so that the
/// chart's own values win over imported ones, and the user's over both.
fn import_values(chart: &mut Chart) {
    for sub in &mut chart.subcharts {
        import_values(sub);
    }
    if chart.dependencies.is_empty() {
        return;
    }
    let cvals = coalesce_with(chart, Map::new(), Mode::Merge);
    let mut imported = Map::new();
    for dep in &chart.dependencies {
        let name = dep.alias.as_deref().unwrap_or(&dep.name);
        if !chart.subcharts.iter().any(|s| s.name() == name) {
            continue;
        }
        for iv in &dep.import_values {
            match iv {
                ImportValue::Path { child, parent } => {
                    if let Some(t) = table(&cvals, &format!("{name}.{child}")) {
                        imported = merge_tables(imported, &path_to_map(parent, t));
                    }
                }
                ImportValue::Exports(key) => {
                    if let Some(t) = table(&cvals, &format!("{name}.exports.{key}")) {
                        imported = merge_tables(imported, &t);
                    }
                }
            }
        }
    }
    chart.values = merge_tables(cvals, &imported);
}

fn capabilities(opts: &Options) -> Value {
    let version = kube_version(opts);
    let parsed = crate::semver::Version::parse(&version).ok();
    let (major, minor) = parsed.map_or((String::new(), String::new()), |v| {
        (v.major.to_string(), v.minor.to_string())
    });
    let mut apis: Vec<String> = DEFAULT_API_VERSIONS
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    for a in &opts.api_versions {
        for x in a.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            apis.push(x.to_owned());
        }
    }
    map_of([
        (
            "KubeVersion",
            map_of([
                ("Version", Value::str(&version)),
                ("GitVersion", Value::str(&version)),
                ("Major", Value::str(major)),
                ("Minor", Value::str(minor)),
            ]),
        ),
        ("APIVersions", Value::ApiVersions(Rc::new(apis))),
        (
            "HelmVersion",
            map_of([
                ("Version", Value::str("v4.2")),
                ("GitCommit", Value::str("")),
                ("GitTreeState", Value::str("")),
                ("GoVersion", Value::str("")),
                ("KubeClientVersion", Value::str("v1.36")),
            ]),
        ),
    ])
}

/// A template of one chart, ready to run.
struct Renderable {
    name: String,
    base_path: String,
    /// The chart's template dot (`.Values`, `.Chart`, `.Files`,
    /// `.Release`, `.Capabilities`, `.Subcharts` and the running file's
    /// `.Template`): one map for all the chart's files, as in Helm (a
    /// `set $ ...` in one file is seen by the files that run after it).
    dot: Rc<MapCell>,
}

/// What every chart's context shares.
struct Shared<'a> {
    release: &'a Value,
    capabilities: &'a Value,
    skip_crds: bool,
}

/// Collects every chart's templates (by full name) and their contexts;
/// returns the chart's template dot, which its parent sees in `.Subcharts`.
fn collect(
    chart: &Chart,
    id: &str,
    values: &Value,
    shared: &Shared<'_>,
    out: &mut Vec<(String, String, Renderable)>,
    crds: &mut Vec<Document>,
) -> Value {
    let files = Value::Files(Rc::new(Files::new(chart.files.clone())));
    let chart_value = Value::map(chart.metadata.clone());
    let library = chart.metadata.get("Type").and_then(Value::as_str) == Some("library");
    if !shared.skip_crds {
        // Helm prints a CRD file whole; a reader of its output (kubectl,
        // Helm's install) takes each of its documents as an object.
        for (path, text) in &chart.crds {
            for text in crate::split::documents(text) {
                crds.push(Document {
                    source: format!("{id}/{path}"),
                    text,
                    hook: false,
                    json: None,
                });
            }
        }
    }
    // A chart's `.Values` is one of Helm's `Values`, with `AsMap`.
    if let Value::Map(m) = values {
        m.mark_values();
    }
    let mut subcharts = Map::new();
    for sub in &chart.subcharts {
        let name = sub.name();
        // The subchart's values are the parent's map under its name, shared
        // (a `set` in one is seen by the other, as in Helm).
        let sub_values = match values.as_map().and_then(|m| m.get(&name).cloned()) {
            Some(v @ Value::Map(_)) => v,
            _ => Value::map(Map::new()),
        };
        let context = collect(
            sub,
            &format!("{id}/charts/{name}"),
            &sub_values,
            shared,
            out,
            crds,
        );
        subcharts.insert(name, context);
    }
    let mut context = Map::new();
    context.insert("Values".into(), values.clone());
    context.insert("Release".into(), shared.release.clone());
    context.insert("Chart".into(), chart_value);
    context.insert("Capabilities".into(), shared.capabilities.clone());
    context.insert("Files".into(), files);
    context.insert("Subcharts".into(), Value::map(subcharts));
    let dot = Rc::new(MapCell::template_dot(context));
    for (path, text) in &chart.templates {
        // A library chart gives only its partials (`_*`), as Helm's
        // `isTemplateValid` decides.
        let partial = path.rsplit('/').next().is_some_and(|b| b.starts_with('_'));
        if library && !partial {
            continue;
        }
        let name = format!("{id}/{path}");
        out.push((
            name.clone(),
            text.clone(),
            Renderable {
                name,
                base_path: format!("{id}/templates"),
                dot: dot.clone(),
            },
        ));
    }
    // The parent's `.Subcharts` holds the chart's template dot itself.
    Value::Map(dot)
}

/// Helm's order of parsing templates: deeper paths first, so that a
/// parent's `define` wins over a subchart's (each path's depth counted
/// once, not at every comparison).
fn parse_order(names: &mut Vec<String>) {
    let mut keyed: Vec<(usize, String)> = names
        .drain(..)
        .map(|name| (kiln_bytes::count(name.as_bytes(), b'/'), name))
        .collect();
    keyed.sort_by(|(da, a), (db, b)| db.cmp(da).then_with(|| b.cmp(a)));
    names.extend(keyed.into_iter().map(|(_, name)| name));
}

/// Renders the chart at `chart_dir` as `helm template` does: CRDs first
/// (unless skipped), then the manifests in install order, then hooks.
pub fn render(
    src: &dyn Source,
    chart_dir: &str,
    opts: &Options,
) -> Result<Vec<Document>, RenderError> {
    let mut chart = load_with(src, chart_dir, &Budget::new(opts.archive))?;
    check_dependencies(&chart)?;
    let user = user_values(src, chart_dir, opts)?;
    process_dependencies(&mut chart, &user, "");
    import_values(&mut chart);
    check_kube_version(&chart, opts)?;
    let vals = fresh_maps(coalesce(&chart, user));
    crate::schema::validate(&chart, &vals)?;
    let vals = Value::map(vals);

    let root = chart.name();
    let release = map_of([
        ("Name", Value::str(&opts.release_name)),
        ("Namespace", Value::str(&opts.namespace)),
        ("IsUpgrade", Value::Bool(false)),
        ("IsInstall", Value::Bool(true)),
        ("Revision", Value::Int(1)),
        ("Service", Value::str("Helm")),
    ]);
    let caps = capabilities(opts);
    let shared = Shared {
        release: &release,
        capabilities: &caps,
        skip_crds: opts.skip_crds,
    };
    let mut renderables = Vec::new();
    let mut crds = Vec::new();
    collect(&chart, &root, &vals, &shared, &mut renderables, &mut crds);

    let mut names: Vec<String> = renderables.iter().map(|r| r.0.clone()).collect();
    parse_order(&mut names);
    // Each template by name (the first of a name, as a search would find
    // it), without a search per template.
    let mut by_name: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (i, r) in renderables.iter().enumerate() {
        by_name.entry(r.0.as_str()).or_insert(i);
    }
    let renderable = |name: &str| &renderables[by_name[name]];
    let mut trees = Trees::new();
    for name in &names {
        let (_, text, _) = renderable(name);
        parse(name, text, &mut trees, &crate::funcs::exists)?;
    }
    let mut rt = Runtime::new(trees, opts.limits);
    rt.now = opts.now;
    rt.random = crate::random::Randomness::new(
        opts.random_seed.as_deref(),
        &[&opts.release_name, &opts.namespace, &root],
    );
    let mut rendered: Vec<(String, String)> = Vec::new();
    for name in &names {
        let base = name.rsplit('/').next().unwrap_or(name);
        if base.starts_with('_') {
            continue;
        }
        let (_, _, r) = renderable(name);
        let template = map_of([
            ("Name", Value::str(&r.name)),
            ("BasePath", Value::str(&r.base_path)),
        ]);
        if let Value::Map(m) = &template {
            m.mark_values();
        }
        r.dot.replace_template(template);
        // The `include` texts that looked at the file before are dropped;
        // the others are reused in this file.
        rt.memo.template_replaced();
        let dot = Value::Map(r.dot.clone());
        rt.random.start_template(name);
        let out = rt.execute(name, dot)?;
        // `NOTES.txt` is rendered (its errors fail the render, as in Helm)
        // and never emitted.
        if name.ends_with("NOTES.txt") {
            continue;
        }
        // Helm drops `<no value>` (the text is copied only when it has one).
        let out = if kiln_bytes::find(&out, "<no value>").is_some() {
            out.replace("<no value>", "")
        } else {
            out
        };
        rendered.push((name.clone(), out));
    }
    rendered.sort_by(|a, b| a.0.cmp(&b.0));
    let documents = sort_manifests(rendered, crds);
    // A document the head reader could not write as JSON is read by the
    // caller, which allocates: it may then reuse this memory rather than
    // grow the instance's, so the peak stays what it was.
    let all_read = documents
        .as_ref()
        .is_ok_and(|docs| docs.iter().all(|d| d.json.is_some()));
    if !opts.free_memory && all_read {
        // The caller discards the memory whole ([`Options::free_memory`]).
        std::mem::forget((rt, chart, vals, release, caps, renderables, names));
    }
    documents
}

/// The position of a kind in Helm's install order.
fn kind_rank(kind: &str) -> (usize, String) {
    match INSTALL_ORDER.iter().position(|k| *k == kind) {
        Some(i) => (i, String::new()),
        None => (INSTALL_ORDER.len(), kind.to_owned()),
    }
}

fn sort_manifests(
    files: Vec<(String, String)>,
    crds: Vec<Document>,
) -> Result<Vec<Document>, RenderError> {
    let mut generic: Vec<((usize, String), Document)> = Vec::new();
    let mut hooks: Vec<((usize, String), Document)> = Vec::new();
    for (source, text) in files {
        if text.trim().is_empty() {
            continue;
        }
        for doc in crate::split::documents(&text) {
            // A Go string's bytes as the manifest's text: raw bytes printed
            // into it are refused, as Helm's YAML reader refuses them.
            let doc = match crate::gostr::to_bytes(&doc) {
                // Text without raw bytes is its own manifest: no copy.
                std::borrow::Cow::Borrowed(_) => Ok(doc),
                std::borrow::Cow::Owned(bytes) => String::from_utf8(bytes),
            };
            let doc = match doc {
                Ok(doc) => doc,
                Err(e) => {
                    let problem = crate::gostr::yaml_encoding_error(e.as_bytes())
                        .unwrap_or("invalid leading UTF-8 octet");
                    return Err(RenderError::Yaml {
                        source_name: source.clone(),
                        message: format!("error converting YAML to JSON: yaml: {problem}"),
                    });
                }
            };
            let head = crate::head::read(&doc).map_err(|e| RenderError::Yaml {
                source_name: source.clone(),
                message: e.to_string(),
            })?;
            // Helm reads each document's head into a struct: a document
            // that is a list or a scalar fails there.
            if let Some(json_type) = crate::head::not_an_object(&doc, head.json.as_deref()) {
                return Err(RenderError::Yaml {
                    source_name: source.clone(),
                    message: format!(
                        "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal \
                         {json_type} into Go value of type util.SimpleHead"
                    ),
                });
            }
            let (kind, hook) = (head.kind, head.hook);
            let document = Document {
                source: source.clone(),
                text: doc,
                hook: hook.is_some(),
                json: head.json,
            };
            match hook {
                None => generic.push((kind_rank(&kind), document)),
                Some(events) => {
                    if events
                        .split(',')
                        .all(|e| HOOK_EVENTS.contains(&e.trim().to_lowercase().as_str()))
                    {
                        hooks.push((kind_rank(&kind), document));
                    }
                }
            }
        }
    }
    generic.sort_by(|a, b| a.0.cmp(&b.0));
    hooks.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = crds;
    out.extend(generic.into_iter().map(|g| g.1));
    out.extend(hooks.into_iter().map(|h| h.1));
    Ok(out)
}

/// The documents as the text `helm template` prints (with `# Source:`).
pub fn stream(docs: &[Document]) -> String {
    let mut out = String::new();
    for d in docs {
        out.push_str("---\n# Source: ");
        out.push_str(&d.source);
        out.push('\n');
        out.push_str(&d.text);
        out.push('\n');
    }
    out
}
