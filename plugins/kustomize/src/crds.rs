//! `crds:`: OpenAPI definitions of custom kinds (kube-openapi's
//! `{"<package>.<Kind>": {"Schema": ...}}` map, JSON or YAML) whose
//! `x-kubernetes-*` extensions tell the build which fields of those kinds
//! are name references, label selectors, annotations or names.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// A field of a custom kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSpec {
    /// The kind (any group and version).
    pub kind: String,
    /// The path to the field.
    pub path: Vec<String>,
}

/// A field of a custom kind that names another object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The kind it names.
    pub target: String,
    /// Where, and in which kind.
    pub field: FieldSpec,
}

/// What the `crds` files of a build add to its field tables.
#[derive(Debug, Clone, Default)]
pub struct CrdConfig {
    /// `x-kubernetes-annotation`: common annotations go there too.
    pub annotations: Vec<FieldSpec>,
    /// `x-kubernetes-label-selector`: common labels go there too.
    pub labels: Vec<FieldSpec>,
    /// `x-kubernetes-identity`: the name prefix goes there too.
    pub identity: Vec<FieldSpec>,
    /// `x-kubernetes-object-ref-kind` (with `-name-key`, default `name`).
    pub references: Vec<Reference>,
}

impl CrdConfig {
    /// Adds the definitions of one file.
    pub fn load(&mut self, text: &str) -> Result<(), String> {
        crate::check_yaml_text(text)?;
        let definitions: Map<String, Value> = serde_yaml::from_str(text)
            .map_err(|e| format!("not an OpenAPI definitions map: {e}"))?;
        for (type_name, definition) in &definitions {
            let properties = &definition["Schema"]["properties"];
            let is_resource = ["kind", "apiVersion", "metadata"]
                .iter()
                .all(|p| properties.get(*p).is_some());
            if !is_resource {
                continue;
            }
            let kind = type_name.rsplit('.').next().unwrap_or(type_name).to_owned();
            let mut seen = BTreeSet::new();
            self.walk(&definitions, &kind, properties, &mut Vec::new(), &mut seen);
        }
        Ok(())
    }

    fn walk(
        &mut self,
        definitions: &Map<String, Value>,
        kind: &str,
        properties: &Value,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) {
        let Some(properties) = properties.as_object() else {
            return;
        };
        for (name, property) in properties {
            path.push(name.clone());
            let spec = || FieldSpec {
                kind: kind.to_owned(),
                path: path.clone(),
            };
            let extension = |key: &str| property.get(key).and_then(Value::as_str);
            if extension("x-kubernetes-annotation").is_some() {
                self.annotations.push(spec());
            }
            if extension("x-kubernetes-label-selector").is_some() {
                self.labels.push(spec());
            }
            if extension("x-kubernetes-identity").is_some() {
                self.identity.push(spec());
            }
            if let (Some(_), Some(target)) = (
                extension("x-kubernetes-object-ref-api-version"),
                extension("x-kubernetes-object-ref-kind"),
            ) {
                let mut field = spec();
                field.path.push(
                    extension("x-kubernetes-object-ref-name-key")
                        .unwrap_or("name")
                        .to_owned(),
                );
                self.references.push(Reference {
                    target: target.to_owned(),
                    field,
                });
            }
            if let Some(reference) = property.get("$ref").and_then(Value::as_str)
                && let Some(definition) = definitions.get(reference)
                && seen.insert(reference.to_owned())
            {
                self.walk(
                    definitions,
                    kind,
                    &definition["Schema"]["properties"],
                    path,
                    seen,
                );
                seen.remove(reference);
            }
            if let Some(nested) = property.get("properties") {
                self.walk(definitions, kind, nested, path, seen);
            }
            path.pop();
        }
    }
}

/// The maps at `path` of `value`, never created; `None` when the path does
/// not lead to a map.
pub fn map_at<'a>(value: &'a mut Value, path: &[String]) -> Option<&'a mut Map<String, Value>> {
    let mut current = value;
    for key in path {
        current = current.get_mut(key)?;
    }
    current.as_object_mut()
}
