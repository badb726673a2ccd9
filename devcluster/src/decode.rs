//! What decoding a built-in kind into its Go type does to an object, which
//! the API server then stores: explicit `null`s vanish (a nil pointer, slice
//! or map is omitted when encoded again), a `null` value in a string map
//! becomes `""`, resource quantities are stored in canonical form
//! (`cpu: 0.5` → `500m`), and fields the type does not declare are dropped
//! — or refused, or warned about, as `fieldValidation` asks.
//!
//! Where a field holds a quantity, a map or a declared struct is answered
//! by a [`FieldTypes`]: [`OpenApi`], the kind's published schema, when the
//! embedded 1.32 data has one; [`ByName`] (Kubernetes' field names)
//! otherwise.

use serde_json::{Map, Value};

use super::builtin::{self, Catalog};

/// What a field holds, as far as decoding cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A `resource.Quantity`: stored in canonical form.
    Quantity,
    /// A map from strings to strings (`labels`, `data`): a `null` value is
    /// stored as `""`.
    StringMap,
    /// A map from strings to quantities (`limits`, `requests`): a `null`
    /// value is stored as `"0"`.
    QuantityMap,
    /// Anything else (structs, lists, scalars, int-or-string: kept as
    /// given).
    Other,
}

/// A segment of a field path: a field name or a list item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A field (or map key).
    Field(String),
    /// An item of a list, by index.
    Item(usize),
}

/// Knowledge of a kind's fields.
pub trait FieldTypes {
    /// What the value at `path` (from the object's root) holds.
    fn shape(&self, path: &[Step]) -> Shape;

    /// Whether the struct at `path` declares `field`; `None` when unknown
    /// (then nothing is dropped).
    fn declares(&self, path: &[Step], field: &str) -> Option<bool>;
}

/// Kubernetes' field names, for kinds without a schema: quantities in
/// resource maps (`limits`, `requests`, `capacity`, `hard`, `allocatable`,
/// `overhead`) and `sizeLimit`; the string maps of metadata, ConfigMaps,
/// Secrets, selectors and node selectors. Declares no fields, so drops
/// nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct ByName;

/// Maps whose values are strings.
const STRING_MAPS: [&str; 7] = [
    "labels",
    "annotations",
    "data",
    "binaryData",
    "stringData",
    "nodeSelector",
    "matchLabels",
];

impl FieldTypes for ByName {
    fn shape(&self, path: &[Step]) -> Shape {
        let last = match path.last() {
            Some(Step::Field(name)) => name.as_str(),
            _ => return Shape::Other,
        };
        let parent = match path.len().checked_sub(2).map(|i| &path[i]) {
            Some(Step::Field(name)) => Some(name.as_str()),
            _ => None,
        };
        if kiln_quantity::held_at(parent, last) {
            return Shape::Quantity;
        }
        if kiln_quantity::QUANTITY_MAPS.contains(&last) {
            return Shape::QuantityMap;
        }
        if STRING_MAPS.contains(&last) {
            return Shape::StringMap;
        }
        Shape::Other
    }

    fn declares(&self, _path: &[Step], _field: &str) -> Option<bool> {
        None
    }
}

/// A built-in kind's published OpenAPI schema (the embedded 1.32 data):
/// quantities are the fields that refer to `resource.Quantity`, string maps
/// the objects whose `additionalProperties` are strings, and a struct
/// declares its `properties` (an object with neither, such as a
/// `RawExtension`, declares anything).
pub struct OpenApi {
    catalog: &'static Catalog,
    root: &'static Value,
}

/// The definition of `resource.Quantity`.
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

impl OpenApi {
    /// The schema of a built-in kind, if the embedded data has one.
    pub fn of(group: &str, version: &str, kind: &str) -> Option<Self> {
        let catalog = builtin::catalog().ok()?;
        Some(Self {
            catalog,
            root: catalog.schema(group, version, kind)?,
        })
    }

