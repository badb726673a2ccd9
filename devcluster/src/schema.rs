//! How lists and maps of a kind merge: the little of the OpenAPI schema that
//! server-side apply and strategic merge need.
//!
//! Built-in kinds use the list keys Kubernetes declares in its Go types
//! (`+listType=map`, `+listMapKey`, `patchMergeKey`); custom resources use
//! `x-kubernetes-list-type`, `x-kubernetes-list-map-keys` and
//! `x-kubernetes-map-type` from their CRD's `openAPIV3Schema`.

use std::sync::Arc;

use serde_json::Value;

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

    fn last_field(&self) -> Option<&str> {
        match self.0.last() {
            Some(Segment::Field(name)) => Some(name),
            _ => None,
        }
    }

    fn in_metadata(&self) -> bool {
        matches!(self.0.first(), Some(Segment::Field(name)) if name == "metadata")
    }

    /// The field holding the list item this path is in, if any: for
    /// `spec.containers[].ports` that is `containers`.
    fn enclosing_list(&self) -> Option<&str> {
        let n = self.0.len();
        if n >= 3
            && matches!(self.0[n - 2], Segment::Item)
            && let Segment::Field(name) = &self.0[n - 3]
        {
            return Some(name);
        }
        None
    }
}

/// The merge rules of one kind.
#[derive(Clone, Debug)]
pub enum Schema {
    /// A built-in kind, by API group and kind.
    Builtin {
        /// API group ("" for the core group).
        group: String,
        /// Kind.
        kind: String,
    },
    /// A custom resource: its version's `openAPIV3Schema`.
    Custom(Arc<Value>),
    /// No schema: lists are atomic, maps merge by key.
    Untyped,
}

const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

impl Schema {
    /// The rules of a built-in kind.
    pub fn builtin(group: &str, kind: &str) -> Self {
        Self::Builtin {
            group: group.to_owned(),
            kind: kind.to_owned(),
        }
    }

    /// How the list at `path` merges.
    pub fn list_type(&self, path: &SchemaPath) -> ListType {
        match self {
            Self::Custom(root) if !path.in_metadata() => match node(root, path) {
                Some(node) => match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
                    Some("map") => ListType::Map(
                        node.get("x-kubernetes-list-map-keys")
                            .and_then(Value::as_array)
                            .map(|keys| {
                                keys.iter()
                                    .filter_map(Value::as_str)
                                    .map(str::to_owned)
                                    .collect()
                            })
                            .unwrap_or_default(),
                    ),
                    Some("set") => ListType::Set,
                    _ => ListType::Atomic,
                },
                None => ListType::Atomic,
            },
            Self::Untyped => ListType::Atomic,
            Self::Builtin { .. } | Self::Custom(_) => self.builtin_list_type(path),
        }
    }

    fn builtin_list_type(&self, path: &SchemaPath) -> ListType {
        let keys = |names: &[&str]| ListType::Map(names.iter().map(|&n| n.to_owned()).collect());
        let Some(field) = path.last_field() else {
            return ListType::Atomic;
        };
        match field {
            "finalizers" if path.in_metadata() => ListType::Set,
            "ownerReferences" if path.in_metadata() => keys(&["uid"]),
            "containers"
            | "initContainers"
            | "ephemeralContainers"
            | "volumes"
            | "imagePullSecrets"
            | "env"
            | "resourceClaims"
            | "schedulingGates" => keys(&["name"]),
            "ports"
                if path
                    .enclosing_list()
                    .is_some_and(|list| CONTAINER_LISTS.contains(&list)) =>
            {
                keys(&["containerPort", "protocol"])
            }
            "ports" if matches!(self, Self::Builtin { group, kind } if group.is_empty() && kind == "Service") => {
                keys(&["port", "protocol"])
            }
            "volumeMounts" => keys(&["mountPath"]),
            "volumeDevices" => keys(&["devicePath"]),
            "hostAliases" => keys(&["ip"]),
            "topologySpreadConstraints" => keys(&["topologyKey", "whenUnsatisfiable"]),
            "resizePolicy" => keys(&["resourceName"]),
            "conditions" => keys(&["type"]),
            _ => ListType::Atomic,
        }
    }

    /// The value a missing key field of a list item stands for (Kubernetes
    /// treats a port without `protocol` as TCP).
    pub fn key_default(&self, path: &SchemaPath, field: &str) -> Option<Value> {
        if let Self::Custom(root) = self
            && !path.in_metadata()
        {
            return node(root, path)?
                .get("items")?
                .get("properties")?
                .get(field)?
                .get("default")
                .cloned();
        }
        (field == "protocol").then(|| Value::from("TCP"))
    }

    /// True when the map at `path` is replaced as a whole.
    pub fn atomic_map(&self, path: &SchemaPath) -> bool {
        match self {
            Self::Custom(root) if !path.in_metadata() => node(root, path)
                .and_then(|node| node.get("x-kubernetes-map-type"))
                .is_some_and(|kind| kind == "atomic"),
            Self::Untyped => false,
            _ => {
                matches!(
                    path.last_field(),
                    Some("selector" | "podSelector" | "namespaceSelector" | "labelSelector")
                ) && !path.in_metadata()
            }
        }
    }

    /// True when the object at `path` is a map with arbitrary keys rather than
    /// a struct with named fields.
    pub fn is_map(&self, path: &SchemaPath) -> bool {
        match self {
            Self::Custom(root) if !path.in_metadata() => node(root, path).is_some_and(|node| {
                node.get("properties").is_none()
                    && node
                        .get("additionalProperties")
                        .is_some_and(|extra| extra != &Value::Bool(false))
            }),
            Self::Untyped => true,
            _ => matches!(
                path.last_field(),
                Some(
                    "labels"
                        | "annotations"
                        | "data"
                        | "stringData"
                        | "binaryData"
                        | "nodeSelector"
                        | "limits"
                        | "requests"
                        | "capacity"
                        | "parameters"
                        | "matchLabels"
                )
            ),
        }
    }
}

/// The schema node at `path` below `root`.
fn node<'a>(root: &'a Value, path: &SchemaPath) -> Option<&'a Value> {
    let mut node = root;
    for segment in &path.0 {
        node = match segment {
            Segment::Field(name) => node
                .get("properties")
                .and_then(|properties| properties.get(name))
                .or_else(|| {
                    node.get("additionalProperties")
                        .filter(|extra| extra.is_object())
                })?,
            Segment::Item => node.get("items")?,
        };
    }
    Some(node)
}
