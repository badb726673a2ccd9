//! `vars`: `$(NAME)` in the `varReference` fields of the build replaced by
//! a field of an object of the build, read once every transformation,
//! hash suffix and name reference is done (kustomize's `ResolveVars`).
//!
//! A var names its object by the id it has where the var is declared
//! (any of its current or earlier ids); vars accumulate from bases to
//! overlays, and a name declared twice in a build is an error. The text
//! is scanned once: a value holding `$(OTHER)` is not scanned again,
//! `$$` is a literal `$`, and `$(UNKNOWN)` stays as it is. A field that
//! is exactly `$(NAME)` takes the value's type (a number stays a number).

use serde::Deserialize;
use serde_json::Value;

use crate::Failure;
use crate::build::{Id, Res};
use crate::fieldspec::{FieldSpec, Leaf};
use crate::transform;

/// The most vars a build may declare.
pub const MAX_VARS: usize = 4096;

/// The most bytes substitution may add to a build's objects, all fields
/// together: a field naming a long value many times cannot blow the
/// output up.
pub const MAX_EXPANSION_BYTES: usize = 64 << 20;

/// The field a var reads when it names none.
const DEFAULT_FIELD_PATH: &str = "metadata.name";

/// A var as a kustomization declares it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Var {
    /// The name used as `$(NAME)`.
    pub name: String,
    /// The object it reads.
    #[serde(alias = "objRef")]
    pub objref: ObjRef,
    /// The field it reads (default `metadata.name`).
    #[serde(default, alias = "fieldRef")]
    pub fieldref: FieldRef,
}

/// The object a var reads, by its id where the var is declared.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjRef {
    /// `group/version` or `version`.
    #[serde(default, rename = "apiVersion", alias = "apiversion")]
    pub api_version: String,
    /// API group (when `apiVersion` does not say it).
    #[serde(default)]
    pub group: String,
    /// API version (when `apiVersion` does not say it).
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Namespace (empty: any).
    #[serde(default)]
    pub namespace: String,
}

/// The field a var reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldRef {
    /// A dotted path: `spec.ports[0].port`, `data.key`,
    /// `spec.containers.[name=app].image`.
    #[serde(default, rename = "fieldPath", alias = "fieldpath")]
    pub field_path: String,
}

impl ObjRef {
    /// Group and version, `apiVersion` first (as kustomize reads them).
    fn group_version(&self) -> (String, String) {
        if self.api_version.is_empty() {
            return (self.group.clone(), self.version.clone());
        }
        match self.api_version.split('/').collect::<Vec<_>>()[..] {
            [group, version] => (group.to_owned(), version.to_owned()),
            [version] => (self.group.clone(), version.to_owned()),
            _ => (self.group.clone(), self.version.clone()),
        }
    }

    /// Whether `id` is this object: same group, version, kind and name;
    /// the namespace counts when the var gives one (or the kind has none).
    fn is(&self, id: &Id) -> bool {
        let (group, version) = self.group_version();
        let wanted = Id {
            group,
            version,
            kind: self.kind.clone(),
            name: self.name.clone(),
            namespace: self.namespace.clone(),
        };
        let gvkn = id.group == wanted.group
            && id.version == wanted.version
            && id.kind == wanted.kind
            && id.name == wanted.name;
        let api_version = if wanted.group.is_empty() {
            wanted.version.clone()
        } else {
            format!("{}/{}", wanted.group, wanted.version)
        };
        if self.namespace.is_empty() && !transform::cluster_scoped(&api_version, &self.kind) {
            gvkn
        } else {
            gvkn && id.effective_namespace() == wanted.effective_namespace()
        }
    }

    fn describe(&self) -> String {
        let (group, version) = self.group_version();
        let mut text = format!("{} {}", self.kind, self.name);
        let gv = if group.is_empty() {
            version
        } else {
            format!("{group}/{version}")
        };
        if !gv.is_empty() {
            text = format!("{text} ({gv})");
        }
        if !self.namespace.is_empty() {
            text = format!("{text} in namespace {}", self.namespace);
        }
        text
    }
}

impl Var {
    fn field_path(&self) -> &str {
        if self.fieldref.field_path.is_empty() {
            DEFAULT_FIELD_PATH
        } else {
            &self.fieldref.field_path
        }
    }
}

/// A var and the kustomization that declares it.
#[derive(Debug, Clone)]
pub struct Declared {
    /// The var.
    pub var: Var,
    /// The kustomization file.
    pub file: String,
}

/// The vars of a build so far, each name once.
#[derive(Debug, Clone, Default)]
pub struct VarSet {
    vars: Vec<Declared>,
}