    /// The (unresolved) schema node at `path`.
    fn node(&self, path: &[Step]) -> Option<&'static Value> {
        let mut node = self.root;
        for step in path {
            let resolved = self.catalog.resolve(node);
            node = match step {
                Step::Field(name) => resolved
                    .get("properties")
                    .and_then(|p| p.get(name))
                    .or_else(|| {
                        resolved
                            .get("additionalProperties")
                            .filter(|a| a.is_object())
                    })?,
                Step::Item(_) => resolved.get("items")?,
            };
        }
        Some(node)
    }
}

/// The definition a schema node refers to.
fn reference(node: &Value) -> Option<&str> {
    let target = node.get("$ref").or_else(|| match node.get("allOf") {
        Some(Value::Array(all)) if all.len() == 1 => all[0].get("$ref"),
        _ => None,
    })?;
    target.as_str()?.rsplit('/').next()
}

impl FieldTypes for OpenApi {
    fn shape(&self, path: &[Step]) -> Shape {
        let Some(node) = self.node(path) else {
            return Shape::Other;
        };
        if reference(node) == Some(QUANTITY) {
            return Shape::Quantity;
        }
        let resolved = self.catalog.resolve(node);
        match resolved.get("additionalProperties") {
            Some(values) if reference(values) == Some(QUANTITY) => Shape::QuantityMap,
            Some(values)
                if resolved.get("properties").is_none()
                    && values.get("type").and_then(Value::as_str) == Some("string")
                    && values.get("format").is_none() =>
            {
                Shape::StringMap
            }
            _ => Shape::Other,
        }
    }

    fn declares(&self, path: &[Step], field: &str) -> Option<bool> {
        let resolved = self.catalog.resolve(self.node(path)?);
        if resolved.get("additionalProperties").is_some()
            || resolved.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
        {
            return None;
        }
        let properties = resolved.get("properties")?.as_object()?;
        Some(properties.contains_key(field))
    }
}

/// No knowledge of the fields: only nulls are dropped.
#[derive(Clone, Copy, Debug, Default)]
pub struct Untyped;

impl FieldTypes for Untyped {
    fn shape(&self, _path: &[Step]) -> Shape {
        Shape::Other
    }

    fn declares(&self, _path: &[Step], _field: &str) -> Option<bool> {
        None
    }
}

/// Why a body cannot be decoded.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct DecodeError {
    /// The API server's message (after `cannot be handled as a KIND: `).
    pub message: String,
}

/// Decodes `object` in place: nulls, quantities, undeclared fields. Returns
/// the undeclared fields dropped (`spec.foo`), in document order.
pub fn decode(object: &mut Value, types: &dyn FieldTypes) -> Result<Vec<String>, DecodeError> {
    let mut dropped = Vec::new();
    let mut path = Vec::new();
    walk(object, types, &mut path, &mut dropped)?;
    Ok(dropped)
}

fn dotted(path: &[Step], field: &str) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Field(name) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
            Step::Item(index) => {
                out.push('[');
                out.push_str(&index.to_string());
                out.push(']');
            }
        }
    }
    if !out.is_empty() {
        out.push('.');
    }
    out.push_str(field);
    out
}

