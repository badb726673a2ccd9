//! The substitution engine, free of any plugin plumbing so it also runs
//! natively.

use serde_yaml::{Mapping, Value};

/// One template document source: where it came from and its text.
#[derive(Debug, Clone)]
pub struct Template {
    /// Path relative to the source root (or a name), for error messages.
    pub source: String,
    /// YAML text, possibly several documents.
    pub text: String,
}

/// A rendering failure located in a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The file (template or values file).
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<u32>,
    /// What is wrong.
    pub message: String,
}

impl Failure {
    fn new(file: &str, message: impl Into<String>) -> Self {
        Failure {
            file: file.to_owned(),
            line: None,
            message: message.into(),
        }
    }
}

/// Parses every non-empty document of a YAML text.
pub fn parse_documents(file: &str, text: &str) -> Result<Vec<Value>, Failure> {
    check_yaml(text).map_err(|e| Failure {
        file: file.to_owned(),
        line: e.line.and_then(|l| u32::try_from(l).ok()),
        message: e.to_string(),
    })?;
    let mut docs = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let value = <Value as serde::Deserialize>::deserialize(document).map_err(|e| Failure {
            file: file.to_owned(),
            line: e.location().map(|l| l.line() as u32),
            message: e.to_string(),
        })?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

/// Checks a YAML text (a file, a parameter, a default) against Kiln's limits
/// on alias expansion, before it is parsed.
fn check_yaml(text: &str) -> Result<(), kiln_yaml_limits::ExpansionError> {
    kiln_yaml_limits::check(text, &kiln_yaml_limits::YamlLimits::default())
}

/// Deep-merges `overlay` into `base`: mappings merge key by key, anything
/// else replaces.
pub fn merge(base: &mut Value, overlay: Value) {
    match (base, overlay) {
        (Value::Mapping(base), Value::Mapping(overlay)) => {
            for (key, value) in overlay {
                match base.get_mut(&key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, overlay) => *base = overlay,
    }
}

/// Sets a dotted path (`image.tag`) to a value parsed as a YAML scalar.
pub fn set_path(values: &mut Value, dotted: &str, raw: &str) -> Result<(), String> {
    if dotted.is_empty() || dotted.split('.').any(str::is_empty) {
        return Err(format!("parameter `{dotted}`: not a dotted value path"));
    }
    check_yaml(raw).map_err(|e| format!("parameter `{dotted}`: {e}"))?;
    let parsed: Value = serde_yaml::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()));
    let mut overlay = parsed;
    for key in dotted.rsplit('.') {
        let mut map = Mapping::new();
        map.insert(Value::String(key.to_owned()), overlay);
        overlay = Value::Mapping(map);
    }
    merge(values, overlay);
    Ok(())
}

/// The data placeholders can reach: `.Values` and `.App`.
#[derive(Debug, Clone)]
pub struct Scope {
    root: Value,
}

impl Scope {
    /// A scope from merged values and the Application's fields
    /// (`Name`, `Namespace`, `Project`, `RepoURL`, `Revision`, `Path`).
    pub fn new(values: Value, app: &[(&str, &str)]) -> Self {
        let mut app_map = Mapping::new();
        for (k, v) in app {
            app_map.insert(
                Value::String((*k).to_owned()),
                Value::String((*v).to_owned()),
            );
        }
        let mut root = Mapping::new();
        root.insert(Value::String("Values".into()), values);
        root.insert(Value::String("App".into()), Value::Mapping(app_map));
        Scope {
            root: Value::Mapping(root),
        }
    }

    fn lookup(&self, path: &str) -> Option<&Value> {
        let mut cur = &self.root;
        for key in path.split('.') {
            cur = cur.as_mapping()?.get(key)?;
        }
        Some(cur)
    }
}

/// Renders templates into documents, in order, each with its source.
pub fn render(scope: &Scope, templates: &[Template]) -> Result<Vec<(String, Value)>, Failure> {
    let mut out = Vec::new();
    for template in templates {
        for mut doc in parse_documents(&template.source, &template.text)? {
            substitute(scope, &mut doc).map_err(|m| Failure::new(&template.source, m))?;
            out.push((template.source.clone(), doc));
        }
    }
    Ok(out)
}

fn substitute(scope: &Scope, value: &mut Value) -> Result<(), String> {
    match value {
        Value::String(text) if text.contains("{{") => {
            *value = expand(scope, text)?;
        }
        Value::Sequence(items) => {
            for item in items {
                substitute(scope, item)?;
            }
        }
        Value::Mapping(map) => {
            for (_, item) in map.iter_mut() {
                substitute(scope, item)?;
            }
        }
        Value::Tagged(tagged) => substitute(scope, &mut tagged.value)?,
        _ => {}
    }
    Ok(())
}

/// Expands every placeholder of one scalar.
fn expand(scope: &Scope, text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    // A scalar that is one placeholder keeps the value's type.
    if trimmed.starts_with("{{") && trimmed.ends_with("}}") && trimmed[2..].find("{{").is_none() {
        return evaluate(scope, &trimmed[2..trimmed.len() - 2]);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| format!("unterminated placeholder in `{text}`"))?;
        let value = evaluate(scope, &after[..end])?;
        out.push_str(&scalar_text(&value).ok_or_else(|| {
            format!(
                "placeholder `{{{{{}}}}}` names a mapping or list and cannot be part of text `{text}`",
                &after[..end]
            )
        })?);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(Value::String(out))
}

/// Evaluates `.Values.a.b` or `.Values.a.b | default X`.
fn evaluate(scope: &Scope, expression: &str) -> Result<Value, String> {
    let (path, default) = match expression.split_once('|') {
        Some((path, filter)) => {
            let filter = filter.trim();
            let raw = filter
                .strip_prefix("default")
                .filter(|rest| rest.starts_with(char::is_whitespace))
                .ok_or_else(|| format!("unknown filter `{filter}` (only `default VALUE` exists)"))?
                .trim();
            check_yaml(raw).map_err(|e| format!("default `{raw}`: {e}"))?;
            let default: Value =
                serde_yaml::from_str(raw).map_err(|e| format!("default `{raw}`: {e}"))?;
            (path.trim(), Some(default))
        }
        None => (expression.trim(), None),
    };
    let dotted = path
        .strip_prefix('.')
        .filter(|p| p.starts_with("Values") || p.starts_with("App"))
        .ok_or_else(|| format!("placeholder `{path}` must start with `.Values` or `.App`"))?;
    match (scope.lookup(dotted), default) {
        (Some(v), _) if !v.is_null() => Ok(v.clone()),
        (_, Some(default)) => Ok(default),
        (found, None) => Err(format!(
            "placeholder `{path}` {}",
            if found.is_some() {
                "is null"
            } else {
                "names no value"
            }
        )),
    }
}

fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Null => Some(String::new()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> Scope {
        let values: Value =
            serde_yaml::from_str("replicas: 3\nimage: {tag: '1.27'}\nres: {cpu: 1}").unwrap();
        Scope::new(values, &[("Name", "shop")])
    }

    fn render_one(text: &str) -> Result<Value, Failure> {
        let t = Template {
            source: "t.yaml".into(),
            text: text.into(),
        };
        render(&scope(), &[t]).map(|mut docs| docs.remove(0).1)
    }

    #[test]
    fn whole_placeholder_keeps_type() {
        let v = render_one("n: '{{ .Values.replicas }}'\nr: '{{ .Values.res }}'").unwrap();
        assert_eq!(v["n"], Value::from(3));
        assert_eq!(v["r"]["cpu"], Value::from(1));
    }

    #[test]
    fn interpolation_and_app_fields() {
        let v = render_one("i: 'nginx:{{ .Values.image.tag }}-{{.App.Name}}'").unwrap();
        assert_eq!(v["i"], Value::from("nginx:1.27-shop"));
    }

    #[test]
    fn default_and_missing() {
        let v = render_one("a: '{{ .Values.nope | default 5 }}'").unwrap();
        assert_eq!(v["a"], Value::from(5));
        let err = render_one("a: '{{ .Values.nope }}'").unwrap_err();
        assert_eq!(err.file, "t.yaml");
        assert!(err.message.contains(".Values.nope"), "{err:?}");
    }

    #[test]
    fn set_path_parses_scalars() {
        let mut values = Value::Null;
        set_path(&mut values, "image.tag", "2").unwrap();
        set_path(&mut values, "image.name", "web").unwrap();
        assert_eq!(values["image"]["tag"], Value::from(2));
        assert_eq!(values["image"]["name"], Value::from("web"));
        assert!(set_path(&mut values, "a..b", "x").is_err());
    }

    /// One anchor of 3000 items referenced 3000 times: 9 million values.
    fn bomb() -> String {
        let items = vec!["1"; 3000].join(",");
        let refs = vec!["*a"; 3000].join(",");
        format!("a: &a [{items}]\nb: [{refs}]\n")
    }

    #[test]
    fn alias_bombs_are_refused_naming_the_file() {
        // Not `unwrap_err`: it would print 9 million values.
        let Err(err) = parse_documents("values.yaml", &bomb()) else {
            panic!("the bomb was parsed");
        };
        assert_eq!((err.file.as_str(), err.line), ("values.yaml", Some(1)));
        assert!(
            err.message.starts_with("YAML aliases expand to more than "),
            "{err:?}"
        );
        let err = set_path(&mut Value::Null, "x", &bomb()).unwrap_err();
        assert!(
            err.starts_with("parameter `x`: YAML aliases expand"),
            "{err}"
        );
        let few = parse_documents("v.yaml", "a: &a {b: 1}\nc: *a\n").unwrap();
        assert_eq!(few[0]["c"]["b"], Value::from(1));
    }

    #[test]
    fn broken_yaml_has_line() {
        let err = render_one("a: 1\nb: [\n").unwrap_err();
        assert_eq!(err.line, Some(3));
    }
}
