//! `replacements`: a value read from one object (its `source`) written into
//! fields of others (its `targets`), with kustomize's field paths
//! (`spec.template.spec.containers.[name=app].image`, `*`, indexes,
//! `[a.b/c]` for keys with dots) and `delimiter`/`index`/`create` options.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::build::{Id, Res};

/// The default field: the source's name.
const DEFAULT_FIELD_PATH: &str = "metadata.name";

/// One replacement.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replacement {
    /// Where the value comes from.
    pub source: Source,
    /// Where it goes.
    #[serde(default)]
    pub targets: Vec<Target>,
}

/// A replacements file: a list of replacements, or one.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Replacements {
    /// A list.
    List(Vec<Replacement>),
    /// Just one.
    One(Replacement),
}

impl Replacements {
    /// The replacements, in order.
    pub fn into_vec(self) -> Vec<Replacement> {
        match self {
            Replacements::List(list) => list,
            Replacements::One(one) => vec![one],
        }
    }
}

/// An object (selected by exact id fields) and a field of it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Source {
    /// API group.
    pub group: Option<String>,
    /// API version.
    pub version: Option<String>,
    /// Kind.
    pub kind: Option<String>,
    /// Name.
    pub name: Option<String>,
    /// Namespace.
    pub namespace: Option<String>,
    /// The field (default `metadata.name`).
    pub field_path: Option<String>,
    /// `delimiter` and `index` pick a part of the value.
    #[serde(default)]
    pub options: Options,
}

/// Exact id fields of objects (unset fields match anything), with label
/// and annotation selectors.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IdSelector {
    /// API group.
    pub group: Option<String>,
    /// API version.
    pub version: Option<String>,
    /// Kind.
    pub kind: Option<String>,
    /// Name.
    pub name: Option<String>,
    /// Namespace.
    pub namespace: Option<String>,
    /// A label selector.
    pub label_selector: Option<String>,
    /// An annotation selector.
    pub annotation_selector: Option<String>,
}

/// The objects and fields a value is written to.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Target {
    /// The objects.
    pub select: Option<IdSelector>,
    /// Objects excluded.
    #[serde(default)]
    pub reject: Vec<IdSelector>,
    /// The fields (default `metadata.name`).
    #[serde(default)]
    pub field_paths: Vec<String>,
    /// `delimiter`/`index` write a part of the field; `create` makes
    /// missing fields.
    #[serde(default)]
    pub options: Options,
}

/// `delimiter`, `index`, `create`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Options {
    /// Split the value at this.
    pub delimiter: Option<String>,
    /// The part (negative: before the first; past the end: after the last).
    #[serde(default)]
    pub index: i64,
    /// Create missing fields of targets.
    #[serde(default)]
    pub create: bool,
}

fn id_selected(
    id: &Id,
    group: &Option<String>,
    version: &Option<String>,
    kind: &Option<String>,
    name: &Option<String>,
    namespace: &Option<String>,
) -> bool {
    let ok = |want: &Option<String>, have: &str| {
        want.as_deref().is_none_or(|w| w.is_empty() || w == have)
    };
    ok(group, &id.group)
        && ok(version, &id.version)
        && ok(kind, &id.kind)
        && ok(name, &id.name)
        && namespace
            .as_deref()
            .is_none_or(|n| n.is_empty() || Id::effective(n) == id.effective_namespace())
}

impl IdSelector {
    fn selects(&self, res: &Res) -> Result<bool, String> {
        let labels = crate::select::Selector {
            label_selector: self.label_selector.clone(),
            annotation_selector: self.annotation_selector.clone(),
            ..Default::default()
        }
        .matcher()?;
        Ok(labels.selects(res)
            && res.ids().iter().any(|id| {
                id_selected(
                    id,
                    &self.group,
                    &self.version,
                    &self.kind,
                    &self.name,
                    &self.namespace,
                )
            }))
    }

    /// kustomize's `reject`: its label and annotation selectors and its id
    /// fields reject on their own (either is enough).
    fn rejects(&self, res: &Res) -> Result<bool, String> {
        let has_selectors = self.label_selector.is_some() || self.annotation_selector.is_some();
        if has_selectors {
            let labels = crate::select::Selector {
                label_selector: self.label_selector.clone(),
                annotation_selector: self.annotation_selector.clone(),
                ..Default::default()
            }
            .matcher()?;
            if labels.selects(res) {
                return Ok(true);
            }
        }
        let has_id = [
            &self.group,
            &self.version,
            &self.kind,
            &self.name,
            &self.namespace,
        ]
        .iter()
        .any(|f| f.as_deref().is_some_and(|v| !v.is_empty()));
        Ok(has_id
            && res.ids().iter().any(|id| {
                id_selected(
                    id,
                    &self.group,
                    &self.version,
                    &self.kind,
                    &self.name,
                    &self.namespace,
                )
            }))
    }

    fn describe(&self) -> String {
        crate::select::describe_fields(&[
            ("group", &self.group),
            ("version", &self.version),
            ("kind", &self.kind),
            ("name", &self.name),
            ("namespace", &self.namespace),
        ])
    }
}

