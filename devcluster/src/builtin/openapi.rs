//! OpenAPI v3 `components.schemas` for a group version's document.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::catalog::{Catalog, REF_PREFIX};

impl Catalog {
    /// The definitions a group version's OpenAPI v3 document carries: those
    /// of its served kinds and of their `List`s, and everything they refer
    /// to, by name. Empty for a group version the catalog does not serve.
    pub fn components(&self, group: &str, version: &str) -> Map<String, Value> {
        let mut pending: Vec<&str> = self
            .resources
            .iter()
            .filter(|r| r.group == group && r.version == version)
            .flat_map(|r| {
                [
                    self.definition_name(group, version, &r.kind),
                    self.definition_name(group, version, &format!("{}List", r.kind)),
                ]
            })
            .flatten()
            .collect();
        let mut names = BTreeSet::new();
        while let Some(name) = pending.pop() {
            if !names.insert(name) {
                continue;
            }
            if let Some(definition) = self.definitions.get(name) {
                references(definition, &mut pending);
            }
        }
        names
            .into_iter()
            .filter_map(|name| Some((name.to_owned(), self.definitions.get(name)?.clone())))
            .collect()
    }
}

/// Adds the definition names a schema refers to.
fn references<'a>(node: &'a Value, out: &mut Vec<&'a str>) {
    match node {
        Value::Object(map) => {
            if let Some(name) = map
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(REF_PREFIX))
            {
                out.push(name);
            }
            map.values().for_each(|v| references(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| references(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::super::catalog;

    #[test]
    fn a_group_version_carries_its_kinds_and_what_they_use() {
        let catalog = catalog().unwrap();
        let apps = catalog.components("apps", "v1");
        for name in [
            "io.k8s.api.apps.v1.Deployment",
            "io.k8s.api.apps.v1.DeploymentList",
            "io.k8s.api.core.v1.PodSpec",
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
            "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
        ] {
            assert!(apps.contains_key(name), "{name}");
        }
        assert!(!apps.contains_key("io.k8s.api.batch.v1.Job"));
    }

    #[test]
    fn an_unserved_group_version_has_nothing() {
        let catalog = catalog().unwrap();
        assert!(catalog.components("policy", "v1beta1").is_empty());
        assert!(catalog.components("resource.k8s.io", "v1beta1").is_empty());
    }
}