fn walk(
    value: &mut Value,
    types: &dyn FieldTypes,
    path: &mut Vec<Step>,
    dropped: &mut Vec<String>,
) -> Result<(), DecodeError> {
    match types.shape(path) {
        Shape::Quantity => {
            *value = Value::String(quantity(value, false)?);
            return Ok(());
        }
        shape @ (Shape::StringMap | Shape::QuantityMap) if value.is_object() => {
            let zero = if shape == Shape::StringMap { "" } else { "0" };
            if let Value::Object(map) = value {
                for item in map.values_mut() {
                    if item.is_null() {
                        *item = Value::String(zero.to_owned());
                    }
                    if shape == Shape::QuantityMap {
                        // A resource list: SetDefaults_ResourceList rounds
                        // up to milli units.
                        *item = Value::String(quantity(item, true)?);
                    }
                }
            }
            return Ok(());
        }
        _ => {}
    }
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            let undeclared: Vec<String> = map
                .keys()
                .filter(|k| types.declares(path, k) == Some(false))
                .cloned()
                .collect();
            for field in &undeclared {
                map.remove(field);
                dropped.push(dotted(path, field));
            }
            descend(map, types, path, dropped)?;
        }
        Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                path.push(Step::Item(index));
                let result = walk(item, types, path, dropped);
                path.pop();
                result?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn descend(
    map: &mut Map<String, Value>,
    types: &dyn FieldTypes,
    path: &mut Vec<Step>,
    dropped: &mut Vec<String>,
) -> Result<(), DecodeError> {
    for (key, child) in map.iter_mut() {
        path.push(Step::Field(key.clone()));
        let result = walk(child, types, path, dropped);
        path.pop();
        result?;
    }
    Ok(())
}

