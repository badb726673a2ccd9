//! Parameters as Argo CD's generators give them: flat string maps for
//! `{{param}}` templates, nested values for Go templates; path
//! parameters; Argo's `normalize`; flattening for selectors.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// One parameter set.
pub type Params = Map<String, Value>;

/// Argo CD's `SanitizeName`: lower case, every character that is not
/// `a-z`, `0-9`, `-` or `.` a `-`, at most 253 bytes, without `-` or `.`
/// at either end.
pub fn normalize(name: &str) -> String {
    let mut out: String = name
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    out.truncate(253);
    out.trim_matches(['-', '.']).to_owned()
}

/// Adds the path parameters of `path` (a directory; `file`, a file in it,
/// for the files generator) under `prefix` (`pathParamPrefix`), as Argo
/// CD's git generator does.
pub fn add_path(params: &mut Params, path: &str, file: Option<&str>, prefix: &str, go: bool) {
    let basename = path.rsplit('/').next().unwrap_or(path);
    if go {
        let mut p = Map::new();
        p.insert("path".into(), path.into());
        p.insert("basename".into(), basename.into());
        p.insert("basenameNormalized".into(), normalize(basename).into());
        if let Some(file) = file {
            p.insert("filename".into(), file.into());
            p.insert("filenameNormalized".into(), normalize(file).into());
        }
        p.insert(
            "segments".into(),
            Value::Array(path.split('/').map(Value::from).collect()),
        );
        let mut target = params;
        for part in prefix.split('.').filter(|p| !p.is_empty()) {
            let entry = target
                .entry(part.to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            target = entry.as_object_mut().expect("an object");
        }
        target.insert("path".into(), Value::Object(p));
    } else {
        let name = if prefix.is_empty() {
            "path".to_owned()
        } else {
            format!("{prefix}.path")
        };
        params.insert(name.clone(), path.into());
        params.insert(format!("{name}.basename"), basename.into());
        params.insert(
            format!("{name}.basenameNormalized"),
            normalize(basename).into(),
        );
        if let Some(file) = file {
            params.insert(format!("{name}.filename"), file.into());
            params.insert(format!("{name}.filenameNormalized"), normalize(file).into());
        }
        for (i, segment) in path.split('/').enumerate() {
            if !segment.is_empty() {
                params.insert(format!("{name}[{i}]"), segment.into());
            }
        }
    }
}

/// `value` flattened with `.` (lists by index), every leaf as Go's `%v`
/// prints it: what a selector sees, and a file's parameters in Argo's
/// default dialect.
pub fn flatten(value: &Params) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (key, item) in value {
        flatten_into(key, item, &mut out);
    }
    out
}

fn flatten_into(prefix: &str, value: &Value, out: &mut BTreeMap<String, String>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, item) in map {
                flatten_into(&format!("{prefix}.{key}"), item, out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, item) in items.iter().enumerate() {
                flatten_into(&format!("{prefix}.{i}"), item, out);
            }
        }
        leaf => {
            out.insert(prefix.to_owned(), go_format(leaf));
        }
    }
}

/// A JSON leaf as Go's `%v` prints what `encoding/json` or `yaml` read.
pub fn go_format(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 1e21 => format!("{}", f as i64),
            Some(f) => f.to_string(),
            None => n.to_string(),
        },
        Value::Array(_) => "[]".to_owned(),
        Value::Object(_) => "map[]".to_owned(),
    }
}

/// Merges `other` into `base`: for Go templates key by key into nested
/// objects, `other` winning; for `{{param}}` templates a key both hold
/// with different values is an error when `strict` (matrix), else
/// `other` wins (merge).
pub fn combine(base: &mut Params, other: &Params, go: bool, strict: bool) -> Result<(), String> {
    for (key, value) in other {
        match (base.get_mut(key), value) {
            (Some(Value::Object(into)), Value::Object(from)) if go => {
                combine(into, from, go, false)?;
            }
            (Some(existing), value) if strict && !go && existing != value => {
                return Err(format!(
                    "found duplicate key {key} with different value, a: {} ,b: {}",
                    go_format(existing),
                    go_format(value)
                ));
            }
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn normalize_is_argo_s_sanitize_name() {
        assert_eq!(normalize("Web_App.v2-"), "web-app.v2");
        assert_eq!(normalize("--a--"), "a");
        assert_eq!(normalize(&"x".repeat(300)).len(), 253);
    }

    #[test]
    fn path_parameters_in_both_dialects() {
        let mut flat = Params::new();
        add_path(&mut flat, "apps/web", None, "", false);
        assert_eq!(
            Value::Object(flat),
            json!({"path": "apps/web", "path.basename": "web", "path.basenameNormalized": "web",
                   "path[0]": "apps", "path[1]": "web"})
        );
        let mut nested = Params::new();
        add_path(
            &mut nested,
            "cfg/prod",
            Some("config.json"),
            "app.src",
            true,
        );
        assert_eq!(
            nested["app"]["src"]["path"],
            json!({"path": "cfg/prod", "basename": "prod", "basenameNormalized": "prod",
                   "filename": "config.json", "filenameNormalized": "config.json",
                   "segments": ["cfg", "prod"]})
        );
        let mut prefixed = Params::new();
        add_path(&mut prefixed, "a", Some("f.yaml"), "src", false);
        assert_eq!(prefixed["src.path.filename"], "f.yaml");
    }

    #[test]
    fn flattening_and_combining() {
        let p = json!({"a": {"b": 1, "c": [true, 2.5]}, "d": null});
        let flat = flatten(p.as_object().unwrap());
        assert_eq!(flat["a.b"], "1");
        assert_eq!(flat["a.c.0"], "true");
        assert_eq!(flat["a.c.1"], "2.5");
        assert_eq!(flat["d"], "<nil>");
        let mut base = json!({"x": "1", "n": {"a": 1}})
            .as_object()
            .unwrap()
            .clone();
        let other = json!({"x": "2"}).as_object().unwrap().clone();
        assert!(
            combine(&mut base.clone(), &other, false, true)
                .unwrap_err()
                .contains("duplicate key x")
        );
        combine(
            &mut base,
            &json!({"n": {"b": 2}}).as_object().unwrap().clone(),
            true,
            true,
        )
        .unwrap();
        assert_eq!(base["n"], json!({"a": 1, "b": 2}));
    }
}
