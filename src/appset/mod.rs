//! ApplicationSets: generators → parameter sets → Applications, with Argo
//! CD's semantics.
//!
//! [`generate()`] is the whole of it for one set, and changes nothing
//! anywhere: its generators ([`spec`], [`generate`](mod@generate)) read
//! what [`Sources`] hand out (a repository's tree through the Git engine,
//! the registered clusters), every template is rendered in the sandbox by
//! the `appset` plugin ([`Templater`]), and the Applications it gives are
//! checked (names, namespace, projects) before anyone applies them. The
//! controller (`src/controller/appset`) and `kiln appset generate` are its
//! two callers.

pub mod generate;
pub mod params;
pub mod selector;
pub mod spec;

use std::collections::BTreeSet;

use serde_json::{Value, json};

pub use generate::{ClusterInfo, Sources};
pub use params::Params;

use crate::api::Application;
use crate::api::appset::ApplicationSet;

/// Why a set generates nothing. Existing Applications are left as they
/// are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AppSetError {
    /// The spec is malformed (the message names the field).
    #[error("invalid spec: {0}")]
    InvalidSpec(String),
    /// A generator failed (a repository, a file, the clusters).
    #[error("generator failed: {0}")]
    Generator(String),
    /// Rendering the template failed (the message names the parameter set).
    #[error("template failed: {0}")]
    Template(String),
    /// A generated Application is invalid or not allowed.
    #[error("{0}")]
    Application(String),
    /// Past a bound.
    #[error("too many: {0}")]
    TooMany(String),
}

impl AppSetError {
    /// The condition reason this error reports.
    pub fn reason(&self) -> &'static str {
        match self {
            AppSetError::InvalidSpec(_) => "InvalidSpec",
            AppSetError::Generator(_) => "GeneratorError",
            AppSetError::Template(_) => "TemplateError",
            AppSetError::Application(_) => "ApplicationNotAllowed",
            AppSetError::TooMany(_) => "TooManyApplications",
        }
    }
}

/// Bounds of one generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Parameter sets (and Applications) one set may give. Default 10,000.
    pub max_applications: usize,
    /// Files and directories a git generator walks in one tree. Default
    /// 200,000.
    pub max_tree_entries: usize,
    /// Bytes of a git generator's file (or `elementsYaml`). Default 1 MiB.
    pub max_file_bytes: usize,
    /// Bytes of every file git generators read in one generation.
    /// Default 64 MiB.
    pub max_total_file_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_applications: 10_000,
            max_tree_entries: 200_000,
            max_file_bytes: 1024 * 1024,
            max_total_file_bytes: 64 * 1024 * 1024,
        }
    }
}

/// One template to render with parameter sets (the `appset` plugin's
/// `TemplateRequest`).
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateRequest {
    /// Go templates, or `{{param}}`.
    pub go: bool,
    /// `goTemplateOptions`.
    pub options: Vec<String>,
    /// An object; every string of it is a template.
    pub template: Value,
    /// `templatePatch`.
    pub patch: Option<String>,
    /// One result per set, in order.
    pub sets: Vec<Params>,
}

impl TemplateRequest {
    /// The request as the `appset` plugin reads it.
    pub fn to_object(&self) -> Value {
        json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "TemplateRequest",
            "metadata": {"name": "templates"},
            "spec": {"goTemplate": self.go, "goTemplateOptions": self.options,
                "template": self.template, "templatePatch": self.patch,
                "parameterSets": self.sets}})
    }
}

/// What renders templates (the `appset` plugin, in the sandbox).
#[async_trait::async_trait]
pub trait Templater: Send + Sync {
    /// One object per set of `request`, in order; an error says why.
    async fn render(&self, request: TemplateRequest) -> Result<Vec<Value>, String>;
}

/// `syncPolicy`: what a set may do to its Applications.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Update the Applications it generated (`sync`, `create-update`).
    pub update: bool,
    /// Delete those no parameter set gives any more, and let them go with
    /// the set (`sync`, `create-delete`).
    pub delete: bool,
    /// `preserveResourcesOnDeletion`: delete Applications without deleting
    /// what they deployed (no resources finalizer).
    pub preserve_resources: bool,
}

impl Policy {
    /// `set`'s policy; an `applicationsSync` Argo CD does not know is an
    /// error (never a full sync by default).
    pub fn of(set: &ApplicationSet) -> Result<Policy, AppSetError> {
        let sync = set.spec.sync_policy.as_ref();
        let (update, delete) = match sync.and_then(|p| p.applications_sync.as_deref()) {
            None | Some("sync") => (true, true),
            Some("create-only") => (false, false),
            Some("create-update") => (true, false),
            Some("create-delete") => (false, true),
            Some(other) => {
                return Err(AppSetError::InvalidSpec(format!(
                    "spec.syncPolicy.applicationsSync {other:?} is not create-only, create-update, create-delete or sync"
                )));
            }
        };
        Ok(Policy {
            update,
            delete,
            preserve_resources: sync.is_some_and(|p| p.preserve_resources_on_deletion),
        })
    }
}

