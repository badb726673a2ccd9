//! `metadata.managedFields`: who owns which field, and how a write changes it.
//!
//! Every write has a field manager. An *apply* makes the applier own exactly
//! the fields of its configuration, fails on fields another manager owns with a
//! different value unless forced, and removes the fields it stopped applying
//! that nobody else owns. An *update* (create, put, the other patches) makes
//! the writer own what it changed and takes those fields from everyone else.

use serde_json::{Map, Value};

use super::fields::{self, FieldSet, display_path};
use super::merge;
use super::schema::Schema;

/// Which kind of write recorded a managed-fields entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Any other write.
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Self::Apply => "Apply",
            Self::Update => "Update",
        }
    }
}

/// The writer of one request.
#[derive(Clone, Debug)]
pub struct Writer {
    /// The field manager's name.
    pub manager: String,
    /// `apiVersion` the request used.
    pub api_version: String,
    /// True for writes to the `status` subresource.
    pub status: bool,
    /// True when the kind has a `status` subresource: writes to the main
    /// resource then neither change nor own `status`.
    pub has_status_subresource: bool,
}

#[derive(Clone, Debug, PartialEq)]
struct Entry {
    manager: String,
    operation: Operation,
    subresource: Option<String>,
    api_version: String,
    time: Option<String>,
    set: FieldSet,
}

impl Entry {
    fn is(&self, writer: &Writer, operation: Operation) -> bool {
        self.manager == writer.manager
            && self.operation == operation
            && self.subresource.is_some() == writer.status
    }
}

/// One manager's conflicting fields.
#[derive(Clone, Debug)]
pub struct Conflict {
    /// The other manager.
    pub manager: String,
    /// The `apiVersion` it wrote with.
    pub api_version: String,
    /// The fields, as `.spec.replicas`.
    pub fields: Vec<String>,
}

/// The entries of an object.
#[derive(Clone, Debug, Default)]
struct Managed(Vec<Entry>);

impl Managed {
    fn read(object: &Value) -> Self {
        let entries = object
            .pointer("/metadata/managedFields")
            .and_then(Value::as_array)
            .map(|entries| entries.iter().filter_map(parse_entry).collect())
            .unwrap_or_default();
        Self(entries)
    }

    fn entry(&mut self, writer: &Writer, operation: Operation) -> &mut Entry {
        let index = match self.0.iter().position(|e| e.is(writer, operation)) {
            Some(index) => index,
            None => {
                self.0.push(Entry {
                    manager: writer.manager.clone(),
                    operation,
                    subresource: writer.status.then(|| "status".to_owned()),
                    api_version: writer.api_version.clone(),
                    time: None,
                    set: FieldSet::default(),
                });
                self.0.len() - 1
            }
        };
        &mut self.0[index]
    }

    /// Writes the entries into `object`, stamping `now` on those whose set
    /// changed since `before` (an unchanged entry keeps its time, so that a
    /// no-op write stays a no-op).
    fn write(mut self, object: &mut Value, before: &Managed, now: &str) {
        self.0.retain(|entry| !entry.set.is_empty());
        let entries: Vec<Value> = self
            .0
            .into_iter()
            .map(|mut entry| {
                let previous = before.0.iter().find(|old| {
                    old.manager == entry.manager
                        && old.operation == entry.operation
                        && old.subresource == entry.subresource
                });
                match previous {
                    Some(old) if old.set == entry.set && old.api_version == entry.api_version => {
                        entry.time.clone_from(&old.time)
                    }
                    _ => entry.time = Some(now.to_owned()),
                }
                let mut map = Map::new();
                map.insert("manager".into(), entry.manager.into());
                map.insert("operation".into(), entry.operation.as_str().into());
                map.insert("apiVersion".into(), entry.api_version.into());
                if let Some(time) = entry.time {
                    map.insert("time".into(), time.into());
                }
                map.insert("fieldsType".into(), "FieldsV1".into());
                map.insert("fieldsV1".into(), entry.set.to_fields_v1());
                if let Some(sub) = entry.subresource {
                    map.insert("subresource".into(), sub.into());
                }
                Value::Object(map)
            })
            .collect();
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            if entries.is_empty() {
                metadata.remove("managedFields");
            } else {
                metadata.insert("managedFields".into(), Value::Array(entries));
            }
        }
    }

    fn owned(&self) -> FieldSet {
        let mut all = FieldSet::default();
        for entry in &self.0 {
            all.union_with(&entry.set);
        }
        all
    }
}

fn parse_entry(value: &Value) -> Option<Entry> {
    let operation = match value.get("operation")?.as_str()? {
        "Apply" => Operation::Apply,
        _ => Operation::Update,
    };
    Some(Entry {
        manager: value.get("manager")?.as_str()?.to_owned(),
        operation,
        subresource: value
            .get("subresource")
            .and_then(Value::as_str)
            .map(str::to_owned),
        api_version: value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        time: value.get("time").and_then(Value::as_str).map(str::to_owned),
        set: FieldSet::from_fields_v1(value.get("fieldsV1").unwrap_or(&Value::Null))?,
    })
}

/// The part of an object that field sets describe: no identity or
/// server-populated metadata, and `status` only for status writes (or kinds
/// without a status subresource).
fn ownable(object: &Value, writer: &Writer) -> Value {
    let mut out = object.as_object().cloned().unwrap_or_default();
    out.remove("apiVersion");
    out.remove("kind");
    if writer.status {
        out.retain(|name, _| name == "status");
    } else if writer.has_status_subresource {
        out.remove("status");
    }
    if let Some(Value::Object(metadata)) = out.get_mut("metadata") {
        for field in [
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
        ] {
            metadata.remove(field);
        }
        if metadata.is_empty() {
            out.remove("metadata");
        }
    }
    Value::Object(out)
}

