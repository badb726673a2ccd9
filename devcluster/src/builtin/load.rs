//! Parsing and checking the embedded data.

use std::collections::{HashMap, HashSet};

use serde::Deserialize;
use serde_json::{Map, Value};

use super::catalog::{BuiltinResource, Catalog, REF_PREFIX};

/// Why the embedded built-in API data is unusable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// A file is not the JSON it should be.
    #[error("built-in API data {file}: {source}")]
    Json {
        /// `resources.json` or `definitions.json`.
        file: &'static str,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// A file describes another Kubernetes release than the code expects.
    #[error("built-in API data {file} describes Kubernetes {found}, expected {expected}")]
    Version {
        /// The file.
        file: &'static str,
        /// The release it names.
        found: String,
        /// [`super::KUBERNETES_VERSION`].
        expected: &'static str,
    },
    /// A resource is listed twice.
    #[error("built-in resource {resource} is listed twice")]
    Duplicate {
        /// `group/version/plural`.
        resource: String,
    },
    /// A resource's kind has no schema.
    #[error("built-in resource {resource}: no definition has kind {kind}")]
    NoDefinition {
        /// `group/version/plural`.
        resource: String,
        /// The kind.
        kind: String,
    },
    /// Two definitions claim the kind of a served resource.
    #[error("built-in resource {resource}: definitions {first} and {second} both claim its kind")]
    AmbiguousDefinition {
        /// `group/version/plural`.
        resource: String,
        /// One definition.
        first: String,
        /// The other.
        second: String,
    },
    /// A resource entry is malformed (no verbs, unknown verb, a `scale`
    /// subresource without replica paths...).
    #[error("built-in resource {resource}: {problem}")]
    Resource {
        /// `group/version/plural`.
        resource: String,
        /// What is wrong.
        problem: String,
    },
    /// A definition refers to one that does not exist.
    #[error("definition {definition} refers to missing {reference}")]
    UnknownReference {
        /// The referring definition.
        definition: String,
        /// The reference.
        reference: String,
    },
}

const RESOURCES_FILE: &str = "resources.json";
const DEFINITIONS_FILE: &str = "definitions.json";

/// The verbs discovery may list.
const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

#[derive(Deserialize)]
struct About {
    kubernetes: String,
}

#[derive(Deserialize)]
struct ResourcesFile {
    about: About,
    resources: Vec<BuiltinResource>,
}

#[derive(Deserialize)]
struct DefinitionsFile {
    about: About,
    definitions: Map<String, Value>,
}

/// Parses and checks the two files.
pub(super) fn parse(resources: &str, definitions: &str) -> Result<Catalog, LoadError> {
    let resources: ResourcesFile =
        serde_json::from_str(resources).map_err(|source| LoadError::Json {
            file: RESOURCES_FILE,
            source,
        })?;
    let definitions: DefinitionsFile =
        serde_json::from_str(definitions).map_err(|source| LoadError::Json {
            file: DEFINITIONS_FILE,
            source,
        })?;
    for (file, about) in [
        (RESOURCES_FILE, &resources.about),
        (DEFINITIONS_FILE, &definitions.about),
    ] {
        if about.kubernetes != super::KUBERNETES_VERSION {
            return Err(LoadError::Version {
                file,
                found: about.kubernetes.clone(),
                expected: super::KUBERNETES_VERSION,
            });
        }
    }
    let definitions = definitions.definitions;
    check_references(&definitions)?;
    let claims = kind_claims(&definitions);
    let mut by_gvk = HashMap::new();
    let mut seen = HashSet::new();
    for resource in &resources.resources {
        let id = format!("{}/{}/{}", resource.group, resource.version, resource.name);
        if !seen.insert((&resource.group, &resource.version, &resource.name)) {
            return Err(LoadError::Duplicate { resource: id });
        }
        check_resource(resource, &id)?;
        let key = (
            resource.group.clone(),
            resource.version.clone(),
            resource.kind.clone(),
        );
        match claims.get(&key).map(Vec::as_slice) {
            None | Some([]) => {
                return Err(LoadError::NoDefinition {
                    resource: id,
                    kind: resource.kind.clone(),
                });
            }
            Some([name]) => {
                by_gvk.insert(key, name.clone());
            }
            Some([first, second, ..]) => {
                return Err(LoadError::AmbiguousDefinition {
                    resource: id,
                    first: first.clone(),
                    second: second.clone(),
                });
            }
        }
    }
    // Kinds that are not resources (Scale, Eviction, DeleteOptions...) are
    // found too when only one definition claims them.
    for (key, names) in claims {
        if let [name] = names.as_slice() {
            by_gvk.entry(key).or_insert_with(|| name.clone());
        }
    }
    Ok(Catalog {
        resources: resources.resources,
        definitions,
        by_gvk,
    })
}

