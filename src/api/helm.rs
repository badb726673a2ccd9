//! `spec.source.helm`: Argo CD's Helm block, as Argo CD users write it,
//! and its mapping onto the `helm` plugin's parameters (which repeat:
//! `set`, `setString`, `valueFiles`, `apiVersions`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Argo CD's `spec.source.helm`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HelmSource {
    /// The release name (default: the Application's name, as in Argo CD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_name: Option<String>,
    /// Value files, relative to the chart (`-f`), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub value_files: Vec<String>,
    /// Values as a YAML text (applied after the value files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<String>,
    /// Values as an object (wins over `values`, as in Argo CD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown")]
    pub values_object: Option<serde_json::Value>,
    /// `--set` (or `--set-string` with `forceString`), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<HelmParameter>,
    /// `--set-file`: a value read from a file of the source.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub file_parameters: Vec<HelmFileParameter>,
    /// Leave out the chart's `crds/`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_crds: bool,
    /// The Kubernetes version templates see (default: the destination
    /// cluster's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_version: Option<String>,
    /// API versions templates see (default: those the destination serves).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_versions: Vec<String>,
    /// The release namespace (default: the destination namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Skip value files that do not exist instead of failing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignore_missing_value_files: bool,
}

fn preserve_unknown(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// One `--set`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HelmParameter {
    /// The value path (`image.tag`).
    pub name: String,
    /// The value.
    #[serde(default)]
    pub value: String,
    /// Always a string (`--set-string`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force_string: bool,
}

/// One `--set-file`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HelmFileParameter {
    /// The value path.
    pub name: String,
    /// The file, relative to the chart.
    pub path: String,
}

/// Where the inline values go: a file the host adds to the chart's view
/// (the plugin reads values only from files), passed last in `valueFiles`.
pub const INLINE_VALUES_FILE: &str = ".kiln-inline-values.yaml";

/// What the renderer needs that is not a plain parameter.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HelmPlan {
    /// The plugin's parameters, in order (keys repeat).
    pub params: Vec<(String, String)>,
    /// The inline values (`valuesObject`, else `values`) as YAML, to be
    /// served at [`INLINE_VALUES_FILE`] (already listed in `params`).
    pub inline_values: Option<String>,
    /// `fileParameters` the host must read from the source and pass as
    /// `setString` (`name`, path relative to the chart).
    pub file_parameters: Vec<(String, String)>,
    /// Value files the host must drop if missing (all of them, when
    /// `ignoreMissingValueFiles`).
    pub ignore_missing_value_files: bool,
}

/// Why the block cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("spec.source.helm.{field}: {message}")]
pub struct HelmSourceError {
    field: &'static str,
    message: String,
}

/// The cluster facts Argo CD passes unless the Application sets them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterFacts {
    /// The destination's version (`v1.31.2`), if known.
    pub kube_version: Option<String>,
    /// The group/versions and `group/version/Kind`s it serves.
    pub api_versions: Vec<String>,
}

impl HelmSource {
    /// Maps the block onto the `helm` plugin: `app_name` and
    /// `destination_namespace` are the defaults Argo CD uses;
    /// `cluster` fills `kubeVersion`/`apiVersions` the block leaves unset.
    pub fn plan(
        &self,
        app_name: &str,
        destination_namespace: &str,
        cluster: &ClusterFacts,
    ) -> Result<HelmPlan, HelmSourceError> {
        let mut params = Vec::new();
        let mut push = |k: &str, v: &str| params.push((k.to_owned(), v.to_owned()));
        push(
            "releaseName",
            self.release_name.as_deref().unwrap_or(app_name),
        );
        let namespace = self.namespace.as_deref().unwrap_or(destination_namespace);
        if !namespace.is_empty() {
            push("namespace", namespace);
        }
        for file in &self.value_files {
            if file.contains(',') {
                return Err(HelmSourceError {
                    field: "valueFiles",
                    message: format!("{file:?}: a file name with a comma is not supported"),
                });
            }
            push("valueFiles", file);
        }
        let inline_values = match (&self.values_object, &self.values) {
            (Some(object), _) => {
                Some(serde_yaml::to_string(object).map_err(|e| HelmSourceError {
                    field: "valuesObject",
                    message: e.to_string(),
                })?)
            }
            (None, Some(text)) if !text.trim().is_empty() => Some(text.clone()),
            _ => None,
        };
        if inline_values.is_some() {
            push("valueFiles", INLINE_VALUES_FILE);
        }
        for p in &self.parameters {
            if p.name.is_empty() {
                return Err(HelmSourceError {
                    field: "parameters",
                    message: "a parameter without a name".into(),
                });
            }
            let key = if p.force_string { "setString" } else { "set" };
            push(key, &format!("{}={}", p.name, p.value));
        }
        if self.skip_crds {
            push("skipCrds", "true");
        }
        if let Some(version) = self.kube_version.as_ref().or(cluster.kube_version.as_ref()) {
            push("kubeVersion", version);
        }
        let api_versions = if self.api_versions.is_empty() {
            &cluster.api_versions
        } else {
            &self.api_versions
        };
        for v in api_versions {
            push("apiVersions", v);
        }
        Ok(HelmPlan {
            params,
            inline_values,
            file_parameters: self
                .file_parameters
                .iter()
                .map(|f| (f.name.clone(), f.path.clone()))
                .collect(),
            ignore_missing_value_files: self.ignore_missing_value_files,
        })
    }
}

