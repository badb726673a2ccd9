//! The `kustomization.yaml` file: what is supported, and the fields that are
//! refused by name.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::Failure;
use crate::select::Selector;

/// The file names a kustomization may have, in kustomize's order.
pub const FILE_NAMES: &[&str] = &["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// One kustomization.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Kustomization {
    /// `kustomize.config.k8s.io/v1beta1` (checked loosely).
    pub api_version: Option<String>,
    /// `Kustomization` or `Component`.
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
    /// Output order.
    pub sort_options: Option<SortOptions>,
    /// Patches (strategic merge or JSON 6902), each on its `target` or on
    /// the object it names.
    #[serde(default)]
    pub patches: Vec<PatchEntry>,
    /// Deprecated: strategic merge patches, as file paths or inline YAML.
    #[serde(default)]
    pub patches_strategic_merge: Vec<String>,
    /// Deprecated: JSON 6902 patches with their target.
    #[serde(default)]
    pub patches_json6902: Vec<PatchEntry>,
    /// Components (`kind: Component` kustomizations) applied to this
    /// layer's resources.
    #[serde(default)]
    pub components: Vec<String>,
    /// Copies of field values from one object into others.
    #[serde(default)]
    pub replacements: Vec<ReplacementEntry>,
    /// CustomResourceDefinition files whose kinds are known to be
    /// namespaced (read; their schemas add nothing yet).
    #[serde(default)]
    pub crds: Vec<String>,
    /// `managedByLabel`, `originAnnotations` (of the root kustomization).
    #[serde(default)]
    pub build_metadata: Vec<String>,

    /// `$(NAME)` variables: a field of an object of the build.
    #[serde(default)]
    pub vars: Vec<crate::vars::Var>,
    /// Transformer configuration files (field specs extending the
    /// built-in transformations).
    #[serde(default)]
    pub configurations: Vec<String>,

    // Not supported: refused by name rather than ignored.
    openapi: Option<serde_yaml::Value>,
    helm_charts: Option<serde_yaml::Value>,
    helm_globals: Option<serde_yaml::Value>,
    helm_chart_inflation_generator: Option<serde_yaml::Value>,
    transformers: Option<serde_yaml::Value>,
    generators: Option<serde_yaml::Value>,
    validators: Option<serde_yaml::Value>,
}

/// An entry of `patches` (or `patchesJson6902`).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchEntry {
    /// A file holding the patch.
    pub path: Option<String>,
    /// The patch itself.
    pub patch: Option<String>,
    /// The objects it applies to (default: the object the patch names).
    pub target: Option<Selector>,
    /// `allowNameChange`, `allowKindChange`.
    #[serde(default)]
    pub options: PatchOptions,
}

/// Options of a patch.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchOptions {
    /// The patch may rename its target.
    #[serde(default)]
    pub allow_name_change: bool,
    /// The patch may change its target's kind.
    #[serde(default)]
    pub allow_kind_change: bool,
}

/// An entry of `replacements`: inline, or a file holding a list of them.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ReplacementEntry {
    /// `path: FILE`.
    File {
        /// The file.
        path: String,
    },
    /// A replacement written in the kustomization.
    Inline(crate::replace::Replacement),
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
    /// Appended to the tag (when neither `newTag` nor `digest` is given;
    /// drops the digest).
    pub tag_suffix: Option<String>,
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
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SortOptions {
    /// `legacy` (the default) or `fifo`.
    pub order: Option<String>,
    /// The kinds the legacy order puts first and last.
    pub legacy_sort_options: Option<LegacySortOptions>,
}

/// `sortOptions.legacySortOptions`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LegacySortOptions {
    /// Kinds first, in this order.
    #[serde(default)]
    pub order_first: Vec<String>,
    /// Kinds last, in this order.
    #[serde(default)]
    pub order_last: Vec<String>,
}

