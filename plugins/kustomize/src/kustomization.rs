//! The `kustomization.yaml` file: what is supported, and the fields that are
//! refused by name until they are.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::Failure;

/// The file names a kustomization may have, in kustomize's order.
pub const FILE_NAMES: &[&str] = &["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// One kustomization.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Kustomization {
    /// `kustomize.config.k8s.io/v1beta1` (checked loosely).
    pub api_version: Option<String>,
    /// `Kustomization` (a `Component` is refused for now).
    pub kind: Option<String>,
    /// Free-form metadata (ignored, as kustomize does).
    pub metadata: Option<serde_yaml::Value>,
    /// Files and directories.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Deprecated alias of `resources`.
    #[serde(default)]
    pub bases: Vec<String>,
    /// The namespace of every namespaced object.
    pub namespace: Option<String>,
    /// Prepended to names.
    pub name_prefix: Option<String>,
    /// Appended to names.
    pub name_suffix: Option<String>,
    /// Labels on every object and in selectors (deprecated in kustomize).
    #[serde(default)]
    pub common_labels: BTreeMap<String, String>,
    /// Labels, with control over selectors and templates.
    #[serde(default)]
    pub labels: Vec<Labels>,
    /// Annotations on every object (and pod templates).
    #[serde(default)]
    pub common_annotations: BTreeMap<String, String>,
    /// Image overrides.
    #[serde(default)]
    pub images: Vec<Image>,
    /// Replica counts.
    #[serde(default)]
    pub replicas: Vec<Replicas>,
    /// ConfigMaps to generate.
    #[serde(default)]
    pub config_map_generator: Vec<Generator>,
    /// Secrets to generate.
    #[serde(default)]
    pub secret_generator: Vec<Generator>,
    /// Options of every generator.
    pub generator_options: Option<GeneratorOptions>,
    /// Output order (`legacy`, the default, only so far).
    pub sort_options: Option<SortOptions>,

    // Not supported yet: refused by name rather than ignored.
    patches: Option<serde_yaml::Value>,
    patches_strategic_merge: Option<serde_yaml::Value>,
    patches_json6902: Option<serde_yaml::Value>,
    components: Option<serde_yaml::Value>,
    replacements: Option<serde_yaml::Value>,
    vars: Option<serde_yaml::Value>,
    crds: Option<serde_yaml::Value>,
    openapi: Option<serde_yaml::Value>,
    helm_charts: Option<serde_yaml::Value>,
    helm_globals: Option<serde_yaml::Value>,
    transformers: Option<serde_yaml::Value>,
    generators: Option<serde_yaml::Value>,
    validators: Option<serde_yaml::Value>,
    configurations: Option<serde_yaml::Value>,
    build_metadata: Option<serde_yaml::Value>,
}

/// An entry of `labels`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Labels {
    /// The labels.
    #[serde(default)]
    pub pairs: BTreeMap<String, String>,
    /// Also in selectors (and templates).
    #[serde(default)]
    pub include_selectors: bool,
    /// Also in pod templates.
    #[serde(default)]
    pub include_templates: bool,
}

/// An entry of `images`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Image {
    /// The image name to match (no tag).
    pub name: String,
    /// A new name.
    pub new_name: Option<String>,
    /// A new tag.
    pub new_tag: Option<String>,
    /// A digest (replaces the tag).
    pub digest: Option<String>,
}

/// An entry of `replicas`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replicas {
    /// The workload's name.
    pub name: String,
    /// The count.
    pub count: i64,
}

/// A ConfigMap or Secret generator.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Generator {
    /// The name (before prefix, suffix and hash).
    pub name: String,
    /// Its namespace.
    pub namespace: Option<String>,
    /// `create` (default), `merge` or `replace` (of a base's generated object).
    pub behavior: Option<String>,
    /// `KEY=VALUE` entries.
    #[serde(default)]
    pub literals: Vec<String>,
    /// Files (`PATH` or `KEY=PATH`).
    #[serde(default)]
    pub files: Vec<String>,
    /// Env files (`KEY=VALUE` lines).
    #[serde(default)]
    pub envs: Vec<String>,
    /// Deprecated single env file.
    pub env: Option<String>,
    /// Secret type (default `Opaque`).
    #[serde(rename = "type")]
    pub type_: Option<String>,
    /// Per-generator options.
    pub options: Option<GeneratorOptions>,
}

/// `generatorOptions`, or a generator's `options`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GeneratorOptions {
    /// Labels of generated objects.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations of generated objects.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// No content hash suffix.
    pub disable_name_suffix_hash: Option<bool>,
    /// `immutable: true` on generated objects.
    pub immutable: Option<bool>,
}

/// `sortOptions`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SortOptions {
    /// `legacy` or `fifo`.
    pub order: Option<String>,
    /// Options of the legacy order (custom kinds first and last).
    #[serde(rename = "legacySortOptions")]
    pub legacy_sort_options: Option<serde_yaml::Value>,
}

impl Kustomization {
    /// Parses a kustomization file; refuses unknown and not-yet-supported
    /// fields by name.
    pub fn parse(file: &str, text: &str) -> Result<Self, Failure> {
        let parsed: Kustomization = serde_yaml::from_str(text).map_err(|e| Failure {
            file: file.to_owned(),
            line: e.location().map(|l| l.line() as u32),
            message: e.to_string(),
        })?;
        let unsupported = [
            ("patches", parsed.patches.is_some()),
            (
                "patchesStrategicMerge",
                parsed.patches_strategic_merge.is_some(),
            ),
            ("patchesJson6902", parsed.patches_json6902.is_some()),
            ("components", parsed.components.is_some()),
            ("replacements", parsed.replacements.is_some()),
            ("vars", parsed.vars.is_some()),
            ("crds", parsed.crds.is_some()),
            ("openapi", parsed.openapi.is_some()),
            ("helmCharts", parsed.helm_charts.is_some()),
            ("helmGlobals", parsed.helm_globals.is_some()),
            ("transformers", parsed.transformers.is_some()),
            ("generators", parsed.generators.is_some()),
            ("validators", parsed.validators.is_some()),
            ("configurations", parsed.configurations.is_some()),
            ("buildMetadata", parsed.build_metadata.is_some()),
        ];
        if let Some((field, _)) = unsupported.iter().find(|(_, set)| *set) {
            return Err(Failure::new(
                file,
                format!("field `{field}` is not supported by Kiln's kustomize plugin yet"),
            ));
        }
        if parsed.kind.as_deref().is_some_and(|k| k != "Kustomization") {
            return Err(Failure::new(
                file,
                format!(
                    "kind {:?} is not supported (only Kustomization)",
                    parsed.kind.as_deref().unwrap_or_default()
                ),
            ));
        }
        if let Some(sort) = &parsed.sort_options
            && sort.order.as_deref().is_some_and(|o| o != "legacy")
        {
            return Err(Failure::new(
                file,
                "sortOptions: only `order: legacy` is supported yet",
            ));
        }
        Ok(parsed)
    }
}