/// What one set generates.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The Applications, by name order, as they are to be applied (in the
    /// set's namespace, without owner references: the caller adds them).
    pub applications: Vec<Application>,
}

/// The Applications `set` generates: its generators' parameter sets, the
/// template rendered with each, every result checked. Nothing is applied.
pub async fn generate(
    set: &ApplicationSet,
    sources: &dyn Sources,
    templater: &dyn Templater,
    limits: Limits,
) -> Result<Generated, AppSetError> {
    let spec = &set.spec;
    let namespace = set.metadata.namespace.clone().unwrap_or_default();
    check_set(set)?;
    let policy = Policy::of(set)?;
    let generators = spec::generators(&spec.generators)?;
    let run = generate::Run::new(
        spec.go_template,
        &spec.go_template_options,
        sources,
        templater,
        limits,
    );
    let mut sets = Vec::new();
    for (generator, raw) in generators.iter().zip(&spec.generators) {
        sets.extend(run.sets(generator, raw).await?);
        if sets.len() > limits.max_applications {
            return Err(AppSetError::TooMany(format!(
                "more than {} parameter sets",
                limits.max_applications
            )));
        }
    }
    let template = application_template(&spec.template)?;
    let rendered = templater
        .render(TemplateRequest {
            go: spec.go_template,
            options: spec.go_template_options.clone(),
            template,
            patch: spec.template_patch.clone(),
            sets,
        })
        .await
        .map_err(AppSetError::Template)?;
    let projects = Projects::of(set)?;
    let mut names = BTreeSet::new();
    let mut applications = Vec::with_capacity(rendered.len());
    for (index, value) in rendered.into_iter().enumerate() {
        let mut app = application(value, index, &namespace, &projects)?;
        // As Argo CD: an Application deleted takes what it deployed with
        // it, unless the set preserves resources.
        let finalizers = app.metadata.finalizers.get_or_insert_with(Vec::new);
        if !policy.preserve_resources
            && !finalizers
                .iter()
                .any(|f| f == crate::api::RESOURCES_FINALIZER)
        {
            finalizers.push(crate::api::RESOURCES_FINALIZER.to_owned());
        }
        let name = app.metadata.name.clone().unwrap_or_default();
        if !names.insert(name.clone()) {
            return Err(AppSetError::Application(format!(
                "two parameter sets generate the Application {name:?} (parameter set {index} is the second): names must be unique"
            )));
        }
        applications.push(app);
    }
    applications.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    Ok(Generated { applications })
}

/// What of a set is refused before anything runs: fields not run yet, a
/// name that cannot be a label value.
fn check_set(set: &ApplicationSet) -> Result<(), AppSetError> {
    let refused = |field: &str, what: &str| {
        Err(AppSetError::InvalidSpec(format!(
            "spec.{field}: {what} are not run yet; remove it"
        )))
    };
    if set.spec.strategy.is_some() {
        return refused(
            "strategy",
            "progressive syncs (RollingSync), rather than every Application synced as generated,",
        );
    }
    if set.spec.ignore_application_differences.is_some() {
        return refused(
            "ignoreApplicationDifferences",
            "ignored Application differences",
        );
    }
    if set.spec.preserved_fields.is_some() {
        return refused("preservedFields", "preserved fields");
    }
    let name = set.metadata.name.as_deref().unwrap_or_default();
    let label_value = name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if !label_value {
        return Err(AppSetError::InvalidSpec(format!(
            "metadata.name {name:?}: an ApplicationSet's name labels its Applications, so it has at most 63 characters"
        )));
    }
    Ok(())
}

/// The template as an Application object the plugin renders.
fn application_template(template: &Value) -> Result<Value, AppSetError> {
    let Value::Object(map) = template else {
        return Err(AppSetError::InvalidSpec(
            "spec.template: not an object".into(),
        ));
    };
    if let Some(unknown) = map.keys().find(|k| *k != "metadata" && *k != "spec") {
        return Err(AppSetError::InvalidSpec(format!(
            "spec.template.{unknown}: a template has metadata and spec only"
        )));
    }
    let metadata = map.get("metadata").cloned().unwrap_or_else(|| json!({}));
    if let Some(unknown) = metadata.as_object().and_then(|m| {
        m.keys()
            .find(|k| {
                !matches!(
                    k.as_str(),
                    "name" | "namespace" | "labels" | "annotations" | "finalizers"
                )
            })
            .cloned()
    }) {
        return Err(AppSetError::InvalidSpec(format!(
            "spec.template.metadata.{unknown}: a template's metadata has name, namespace, labels, annotations and finalizers"
        )));
    }
    Ok(
        json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Application",
        "metadata": metadata, "spec": map.get("spec").cloned().unwrap_or_else(|| json!({}))}),
    )
}