impl VarSet {
    /// Adds `incoming`, refusing a name already declared.
    pub fn merge(&mut self, incoming: &VarSet) -> Result<(), Failure> {
        for declared in &incoming.vars {
            self.add(declared.clone())?;
        }
        Ok(())
    }

    /// Adds one var; on a name already declared, the file and the message.
    fn add(&mut self, declared: Declared) -> Result<(), Failure> {
        if let Some(existing) = self.vars.iter().find(|d| d.var.name == declared.var.name) {
            return Err(Failure::new(
                &declared.file,
                format!(
                    "var {:?} is declared twice in the build (also in {}); kustomize: var '{}' already encountered",
                    declared.var.name, existing.file, declared.var.name
                ),
            ));
        }
        if self.vars.len() >= MAX_VARS {
            return Err(Failure::new(
                &declared.file,
                format!("more than {MAX_VARS} vars in the build"),
            ));
        }
        self.vars.push(declared);
        Ok(())
    }

    /// Declares the vars of the kustomization `file`, after its
    /// transformations: each marks the one object it names (by any of its
    /// ids), which it will read at the end of the build.
    pub fn declare(
        &mut self,
        file: &str,
        vars: &[Var],
        resources: &mut [Res],
    ) -> Result<(), Failure> {
        for var in vars {
            if var.name.is_empty() {
                return Err(Failure::new(file, "a var has no name"));
            }
            let matched: Vec<usize> = resources
                .iter()
                .enumerate()
                .filter(|(_, res)| res.ids().iter().any(|id| var.objref.is(id)))
                .map(|(index, _)| index)
                .collect();
            match matched[..] {
                [] => {}
                [one] => resources[one].var_names.push(var.name.clone()),
                _ => {
                    return Err(Failure::new(
                        file,
                        format!(
                            "var {:?}: {} objects of the build are {} (give objref.namespace to tell them apart)",
                            var.name,
                            matched.len(),
                            var.objref.describe()
                        ),
                    ));
                }
            }
            self.add(Declared {
                var: var.clone(),
                file: file.to_owned(),
            })?;
        }
        Ok(())
    }

    /// Whether no var is declared.
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// The value of every var, read from the object it marked; by name.
    pub fn values(&self, resources: &[Res]) -> Result<Vec<(String, Value)>, Failure> {
        let mut sorted: Vec<&Declared> = self.vars.iter().collect();
        sorted.sort_by(|a, b| a.var.name.cmp(&b.var.name));
        let mut values = Vec::new();
        for declared in sorted {
            let var = &declared.var;
            let Some(res) = resources.iter().find(|r| r.var_names.contains(&var.name)) else {
                return Err(Failure::new(
                    &declared.file,
                    format!(
                        "var {:?} names {}, which is not in the build",
                        var.name,
                        var.objref.describe()
                    ),
                ));
            };
            let value = field(&res.value, var.field_path()).map_err(|e| {
                Failure::new(
                    &declared.file,
                    format!("var {:?}: {}: {e}", var.name, res.describe()),
                )
            })?;
            // kustomize reads a null field as its text: `null` as written
            // so (an empty value would be `""`; the plugin cannot tell).
            let value = if value.is_null() {
                Value::String("null".to_owned())
            } else {
                value
            };
            values.push((var.name.clone(), value));
        }
        Ok(values)
    }
}

/// The value at a var's dotted field path: keys, `name[N]` and `N` indexes,
/// `[key=value]` list elements, `[a.b]` keys holding dots.
fn field(object: &Value, path: &str) -> Result<Value, String> {
    let mut current = object;
    for step in split(path) {
        let next = match current {
            Value::Object(map) => map.get(step.as_str()),
            Value::Array(list) => match step
                .strip_prefix('[')
                .and_then(|s| s.strip_suffix(']'))
                .and_then(|s| s.split_once('='))
            {
                Some((key, wanted)) => list.iter().find(|e| {
                    if key.is_empty() {
                        e.as_str() == Some(wanted)
                    } else {
                        e[key].as_str() == Some(wanted)
                    }
                }),
                None => step.parse::<usize>().ok().and_then(|i| list.get(i)),
            },
            _ => None,
        };
        current = next.ok_or_else(|| format!("no field {path:?}"))?;
    }
    Ok(current.clone())
}

/// Splits at dots outside brackets; `name[N]` becomes `name`, `N`; a
/// bracketed key without `=` is the key itself.
fn split(path: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in path.chars() {
        match c {
            '[' => {
                depth += 1;
                current.push(c);
            }
            ']' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            '.' if depth == 0 => parts.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    parts.push(current);
    let mut steps = Vec::new();
    for part in parts {
        if let Some(open) = part.find('[')
            && open > 0
            && part.ends_with(']')
            && part[open + 1..part.len() - 1]
                .bytes()
                .all(|b| b.is_ascii_digit())
            && part.len() > open + 2
        {
            steps.push(part[..open].to_owned());
            steps.push(part[open + 1..part.len() - 1].to_owned());
        } else if let Some(inner) = part.strip_prefix('[').and_then(|p| p.strip_suffix(']'))
            && !inner.contains('=')
        {
            steps.push(inner.to_owned());
        } else {
            steps.push(part);
        }
    }
    steps
}

/// The replacement of `$(NAME)`: a var's value if it is a scalar.
fn lookup<'a>(values: &'a [(String, Value)], name: &str) -> Option<&'a Value> {
    values
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
        .filter(|v| !v.is_object() && !v.is_array())
}

