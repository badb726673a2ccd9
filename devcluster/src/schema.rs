//! How lists and maps of a kind merge: the little of the OpenAPI schema that
//! server-side apply and strategic merge need.
//!
//! Both built-in kinds (their published OpenAPI definitions, see
//! [`crate::builtin`]) and custom resources (their CRD's `openAPIV3Schema`)
//! declare it with `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`
//! and `x-kubernetes-map-type` (server-side apply), and built-in kinds with
//! `x-kubernetes-patch-strategy` and `x-kubernetes-patch-merge-key`
//! (strategic merge patch).

use std::sync::Arc;

use serde_json::Value;

use crate::builtin;

/// How the items of a list merge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListType {
    /// Replaced as a whole.
    Atomic,
    /// A set of scalars: items merge by value.
    Set,
    /// Items merge by the values of these fields.
    Map(Vec<String>),
}

/// A position in an object, for schema lookups: field names, with list items
/// marked.
#[derive(Clone, Debug, Default)]
pub struct SchemaPath(Vec<Segment>);

#[derive(Clone, Debug)]
enum Segment {
    Field(String),
    Item,
}

impl SchemaPath {
    /// Descends into a field.
    pub fn push_field(&mut self, name: &str) {
        self.0.push(Segment::Field(name.to_owned()));
    }

    /// Descends into a list item.
    pub fn push_item(&mut self) {
        self.0.push(Segment::Item);
    }

    /// Goes back up one step.
    pub fn pop(&mut self) {
        self.0.pop();
    }

    fn in_metadata(&self) -> bool {
        matches!(self.0.first(), Some(Segment::Field(name)) if name == "metadata")
    }
}

/// The merge rules of one kind.
#[derive(Clone, Debug)]
pub enum Schema {
    /// A built-in kind: its published definition in the built-in catalog
    /// ([`crate::builtin`]), whose `$ref`s are followed.
    Builtin(&'static Value),
    /// A custom resource: its version's `openAPIV3Schema`.
    Custom(Arc<Value>),
    /// No schema: lists are atomic, maps merge by key.
    Untyped,
}

impl Schema {
    /// The rules of a built-in kind, at its newest served version; untyped
    /// when the catalog does not serve the kind.
    pub fn builtin(group: &str, kind: &str) -> Self {
        let Ok(catalog) = builtin::catalog() else {
            return Self::Untyped;
        };
        catalog
            .resources()
            .iter()
            .rev()
            .find(|r| r.group == group && r.kind == kind)
            .map_or(Self::Untyped, |r| Self::builtin_at(group, &r.version, kind))
    }

    /// The rules of a built-in kind at a version; untyped when the catalog
    /// has no schema for it.
    pub fn builtin_at(group: &str, version: &str, kind: &str) -> Self {
        builtin::openapi_schema(group, version, kind).map_or(Self::Untyped, Self::Builtin)
    }

    /// How the list at `path` merges in server-side apply:
    /// `x-kubernetes-list-type` and `x-kubernetes-list-map-keys`.
    pub fn list_type(&self, path: &SchemaPath) -> ListType {
        let Some(node) = self.node(path) else {
            return ListType::Atomic;
        };
        match extension(node, "x-kubernetes-list-type").and_then(Value::as_str) {
            Some("map") => ListType::Map(strings(extension(node, "x-kubernetes-list-map-keys"))),
            Some("set") => ListType::Set,
            _ => ListType::Atomic,
        }
    }

    /// How the list at `path` merges in a strategic merge patch: by
    /// `x-kubernetes-patch-merge-key` where `x-kubernetes-patch-strategy`
    /// says `merge` (a list of scalars without a key merges as a set);
    /// replaced otherwise. Custom resources (which Kubernetes does not
    /// patch strategically) use their list types.
    pub fn patch_list_type(&self, path: &SchemaPath) -> ListType {
        if !matches!(self, Self::Builtin(_)) && !path.in_metadata() {
            return self.list_type(path);
        }
        let Some(node) = self.node(path) else {
            return ListType::Atomic;
        };
        let merge = extension(node, "x-kubernetes-patch-strategy")
            .and_then(Value::as_str)
            .is_some_and(|strategy| strategy.split(',').any(|s| s == "merge"));
        match extension(node, "x-kubernetes-patch-merge-key").and_then(Value::as_str) {
            Some(key) if merge => ListType::Map(vec![key.to_owned()]),
            None if merge => ListType::Set,
            _ => ListType::Atomic,
        }
    }

