//! Field sets: the unit of server-side-apply ownership.
//!
//! A [`FieldSet`] is a tree of path elements in the shape of Kubernetes'
//! `fieldsV1` encoding: `f:name` for a named field, `k:{"name":"nginx"}` for
//! an item of a list merged by keys, `v:"x"` for an item of a set, and `.`
//! marking that a node with children is itself a member. The functions here
//! compute the set an applied configuration names, and what changed between
//! two objects, using the [`Schema`] to know which lists merge by key.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::schema::{ListType, Schema, SchemaPath};

/// One step into an object.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathElement {
    /// A field of a map or struct.
    Field(String),
    /// An item of a list merged by keys: the canonical JSON of its key fields.
    Key(String),
    /// An item of a set: the canonical JSON of the value.
    Value(String),
}

impl PathElement {
    fn encode(&self) -> String {
        match self {
            Self::Field(name) => format!("f:{name}"),
            Self::Key(json) => format!("k:{json}"),
            Self::Value(json) => format!("v:{json}"),
        }
    }

    fn decode(text: &str) -> Option<Self> {
        let (prefix, rest) = text.split_at_checked(2)?;
        match prefix {
            "f:" => Some(Self::Field(rest.to_owned())),
            // Re-encode so that equal keys compare equal whatever their spacing.
            "k:" => Some(Self::Key(canonical(&serde_json::from_str(rest).ok()?))),
            "v:" => Some(Self::Value(canonical(&serde_json::from_str(rest).ok()?))),
            _ => None,
        }
    }
}

impl std::fmt::Display for PathElement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Field(name) => write!(f, ".{name}"),
            Self::Key(json) | Self::Value(json) => write!(f, "[{json}]"),
        }
    }
}

/// A path from the object root.
pub type Path = Vec<PathElement>;

/// Renders a path the way the API server names fields in conflict messages.
pub fn display_path(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// A set of paths, stored as a tree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet {
    member: bool,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    /// True when the set holds no path.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    /// Adds a path.
    pub fn insert(&mut self, path: &[PathElement]) {
        let mut node = self;
        for element in path {
            node = node.children.entry(element.clone()).or_default();
        }
        node.member = true;
    }

    /// True when `path` or anything below it is a member.
    pub fn covers(&self, path: &[PathElement]) -> bool {
        self.node(path).is_some_and(|node| !node.is_empty())
    }

    fn node(&self, path: &[PathElement]) -> Option<&FieldSet> {
        let mut node = self;
        for element in path {
            node = node.children.get(element)?;
        }
        Some(node)
    }

    /// Every member path, in order.
    pub fn paths(&self) -> Vec<Path> {
        fn walk(node: &FieldSet, prefix: &mut Path, out: &mut Vec<Path>) {
            if node.member {
                out.push(prefix.clone());
            }
            for (element, child) in &node.children {
                prefix.push(element.clone());
                walk(child, prefix, out);
                prefix.pop();
            }
        }
        let mut out = Vec::new();
        walk(self, &mut Vec::new(), &mut out);
        out
    }

    /// Adds every member of `other`.
    pub fn union_with(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (element, child) in &other.children {
            self.children
                .entry(element.clone())
                .or_default()
                .union_with(child);
        }
    }

    /// The members of both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (element, child) in &self.children {
            if let Some(theirs) = other.children.get(element) {
                let both = child.intersection(theirs);
                if !both.is_empty() {
                    out.children.insert(element.clone(), both);
                }
            }
        }
        out
    }

    /// Removes the members of `other` (members only, not what is below them).
    pub fn remove_members(&mut self, other: &FieldSet) {
        if other.member {
            self.member = false;
        }
        for (element, theirs) in &other.children {
            if let Some(child) = self.children.get_mut(element) {
                child.remove_members(theirs);
            }
        }
        self.compact();
    }

    /// Removes every member of `other` together with everything below it.
    pub fn remove_subtrees(&mut self, other: &FieldSet) {
        for (element, theirs) in &other.children {
            if theirs.member {
                self.children.remove(element);
            } else if let Some(child) = self.children.get_mut(element) {
                child.remove_subtrees(theirs);
            }
        }
        self.compact();
    }

    fn compact(&mut self) {
        self.children.retain(|_, child| {
            child.compact();
            !child.is_empty()
        });
    }

    /// The `fieldsV1` JSON encoding.
    pub fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        if self.member && !self.children.is_empty() {
            map.insert(".".to_owned(), Value::Object(Map::new()));
        }
        for (element, child) in &self.children {
            if !child.is_empty() {
                map.insert(element.encode(), child.to_fields_v1());
            }
        }
        Value::Object(map)
    }

    /// Parses the `fieldsV1` JSON encoding; `None` when it is malformed.
    pub fn from_fields_v1(value: &Value) -> Option<FieldSet> {
        let map = value.as_object()?;
        let mut set = FieldSet {
            member: map.is_empty(),
            children: BTreeMap::new(),
        };
        for (key, child) in map {
            if key == "." {
                set.member = true;
                continue;
            }
            let element = PathElement::decode(key)?;
            set.children
                .insert(element, FieldSet::from_fields_v1(child)?);
        }
        Some(set)
    }
}