/// Server-side apply of `config` onto `live` (an existing object, or the
/// skeleton of the one being created). Returns the new object, managed
/// fields included, or the conflicts that stopped it.
pub fn apply(
    live: &Value,
    config: &Value,
    writer: &Writer,
    force: bool,
    schema: &Schema,
    now: &str,
) -> Result<Value, Vec<Conflict>> {
    let before = Managed::read(live);
    let mut managed = before.clone();
    let config = ownable(config, writer);
    let mut merged = merge::apply_merge(live, &config, schema);
    let comparison = fields::compare(&ownable(live, writer), &ownable(&merged, writer), schema);
    let changed = comparison.changed();

    let mut conflicts = Vec::new();
    for entry in managed
        .0
        .iter_mut()
        .filter(|e| !e.is(writer, Operation::Apply))
    {
        let clash = entry.set.intersection(&changed);
        if !clash.is_empty() {
            conflicts.push(Conflict {
                manager: entry.manager.clone(),
                api_version: entry.api_version.clone(),
                fields: clash.paths().iter().map(|p| display_path(p)).collect(),
            });
            // Forced: the applier takes the fields over.
            entry.set.remove_members(&clash);
        }
        entry.set.remove_subtrees(&comparison.removed);
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }

    let mine = managed.entry(writer, Operation::Apply);
    let last = std::mem::replace(&mut mine.set, fields::field_set(&config, schema));
    mine.api_version.clone_from(&writer.api_version);
    let owned = managed.owned();
    merge::prune(&mut merged, &last, &owned, schema);
    managed.write(&mut merged, &before, now);
    Ok(merged)
}

/// Records an update of `old` to `new` by `writer` in `new`'s managed fields.
/// `old` is `Value::Null` for a create.
pub fn update(old: &Value, new: &mut Value, writer: &Writer, schema: &Schema, now: &str) {
    let before = Managed::read(old);
    let mut managed = before.clone();
    let comparison = fields::compare(&ownable(old, writer), &ownable(new, writer), schema);
    let changed = comparison.changed();
    for entry in managed.0.iter_mut() {
        entry.set.remove_members(&changed);
        entry.set.remove_subtrees(&comparison.removed);
    }
    if !changed.is_empty() {
        let mine = managed.entry(writer, Operation::Update);
        mine.set.union_with(&changed);
        mine.api_version.clone_from(&writer.api_version);
    }
    managed.write(new, &before, now);
}

/// The message the API server gives for apply conflicts.
pub fn conflict_message(conflicts: &[Conflict]) -> String {
    let count: usize = conflicts.iter().map(|c| c.fields.len()).sum();
    let mut message = format!(
        "Apply failed with {count} conflict{}:",
        if count == 1 { "" } else { "s" }
    );
    for conflict in conflicts {
        if conflict.fields.len() == 1 {
            message.push_str(&format!(
                " conflict with \"{}\" using {}: {}",
                conflict.manager, conflict.api_version, conflict.fields[0]
            ));
        } else {
            message.push_str(&format!(
                " conflicts with \"{}\" using {}:",
                conflict.manager, conflict.api_version
            ));
            for field in &conflict.fields {
                message.push_str(&format!("\n- {field}"));
            }
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn writer(name: &str) -> Writer {
        Writer {
            manager: name.into(),
            api_version: "v1".into(),
            status: false,
            has_status_subresource: false,
        }
    }

    fn schema() -> Schema {
        Schema::builtin("", "ConfigMap")
    }

    #[test]
    fn shared_values_do_not_conflict_and_different_values_do() {
        let skeleton = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let a = apply(
            &skeleton,
            &json!({"data": {"k": "1"}}),
            &writer("a"),
            false,
            &schema(),
            "t1",
        )
        .unwrap();
        let shared = apply(
            &a,
            &json!({"data": {"k": "1"}}),
            &writer("b"),
            false,
            &schema(),
            "t2",
        )
        .unwrap();
        assert_eq!(
            shared["metadata"]["managedFields"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        let conflicts = apply(
            &a,
            &json!({"data": {"k": "2"}}),
            &writer("b"),
            false,
            &schema(),
            "t2",
        )
        .unwrap_err();
        assert_eq!(conflicts[0].manager, "a");
        assert_eq!(conflicts[0].fields, vec![".data.k"]);
        let forced = apply(
            &a,
            &json!({"data": {"k": "2"}}),
            &writer("b"),
            true,
            &schema(),
            "t2",
        )
        .unwrap();
        let managers: Vec<_> = forced["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            managers,
            vec!["b"],
            "a lost its only field to the forced apply"
        );
    }

    #[test]
    fn unchanged_entries_keep_their_time() {
        let skeleton = json!({"metadata": {"name": "c"}});
        let first = apply(
            &skeleton,
            &json!({"data": {"k": "1"}}),
            &writer("a"),
            false,
            &schema(),
            "t1",
        )
        .unwrap();
        let again = apply(
            &first,
            &json!({"data": {"k": "1"}}),
            &writer("a"),
            false,
            &schema(),
            "t2",
        )
        .unwrap();
        assert_eq!(first, again);
    }
}
