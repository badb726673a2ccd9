//! `configurations:`: transformer configuration files (kustomize's
//! `TransformerConfig`) whose field specs extend where the built-in
//! transformations work: name references, `$(VAR)` references, common
//! labels and annotations, name prefix and suffix, namespace, images and
//! replicas. A layer's configuration is its own files merged with its
//! bases' and components' (kustomize merges the whole tree's: an overlay
//! inherits its bases' configuration, a base never sees its overlay's).

use serde::Deserialize;

use serde_json::Value;

use crate::fieldspec::{self, FieldSpec};

/// The most field specs a build's configuration may hold, all tables
/// together (kustomize's built-in tables hold about 300; merging is
/// quadratic, so a configuration of millions of specs is refused).
pub const MAX_FIELD_SPECS: usize = 10_000;

/// One configuration file, or the merge of several.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TransformerConfig {
    /// Fields that take the name prefix.
    #[serde(default)]
    pub name_prefix: Vec<FieldSpec>,
    /// Fields that take the name suffix.
    #[serde(default)]
    pub name_suffix: Vec<FieldSpec>,
    /// Fields that take the namespace.
    #[serde(default)]
    pub namespace: Vec<FieldSpec>,
    /// Maps that take common labels (and `labels` with `includeSelectors`).
    #[serde(default)]
    pub common_labels: Vec<FieldSpec>,
    /// Maps that take common annotations.
    #[serde(default)]
    pub common_annotations: Vec<FieldSpec>,
    /// Fields naming other objects, by the kind they name.
    #[serde(default)]
    pub name_reference: Vec<NameBackReferences>,
    /// Fields where `$(VAR)` is replaced.
    #[serde(default)]
    pub var_reference: Vec<FieldSpec>,
    /// Fields holding image references.
    #[serde(default)]
    pub images: Vec<FieldSpec>,
    /// Fields holding replica counts.
    #[serde(default)]
    pub replicas: Vec<FieldSpec>,
    /// Maps that take the pairs of every `labels` entry.
    #[serde(default)]
    pub labels: Vec<FieldSpec>,
    /// Maps that take the pairs of `labels` entries with
    /// `includeTemplates` (and without `includeSelectors`).
    #[serde(default)]
    pub template_labels: Vec<FieldSpec>,
}

/// The fields that name objects of one kind (kustomize's
/// `NameBackReferences`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NameBackReferences {
    /// The named object's group (empty: any).
    #[serde(default)]
    pub group: String,
    /// The named object's version (empty: any).
    #[serde(default)]
    pub version: String,
    /// The named object's kind.
    #[serde(default)]
    pub kind: String,
    /// The fields naming it.
    #[serde(default, rename = "fieldSpecs")]
    pub field_specs: Vec<FieldSpec>,
}

impl NameBackReferences {
    /// Whether `object` is of the named kind (group and version when given).
    pub fn names(&self, object: &Value) -> bool {
        FieldSpec {
            group: self.group.clone(),
            version: self.version.clone(),
            kind: self.kind.clone(),
            ..FieldSpec::default()
        }
        .selects(object)
    }
}

impl TransformerConfig {
    /// The configuration of a layer without `configurations`: kustomize's
    /// built-in `varReference` table (the other built-in tables are the
    /// transformations' own).
    pub fn builtin() -> TransformerConfig {
        TransformerConfig {
            var_reference: builtin_var_references(),
            ..TransformerConfig::default()
        }
    }