/// A scalar as Go's `%v` prints it inside a longer string.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "null".to_owned(),
        Value::Number(n) if n.is_f64() => go_float(n.as_f64().unwrap_or_default()),
        other => other.to_string(),
    }
}

/// Go's `%v` of a float64: shortest digits, an exponent below 1e-4 and
/// from 1e21 on.
fn go_float(f: f64) -> String {
    if f != 0.0 && (f.abs() < 1e-4 || f.abs() >= 1e21) {
        let text = format!("{f:e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let exponent: i32 = exponent.parse().unwrap_or_default();
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    } else {
        format!("{f}")
    }
}

/// A float64 as kustomize writes a whole field (`strconv.FormatFloat(f, 'f', -1, 64)`).
fn whole_float(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        Value::from(f as i64)
    } else {
        Value::from(f)
    }
}

/// `input` with its `$(NAME)` replaced (kustomize's one-pass scan).
pub fn expand(input: &str, values: &[(String, Value)]) -> Value {
    let mut unbounded = usize::MAX;
    expand_within(input, values, &mut unbounded).unwrap_or_default()
}

/// [`expand`], refusing to grow the text by more than `budget` bytes
/// (checked before each value is copied); what it grew by is taken from
/// `budget`.
fn expand_within(
    input: &str,
    values: &[(String, Value)],
    budget: &mut usize,
) -> Result<Value, String> {
    let limit = input.len().saturating_add(*budget);
    let too_long =
        || format!("var substitution adds more than {MAX_EXPANSION_BYTES} bytes to the build");
    let bytes = input.as_bytes();
    let mut out = String::with_capacity(input.len());
    let mut checkpoint = 0;
    let mut cursor = 0;
    while cursor < bytes.len() {
        if bytes[cursor] == b'$' && cursor + 1 < bytes.len() {
            out.push_str(&input[checkpoint..cursor]);
            let rest = &input[cursor + 1..];
            let advance = match rest.as_bytes()[0] {
                // `$$`: a literal `$`.
                b'$' => {
                    out.push('$');
                    1
                }
                b'(' => match rest[1..].find(')') {
                    Some(close) => {
                        let name = &rest[1..close + 1];
                        let replacement = lookup(values, name);
                        if input.len() == name.len() + 3 {
                            // The whole field: the value keeps its type.
                            let whole = match replacement {
                                Some(Value::Number(n)) if n.is_f64() => {
                                    whole_float(n.as_f64().unwrap_or_default())
                                }
                                Some(value) => value.clone(),
                                None => Value::String(input.to_owned()),
                            };
                            let grown = match &whole {
                                Value::String(s) => s.len().saturating_sub(input.len()),
                                _ => 0,
                            };
                            *budget = budget.checked_sub(grown).ok_or_else(too_long)?;
                            return Ok(whole);
                        }
                        let piece = match replacement {
                            Some(value) => text(value),
                            None => format!("$({name})"),
                        };
                        if out.len().saturating_add(piece.len()) > limit {
                            return Err(too_long());
                        }
                        out.push_str(&piece);
                        close + 2
                    }
                    // An unclosed `$(`: kept.
                    None => {
                        out.push_str("$(");
                        1
                    }
                },
                _ => {
                    out.push('$');
                    0
                }
            };
            cursor += advance;
            checkpoint = cursor + 1;
        }
        cursor += 1;
    }
    out.push_str(&input[checkpoint.min(input.len())..]);
    if out.len() > limit {
        return Err(too_long());
    }
    *budget -= out.len().saturating_sub(input.len());
    Ok(Value::String(out))
}

/// Replaces `$(NAME)` in the `varReference` fields of every object.
pub fn substitute(
    resources: &mut [Res],
    specs: &[FieldSpec],
    values: &[(String, Value)],
) -> Result<(), String> {
    let mut budget = MAX_EXPANSION_BYTES;
    for res in resources.iter_mut() {
        let described = res.describe();
        for spec in specs {
            if !spec.selects(&res.value) {
                continue;
            }
            let spec = FieldSpec {
                create: false,
                ..spec.clone()
            };
            spec.visit(&mut res.value, Leaf::Scalar, &mut |field| {
                set(field, values, &mut budget)
            })
            .map_err(|e| format!("{described}: {e}"))?;
        }
    }
    Ok(())
}