impl Source {
    fn describe(&self) -> String {
        crate::select::describe_fields(&[
            ("group", &self.group),
            ("version", &self.version),
            ("kind", &self.kind),
            ("name", &self.name),
            ("namespace", &self.namespace),
        ])
    }
}

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// A map key.
    Key(String),
    /// Every element of a list (or every value of a map).
    All,
    /// The list element whose `key` is `value` (`[=value]`: a primitive
    /// element equal to `value`).
    Element(String, String),
    /// A list index.
    Index(usize),
}

/// Splits a field path at dots outside brackets; `\.` is a literal dot.
fn steps(path: &str) -> Result<Vec<Step>, String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut depth = 0;
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'.') => {
                current.push('.');
                chars.next();
            }
            '[' => {
                depth += 1;
                current.push(c);
            }
            ']' => {
                depth -= 1;
                current.push(c);
            }
            '.' if depth == 0 => parts.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    parts.push(current);
    // kustomize skips empty steps: `.metadata.name` (kubebuilder's
    // scaffolding writes it so), `a..b` and a trailing dot all mean the
    // path without them.
    parts.retain(|part| !part.is_empty());
    if parts.is_empty() {
        return Err(format!("field path {path:?} names no field"));
    }
    parts
        .into_iter()
        .map(|part| {
            if part == "*" {
                return Ok(Step::All);
            }
            if let Some(inner) = part.strip_prefix('[').and_then(|p| p.strip_suffix(']')) {
                return Ok(match inner.split_once('=') {
                    Some((key, value)) => Step::Element(key.to_owned(), value.to_owned()),
                    None => Step::Key(inner.to_owned()),
                });
            }
            if let Ok(index) = part.parse::<usize>() {
                return Ok(Step::Index(index));
            }
            Ok(Step::Key(part))
        })
        .collect()
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// How `[key=value]` compares: exactly (sources), or as an unanchored
/// regular expression (targets — kustomize's rule, so `[name=app]` also
/// selects `myapp`; write `[name=^app$]` to be exact).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compare {
    Exact,
    Regex,
}

fn element_matches(element: &Value, key: &str, value: &str, compare: Compare) -> bool {
    let found = if key.is_empty() {
        (!element.is_object() && !element.is_array()).then(|| text(element))
    } else {
        element.get(key).map(text)
    };
    let Some(found) = found else {
        return false;
    };
    match compare {
        Compare::Exact => found == value,
        Compare::Regex => regex_lite::Regex::new(value)
            .map(|r| r.is_match(&found))
            .unwrap_or(found == value),
    }
}

/// The fields a path names; with `create`, missing ones are made (the last
/// one as `Null`, to be written).
fn lookup<'a>(
    value: &'a mut Value,
    steps: &[Step],
    create: bool,
    compare: Compare,
    out: &mut Vec<&'a mut Value>,
) {
    let Some((step, rest)) = steps.split_first() else {
        out.push(value);
        return;
    };
    match step {
        Step::Key(key) => {
            if create && value.is_null() {
                *value = Value::Object(Map::new());
            }
            let Some(map) = value.as_object_mut() else {
                return;
            };
            if create && !map.contains_key(key) {
                let next = if rest.is_empty() {
                    Value::Null
                } else {
                    Value::Object(Map::new())
                };
                map.insert(key.clone(), next);
            }
            if let Some(next) = map.get_mut(key) {
                lookup(next, rest, create, compare, out);
            }
        }
        Step::All => match value {
            Value::Array(list) => list
                .iter_mut()
                .for_each(|v| lookup(v, rest, create, compare, out)),
            Value::Object(map) => map
                .values_mut()
                .for_each(|v| lookup(v, rest, create, compare, out)),
            _ => {}
        },
        Step::Element(key, wanted) => {
            if create && value.is_null() {
                *value = Value::Array(Vec::new());
            }
            let Some(list) = value.as_array_mut() else {
                return;
            };
            if create
                && !list
                    .iter()
                    .any(|e| element_matches(e, key, wanted, compare))
            {
                list.push(if key.is_empty() {
                    Value::String(wanted.clone())
                } else {
                    serde_json::json!({ key.as_str(): wanted })
                });
            }
            for element in list
                .iter_mut()
                .filter(|e| element_matches(e, key, wanted, compare))
            {
                lookup(element, rest, create, compare, out);
            }
        }
        Step::Index(index) => {
            if let Some(next) = value.as_array_mut().and_then(|l| l.get_mut(*index)) {
                lookup(next, rest, create, compare, out);
            }
        }
    }
}

