//! `match` and `exclude`: which resources a rule applies to.

use serde_json::{Map, Value};

use crate::wildcard;

/// A namespace's labels (`metadata.labels`), or why they are unknown.
pub type NamespaceLabels = Result<Map<String, Value>, String>;

/// What a review knows of the request besides the resource.
#[derive(Clone)]
pub struct Request<'a> {
    /// The operation reviewed: `CREATE` (a review before apply), or
    /// `UPDATE` when the object exists on the destination.
    pub operation: &'a str,
    /// Labels of namespaces (the rendered set's Namespaces, the
    /// destination's): name → labels; an error says why they are unknown.
    pub namespace_labels: &'a dyn Fn(&str) -> NamespaceLabels,
    /// The ConfigMaps `configMap` context entries read: namespace and name
    /// → the object (the rendered set's, the destination's); an error says
    /// why there is none.
    pub config_maps: &'a dyn Fn(&str, &str) -> Result<Value, String>,
}

/// Whether a `match` or `exclude` block selects `resource`. `None` (no
/// block) selects nothing, as an empty block does.
pub fn selects(
    block: Option<&Value>,
    resource: &Value,
    request: &Request<'_>,
) -> Result<bool, String> {
    let Some(Value::Object(block)) = block else {
        return Ok(false);
    };
    if let Some(any) = block
        .get("any")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
    {
        for filter in any {
            if filter_selects(filter, resource, request)? {
                return Ok(true);
            }
        }
        return Ok(false);
    }
    if let Some(all) = block
        .get("all")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
    {
        for filter in all {
            if !filter_selects(filter, resource, request)? {
                return Ok(false);
            }
        }
        return Ok(true);
    }
    // The older form: `resources` (and subjects) directly in the block.
    if block.contains_key("resources") {
        return filter_selects(&Value::Object(block.clone()), resource, request);
    }
    Ok(false)
}

/// One filter: `resources` (users and roles are not known before apply:
/// a filter naming them never selects).
fn filter_selects(filter: &Value, resource: &Value, request: &Request<'_>) -> Result<bool, String> {
    for who in ["subjects", "roles", "clusterRoles"] {
        if filter
            .get(who)
            .is_some_and(|v| v.as_array().is_some_and(|a| !a.is_empty()))
        {
            return Ok(false);
        }
    }
    let Some(description) = filter.get("resources") else {
        return Ok(false);
    };
    description_selects(description, resource, request)
}

/// A list of strings of a resource description; anything else (a string
/// where a list belongs, a number in the list) is the policy's error, not
/// an empty list that would select everything or nothing.
fn strings<'v>(value: Option<&'v Value>, field: &str) -> Result<Vec<&'v str>, String> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .ok_or_else(|| format!("`{field}` must be a list of strings, it holds {item}"))
            })
            .collect(),
        Some(other) => Err(format!("`{field}` must be a list of strings, not {other}")),
    }
}

fn description_selects(
    description: &Value,
    resource: &Value,
    request: &Request<'_>,
) -> Result<bool, String> {
    let api_version = resource
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = resource.get("kind").and_then(Value::as_str).unwrap_or("");
    let metadata = resource.get("metadata");
    let name = metadata
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let namespace = metadata
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or("");

    let kinds = strings(description.get("kinds"), "kinds")?;
    if !kinds.is_empty() && !kinds.iter().any(|k| kind_matches(k, api_version, kind)) {
        return Ok(false);
    }
    if let Some(pattern) = description.get("name").and_then(Value::as_str)
        && !pattern.is_empty()
        && !wildcard::matches(pattern, name)
    {
        return Ok(false);
    }
    let names = strings(description.get("names"), "names")?;
    if !names.is_empty() && !names.iter().any(|n| wildcard::matches(n, name)) {
        return Ok(false);
    }
    let namespaces = strings(description.get("namespaces"), "namespaces")?;
    if !namespaces.is_empty() {
        // A Namespace is matched by its own name.
        let own = if kind == "Namespace" { name } else { namespace };
        if !namespaces.iter().any(|n| wildcard::matches(n, own)) {
            return Ok(false);
        }
    }
    let operations = strings(description.get("operations"), "operations")?;
    if !operations.is_empty() && !operations.contains(&request.operation) {
        return Ok(false);
    }
    if let Some(Value::Object(wanted)) = description.get("annotations") {
        let have = metadata
            .and_then(|m| m.get("annotations"))
            .and_then(Value::as_object);
        for (key, value) in wanted {
            let pattern = value.as_str().unwrap_or("");
            let found = have.is_some_and(|have| {
                have.iter().any(|(k, v)| {
                    wildcard::matches(key, k)
                        && v.as_str().is_some_and(|v| wildcard::matches(pattern, v))
                })
            });
            if !found {
                return Ok(false);
            }
        }
    }
    if let Some(selector) = description.get("selector") {
        let labels = metadata
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object);
        if !selector_selects(selector, labels)? {
            return Ok(false);
        }
    }
    // A Namespace is not in a namespace: Kyverno applies no namespace
    // selector to it. Elsewhere the namespace's labels must be known: a
    // selector over labels nobody knows fails closed (an error), never a
    // silent skip.
    if let Some(selector) = description
        .get("namespaceSelector")
        .filter(|_| kind != "Namespace")
    {
        if namespace.is_empty() {
            return Ok(false);
        }
        let labels = (request.namespace_labels)(namespace).map_err(|why| {
            format!("namespaceSelector: the labels of namespace {namespace} are unknown: {why}")
        })?;
        if !selector_selects(selector, Some(&labels))? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `KIND`, `VERSION/KIND`, `GROUP/VERSION/KIND` (each part a wildcard),
/// `KIND/SUBRESOURCE` never matching a resource itself.
fn kind_matches(pattern: &str, api_version: &str, kind: &str) -> bool {
    let (group, version) = match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    };
    let parts: Vec<&str> = pattern.split('/').collect();
    let (want_group, want_version, want_kind, sub) = match parts.as_slice() {
        [k] => (None, None, *k, None),
        [v, k] if k.chars().next().is_some_and(char::is_uppercase) || *k == "*" => {
            (None, Some(*v), *k, None)
        }
        [k, s] => (None, None, *k, Some(*s)),
        [g, v, k] => (Some(*g), Some(*v), *k, None),
        [g, v, k, s] => (Some(*g), Some(*v), *k, Some(*s)),
        _ => return false,
    };
    if sub.is_some() {
        return false;
    }
    wildcard::matches(want_kind, kind)
        && want_version.is_none_or(|v| wildcard::matches(v, version))
        && want_group.is_none_or(|g| wildcard::matches(g, group))
}