/// Which projects a set's Applications may name.
pub enum Projects {
    /// Those matching `spec.projects`.
    Globs(Vec<crate::glob::Glob>),
    /// Only this one (the template's, written without parameters).
    Only(String),
}

impl Projects {
    /// What `set` allows: `spec.projects`, or the template's own project.
    pub fn of(set: &ApplicationSet) -> Result<Projects, AppSetError> {
        if !set.spec.projects.is_empty() {
            return set
                .spec
                .projects
                .iter()
                .map(|p| {
                    crate::glob::Glob::new(p)
                        .map_err(|e| AppSetError::InvalidSpec(format!("spec.projects: {e}")))
                })
                .collect::<Result<_, _>>()
                .map(Projects::Globs);
        }
        let project = set.spec.template["spec"]["project"]
            .as_str()
            .unwrap_or("default");
        if project.contains("{{") {
            return Err(AppSetError::InvalidSpec(format!(
                "spec.template.spec.project {project:?} is a template: list the projects its Applications may name in spec.projects"
            )));
        }
        Ok(Projects::Only(project.to_owned()))
    }

    /// Whether an Application of the set may name `project`.
    pub fn allows(&self, project: &str) -> bool {
        match self {
            Projects::Globs(globs) => globs.iter().any(|g| g.is_match(project)),
            Projects::Only(only) => only == project,
        }
    }
}

/// A rendered Application, read and checked.
fn application(
    value: Value,
    index: usize,
    namespace: &str,
    projects: &Projects,
) -> Result<Application, AppSetError> {
    let mut app: Application = serde_json::from_value(value).map_err(|e| {
        AppSetError::Application(format!(
            "parameter set {index}: the template does not give an Application: {e}"
        ))
    })?;
    let name = app.metadata.name.clone().unwrap_or_default();
    let valid_name = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if !valid_name {
        return Err(AppSetError::Application(format!(
            "parameter set {index}: the Application name {name:?} is not a DNS subdomain (lower-case letters, digits, '-' and '.')"
        )));
    }
    match app.metadata.namespace.as_deref() {
        None | Some("") => app.metadata.namespace = Some(namespace.to_owned()),
        Some(ns) if ns == namespace => {}
        Some(other) => {
            return Err(AppSetError::Application(format!(
                "Application {name}: namespace {other:?}: a set generates Applications in its own namespace ({namespace})"
            )));
        }
    }
    if !projects.allows(&app.spec.project) {
        return Err(AppSetError::Application(format!(
            "Application {name}: project {:?} is not one this ApplicationSet may use (spec.projects, or the template's own project)",
            app.spec.project
        )));
    }
    Ok(app)
}

/// Renders `request` with `plugin` (the `appset` plugin): one object per
/// parameter set, in order.
pub async fn render_with(
    plugin: &crate::plugin::Plugin,
    request: &TemplateRequest,
) -> Result<Vec<Value>, String> {
    let object = request.to_object();
    let input = crate::manifest::parse(&object.to_string(), Some("TemplateRequest"))
        .map_err(|e| e.to_string())?;
    let count = request.sets.len();
    let objects = plugin
        .render(
            std::sync::Arc::new(crate::source::EmptyView),
            crate::plugin::AppContext::default(),
            Vec::new(),
            input,
        )
        .await
        .map_err(|e| crate::text::chain(&e))?;
    if objects.len() != count {
        return Err(format!(
            "plugin {}: {} objects for {count} parameter sets",
            plugin.name(),
            objects.len()
        ));
    }
    Ok(objects
        .into_iter()
        .map(|o| Value::Object(o.value().clone()))
        .collect())
}

impl ClusterInfo {
    /// The controller's own cluster, as Argo CD names it.
    pub fn in_cluster() -> ClusterInfo {
        ClusterInfo {
            name: "in-cluster".to_owned(),
            server: crate::api::IN_CLUSTER.to_owned(),
            project: None,
            labels: Default::default(),
            annotations: Default::default(),
        }
    }
}

