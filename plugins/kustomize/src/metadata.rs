//! `buildMetadata` of the kustomization being built: where every object
//! came from (`originAnnotations`) and who manages it (`managedByLabel`).

use serde_json::{Map, Value};

use crate::build::Res;

/// The label `managedByLabel` sets.
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Its value: what the kustomize built into kubectl (the oracle) writes.
const MANAGED_BY_VALUE: &str = "kustomize-(devel)";
/// The annotation `originAnnotations` sets.
const ORIGIN: &str = "config.kubernetes.io/origin";

/// `to` relative to the directory `from` (both relative to the source
/// root).
fn relative(from: &str, to: &str) -> String {
    let from: Vec<&str> = from.split('/').filter(|p| !p.is_empty()).collect();
    let to: Vec<&str> = to.split('/').filter(|p| !p.is_empty()).collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; from.len() - common];
    parts.extend(&to[common..]);
    parts.join("/")
}

fn map<'a>(value: &'a mut Value, field: &str) -> Option<&'a mut Map<String, Value>> {
    let metadata = value.get_mut("metadata")?.as_object_mut()?;
    let entry = metadata
        .entry(field)
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut()
}

/// Applies the root kustomization's `buildMetadata` options; `root` is its
/// directory.
pub fn apply(resources: &mut [Res], options: &[String], root: &str) {
    for res in resources {
        if options.iter().any(|o| o == "originAnnotations") {
            let origin = match res.generated {
                Some(kind) => format!(
                    "configuredIn: {}\nconfiguredBy:\n  apiVersion: builtin\n  kind: {}Generator\n",
                    relative(root, &res.origin),
                    kind.name()
                ),
                None => format!("path: {}\n", relative(root, &res.origin)),
            };
            if let Some(annotations) = map(&mut res.value, "annotations") {
                annotations.insert(ORIGIN.into(), origin.into());
            }
        }
        if options.iter().any(|o| o == "managedByLabel")
            && let Some(labels) = map(&mut res.value, "labels")
        {
            labels.insert(MANAGED_BY.into(), MANAGED_BY_VALUE.into());
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn paths_are_relative_to_the_root() {
        assert_eq!(super::relative("ov", "base/c.yaml"), "../base/c.yaml");
        assert_eq!(super::relative("ov", "ov/s.yaml"), "s.yaml");
        assert_eq!(super::relative("", "a/b.yaml"), "a/b.yaml");
    }
}
