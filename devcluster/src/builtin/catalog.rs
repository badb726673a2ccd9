//! The parsed built-in API: resources and OpenAPI definitions, with lookups.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value};

/// A group, version and kind (`""` group for the core group).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Deserialize)]
pub struct GroupVersionKind {
    /// API group.
    pub group: String,
    /// Version.
    pub version: String,
    /// Kind.
    pub kind: String,
}

/// A subresource of a built-in resource (`status`, `scale`, `log`...).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Subresource {
    /// `status`, `scale`, ...
    pub name: String,
    /// Its verbs, as discovery lists them.
    pub verbs: Vec<String>,
    /// The kind it reads and writes when not the resource's own
    /// (`autoscaling/v1` `Scale` for `scale`).
    #[serde(default)]
    pub response_kind: Option<GroupVersionKind>,
    /// For `scale`: where the desired replicas are (`.spec.replicas`).
    #[serde(default)]
    pub spec_replicas_path: Option<String>,
    /// For `scale`: where the observed replicas are (`.status.replicas`).
    #[serde(default)]
    pub status_replicas_path: Option<String>,
}

/// One built-in resource at one version, as a 1.32 API server serves it.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BuiltinResource {
    /// API group (`""` for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural name, used in URLs.
    pub name: String,
    /// Kind.
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Verbs, as discovery lists them.
    pub verbs: Vec<String>,
    /// `kubectl` short names.
    #[serde(default)]
    pub short_names: Vec<String>,
    /// Categories (`all`, `api-extensions`).
    #[serde(default)]
    pub categories: Vec<String>,
    /// Whether the API server sets and bumps `metadata.generation`.
    #[serde(default)]
    pub generation: bool,
    /// Subresources.
    #[serde(default)]
    pub subresources: Vec<Subresource>,
}

impl BuiltinResource {
    /// The singular name: the lower-cased kind, as 1.32 reports it.
    pub fn singular(&self) -> String {
        self.kind.to_lowercase()
    }

    /// The named subresource, if the resource has it.
    pub fn subresource(&self, name: &str) -> Option<&Subresource> {
        self.subresources.iter().find(|s| s.name == name)
    }

    /// True when the resource can only be created (the access and token
    /// reviews, `bindings`): nothing is stored, the answer is computed.
    pub fn create_only(&self) -> bool {
        self.verbs.iter().all(|verb| verb == "create")
    }
}

/// The built-in API of one Kubernetes release.
#[derive(Debug)]
pub struct Catalog {
    pub(super) resources: Vec<BuiltinResource>,
    pub(super) definitions: Map<String, Value>,
    /// (group, version, kind) → definition name.
    pub(super) by_gvk: HashMap<(String, String, String), String>,
}

/// How deep [`Catalog::resolve`] follows chains of references before giving
/// up (the published definitions never chain more than once).
const MAX_REF_DEPTH: usize = 8;

/// The prefix of every reference in the embedded definitions.
pub(super) const REF_PREFIX: &str = "#/components/schemas/";

impl Catalog {
    /// Every served resource, in the order of the data (by group, version,
    /// name).
    pub fn resources(&self) -> &[BuiltinResource] {
        &self.resources
    }

    /// A served resource by group, version and plural.
    pub fn resource(&self, group: &str, version: &str, plural: &str) -> Option<&BuiltinResource> {
        self.resources
            .iter()
            .find(|r| r.group == group && r.version == version && r.name == plural)
    }

    /// Every OpenAPI definition, by name (`io.k8s.api.apps.v1.Deployment`).
    pub fn definitions(&self) -> &Map<String, Value> {
        &self.definitions
    }

    /// One definition by name.
    pub fn definition(&self, name: &str) -> Option<&Value> {
        self.definitions.get(name)
    }

    /// The name of the definition of a kind at a version.
    pub fn definition_name(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.by_gvk
            .get(&(group.to_owned(), version.to_owned(), kind.to_owned()))
            .map(String::as_str)
    }

    /// The schema of a kind at a version.
    pub fn schema(&self, group: &str, version: &str, kind: &str) -> Option<&Value> {
        self.definition(self.definition_name(group, version, kind)?)
    }

    /// The schema a node stands for: the definition its `$ref` names (also
    /// when wrapped in a one-element `allOf`, as OpenAPI v3 documents do),
    /// else the node itself. An unknown reference resolves to the node.
    pub fn resolve<'a>(&'a self, mut node: &'a Value) -> &'a Value {
        for _ in 0..MAX_REF_DEPTH {
            match reference(node).and_then(|name| self.definitions.get(name)) {
                Some(target) => node = target,
                None => break,
            }
        }
        node
    }

    /// The schema of field `name` of an object node (following references):
    /// its declared property, else its `additionalProperties` schema (the
    /// values of a map). Unresolved, so the extensions beside a `$ref`
    /// stay visible; `None` for a field the schema does not allow.
    pub fn field<'a>(&'a self, node: &'a Value, name: &str) -> Option<&'a Value> {
        let node = self.resolve(node);
        node.get("properties")
            .and_then(|properties| properties.get(name))
            .or_else(|| {
                node.get("additionalProperties")
                    .filter(|extra| extra.is_object())
            })
    }

    /// The schema of the items of an array node (following references).
    pub fn items<'a>(&'a self, node: &'a Value) -> Option<&'a Value> {
        self.resolve(node).get("items")
    }

    /// The value of an extension (`x-kubernetes-list-type`...) on a node or,
    /// when the node does not carry it, on the definition it refers to.
    pub fn extension<'a>(&'a self, node: &'a Value, name: &str) -> Option<&'a Value> {
        node.get(name).or_else(|| self.resolve(node).get(name))
    }
}

/// The definition name a node refers to, if it is a reference.
pub(super) fn reference(node: &Value) -> Option<&str> {
    let target = node.get("$ref").or_else(|| match node.get("allOf") {
        Some(Value::Array(all)) if all.len() == 1 => all[0].get("$ref"),
        _ => None,
    })?;
    target.as_str()?.strip_prefix(REF_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::super::catalog;

    #[test]
    fn walking_a_kind_follows_references() {
        let catalog = catalog().unwrap();
        let deployment = catalog.schema("apps", "v1", "Deployment").unwrap();
        let spec = catalog.field(deployment, "spec").unwrap();
        let template = catalog.field(spec, "template").unwrap();
        let pod = catalog.field(template, "spec").unwrap();
        let containers = catalog.field(pod, "containers").unwrap();
        assert_eq!(
            catalog.extension(containers, "x-kubernetes-list-map-keys"),
            Some(&serde_json::json!(["name"]))
        );
        let container = catalog.items(containers).unwrap();
        let image = catalog.field(container, "image").unwrap();
        assert_eq!(image["type"], "string");
        // A map's values.
        let resources = catalog.field(container, "resources").unwrap();
        let limits = catalog.field(resources, "limits").unwrap();
        let quantity = catalog.resolve(catalog.field(limits, "cpu").unwrap());
        assert_eq!(quantity, &serde_json::json!({"type": "string"}));
        // An extension on the referenced definition.
        let selector = catalog.field(spec, "selector").unwrap();
        assert_eq!(
            catalog.extension(selector, "x-kubernetes-map-type"),
            Some(&serde_json::json!("atomic"))
        );
        assert!(catalog.field(spec, "noSuchField").is_none());
        let strategy = catalog.field(spec, "strategy").unwrap();
        let rolling = catalog.field(strategy, "rollingUpdate").unwrap();
        let surge = catalog.resolve(catalog.field(rolling, "maxSurge").unwrap());
        assert_eq!(surge["format"], "int-or-string");
    }
}