    /// Parses a configuration file, refusing unknown fields.
    pub fn parse(text: &str) -> Result<TransformerConfig, String> {
        crate::check_yaml_text(text)?;
        if text.trim().is_empty() {
            return Ok(TransformerConfig::default());
        }
        let config: TransformerConfig =
            serde_yaml::from_str(text).map_err(|e| match e.location() {
                Some(at) => format!("line {}: {e}", at.line()),
                None => e.to_string(),
            })?;
        let all = config
            .name_prefix
            .iter()
            .chain(&config.name_suffix)
            .chain(&config.namespace)
            .chain(&config.common_labels)
            .chain(&config.common_annotations)
            .chain(&config.var_reference)
            .chain(&config.images)
            .chain(&config.replicas)
            .chain(&config.labels)
            .chain(&config.template_labels)
            .chain(config.name_reference.iter().flat_map(|n| &n.field_specs));
        for spec in all {
            if spec.path.split('/').all(str::is_empty) {
                return Err(format!("a field spec of {} has no path", spec.describe()));
            }
        }
        if let Some(reference) = config.name_reference.iter().find(|n| n.kind.is_empty()) {
            return Err(format!(
                "a nameReference entry has no kind ({} field specs)",
                reference.field_specs.len()
            ));
        }
        Ok(config)
    }

    /// The configured fields a `labels` entry adds its pairs to, as
    /// kustomize merges them: the `labels` table, then `commonLabels` with
    /// `includeSelectors`, else `templateLabels` with `includeTemplates`.
    pub fn label_specs(&self, selectors: bool, templates: bool) -> Result<Vec<FieldSpec>, String> {
        let mut specs = Vec::new();
        fieldspec::merge(&mut specs, &self.labels)?;
        if selectors {
            fieldspec::merge(&mut specs, &self.common_labels)?;
        } else if templates {
            fieldspec::merge(&mut specs, &self.template_labels)?;
        }
        Ok(specs)
    }

    /// The number of field specs, all tables together.
    fn len(&self) -> usize {
        self.name_prefix.len()
            + self.name_suffix.len()
            + self.namespace.len()
            + self.common_labels.len()
            + self.common_annotations.len()
            + self.var_reference.len()
            + self.images.len()
            + self.replicas.len()
            + self.labels.len()
            + self.template_labels.len()
            + self
                .name_reference
                .iter()
                .map(|n| n.field_specs.len() + 1)
                .sum::<usize>()
    }

    /// Adds `other` (kustomize's merge: a field already listed is kept
    /// once; the same field with another `create` is an error).
    pub fn merge(&mut self, other: &TransformerConfig) -> Result<(), String> {
        if self.len().saturating_add(other.len()) > MAX_FIELD_SPECS {
            return Err(format!(
                "more than {MAX_FIELD_SPECS} field specs in the build's configurations"
            ));
        }
        let tables = [
            ("namePrefix", &mut self.name_prefix, &other.name_prefix),
            ("nameSuffix", &mut self.name_suffix, &other.name_suffix),
            ("namespace", &mut self.namespace, &other.namespace),
            (
                "commonLabels",
                &mut self.common_labels,
                &other.common_labels,
            ),
            (
                "commonAnnotations",
                &mut self.common_annotations,
                &other.common_annotations,
            ),
            (
                "varReference",
                &mut self.var_reference,
                &other.var_reference,
            ),
            ("images", &mut self.images, &other.images),
            ("replicas", &mut self.replicas, &other.replicas),
            ("labels", &mut self.labels, &other.labels),
            (
                "templateLabels",
                &mut self.template_labels,
                &other.template_labels,
            ),
        ];
        for (name, mine, theirs) in tables {
            fieldspec::merge(mine, theirs).map_err(|e| format!("{name}: {e}"))?;
        }
        for incoming in &other.name_reference {
            let same_target = self.name_reference.iter_mut().find(|n| {
                n.group == incoming.group
                    && n.version == incoming.version
                    && n.kind == incoming.kind
            });
            match same_target {
                Some(existing) => {
                    fieldspec::merge(&mut existing.field_specs, &incoming.field_specs)
                        .map_err(|e| format!("nameReference to {}: {e}", incoming.kind))?
                }
                None => self.name_reference.push(incoming.clone()),
            }
        }
        Ok(())
    }
}