/// The canonical text of a quantity given as a JSON string or number (as
/// `Quantity.UnmarshalJSON` reads either); `resource_list` rounds up to
/// milli units.
fn quantity(value: &Value, resource_list: bool) -> Result<String, DecodeError> {
    let text = match value {
        Value::String(text) => text.clone(),
        Value::Number(number) => number.to_string(),
        // A null quantity is the zero quantity.
        Value::Null => "0".to_owned(),
        _ => {
            return Err(DecodeError {
                message: format!(
                    "json: cannot unmarshal {} into Go value of type resource.Quantity",
                    json_type(value)
                ),
            });
        }
    };
    let canonical = if resource_list {
        kiln_quantity::canonical_resource(&text)
    } else {
        kiln_quantity::canonical(&text)
    };
    canonical.map_err(|e| DecodeError {
        message: e.to_string(),
    })
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Declares only `spec.replicas` and `spec.template` under `spec`.
    struct Declared;

    impl FieldTypes for Declared {
        fn shape(&self, path: &[Step]) -> Shape {
            ByName.shape(path)
        }

        fn declares(&self, path: &[Step], field: &str) -> Option<bool> {
            (path == [Step::Field("spec".into())])
                .then_some(matches!(field, "replicas" | "template"))
        }
    }

    #[test]
    fn explicit_nulls_are_dropped_like_a_nil_go_pointer() {
        // prometheus-node-exporter's probes: `httpHeaders: null` must not be
        // stored, or the object never matches what the chart renders.
        let mut object = json!({"spec": {"template": {"spec": {"containers": [{"name": "a",
            "livenessProbe": {"httpGet": {"httpHeaders": null, "path": "/", "port": "metrics", "scheme": "HTTP"}},
            "env": null}]}}, "strategy": {"type": "Recreate", "rollingUpdate": null}}});
        decode(&mut object, &ByName).unwrap();
        assert_eq!(
            object,
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a",
                "livenessProbe": {"httpGet": {"path": "/", "port": "metrics", "scheme": "HTTP"}}}]}},
                "strategy": {"type": "Recreate"}}})
        );
    }

    #[test]
    fn a_null_in_a_string_map_is_an_empty_string() {
        let mut object =
            json!({"metadata": {"labels": {"a": null, "b": "x"}}, "data": {"k": null}});
        decode(&mut object, &ByName).unwrap();
        assert_eq!(
            object,
            json!({"metadata": {"labels": {"a": "", "b": "x"}}, "data": {"k": ""}})
        );
    }

    #[test]
    fn quantities_are_stored_in_canonical_form() {
        let mut object = json!({"spec": {"containers": [{"resources": {
            "limits": {"cpu": 0.5, "memory": "1024Mi", "nvidia.com/gpu": 1},
            "requests": {"cpu": "100m", "memory": "1e3", "ephemeral-storage": null, "tiny": "100n"}}}],
            "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "0.5Gi"}}]}});
        decode(&mut object, &ByName).unwrap();
        assert_eq!(
            object,
            json!({"spec": {"containers": [{"resources": {
                "limits": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"},
                "requests": {"cpu": "100m", "memory": "1e3", "ephemeral-storage": "0", "tiny": "1m"}}}],
                "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "512Mi"}}]}})
        );
    }

    #[test]
    fn a_malformed_quantity_is_refused_with_apimachinery_s_message() {
        let mut object = json!({"spec": {"resources": {"requests": {"storage": "8 Gi"}}}});
        let error = decode(&mut object, &ByName).unwrap_err();
        assert!(
            error
                .message
                .starts_with("quantities must match the regular expression"),
            "{error}"
        );
        let mut object = json!({"spec": {"resources": {"requests": {"storage": true}}}});
        assert!(decode(&mut object, &ByName).is_err());
    }

    #[test]
    fn int_or_string_and_empty_structs_are_kept_as_given() {
        let given = json!({"spec": {"ports": [{"port": 80, "targetPort": "http"}, {"port": 81, "targetPort": 8081}],
            "template": {"spec": {"securityContext": {}, "volumes": [{"name": "t", "emptyDir": {}}]}}}});
        let mut object = given.clone();
        decode(&mut object, &ByName).unwrap();
        assert_eq!(object, given);
    }

    #[test]
    fn undeclared_fields_are_dropped_and_reported() {
        let mut object = json!({"spec": {"replicas": 1, "foo": 1, "bar": {"x": 1}}});
        let dropped = decode(&mut object, &Declared).unwrap();
        assert_eq!(dropped, vec!["spec.foo", "spec.bar"]);
        assert_eq!(object, json!({"spec": {"replicas": 1}}));
    }

    #[test]
    fn the_published_schema_finds_quantities_maps_and_unknown_fields() {
        let schema = OpenApi::of("apps", "v1", "Deployment").expect("apps/v1 Deployment");
        let mut object = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "labels": {"a": null}, "bogus": 1},
            "spec": {"foo": 1, "template": {"spec": {
                "containers": [{"name": "a", "image": "a:1", "extra": true,
                    "resources": {"limits": {"cpu": 0.5, "memory": "1024Mi"}, "requests": {"cpu": "0.0001"}},
                    "ports": [{"containerPort": 80}], "readinessProbe": {"httpGet": {"port": "http"}}}],
                "volumes": [{"name": "t", "emptyDir": {"sizeLimit": "0.5Gi"}}],
                "overhead": {"cpu": "1000m"}}}}});
        let dropped = decode(&mut object, &schema).unwrap();
        assert_eq!(
            dropped,
            vec![
                "metadata.bogus",
                "spec.foo",
                "spec.template.spec.containers[0].extra"
            ]
        );
        let pod = &object["spec"]["template"]["spec"];
        assert_eq!(object["metadata"]["labels"], json!({"a": ""}));
        assert_eq!(
            pod["containers"][0]["resources"],
            json!({"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "1m"}})
        );
        assert_eq!(
            pod["containers"][0]["readinessProbe"]["httpGet"]["port"],
            "http"
        );
        assert_eq!(pod["volumes"][0]["emptyDir"]["sizeLimit"], "512Mi");
        assert_eq!(pod["overhead"]["cpu"], "1");
    }

    #[test]
    fn free_form_fields_of_the_schema_keep_whatever_they_hold() {
        // A CRD's schema is JSONSchemaProps: `properties` is a map, and
        // `default`/`example` hold any JSON.
        let schema = OpenApi::of("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
            .expect("CRD schema");
        let mut object = json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"limits": {"type": "object", "default": {"cpu": "0.5", "any": [1]}}}}}}]}});
        let given = object.clone();
        assert!(decode(&mut object, &schema).unwrap().is_empty());
        assert_eq!(object, given);
    }
}