/// Escapes a file's content for `setString` (Helm's strvals: `,` and `\`
/// are special in a value).
pub fn escape_set_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, ',' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argo_cd_helm_block_maps_onto_repeated_plugin_parameters() {
        let block: HelmSource = serde_yaml::from_str(
            r#"
releaseName: web
valueFiles: [values-prod.yaml, values-eu.yaml]
valuesObject: {replicas: 3}
values: "ignored: true"
parameters:
- {name: image.tag, value: "1.2"}
- {name: image.tag, value: "1.3"}
- {name: port, value: "8080", forceString: true}
fileParameters:
- {name: config, path: files/app.conf}
skipCrds: true
apiVersions: [monitoring.coreos.com/v1]
ignoreMissingValueFiles: true
"#,
        )
        .unwrap();
        let cluster = ClusterFacts {
            kube_version: Some("v1.31.2".into()),
            api_versions: vec!["v1".into(), "apps/v1".into()],
        };
        let plan = block.plan("app", "prod", &cluster).unwrap();
        let want: Vec<(String, String)> = [
            ("releaseName", "web"),
            ("namespace", "prod"),
            ("valueFiles", "values-prod.yaml"),
            ("valueFiles", "values-eu.yaml"),
            ("valueFiles", INLINE_VALUES_FILE),
            ("set", "image.tag=1.2"),
            ("set", "image.tag=1.3"),
            ("setString", "port=8080"),
            ("skipCrds", "true"),
            ("kubeVersion", "v1.31.2"),
            ("apiVersions", "monitoring.coreos.com/v1"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        assert_eq!(plan.params, want);
        assert_eq!(plan.inline_values.as_deref(), Some("replicas: 3\n"));
        assert_eq!(
            plan.file_parameters,
            [("config".to_owned(), "files/app.conf".to_owned())]
        );
        assert!(plan.ignore_missing_value_files);
    }

    #[test]
    fn defaults_come_from_the_application_and_its_cluster() {
        let plan = HelmSource::default()
            .plan(
                "guestbook",
                "",
                &ClusterFacts {
                    kube_version: Some("v1.30.0".into()),
                    api_versions: vec!["batch/v1".into()],
                },
            )
            .unwrap();
        assert_eq!(
            plan.params,
            [
                ("releaseName".to_owned(), "guestbook".to_owned()),
                ("kubeVersion".to_owned(), "v1.30.0".to_owned()),
                ("apiVersions".to_owned(), "batch/v1".to_owned()),
            ]
        );
    }

    #[test]
    fn unusable_blocks_are_refused_by_field() {
        let block = HelmSource {
            parameters: vec![HelmParameter::default()],
            ..HelmSource::default()
        };
        let err = block.plan("a", "", &ClusterFacts::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.source.helm.parameters: a parameter without a name"
        );
        let block = HelmSource {
            value_files: vec!["a,b.yaml".into()],
            ..HelmSource::default()
        };
        assert!(block.plan("a", "", &ClusterFacts::default()).is_err());
        assert_eq!(escape_set_value("a,b\\c"), "a\\,b\\\\c");
    }
}