/// The kinds whose pods kustomize's built-in `varReference` table covers,
/// with the path to their pod spec, and to their volumes (CronJob's
/// volumes path is kustomize's, without the inner `spec`).
const POD_KINDS: &[(&str, &str, &str)] = &[
    (
        "CronJob",
        "spec/jobTemplate/spec/template/spec",
        "spec/jobTemplate/spec/template/volumes",
    ),
    (
        "DaemonSet",
        "spec/template/spec",
        "spec/template/spec/volumes",
    ),
    (
        "Deployment",
        "spec/template/spec",
        "spec/template/spec/volumes",
    ),
    ("Job", "spec/template/spec", "spec/template/spec/volumes"),
    ("Pod", "spec", "spec/volumes"),
    (
        "ReplicaSet",
        "spec/template/spec",
        "spec/template/spec/volumes",
    ),
    ("StatefulSet", "spec/template/spec", ""),
];

/// kustomize's built-in `varReference` table: where `$(VAR)` is replaced
/// when no configuration adds more.
pub fn builtin_var_references() -> Vec<FieldSpec> {
    let mut specs = Vec::new();
    for (kind, pod, volumes) in POD_KINDS {
        for list in ["containers", "initContainers"] {
            for field in ["args", "command", "env/value", "volumeMounts/mountPath"] {
                specs.push(FieldSpec::of(kind, &format!("{pod}/{list}/{field}")));
            }
        }
        if !volumes.is_empty() {
            specs.push(FieldSpec::of(kind, &format!("{volumes}/nfs/server")));
        }
    }
    specs.push(FieldSpec::of(
        "StatefulSet",
        "spec/volumeClaimTemplates/spec/nfs/server",
    ));
    specs.push(FieldSpec::of(
        "Deployment",
        "spec/template/metadata/annotations",
    ));
    for path in ["spec/rules/host", "spec/tls/hosts", "spec/tls/secretName"] {
        specs.push(FieldSpec::of("Ingress", path));
    }
    for path in ["spec/ports/port", "spec/ports/targetPort"] {
        specs.push(FieldSpec::of("Service", path));
    }
    specs.push(FieldSpec::of("PersistentVolume", "spec/nfs/server"));
    specs.push(FieldSpec::any("metadata/labels"));
    specs.push(FieldSpec::any("metadata/annotations"));
    specs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_var_reference_table_has_kustomizes_size() {
        // kustomize v5.5's varreference.go lists 72 field specs.
        assert_eq!(builtin_var_references().len(), 72);
    }

    #[test]
    fn unknown_tables_and_fields_are_refused() {
        assert!(TransformerConfig::parse("nameRefrence: []\n").is_err());
        // Not in kustomize v5.5 (added later): unknown, as kubectl's kustomize says.
        assert!(TransformerConfig::parse("volumeClaimTemplateLabels: []\n").is_err());
        assert!(TransformerConfig::parse("images:\n- kind: Foo\n").is_err());
    }

    #[test]
    fn the_number_of_field_specs_is_bounded() {
        let huge: String = (0..MAX_FIELD_SPECS)
            .map(|i| format!("- {{kind: K, path: spec/f{i}}}\n"))
            .collect();
        let config = TransformerConfig::parse(&format!("images:\n{huge}")).unwrap();
        let error = TransformerConfig::builtin().merge(&config).unwrap_err();
        assert!(error.contains("more than 10000 field specs"), "{error}");
    }

    #[test]
    fn merging_name_references_groups_them_by_target() {
        let mut a = TransformerConfig::parse(
            "nameReference:\n- kind: ConfigMap\n  fieldSpecs:\n  - {kind: Foo, path: spec/a}\n",
        )
        .unwrap();
        let b = TransformerConfig::parse(
            "nameReference:\n- kind: ConfigMap\n  fieldSpecs:\n  - {kind: Foo, path: spec/a}\n  - {kind: Foo, path: spec/b}\n",
        )
        .unwrap();
        a.merge(&b).unwrap();
        assert_eq!(a.name_reference.len(), 1);
        assert_eq!(a.name_reference[0].field_specs.len(), 2);
    }
}