fn set(field: &mut Value, values: &[(String, Value)], budget: &mut usize) -> Result<(), String> {
    let mut one = |item: &mut Value| -> Result<(), String> {
        let Value::String(input) = &*item else {
            return Ok(());
        };
        *item = expand_within(input, values, budget)?;
        Ok(())
    };
    match field {
        Value::String(_) => one(field),
        Value::Object(map) => map.values_mut().try_for_each(one),
        Value::Array(list) => list.iter_mut().try_for_each(|item| {
            if !item.is_string() {
                return Err(
                    "a list item is not a string (kustomize: invalid value type expect a string)"
                        .to_owned(),
                );
            }
            one(item)
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn values() -> Vec<(String, Value)> {
        vec![
            ("A".into(), json!("alpha")),
            ("N".into(), json!(8080)),
            ("B".into(), json!(false)),
            ("LOOP".into(), json!("$(LOOP)$(A)")),
            ("MAP".into(), json!({"k": "v"})),
        ]
    }

    #[test]
    fn expansion_follows_kustomizes_scan() {
        let v = values();
        assert_eq!(expand("$(A)", &v), json!("alpha"));
        assert_eq!(expand("$(N)", &v), json!(8080));
        assert_eq!(expand("$(B)", &v), json!(false));
        assert_eq!(expand("x$(N)y$(B)", &v), json!("x8080yfalse"));
        assert_eq!(expand("$$(A)", &v), json!("$(A)"));
        assert_eq!(expand("$(NOPE)-$(A)", &v), json!("$(NOPE)-alpha"));
        assert_eq!(expand("$(NOPE)", &v), json!("$(NOPE)"));
        assert_eq!(expand("$(MAP)", &v), json!("$(MAP)"));
        assert_eq!(expand("$HOME $ $( $", &v), json!("$HOME $ $( $"));
        assert_eq!(expand("é$(A)é$", &v), json!("éalphaé$"));
    }

    #[test]
    fn a_value_naming_a_var_is_not_expanded_again() {
        let v = values();
        assert_eq!(expand("$(LOOP)", &v), json!("$(LOOP)$(A)"));
        assert_eq!(expand("<$(LOOP)>", &v), json!("<$(LOOP)$(A)>"));
    }

    #[test]
    fn substitution_is_bounded() {
        // A field naming a 1 MiB value a million times would be 1 TiB: it
        // fails when the budget runs out, before the text is built.
        let big = "x".repeat(1 << 20);
        let v = vec![("BIG".to_owned(), Value::String(big))];
        let mut field = Value::String("$(BIG)".repeat(1 << 20));
        let mut budget = MAX_EXPANSION_BYTES;
        let error = set(&mut field, &v, &mut budget).unwrap_err();
        assert!(error.contains("more than"), "{error}");
        // The budget is the build's: many fields together run it out too.
        let mut budget = MAX_EXPANSION_BYTES;
        let mut fields = vec![Value::String("$(BIG)".to_owned()); 100];
        let error = fields
            .iter_mut()
            .try_for_each(|f| set(f, &v, &mut budget))
            .unwrap_err();
        assert!(error.contains("more than"), "{error}");
    }

    #[test]
    fn the_number_of_vars_is_bounded() {
        let var = |i: usize| Var {
            name: format!("V{i}"),
            objref: ObjRef::default(),
            fieldref: FieldRef::default(),
        };
        let vars: Vec<Var> = (0..=MAX_VARS).map(var).collect();
        let mut set = VarSet::default();
        let error = set.declare("k.yaml", &vars, &mut []).unwrap_err();
        assert_eq!(error.file, "k.yaml");
        assert!(
            error
                .message
                .contains(&format!("more than {MAX_VARS} vars")),
            "{error}"
        );
    }

    #[test]
    fn field_paths_read_like_kustomizes() {
        let object = json!({
            "spec": {"ports": [{"port": 80}, {"port": 443}], "containers": [{"name": "a", "image": "x"}]},
            "metadata": {"annotations": {"a.b/c": "d"}}
        });
        assert_eq!(field(&object, "spec.ports[1].port").unwrap(), json!(443));
        assert_eq!(field(&object, "spec.ports.0.port").unwrap(), json!(80));
        assert_eq!(
            field(&object, "spec.containers.[name=a].image").unwrap(),
            json!("x")
        );
        assert_eq!(
            field(&object, "metadata.annotations.[a.b/c]").unwrap(),
            json!("d")
        );
        assert!(field(&object, "spec.nope").is_err());
    }

    #[test]
    fn floats_print_as_go_prints_them() {
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(0.00001), "1e-05");
    }
}