/// The value of `source`, with its options applied.
fn source_value(resources: &mut [Res], source: &Source) -> Result<Value, String> {
    let mut found = None;
    for (index, res) in resources.iter().enumerate() {
        let selected = res.ids().iter().any(|id| {
            id_selected(
                id,
                &source.group,
                &source.version,
                &source.kind,
                &source.name,
                &source.namespace,
            )
        });
        if selected {
            if found.is_some() {
                return Err(format!(
                    "more than one object matches the replacement source ({})",
                    source.describe()
                ));
            }
            found = Some(index);
        }
    }
    let Some(index) = found else {
        return Err(format!(
            "no object matches the replacement source ({})",
            source.describe()
        ));
    };
    let path = source.field_path.as_deref().unwrap_or(DEFAULT_FIELD_PATH);
    let mut fields = Vec::new();
    lookup(
        &mut resources[index].value,
        &steps(path)?,
        false,
        Compare::Exact,
        &mut fields,
    );
    let value = fields
        .into_iter()
        .next()
        .filter(|v| !v.is_null())
        .map(|v| v.clone())
        .ok_or_else(|| {
            format!(
                "the replacement source ({}) has no field {path:?}",
                source.describe()
            )
        })?;
    let Some(delimiter) = source
        .options
        .delimiter
        .as_deref()
        .filter(|d| !d.is_empty())
    else {
        return Ok(value);
    };
    if value.is_object() || value.is_array() {
        return Err(format!(
            "the replacement source's {path:?} is not a scalar: delimiter cannot split it"
        ));
    }
    let text = text(&value);
    let parts: Vec<&str> = text.split(delimiter).collect();
    let index = source.options.index;
    if index < 0 || index as usize >= parts.len() {
        return Err(format!(
            "options.index {index} is out of bounds for the value {text:?} of the replacement source"
        ));
    }
    Ok(Value::String(parts[index as usize].to_owned()))
}

/// A scalar target keeps its type (`"80"` into a number stays a number).
fn write(field: &mut Value, value: &Value, options: &Options) -> Result<(), String> {
    let mut value = value.clone();
    if let Some(delimiter) = options.delimiter.as_deref().filter(|d| !d.is_empty()) {
        if field.is_object() || field.is_array() {
            return Err("delimiter can only be used with scalar fields".into());
        }
        let current = text(field);
        let mut parts: Vec<String> = current.split(delimiter).map(str::to_owned).collect();
        let new = text(&value);
        if options.index < 0 {
            parts.insert(0, new);
        } else if options.index as usize >= parts.len() {
            parts.push(new);
        } else {
            parts[options.index as usize] = new;
        }
        value = Value::String(parts.join(delimiter));
    }
    let scalar = |v: &Value| !v.is_object() && !v.is_array();
    *field = match (&*field, scalar(&value)) {
        (Value::String(_), true) => Value::String(text(&value)),
        (Value::Number(_), true) => {
            let t = text(&value);
            serde_json::from_str::<serde_json::Number>(&t)
                .map(Value::Number)
                .unwrap_or(Value::String(t))
        }
        (Value::Bool(_), true) => match text(&value).as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            t => Value::String(t.to_owned()),
        },
        _ => value,
    };
    Ok(())
}

/// Runs one replacement over the layer's objects.
pub fn apply(resources: &mut [Res], replacement: &Replacement) -> Result<(), String> {
    let value = source_value(resources, &replacement.source)?;
    for target in &replacement.targets {
        let Some(select) = &target.select else {
            return Err("a replacement target has no `select`".into());
        };
        let default = [DEFAULT_FIELD_PATH.to_owned()];
        let paths = if target.field_paths.is_empty() {
            &default[..]
        } else {
            &target.field_paths[..]
        };
        let paths: Vec<(String, Vec<Step>)> = paths
            .iter()
            .map(|p| steps(p).map(|s| (p.clone(), s)))
            .collect::<Result<_, _>>()?;
        for res in resources.iter_mut() {
            if !select.selects(res)? {
                continue;
            }
            let mut rejected = false;
            for reject in &target.reject {
                rejected |= reject.rejects(res)?;
            }
            if rejected {
                continue;
            }
            for (path, steps) in &paths {
                let mut fields = Vec::new();
                lookup(
                    &mut res.value,
                    steps,
                    target.options.create,
                    Compare::Regex,
                    &mut fields,
                );
                if fields.is_empty() {
                    return Err(format!(
                        "unable to find{} field {path:?} in the replacement target {} (selected by {})",
                        if target.options.create {
                            " or create"
                        } else {
                            ""
                        },
                        res.describe(),
                        select.describe()
                    ));
                }
                for field in fields {
                    write(field, &value, &target.options)?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_paths_split_like_kustomize() {
        assert_eq!(
            steps("spec.containers.[name=app.v1].image").unwrap(),
            vec![
                Step::Key("spec".into()),
                Step::Key("containers".into()),
                Step::Element("name".into(), "app.v1".into()),
                Step::Key("image".into())
            ]
        );
        assert_eq!(
            steps("metadata.labels.[app.kubernetes.io/name]").unwrap()[2],
            Step::Key("app.kubernetes.io/name".into())
        );
        assert_eq!(
            steps(r"metadata.labels.a\.b").unwrap()[2],
            Step::Key("a.b".into())
        );
        assert_eq!(steps("spec.ports.0.port").unwrap()[2], Step::Index(0));
    }
}