fn check_resource(resource: &BuiltinResource, id: &str) -> Result<(), LoadError> {
    let problem = |problem: String| LoadError::Resource {
        resource: id.to_owned(),
        problem,
    };
    if resource.verbs.is_empty() {
        return Err(problem("no verbs".into()));
    }
    let all_verbs = resource
        .verbs
        .iter()
        .chain(resource.subresources.iter().flat_map(|s| &s.verbs));
    if let Some(verb) = all_verbs
        .into_iter()
        .find(|verb| !VERBS.contains(&verb.as_str()))
    {
        return Err(problem(format!("unknown verb {verb:?}")));
    }
    let mut names = HashSet::new();
    for sub in &resource.subresources {
        if !names.insert(&sub.name) {
            return Err(problem(format!("subresource {} listed twice", sub.name)));
        }
        if sub.name == "scale" && sub.spec_replicas_path.is_none() {
            return Err(problem("scale subresource without specReplicasPath".into()));
        }
    }
    Ok(())
}

/// (group, version, kind) → the definitions that declare it in
/// `x-kubernetes-group-version-kind`.
fn kind_claims(definitions: &Map<String, Value>) -> HashMap<(String, String, String), Vec<String>> {
    let mut claims: HashMap<_, Vec<String>> = HashMap::new();
    for (name, definition) in definitions {
        let Some(Value::Array(kinds)) = definition.get("x-kubernetes-group-version-kind") else {
            continue;
        };
        for gvk in kinds {
            let text = |field: &str| gvk.get(field).and_then(Value::as_str).map(str::to_owned);
            if let (Some(group), Some(version), Some(kind)) =
                (text("group"), text("version"), text("kind"))
            {
                claims
                    .entry((group, version, kind))
                    .or_default()
                    .push(name.clone());
            }
        }
    }
    claims
}