impl Kustomization {
    /// Parses a kustomization file; refuses unknown and not-yet-supported
    /// fields by name.
    pub fn parse(file: &str, text: &str) -> Result<Self, Failure> {
        crate::check_yaml(text).map_err(|e| Failure::from((file, e)))?;
        let parsed: Kustomization = serde_yaml::from_str(text).map_err(|e| Failure {
            file: file.to_owned(),
            line: e.location().map(|l| l.line() as u32),
            message: e.to_string(),
        })?;
        const HELM: &str = "it inflates Helm charts: that needs the helm program (a process) \
                            and usually a chart fetched from a repository (a network), and the \
                            sandbox has neither; render the chart with a Helm renderer instead";
        const PLUGINS: &str = "it loads kustomize plugins: exec and container (KRM function) \
                               plugins need a process, which the sandbox cannot start, and \
                               configurations of built-in plugins are not read yet";
        let unsupported = [
            (
                "openapi",
                parsed.openapi.is_some(),
                "it replaces the OpenAPI schema kustomize reads strategic merge keys and \
                 namespace scopes from (a schema file, or a bundled Kubernetes version), and \
                 Kiln's plugin has its own built-in tables and reads no schema",
            ),
            ("helmCharts", parsed.helm_charts.is_some(), HELM),
            ("helmGlobals", parsed.helm_globals.is_some(), HELM),
            (
                "helmChartInflationGenerator",
                parsed.helm_chart_inflation_generator.is_some(),
                HELM,
            ),
            ("transformers", parsed.transformers.is_some(), PLUGINS),
            ("generators", parsed.generators.is_some(), PLUGINS),
            ("validators", parsed.validators.is_some(), PLUGINS),
        ];
        if let Some((field, _, reason)) = unsupported.iter().find(|(_, set, _)| *set) {
            return Err(Failure::new(
                file,
                format!("field `{field}` is not supported by Kiln's kustomize plugin: {reason}"),
            ));
        }
        if let Some(kind) = parsed.kind.as_deref()
            && kind != "Kustomization"
            && kind != "Component"
        {
            return Err(Failure::new(
                file,
                format!("kind {kind:?} is not Kustomization or Component"),
            ));
        }
        if let Some(sort) = &parsed.sort_options
            && let Some(order) = sort.order.as_deref()
            && order != "legacy"
            && order != "fifo"
        {
            return Err(Failure::new(
                file,
                format!("sortOptions.order {order:?} is not legacy or fifo"),
            ));
        }
        for entry in &parsed.build_metadata {
            if !matches!(entry.as_str(), "managedByLabel" | "originAnnotations") {
                return Err(Failure::new(
                    file,
                    format!(
                        "buildMetadata {entry:?} is not supported (only managedByLabel and originAnnotations)"
                    ),
                ));
            }
        }
        Ok(parsed)
    }
}

/// Whether a kustomization's text sets nothing, which kustomize refuses
/// (`kustomization.yaml is empty`): no document, or only `apiVersion` and
/// `kind` and fields at Go's zero values (`null`, `""`, `false`, `0`). An
/// explicitly empty list or map (`[]`, `{}`, `metadata: {}`) is a value,
/// as for kustomize.
pub fn is_empty(text: &str) -> bool {
    fn zero(value: &serde_yaml::Value) -> bool {
        use serde_yaml::Value;
        match value {
            Value::Null => true,
            Value::Bool(b) => !b,
            Value::String(s) => s.is_empty(),
            Value::Number(n) => n.as_f64() == Some(0.0),
            _ => false,
        }
    }
    let Ok(value) = serde_yaml::from_str::<serde_yaml::Value>(text) else {
        return false;
    };
    match value {
        serde_yaml::Value::Null => true,
        serde_yaml::Value::Mapping(map) => map
            .iter()
            .all(|(key, value)| matches!(key.as_str(), Some("apiVersion" | "kind")) || zero(value)),
        _ => false,
    }
}

#[cfg(test)]
mod empty_tests {
    use super::is_empty;

    #[test]
    fn empty_as_kustomize_sees_it() {
        // Each checked with `kubectl kustomize` (v5.5).
        for text in [
            "",
            "# a comment\n",
            "---\n",
            "{}\n",
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n",
            "namePrefix: ''\nresources:\n",
            "metadata:\n",
        ] {
            assert!(is_empty(text), "{text:?}");
        }
        for text in [
            "resources: []\n",
            "commonLabels: {}\n",
            "namePrefix: p-\n",
            "metadata: {}\n",
            "buildMetadata: []\n",
        ] {
            assert!(!is_empty(text), "{text:?}");
        }
    }
}