/// Whether a push to a repository (`pushed` tells which URLs name it) that
/// changed `files` (`None`: unknown) concerns `set`: one of its git
/// generators reads that repository, and a changed file is one its
/// `files` patterns match or lies in a directory its `directories`
/// patterns match (or under one: a directory appears or goes with its
/// files). A generator whose `repoURL` is a template (a matrix's second)
/// is concerned by any push.
pub fn concerned_by_push(
    set: &ApplicationSet,
    pushed: &dyn Fn(&str) -> bool,
    files: Option<&[String]>,
) -> bool {
    let mut gits = Vec::new();
    collect_gits(&Value::Array(set.spec.generators.clone()), &mut gits, 0);
    gits.into_iter().any(|git| {
        let repo = git["repoURL"].as_str().unwrap_or_default();
        if !(repo.contains("{{") || pushed(repo)) {
            return false;
        }
        let Some(files) = files else { return true };
        let patterns = |field: &str| -> Vec<generate::PathPattern> {
            git[field]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| {
                    Some(generate::PathPattern {
                        path: p["path"].as_str()?.to_owned(),
                        exclude: p["exclude"].as_bool().unwrap_or(false),
                    })
                })
                .collect()
        };
        let (directories, file_patterns) = (patterns("directories"), patterns("files"));
        let directory = generate::Matcher::new(&directories).ok();
        let file = generate::Matcher::new(&file_patterns).ok();
        files.iter().any(|changed| {
            file.as_ref().is_some_and(|m| m.selects(changed))
                || directory.as_ref().is_some_and(|m| {
                    let mut dir = changed.as_str();
                    while let Some((parent, _)) = dir.rsplit_once('/') {
                        if m.selects(parent) {
                            return true;
                        }
                        dir = parent;
                    }
                    false
                })
        })
    })
}

/// The `git` generators of `value` (a generator list), nested ones too.
fn collect_gits(value: &Value, out: &mut Vec<Value>, depth: usize) {
    if depth > 2 * spec::MAX_NESTING + 2 {
        return;
    }
    match value {
        Value::Array(items) => items.iter().for_each(|v| collect_gits(v, out, depth + 1)),
        Value::Object(map) => {
            if let Some(git) = map.get("git") {
                out.push(git.clone());
            }
            for key in ["matrix", "merge"] {
                if let Some(nested) = map.get(key) {
                    collect_gits(&nested["generators"], out, depth + 1);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(generators: Value) -> ApplicationSet {
        serde_json::from_value(
            json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "ApplicationSet",
            "metadata": {"name": "s"}, "spec": {"generators": generators, "template": {}}}),
        )
        .unwrap()
    }

    #[test]
    fn a_push_concerns_the_sets_that_read_what_it_changed() {
        let repo = |url: &str| url == "https://git/apps";
        let files = |list: &[&str]| list.iter().map(|f| (*f).to_owned()).collect::<Vec<_>>();
        let dirs = set(json!([{"matrix": {"generators": [
            {"list": {"elements": []}},
            {"git": {"repoURL": "https://git/apps", "directories": [{"path": "apps/*"}, {"path": "apps/x", "exclude": true}]}}]}}]));
        assert!(concerned_by_push(
            &dirs,
            &repo,
            Some(&files(&["apps/new/deep/cm.yaml"]))
        ));
        assert!(!concerned_by_push(
            &dirs,
            &repo,
            Some(&files(&["README.md", "apps/x/cm.yaml"]))
        ));
        assert!(concerned_by_push(&dirs, &repo, None));
        assert!(!concerned_by_push(&dirs, &|_| false, None));
        let config = set(
            json!([{"git": {"repoURL": "https://git/apps", "files": [{"path": "envs/*/config.json"}]}}]),
        );
        assert!(concerned_by_push(
            &config,
            &repo,
            Some(&files(&["envs/prod/config.json"]))
        ));
        assert!(!concerned_by_push(
            &config,
            &repo,
            Some(&files(&["envs/prod/other.json"]))
        ));
        // A templated repository: any push might be it.
        let templated = set(json!([{"git": {"repoURL": "{{url}}", "files": [{"path": "a"}]}}]));
        assert!(concerned_by_push(
            &templated,
            &|_| false,
            Some(&files(&["a"]))
        ));
    }

    #[test]
    fn sync_policies_and_set_names_are_checked() {
        let mut s = set(json!([]));
        s.spec.sync_policy = Some(crate::api::appset::ApplicationSetSyncPolicy {
            applications_sync: Some("createOnly".into()),
            preserve_resources_on_deletion: false,
        });
        assert!(
            Policy::of(&s)
                .unwrap_err()
                .to_string()
                .contains("\"createOnly\" is not")
        );
        let mut long = set(json!([]));
        long.metadata.name = Some("x".repeat(64));
        assert!(
            check_set(&long)
                .unwrap_err()
                .to_string()
                .contains("at most 63")
        );
    }
}