/// A label selector (`matchLabels` with wildcards, `matchExpressions`).
pub fn selector_selects(
    selector: &Value,
    labels: Option<&Map<String, Value>>,
) -> Result<bool, String> {
    let empty = Map::new();
    let labels = labels.unwrap_or(&empty);
    let label = |key: &str| labels.get(key).and_then(Value::as_str);
    if let Some(Value::Object(wanted)) = selector.get("matchLabels") {
        for (key, value) in wanted {
            let value = value.as_str().unwrap_or("");
            let found = if wildcard::contains_wildcard(key) || wildcard::contains_wildcard(value) {
                labels.iter().any(|(k, v)| {
                    wildcard::matches(key, k)
                        && v.as_str().is_some_and(|v| wildcard::matches(value, v))
                })
            } else {
                label(key) == Some(value)
            };
            if !found {
                return Ok(false);
            }
        }
    }
    if let Some(Value::Array(expressions)) = selector.get("matchExpressions") {
        for expression in expressions {
            let key = expression.get("key").and_then(Value::as_str).unwrap_or("");
            let values = strings(expression.get("values"), "values")?;
            let operator = expression
                .get("operator")
                .and_then(Value::as_str)
                .unwrap_or("");
            let holds = match operator {
                "In" => label(key).is_some_and(|v| values.contains(&v)),
                "NotIn" => label(key).is_none_or(|v| !values.contains(&v)),
                "Exists" => label(key).is_some(),
                "DoesNotExist" => label(key).is_none(),
                other => return Err(format!("label selector: unknown operator {other:?}")),
            };
            if !holds {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request() -> Request<'static> {
        Request {
            operation: "CREATE",
            namespace_labels: &|_| Err("it is not in the rendered set".into()),
            config_maps: &|_, _| Err("none".into()),
        }
    }

    #[test]
    fn kinds_names_namespaces_and_selectors() {
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}}});
        let select = |block: Value| selects(Some(&block), &deployment, &request()).unwrap();
        assert!(select(
            json!({"any": [{"resources": {"kinds": ["Deployment"]}}]})
        ));
        assert!(select(
            json!({"any": [{"resources": {"kinds": ["apps/v1/Deployment"]}}]})
        ));
        assert!(select(
            json!({"any": [{"resources": {"kinds": ["v1/Deployment"]}}]})
        ));
        assert!(!select(
            json!({"any": [{"resources": {"kinds": ["batch/*/Deployment"]}}]})
        ));
        assert!(select(json!({"any": [{"resources": {"kinds": ["*"]}}]})));
        assert!(!select(json!({"any": [{"resources": {"kinds": ["Pod"]}}]})));
        assert!(!select(
            json!({"any": [{"resources": {"kinds": ["Deployment/scale"]}}]})
        ));
        assert!(select(
            json!({"resources": {"kinds": ["Deployment"], "namespaces": ["sh*"]}})
        ));
        assert!(!select(
            json!({"all": [{"resources": {"kinds": ["Deployment"]}}, {"resources": {"names": ["db"]}}]})
        ));
        assert!(select(
            json!({"any": [{"resources": {"selector": {"matchLabels": {"app": "w*"}}}}]})
        ));
        assert!(!select(
            json!({"any": [{"resources": {"selector": {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}}}]})
        ));
        assert!(!select(
            json!({"any": [{"resources": {"kinds": ["Deployment"], "operations": ["DELETE"]}}]})
        ));
        assert!(!select(
            json!({"any": [{"subjects": [{"kind": "User", "name": "x"}], "resources": {"kinds": ["Deployment"]}}]})
        ));
        assert!(!selects(None, &deployment, &request()).unwrap());
        // Wrong types are the policy's error, not an empty list.
        assert!(selects(Some(&json!({"any": [{"resources": {"kinds": ["Deployment"], "namespaces": "shop"}}]})), &deployment, &request()).is_err());
        // A namespace selector over a namespace nobody knows fails closed.
        assert!(selects(Some(&json!({"any": [{"resources": {"namespaceSelector": {"matchLabels": {"env": "prod"}}}}]})), &deployment, &request()).is_err());
    }
}
