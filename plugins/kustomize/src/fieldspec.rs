//! kustomize's field specs: a field of the objects of some group, version
//! and kind, written as a `/`-separated path (`spec/template/spec/containers/args`)
//! where a list on the way is walked element by element (`containers[]`
//! says so explicitly; a list is walked whether it is written or not).

use serde::Deserialize;
use serde_json::{Map, Value};

/// A field of some objects (kustomize's `FieldSpec`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldSpec {
    /// API group (empty: any).
    #[serde(default)]
    pub group: String,
    /// API version (empty: any).
    #[serde(default)]
    pub version: String,
    /// Kind (empty: any).
    #[serde(default)]
    pub kind: String,
    /// The path, `/`-separated.
    #[serde(default)]
    pub path: String,
    /// Create the field (and the maps leading to it) when missing.
    #[serde(default)]
    pub create: bool,
}

/// What to put where a missing leaf is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leaf {
    /// A map (labels, annotations).
    Map,
    /// A null scalar, for the setter to fill (a name, a count).
    Scalar,
}

impl FieldSpec {
    /// A spec for any object.
    pub fn any(path: &str) -> FieldSpec {
        FieldSpec {
            path: path.to_owned(),
            ..FieldSpec::default()
        }
    }

    /// A spec for objects of `kind`.
    pub fn of(kind: &str, path: &str) -> FieldSpec {
        FieldSpec {
            kind: kind.to_owned(),
            path: path.to_owned(),
            ..FieldSpec::default()
        }
    }

    /// Whether the spec applies to `object` (empty group, version and kind
    /// match anything).
    pub fn selects(&self, object: &Value) -> bool {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        (self.kind.is_empty() || object["kind"].as_str() == Some(self.kind.as_str()))
            && (self.group.is_empty() || self.group == group)
            && (self.version.is_empty() || self.version == version)
    }

    /// The same field of the same objects (kustomize's primary key: this
    /// spec's group, version and kind selected by `other`'s, same path).
    pub fn same_field(&self, other: &FieldSpec) -> bool {
        let selected = |mine: &str, theirs: &str| theirs.is_empty() || mine == theirs;
        self.path == other.path
            && selected(&self.group, &other.group)
            && selected(&self.version, &other.version)
            && selected(&self.kind, &other.kind)
    }

    /// `group/version/kind:path`, for messages.
    pub fn describe(&self) -> String {
        let kind = if self.kind.is_empty() {
            "any kind"
        } else {
            &self.kind
        };
        format!("{kind} {}", self.path)
    }

    /// Calls `set` on every field at the path of `object` (which the spec
    /// must select: see [`FieldSpec::selects`]). Missing fields are
    /// created (maps on the way, `leaf` at the end) when the spec says so;
    /// otherwise a missing field is no field. A scalar in the middle of the
    /// path is an error, as in kustomize.
    pub fn visit(
        &self,
        object: &mut Value,
        leaf: Leaf,
        set: &mut dyn FnMut(&mut Value) -> Result<(), String>,
    ) -> Result<(), String> {
        let steps: Vec<&str> = self.path.split('/').filter(|s| !s.is_empty()).collect();
        if steps.is_empty() {
            return Err(format!("the field spec {:?} has an empty path", self.path));
        }
        walk(object, &steps, self.create, leaf, set)
            .map_err(|e| format!("field {:?}: {e}", self.path))
    }
}

fn walk(
    value: &mut Value,
    steps: &[&str],
    create: bool,
    leaf: Leaf,
    set: &mut dyn FnMut(&mut Value) -> Result<(), String>,
) -> Result<(), String> {
    let Some((step, rest)) = steps.split_first() else {
        return set(value);
    };
    match value {
        Value::Null => Ok(()),
        Value::Array(list) => {
            for element in list {
                walk(element, steps, create, leaf, set)?;
            }
            Ok(())
        }
        Value::Object(map) => {
            let (key, is_list) = match step.strip_suffix("[]") {
                Some(key) => (key, true),
                None => (*step, false),
            };
            if key.is_empty() {
                return Err("an empty field name".to_owned());
            }
            if create && !is_list && map.get(key).is_none_or(Value::is_null) {
                let fresh = if rest.is_empty() && leaf == Leaf::Scalar {
                    Value::Null
                } else {
                    Value::Object(Map::new())
                };
                map.insert(key.to_owned(), fresh);
            }
            match map.get_mut(key) {
                Some(next) => walk(next, rest, create, leaf, set),
                None => Ok(()),
            }
        }
        _ => Err(format!("{key:?} is under a scalar", key = step)),
    }
}

/// Adds `incoming` to `specs` unless the same field is there already; the
/// same field with another `create` is kustomize's "conflicting
/// fieldspecs" error.
pub fn merge(specs: &mut Vec<FieldSpec>, incoming: &[FieldSpec]) -> Result<(), String> {
    for spec in incoming {
        match specs.iter().find(|s| s.same_field(spec)) {
            Some(existing) if existing.create != spec.create => {
                return Err(format!(
                    "conflicting field specs for {} (create: {} and {})",
                    spec.describe(),
                    existing.create,
                    spec.create
                ));
            }
            Some(_) => {}
            None => specs.push(spec.clone()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn strings(object: &mut Value, spec: &FieldSpec) -> Vec<String> {
        let mut seen = Vec::new();
        spec.visit(object, Leaf::Scalar, &mut |v| {
            seen.push(v.to_string());
            Ok(())
        })
        .unwrap();
        seen
    }

    #[test]
    fn lists_on_the_path_are_walked_written_or_not() {
        let mut object = json!({"spec": {"containers": [{"args": ["a"]}, {"args": ["b"]}]}});
        let spec = FieldSpec::any("spec/containers/args");
        assert_eq!(strings(&mut object, &spec), ["[\"a\"]", "[\"b\"]"]);
        let spec = FieldSpec::any("spec/containers[]/args");
        assert_eq!(strings(&mut object, &spec), ["[\"a\"]", "[\"b\"]"]);
    }

    #[test]
    fn missing_fields_are_created_only_when_asked() {
        let mut object = json!({"spec": {}});
        assert!(strings(&mut object, &FieldSpec::any("spec/a/b")).is_empty());
        let mut spec = FieldSpec::any("spec/a/b");
        spec.create = true;
        assert_eq!(strings(&mut object, &spec), ["null"]);
        assert_eq!(object, json!({"spec": {"a": {"b": null}}}));
    }

    #[test]
    fn a_scalar_in_the_middle_is_an_error() {
        let mut object = json!({"spec": "text"});
        let error = FieldSpec::any("spec/a")
            .visit(&mut object, Leaf::Scalar, &mut |_| Ok(()))
            .unwrap_err();
        assert!(error.contains("under a scalar"), "{error}");
    }

    #[test]
    fn merging_keeps_one_spec_per_field_and_refuses_conflicts() {
        let mut specs = vec![FieldSpec::of("Foo", "spec/a")];
        merge(&mut specs, &[FieldSpec::of("Foo", "spec/a")]).unwrap();
        assert_eq!(specs.len(), 1);
        let mut create = FieldSpec::of("Foo", "spec/a");
        create.create = true;
        assert!(merge(&mut specs, &[create]).is_err());
        merge(&mut specs, &[FieldSpec::of("Bar", "spec/a")]).unwrap();
        assert_eq!(specs.len(), 2);
    }
}
