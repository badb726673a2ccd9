//! The host's request and its rendering: a `TemplateRequest` object
//!
//! ```yaml
//! apiVersion: kiln.dev/v1alpha1
//! kind: TemplateRequest
//! metadata: {name: SET}
//! spec:
//!   goTemplate: false            # Argo CD's dialect
//!   goTemplateOptions: []        # with goTemplate
//!   template: {...}              # any object: every string is a template
//!   templatePatch: "..."         # with goTemplate: YAML merged into each result
//!   parameterSets: [{...}, ...]  # one result each, in order
//! ```

use serde_json::{Map, Value};

use crate::fasttemplate;
use crate::gotemplate::{Budget, Engine, Options};

/// Parameter sets one request may hold.
pub const MAX_PARAMETER_SETS: usize = 100_000;
/// Nesting of the template (and of a patch) the walk follows.
pub const MAX_DEPTH: usize = 64;

/// A request, read.
#[derive(Debug)]
pub struct Request {
    go_template: bool,
    options: Options,
    template: Value,
    patch: Option<String>,
    parameter_sets: Vec<Map<String, Value>>,
}

impl Request {
    /// Reads the request object.
    pub fn parse(object: &Value) -> Result<Request, String> {
        if object["kind"] != "TemplateRequest" {
            return Err(format!(
                "the input is a {}, not a TemplateRequest",
                object["kind"].as_str().unwrap_or("document without a kind")
            ));
        }
        let spec = &object["spec"];
        let go_template = match &spec["goTemplate"] {
            Value::Null => false,
            Value::Bool(b) => *b,
            other => return Err(format!("spec.goTemplate: {other} is not a boolean")),
        };
        let options: Vec<String> = match &spec["goTemplateOptions"] {
            Value::Null => Vec::new(),
            Value::Array(items) => items
                .iter()
                .map(|o| o.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or("spec.goTemplateOptions: not a list of strings")?,
            _ => return Err("spec.goTemplateOptions: not a list".into()),
        };
        let template = spec["template"].clone();
        if !template.is_object() {
            return Err("spec.template: not an object".into());
        }
        let patch = match &spec["templatePatch"] {
            Value::Null => None,
            Value::String(text) if go_template => Some(text.clone()),
            Value::String(_) => {
                return Err("spec.templatePatch needs goTemplate: true".into());
            }
            _ => return Err("spec.templatePatch: not a string".into()),
        };
        let Value::Array(sets) = &spec["parameterSets"] else {
            return Err("spec.parameterSets: not a list".into());
        };
        if sets.len() > MAX_PARAMETER_SETS {
            return Err(format!(
                "{} parameter sets, more than the {MAX_PARAMETER_SETS} a request may hold",
                sets.len()
            ));
        }
        let parameter_sets = sets
            .iter()
            .enumerate()
            .map(|(i, set)| {
                set.as_object()
                    .cloned()
                    .ok_or_else(|| format!("spec.parameterSets[{i}]: not an object"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Request {
            go_template,
            options: Options::parse(&options)?,
            template,
            patch,
            parameter_sets,
        })
    }
}

/// Renders `request`: one value per parameter set, in order. An error
/// names the parameter set.
pub fn render(request: &Request, budget: Budget) -> Result<Vec<Value>, String> {
    let mut engine = Engine::new(request.options, budget);
    let mut out = Vec::with_capacity(request.parameter_sets.len());
    for (index, params) in request.parameter_sets.iter().enumerate() {
        let failed = |e: String| format!("parameter set {index}: {e}");
        let dot = kiln_helm::convert::from_json(&Value::Object(params.clone()));
        let mut text = |s: &str| -> Result<String, String> {
            if !s.contains("{{") {
                return Ok(s.to_owned());
            }
            if request.go_template {
                engine.render(s, &dot)
            } else {
                fasttemplate::render(s, params)
            }
        };
        let mut rendered = walk(&request.template, &mut text, 0).map_err(failed)?;
        if let Some(patch) = &request.patch {
            let patch_text = engine.render(patch, &dot).map_err(failed)?;
            let patch = kiln_helm::convert::from_yaml(&patch_text)
                .ok()
                .and_then(|v| kiln_helm::convert::to_json_value(&v))
                .ok_or_else(|| failed(format!("templatePatch is not YAML: {patch_text}")))?;
            match patch {
                // A patch that renders to nothing changes nothing.
                Value::Null => {}
                Value::Object(_) => merge(&mut rendered, patch, 0).map_err(failed)?,
                _ => {
                    return Err(failed(format!(
                        "templatePatch gives no object: {patch_text}"
                    )));
                }
            }
        }
        out.push(rendered);
    }
    Ok(out)
}

/// `value` with every string (keys included) passed through `text`.
fn walk(
    value: &Value,
    text: &mut dyn FnMut(&str) -> Result<String, String>,
    depth: usize,
) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err(format!("the template nests deeper than {MAX_DEPTH} levels"));
    }
    Ok(match value {
        Value::String(s) => Value::String(text(s)?),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| walk(item, text, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, item) in map {
                out.insert(text(key)?, walk(item, text, depth + 1)?);
            }
            Value::Object(out)
        }
        other => other.clone(),
    })
}

/// Merges `patch` into `target` as a merge patch: objects key by key, a
/// `null` removing the key, anything else replacing what was there.
fn merge(target: &mut Value, patch: Value, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "templatePatch nests deeper than {MAX_DEPTH} levels"
        ));
    }
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                if value.is_null() {
                    target.remove(&key);
                } else {
                    merge(target.entry(key).or_insert(Value::Null), value, depth + 1)?;
                }
            }
        }
        (target, patch) => *target = patch,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(spec: Value) -> Request {
        Request::parse(
            &json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "TemplateRequest",
            "metadata": {"name": "set"}, "spec": spec}),
        )
        .unwrap()
    }

    #[test]
    fn every_string_and_key_is_rendered_with_each_set() {
        let r = request(json!({
            "template": {"metadata": {"name": "{{path.basename}}", "labels": {"{{env}}": "yes"}},
                "spec": {"replicas": 2, "path": "{{path}}"}},
            "parameterSets": [
                {"path": "apps/a", "path.basename": "a", "env": "prod"},
                {"path": "apps/b", "path.basename": "b", "env": "dev"}
            ]
        }));
        let out = render(&r, Budget::default()).unwrap();
        assert_eq!(
            out,
            vec![
                json!({"metadata": {"name": "a", "labels": {"prod": "yes"}}, "spec": {"replicas": 2, "path": "apps/a"}}),
                json!({"metadata": {"name": "b", "labels": {"dev": "yes"}}, "spec": {"replicas": 2, "path": "apps/b"}}),
            ]
        );
    }

    #[test]
    fn go_templates_and_patches() {
        let r = request(json!({
            "goTemplate": true,
            "goTemplateOptions": ["missingkey=error"],
            "template": {"metadata": {"name": "{{ .name }}"}, "spec": {"destination": {"namespace": "{{ .name }}"}}},
            "templatePatch": "spec:\n  {{- if .auto }}\n  syncPolicy: {automated: {prune: true}}\n  {{- end }}\n  destination: {server: '{{ .server }}'}\n",
            "parameterSets": [
                {"name": "a", "auto": true, "server": "https://a"},
                {"name": "b", "auto": false, "server": "https://b"}
            ]
        }));
        let out = render(&r, Budget::default()).unwrap();
        assert_eq!(
            out[0]["spec"]["syncPolicy"],
            json!({"automated": {"prune": true}})
        );
        assert_eq!(
            out[0]["spec"]["destination"],
            json!({"namespace": "a", "server": "https://a"})
        );
        assert_eq!(out[1]["spec"].get("syncPolicy"), None);
        // A patch that renders to nothing changes nothing; one that is no
        // object is an error.
        let r = request(json!({
            "goTemplate": true,
            "template": {"metadata": {"name": "a"}},
            "templatePatch": "{{ if .patch }}spec: {x: 1}{{ end }}",
            "parameterSets": [{"patch": false}]
        }));
        assert_eq!(
            render(&r, Budget::default()).unwrap(),
            vec![json!({"metadata": {"name": "a"}})]
        );
        let r = request(json!({
            "goTemplate": true, "template": {}, "templatePatch": "- a", "parameterSets": [{}]
        }));
        assert!(
            render(&r, Budget::default())
                .unwrap_err()
                .contains("templatePatch gives no object")
        );
        // A typo in one set is an error naming the set.
        let r = request(json!({
            "goTemplate": true, "goTemplateOptions": ["missingkey=error"],
            "template": {"metadata": {"name": "{{ .nmae }}"}},
            "parameterSets": [{"name": "a"}]
        }));
        let error = render(&r, Budget::default()).unwrap_err();
        assert!(
            error.starts_with("parameter set 0: failed to execute go template {{ .nmae }}"),
            "{error}"
        );
        assert!(
            error.contains("map has no entry for key \"nmae\""),
            "{error}"
        );
    }

    #[test]
    fn malformed_requests_are_refused_naming_the_field() {
        let parse = |spec: Value| {
            Request::parse(&json!({"kind": "TemplateRequest", "spec": spec})).unwrap_err()
        };
        assert!(parse(json!({"template": 3, "parameterSets": []})).contains("spec.template"));
        assert!(parse(json!({"template": {}, "parameterSets": [3]})).contains("parameterSets[0]"));
        assert!(
            parse(json!({"template": {}, "templatePatch": "x", "parameterSets": []}))
                .contains("goTemplate")
        );
        assert!(parse(json!({"template": {}, "goTemplate": true, "goTemplateOptions": ["x"], "parameterSets": []})).contains("unrecognized option"));
        assert!(
            Request::parse(&json!({"kind": "Pod"}))
                .unwrap_err()
                .contains("not a TemplateRequest")
        );
    }

    #[test]
    fn attack_deep_templates_and_patches_are_refused() {
        let mut deep = json!("x");
        for _ in 0..100 {
            deep = json!({"a": deep});
        }
        let r = request(json!({"template": deep, "parameterSets": [{}]}));
        assert!(
            render(&r, Budget::default())
                .unwrap_err()
                .contains("deeper than 64")
        );
    }
}