    /// The value a missing key field of a list item stands for: the
    /// schema's `default`, else Kubernetes' defaulting of `protocol` (TCP).
    pub fn key_default(&self, path: &SchemaPath, field: &str) -> Option<Value> {
        let declared = self.node(path).and_then(|list| {
            let item = resolve(list.get("items")?);
            resolve(item.get("properties")?.get(field)?)
                .get("default")
                .cloned()
        });
        match self {
            Self::Custom(_) if !path.in_metadata() => declared,
            _ => declared.or_else(|| (field == "protocol").then(|| Value::from("TCP"))),
        }
    }

    /// True when the map at `path` is replaced as a whole
    /// (`x-kubernetes-map-type: atomic`).
    pub fn atomic_map(&self, path: &SchemaPath) -> bool {
        self.node(path)
            .and_then(|node| extension(node, "x-kubernetes-map-type"))
            .is_some_and(|kind| kind == "atomic")
    }

    /// True when the object at `path` is a map with arbitrary keys rather than
    /// a struct with named fields.
    pub fn is_map(&self, path: &SchemaPath) -> bool {
        if matches!(self, Self::Untyped) {
            return true;
        }
        self.node(path).is_some_and(|node| {
            let node = resolve(node);
            node.get("properties").is_none()
                && node
                    .get("additionalProperties")
                    .is_some_and(|extra| extra != &Value::Bool(false))
        })
    }

    /// The schema node at `path`, unresolved (so that the extensions beside
    /// a `$ref` are seen). `metadata` is `ObjectMeta` whatever the schema
    /// says; an untyped object has no nodes.
    fn node(&self, path: &SchemaPath) -> Option<&Value> {
        let root: &Value = match self {
            Self::Builtin(root) => root,
            Self::Custom(root) => root,
            Self::Untyped => return None,
        };
        let catalog = builtin::catalog().ok()?;
        let mut segments = path.0.iter();
        let mut node = root;
        if path.in_metadata() {
            segments.next();
            node = catalog.definition(OBJECT_META)?;
        }
        for segment in segments {
            node = match segment {
                Segment::Field(name) => catalog.field(node, name)?,
                Segment::Item => catalog.items(node)?,
            };
        }
        Some(node)
    }
}

/// The definition every object's `metadata` follows.
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// A node's target when it is a reference into the built-in definitions.
fn resolve(node: &Value) -> &Value {
    match builtin::catalog() {
        Ok(catalog) => catalog.resolve(node),
        Err(_) => node,
    }
}

/// An extension on a node or on the definition it refers to.
fn extension<'a>(node: &'a Value, name: &str) -> Option<&'a Value> {
    node.get(name).or_else(|| resolve(node).get(name))
}

fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(steps: &[&str]) -> SchemaPath {
        let mut path = SchemaPath::default();
        for step in steps {
            if *step == "[]" {
                path.push_item();
            } else {
                path.push_field(step);
            }
        }
        path
    }

    fn keys(names: &[&str]) -> ListType {
        ListType::Map(names.iter().map(|&n| n.to_owned()).collect())
    }

    #[test]
    fn builtin_list_types_come_from_the_published_schema() {
        let pod = Schema::builtin("", "Pod");
        assert_eq!(
            pod.list_type(&path(&["spec", "containers"])),
            keys(&["name"])
        );
        assert_eq!(
            pod.list_type(&path(&["spec", "containers", "[]", "ports"])),
            keys(&["containerPort", "protocol"])
        );
        assert_eq!(
            pod.list_type(&path(&["spec", "containers", "[]", "env"])),
            keys(&["name"])
        );
        assert_eq!(
            pod.list_type(&path(&["spec", "containers", "[]", "command"])),
            ListType::Atomic
        );
        assert_eq!(
            pod.list_type(&path(&["spec", "tolerations"])),
            ListType::Atomic
        );
        assert_eq!(
            pod.list_type(&path(&["status", "conditions"])),
            keys(&["type"])
        );
        assert_eq!(
            pod.list_type(&path(&["metadata", "finalizers"])),
            ListType::Set
        );
        assert_eq!(
            pod.list_type(&path(&["metadata", "ownerReferences"])),
            keys(&["uid"])
        );
        let service = Schema::builtin("", "Service");
        assert_eq!(
            service.list_type(&path(&["spec", "ports"])),
            keys(&["port", "protocol"])
        );
        // Kinds the hand-kept tables never knew.
        let webhooks = Schema::builtin(
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration",
        );
        assert_eq!(webhooks.list_type(&path(&["webhooks"])), keys(&["name"]));
        let hpa = Schema::builtin("autoscaling", "HorizontalPodAutoscaler");
        assert_eq!(hpa.list_type(&path(&["spec", "metrics"])), ListType::Atomic);
        // Through a pod template, two references deep.
        let deployment = Schema::builtin("apps", "Deployment");
        assert_eq!(
            deployment.list_type(&path(&["spec", "template", "spec", "volumes"])),
            keys(&["name"])
        );
    }

    #[test]
    fn strategic_merge_uses_the_patch_merge_key() {
        let pod = Schema::builtin("", "Pod");
        assert_eq!(
            pod.patch_list_type(&path(&["spec", "containers", "[]", "ports"])),
            keys(&["containerPort"])
        );
        assert_eq!(
            pod.patch_list_type(&path(&["metadata", "finalizers"])),
            ListType::Set
        );
        assert_eq!(
            pod.patch_list_type(&path(&["spec", "tolerations"])),
            ListType::Atomic
        );
    }

    #[test]
    fn maps_and_atomic_maps_come_from_the_published_schema() {
        let deployment = Schema::builtin("apps", "Deployment");
        assert!(deployment.atomic_map(&path(&["spec", "selector"])));
        assert!(!deployment.atomic_map(&path(&["spec", "template"])));
        assert!(deployment.is_map(&path(&["metadata", "labels"])));
        assert!(deployment.is_map(&path(&["spec", "template", "spec", "nodeSelector"])));
        assert!(!deployment.is_map(&path(&["spec", "strategy"])));
        let service = Schema::builtin("", "Service");
        assert!(service.atomic_map(&path(&["spec", "selector"])));
        let pdb = Schema::builtin("policy", "PodDisruptionBudget");
        assert!(pdb.atomic_map(&path(&["spec", "selector"])));
    }

    #[test]
    fn a_missing_protocol_key_defaults_to_tcp() {
        let pod = Schema::builtin("", "Pod");
        let ports = path(&["spec", "containers", "[]", "ports"]);
        assert_eq!(
            pod.key_default(&ports, "protocol"),
            Some(Value::from("TCP"))
        );
        assert_eq!(pod.key_default(&ports, "containerPort"), None);
    }

    #[test]
    fn custom_resources_use_their_own_schema_and_object_meta() {
        let schema = Schema::Custom(Arc::new(serde_json::json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"},
                        "protocol": {"type": "string", "default": "UDP"}}}},
                "conditions": {"type": "array", "items": {"type": "object"}},
            }}},
        })));
        assert_eq!(schema.list_type(&path(&["spec", "ports"])), keys(&["name"]));
        // Not declared: atomic, whatever the field's name.
        assert_eq!(
            schema.list_type(&path(&["spec", "conditions"])),
            ListType::Atomic
        );
        assert_eq!(
            schema.key_default(&path(&["spec", "ports"]), "protocol"),
            Some(Value::from("UDP"))
        );
        assert_eq!(
            schema.list_type(&path(&["metadata", "finalizers"])),
            ListType::Set
        );
        assert!(schema.is_map(&path(&["metadata", "annotations"])));
    }

    #[test]
    fn an_unknown_kind_is_untyped() {
        let schema = Schema::builtin("example.com", "Gizmo");
        assert!(matches!(schema, Schema::Untyped));
        assert_eq!(
            schema.list_type(&path(&["spec", "items"])),
            ListType::Atomic
        );
        assert!(schema.is_map(&path(&["spec"])));
    }
}