/// Every `$ref` names a definition that exists.
fn check_references(definitions: &Map<String, Value>) -> Result<(), LoadError> {
    fn walk(node: &Value, definitions: &Map<String, Value>) -> Result<(), String> {
        match node {
            Value::Object(map) => {
                if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
                    let known = reference
                        .strip_prefix(REF_PREFIX)
                        .is_some_and(|name| definitions.contains_key(name));
                    if !known {
                        return Err(reference.to_owned());
                    }
                }
                map.values().try_for_each(|v| walk(v, definitions))
            }
            Value::Array(items) => items.iter().try_for_each(|v| walk(v, definitions)),
            _ => Ok(()),
        }
    }
    for (name, definition) in definitions {
        walk(definition, definitions).map_err(|reference| LoadError::UnknownReference {
            definition: name.clone(),
            reference,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{DEFINITIONS, RESOURCES};
    use super::*;

    fn definitions_with(extra: &str) -> String {
        format!(
            r#"{{"about":{{"kubernetes":"v1.32.0"}},"definitions":{{
            "io.k8s.api.core.v1.ConfigMap":{{"type":"object","properties":{{"data":{{"type":"object"}}}},
              "x-kubernetes-group-version-kind":[{{"group":"","version":"v1","kind":"ConfigMap"}}]}}{extra}}}}}"#
        )
    }

    fn resources_with(rows: &str) -> String {
        format!(r#"{{"about":{{"kubernetes":"v1.32.0"}},"resources":[{rows}]}}"#)
    }

    const CONFIGMAPS: &str = r#"{"group":"","version":"v1","name":"configmaps","kind":"ConfigMap","namespaced":true,"verbs":["get"]}"#;

    #[test]
    fn the_embedded_data_loads() {
        let catalog = parse(RESOURCES, DEFINITIONS).expect("embedded data is consistent");
        assert!(
            catalog.resources().len() >= 59,
            "{}",
            catalog.resources().len()
        );
        assert_eq!(
            catalog.definition_name("policy", "v1", "PodDisruptionBudget"),
            Some("io.k8s.api.policy.v1.PodDisruptionBudget")
        );
        // Kinds that are not resources resolve too.
        assert_eq!(
            catalog.definition_name("autoscaling", "v1", "Scale"),
            Some("io.k8s.api.autoscaling.v1.Scale")
        );
    }

    #[test]
    fn the_embedded_definitions_are_kubernetes_1_32() {
        let catalog = parse(RESOURCES, DEFINITIONS).unwrap();
        let defined = |prefix: &str| catalog.definitions().keys().any(|k| k.starts_with(prefix));
        // New in 1.32.
        assert!(defined("io.k8s.api.coordination.v1alpha2.LeaseCandidate"));
        assert!(defined("io.k8s.api.resource.v1beta1."));
        // New in 1.33.
        assert!(!defined("io.k8s.api.resource.v1beta2."));
        assert!(!defined("io.k8s.api.coordination.v1beta1."));
        // Removed in 1.32.
        assert!(!defined("io.k8s.api.flowcontrol.v1beta3."));
        // Removed long before.
        assert!(!defined("io.k8s.api.policy.v1beta1.PodSecurityPolicy"));
        assert!(!defined("io.k8s.api.extensions."));
    }

    #[test]
    fn a_minimal_catalog_loads() {
        let catalog = parse(&resources_with(CONFIGMAPS), &definitions_with("")).unwrap();
        assert_eq!(catalog.resources().len(), 1);
        assert!(catalog.schema("", "v1", "ConfigMap").is_some());
    }

    #[test]
    fn broken_json_is_an_error_naming_the_file() {
        let error = parse("{", &definitions_with("")).unwrap_err();
        assert!(
            matches!(
                error,
                LoadError::Json {
                    file: "resources.json",
                    ..
                }
            ),
            "{error}"
        );
        let error = parse(&resources_with(CONFIGMAPS), "[]").unwrap_err();
        assert!(error.to_string().contains("definitions.json"), "{error}");
    }

    #[test]
    fn another_release_is_refused() {
        let resources = resources_with(CONFIGMAPS).replace("v1.32.0", "v1.31.0");
        let error = parse(&resources, &definitions_with("")).unwrap_err();
        assert!(matches!(error, LoadError::Version { .. }), "{error}");
    }

    #[test]
    fn a_resource_without_a_schema_is_refused() {
        let rows = CONFIGMAPS.replace("ConfigMap", "Secret");
        let error = parse(&resources_with(&rows), &definitions_with("")).unwrap_err();
        assert!(matches!(error, LoadError::NoDefinition { .. }), "{error}");
    }

    #[test]
    fn a_duplicate_resource_is_refused() {
        let rows = format!("{CONFIGMAPS},{CONFIGMAPS}");
        let error = parse(&resources_with(&rows), &definitions_with("")).unwrap_err();
        assert!(matches!(error, LoadError::Duplicate { .. }), "{error}");
    }

    #[test]
    fn an_unknown_verb_is_refused() {
        let rows = CONFIGMAPS.replace(r#"["get"]"#, r#"["get","steal"]"#);
        let error = parse(&resources_with(&rows), &definitions_with("")).unwrap_err();
        assert!(error.to_string().contains("steal"), "{error}");
    }

    #[test]
    fn an_unknown_field_in_a_resource_is_refused() {
        let rows = CONFIGMAPS.replace(r#""verbs""#, r#""shortname":["cm"],"verbs""#);
        let error = parse(&resources_with(&rows), &definitions_with("")).unwrap_err();
        assert!(matches!(error, LoadError::Json { .. }), "{error}");
    }

    #[test]
    fn a_dangling_reference_is_refused() {
        let extra = r##","io.k8s.api.core.v1.Pod":{"properties":{"spec":{"$ref":"#/components/schemas/io.k8s.api.core.v1.PodSpec"}}}"##;
        let error = parse(&resources_with(CONFIGMAPS), &definitions_with(extra)).unwrap_err();
        assert!(
            matches!(&error, LoadError::UnknownReference { reference, .. } if reference.ends_with("PodSpec")),
            "{error}"
        );
    }

    #[test]
    fn a_reference_cycle_does_not_hang_resolution() {
        let extra =
            r##","a":{"$ref":"#/components/schemas/b"},"b":{"$ref":"#/components/schemas/a"}"##;
        let catalog = parse(&resources_with(CONFIGMAPS), &definitions_with(extra)).unwrap();
        let node = serde_json::json!({"$ref": "#/components/schemas/a"});
        let resolved = catalog.resolve(&node);
        assert!(resolved.get("$ref").is_some());
    }
}