/// Canonical JSON: object keys sorted, no spaces. Used for list keys and set
/// values so that equal items have equal path elements.
pub fn canonical(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<_> = map.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&map[k])))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

/// The path element naming `item` in a list merged by `keys`.
pub fn key_element(
    item: &Value,
    keys: &[String],
    schema: &Schema,
    spath: &SchemaPath,
) -> PathElement {
    let mut key = Map::new();
    let mut names: Vec<&String> = keys.iter().collect();
    names.sort();
    for name in names {
        let value = item
            .get(name)
            .cloned()
            .or_else(|| schema.key_default(spath, name));
        if let Some(value) = value {
            key.insert(name.clone(), value);
        }
    }
    PathElement::Key(Value::Object(key).to_string())
}

/// The set of fields an applied configuration sets: its leaves, the items of
/// its keyed lists, and atomic values as a whole.
pub fn field_set(value: &Value, schema: &Schema) -> FieldSet {
    let mut set = FieldSet::default();
    let mut spath = SchemaPath::default();
    collect(value, schema, &mut Vec::new(), &mut spath, &mut set);
    // The root is never itself a member.
    set.member = false;
    set
}

fn collect(
    value: &Value,
    schema: &Schema,
    path: &mut Path,
    spath: &mut SchemaPath,
    set: &mut FieldSet,
) {
    match value {
        Value::Object(map) if !map.is_empty() && !schema.atomic_map(spath) => {
            for (name, child) in map {
                path.push(PathElement::Field(name.clone()));
                spath.push_field(name);
                collect(child, schema, path, spath, set);
                spath.pop();
                path.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => match schema.list_type(spath) {
            ListType::Atomic => set.insert(path),
            ListType::Set => {
                for item in items {
                    path.push(PathElement::Value(canonical(item)));
                    set.insert(path);
                    path.pop();
                }
            }
            ListType::Map(keys) => {
                for item in items {
                    path.push(key_element(item, &keys, schema, spath));
                    set.insert(path);
                    spath.push_item();
                    collect(item, schema, path, spath, set);
                    spath.pop();
                    path.pop();
                }
            }
        },
        _ => set.insert(path),
    }
}

/// What changed between two versions of an object.
#[derive(Debug, Default)]
pub struct Comparison {
    /// Fields present only in the new version (with what is below them).
    pub added: FieldSet,
    /// Fields whose value changed.
    pub modified: FieldSet,
    /// Fields present only in the old version.
    pub removed: FieldSet,
}

impl Comparison {
    /// Added and modified fields together: what a writer takes ownership of.
    pub fn changed(&self) -> FieldSet {
        let mut set = self.added.clone();
        set.union_with(&self.modified);
        set
    }
}

/// Compares two versions of an object field by field.
pub fn compare(old: &Value, new: &Value, schema: &Schema) -> Comparison {
    let mut out = Comparison::default();
    let mut spath = SchemaPath::default();
    diff(old, new, schema, &mut Vec::new(), &mut spath, &mut out);
    out
}

fn added(
    value: &Value,
    schema: &Schema,
    path: &mut Path,
    spath: &mut SchemaPath,
    out: &mut Comparison,
) {
    // Maps (not structs) are members themselves when they appear, as the
    // API server records them (`f:labels: {".": {}, ...}`).
    if value.as_object().is_some_and(|map| !map.is_empty()) && schema.is_map(spath) {
        out.added.insert(path);
    }
    collect(value, schema, path, spath, &mut out.added);
}

fn diff(
    old: &Value,
    new: &Value,
    schema: &Schema,
    path: &mut Path,
    spath: &mut SchemaPath,
    out: &mut Comparison,
) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) if !schema.atomic_map(spath) => {
            for (name, new_child) in b {
                path.push(PathElement::Field(name.clone()));
                spath.push_field(name);
                match a.get(name) {
                    Some(old_child) => diff(old_child, new_child, schema, path, spath, out),
                    None => added(new_child, schema, path, spath, out),
                }
                spath.pop();
                path.pop();
            }
            for name in a.keys().filter(|name| !b.contains_key(*name)) {
                path.push(PathElement::Field(name.clone()));
                out.removed.insert(path);
                path.pop();
            }
        }
        (Value::Array(a), Value::Array(b)) => match schema.list_type(spath) {
            ListType::Map(keys) => {
                let index = |items: &Vec<Value>| -> BTreeMap<PathElement, Value> {
                    items
                        .iter()
                        .map(|item| (key_element(item, &keys, schema, spath), item.clone()))
                        .collect()
                };
                let (a, b) = (index(a), index(b));
                spath.push_item();
                for (element, new_item) in &b {
                    path.push(element.clone());
                    match a.get(element) {
                        Some(old_item) => diff(old_item, new_item, schema, path, spath, out),
                        None => {
                            out.added.insert(path);
                            collect(new_item, schema, path, spath, &mut out.added);
                        }
                    }
                    path.pop();
                }
                spath.pop();
                for element in a.keys().filter(|element| !b.contains_key(*element)) {
                    path.push(element.clone());
                    out.removed.insert(path);
                    path.pop();
                }
            }
            ListType::Set => {
                let a: Vec<String> = a.iter().map(canonical).collect();
                let b: Vec<String> = b.iter().map(canonical).collect();
                for value in b.iter().filter(|value| !a.contains(value)) {
                    path.push(PathElement::Value(value.clone()));
                    out.added.insert(path);
                    path.pop();
                }
                for value in a.iter().filter(|value| !b.contains(value)) {
                    path.push(PathElement::Value(value.clone()));
                    out.removed.insert(path);
                    path.pop();
                }
            }
            ListType::Atomic => {
                if a != b {
                    out.modified.insert(path);
                }
            }
        },
        (a, b) if a == b => {}
        _ => out.modified.insert(path),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment() -> Schema {
        Schema::builtin("apps", "Deployment")
    }

    #[test]
    fn apply_set_names_leaves_and_keyed_items() {
        let config = json!({"spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"spec": {"containers": [{"name": "web", "image": "nginx",
                "ports": [{"containerPort": 80}]}]}}}});
        let set = field_set(&config, &deployment());
        let encoded = set.to_fields_v1();
        assert_eq!(
            encoded,
            json!({"f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {"f:spec": {
                "f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {},
                    "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}}}}}})
        );
        assert_eq!(FieldSet::from_fields_v1(&encoded), Some(set));
    }

    #[test]
    fn comparison_marks_new_maps_but_not_structs() {
        let old = json!({"metadata": {}});
        let new = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"replicas": 1}});
        let cmp = compare(&old, &new, &deployment());
        assert_eq!(
            cmp.added.to_fields_v1(),
            json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {"f:replicas": {}}})
        );
        assert!(cmp.modified.is_empty() && cmp.removed.is_empty());
    }

    #[test]
    fn set_operations() {
        let mut a = FieldSet::default();
        a.insert(&[
            PathElement::Field("a".into()),
            PathElement::Field("b".into()),
        ]);
        a.insert(&[PathElement::Field("c".into())]);
        let mut b = FieldSet::default();
        b.insert(&[
            PathElement::Field("a".into()),
            PathElement::Field("b".into()),
        ]);
        assert_eq!(a.intersection(&b), b);
        a.remove_members(&b);
        assert_eq!(a.paths(), vec![vec![PathElement::Field("c".into())]]);
        assert!(a.covers(&[]));
        assert!(!a.covers(&[PathElement::Field("a".into())]));
    }
}
