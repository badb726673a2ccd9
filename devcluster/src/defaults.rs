//! What the API server fills in and checks: defaults of built-in kinds (those
//! that matter for diffs), structural-schema pruning and defaulting of custom
//! resources, and validation with field-level causes.

use serde_json::{Map, Value, json};

use super::resources::ResourceType;

/// A `(field, message)` validation cause.
pub type Cause = (String, String);

fn obj(value: &mut Value) -> Option<&mut Map<String, Value>> {
    value.as_object_mut()
}

fn set_default(map: &mut Map<String, Value>, key: &str, value: Value) {
    map.entry(key.to_owned()).or_insert(value);
}

fn child<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    map.get_mut(key).and_then(Value::as_object_mut)
}

/// Fills in the defaults of a built-in kind. `next_ip` allocates Service
/// cluster IPs.
pub fn builtin(kind: &str, object: &mut Value, next_ip: &mut dyn FnMut() -> String) {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let Some(root) = obj(object) else { return };
    match kind {
        "Namespace" => {
            let metadata = root.entry("metadata").or_insert_with(|| json!({}));
            if let Some(metadata) = obj(metadata) {
                let labels = metadata.entry("labels").or_insert_with(|| json!({}));
                if let Some(labels) = obj(labels) {
                    labels.insert("kubernetes.io/metadata.name".into(), name.into());
                }
            }
            let spec = root.entry("spec").or_insert_with(|| json!({}));
            if let Some(spec) = obj(spec) {
                set_default(spec, "finalizers", json!(["kubernetes"]));
            }
            let status = root.entry("status").or_insert_with(|| json!({}));
            if let Some(status) = obj(status) {
                set_default(status, "phase", "Active".into());
            }
        }
        "Secret" => {
            set_default(root, "type", "Opaque".into());
            // `stringData` is write-only: merged into `data`, base64-encoded.
            if let Some(Value::Object(strings)) = root.remove("stringData") {
                use base64::Engine as _;
                let data = root.entry("data").or_insert_with(|| json!({}));
                if let Some(data) = obj(data) {
                    for (key, value) in strings {
                        let text = value.as_str().unwrap_or_default();
                        data.insert(
                            key,
                            base64::engine::general_purpose::STANDARD
                                .encode(text)
                                .into(),
                        );
                    }
                }
            }
        }
        "Service" => {
            let Some(spec) = child(root, "spec") else {
                return;
            };
            set_default(spec, "type", "ClusterIP".into());
            set_default(spec, "sessionAffinity", "None".into());
            if spec.get("type").and_then(Value::as_str) != Some("ExternalName") {
                if !spec.contains_key("clusterIP") {
                    spec.insert("clusterIP".into(), next_ip().into());
                }
                let ip = spec["clusterIP"].clone();
                set_default(spec, "clusterIPs", json!([ip]));
                set_default(spec, "ipFamilies", json!(["IPv4"]));
                set_default(spec, "ipFamilyPolicy", "SingleStack".into());
                set_default(spec, "internalTrafficPolicy", "Cluster".into());
            }
            if let Some(Value::Array(ports)) = spec.get_mut("ports") {
                for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                    set_default(port, "protocol", "TCP".into());
                    if let Some(number) = port.get("port").cloned() {
                        set_default(port, "targetPort", number);
                    }
                }
            }
        }
        "Pod" => {
            if let Some(spec) = child(root, "spec") {
                pod_spec(spec);
            }
            let status = root.entry("status").or_insert_with(|| json!({}));
            if let Some(status) = obj(status) {
                set_default(status, "phase", "Pending".into());
            }
        }
        "PersistentVolumeClaim" => {
            if let Some(spec) = child(root, "spec") {
                set_default(spec, "volumeMode", "Filesystem".into());
            }
            let status = root.entry("status").or_insert_with(|| json!({}));
            if let Some(status) = obj(status) {
                set_default(status, "phase", "Pending".into());
            }
        }
        "Deployment" => {
            let Some(spec) = child(root, "spec") else {
                return;
            };
            set_default(spec, "replicas", 1.into());
            set_default(spec, "revisionHistoryLimit", 10.into());
            set_default(spec, "progressDeadlineSeconds", 600.into());
            let strategy = spec.entry("strategy").or_insert_with(|| json!({}));
            if let Some(strategy) = obj(strategy) {
                set_default(strategy, "type", "RollingUpdate".into());
                if strategy["type"] == "RollingUpdate" {
                    let rolling = strategy.entry("rollingUpdate").or_insert_with(|| json!({}));
                    if let Some(rolling) = obj(rolling) {
                        set_default(rolling, "maxUnavailable", "25%".into());
                        set_default(rolling, "maxSurge", "25%".into());
                    }
                }
            }
            template(spec);
        }
        "StatefulSet" => {
            let Some(spec) = child(root, "spec") else {
                return;
            };
            set_default(spec, "replicas", 1.into());
            set_default(spec, "revisionHistoryLimit", 10.into());
            set_default(spec, "podManagementPolicy", "OrderedReady".into());
            set_default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            );
            set_default(
                spec,
                "persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
            template(spec);
        }
        "DaemonSet" => {
            let Some(spec) = child(root, "spec") else {
                return;
            };
            set_default(spec, "revisionHistoryLimit", 10.into());
            set_default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            );
            template(spec);
        }
        "ReplicaSet" => {
            let Some(spec) = child(root, "spec") else {
                return;
            };
            set_default(spec, "replicas", 1.into());
            template(spec);
        }
        "Job" => {
            let Some(spec) = child(root, "spec") else {
                return;
            };
            job_spec(spec);
        }
        "CronJob" => {
            let Some(spec) = child(root, "spec") else {
                return;
            };
            set_default(spec, "concurrencyPolicy", "Allow".into());
            set_default(spec, "suspend", false.into());
            set_default(spec, "successfulJobsHistoryLimit", 3.into());
            set_default(spec, "failedJobsHistoryLimit", 1.into());
            if let Some(job) = child(spec, "jobTemplate").and_then(|t| child(t, "spec")) {
                job_spec(job);
            }
        }
        "NetworkPolicy" => {
            let Some(spec) = child(root, "spec") else {
                return;
            };
            if !spec.contains_key("policyTypes") {
                let mut types = vec![json!("Ingress")];
                if spec.contains_key("egress") {
                    types.push(json!("Egress"));
                }
                spec.insert("policyTypes".into(), Value::Array(types));
            }
        }
        "CustomResourceDefinition" => {
            if let Some(Value::Array(versions)) =
                child(root, "spec").and_then(|s| s.get_mut("versions"))
            {
                for version in versions.iter_mut().filter_map(Value::as_object_mut) {
                    set_default(version, "served", true.into());
                }
            }
        }
        _ => {}
    }
}

fn job_spec(spec: &mut Map<String, Value>) {
    set_default(spec, "parallelism", 1.into());
    set_default(spec, "completions", 1.into());
    set_default(spec, "backoffLimit", 6.into());
    set_default(spec, "completionMode", "NonIndexed".into());
    set_default(spec, "suspend", false.into());
    set_default(spec, "podReplacementPolicy", "TerminatingOrFailed".into());
    template(spec);
}

fn template(spec: &mut Map<String, Value>) {
    if let Some(pod) = child(spec, "template").and_then(|t| child(t, "spec")) {
        pod_spec(pod);
    }
}

fn pod_spec(spec: &mut Map<String, Value>) {
    set_default(spec, "restartPolicy", "Always".into());
    set_default(spec, "terminationGracePeriodSeconds", 30.into());
    set_default(spec, "dnsPolicy", "ClusterFirst".into());
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "schedulerName", "default-scheduler".into());
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(containers)) = spec.get_mut(list) {
            for container in containers.iter_mut().filter_map(Value::as_object_mut) {
                let image = container
                    .get("image")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                // Kubernetes pulls `:latest` (or untagged) images always.
                let last = image.rsplit('/').next().unwrap_or_default();
                let latest =
                    !last.contains(':') && !image.contains('@') || image.ends_with(":latest");
                set_default(
                    container,
                    "imagePullPolicy",
                    if latest { "Always" } else { "IfNotPresent" }.into(),
                );
                set_default(
                    container,
                    "terminationMessagePath",
                    "/dev/termination-log".into(),
                );
                set_default(container, "terminationMessagePolicy", "File".into());
                set_default(container, "resources", json!({}));
                if let Some(Value::Array(ports)) = container.get_mut("ports") {
                    for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                        set_default(port, "protocol", "TCP".into());
                    }
                }
            }
        }
    }
}

const DNS_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn is_label(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 63
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

fn is_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(is_label)
}

/// Checks an object name for its kind: RFC 1123 labels for namespaces and
/// services, subdomains otherwise.
pub fn name_problem(kind: &str, name: &str) -> Option<String> {
    let label = matches!(kind, "Namespace" | "Service");
    let ok = if label {
        is_label(name)
    } else {
        is_subdomain(name)
    };
    (!ok).then(|| {
        format!(
            "Invalid value: {name:?}: {}",
            if label { DNS_LABEL } else { DNS_SUBDOMAIN }
        )
    })
}

fn label_value_ok(value: &str) -> bool {
    value.len() <= 63
        && (value.is_empty()
            || value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
                && value.as_bytes()[0].is_ascii_alphanumeric()
                && value.as_bytes()[value.len() - 1].is_ascii_alphanumeric())
}

/// Validates a built-in object (with `old` for updates); returns the causes.
pub fn validate(rt: &ResourceType, object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(labels) = object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
    {
        for (key, value) in labels {
            match value.as_str() {
                Some(text) if label_value_ok(text) => {}
                _ => causes.push((
                    "metadata.labels".into(),
                    format!("Invalid value: {value}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (label {key:?})"),
                )),
            }
        }
    }
    if rt.is_custom() {
        if let Some(schema) = &rt.openapi {
            validate_schema(schema, object, "", &mut causes);
        }
        return causes;
    }
    let workload = matches!(
        rt.kind.as_str(),
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet"
    );
    if workload {
        match object.pointer("/spec/selector") {
            None => causes.push(("spec.selector".into(), "Required value".into())),
            Some(selector) => {
                let labels = object
                    .pointer("/spec/template/metadata/labels")
                    .and_then(Value::as_object);
                let wanted = selector.get("matchLabels").and_then(Value::as_object);
                if let Some(wanted) = wanted {
                    let matched = wanted
                        .iter()
                        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
                    if !matched {
                        causes.push((
                            "spec.template.metadata.labels".into(),
                            "Invalid value: `selector` does not match template `labels`".into(),
                        ));
                    }
                }
                if let Some(old) = old.and_then(|o| o.pointer("/spec/selector"))
                    && old != selector
                {
                    causes.push((
                        "spec.selector".into(),
                        "Invalid value: field is immutable".into(),
                    ));
                }
            }
        }
    }
    let pod = match rt.kind.as_str() {
        "Pod" => object.get("spec"),
        "Job" => object.pointer("/spec/template/spec"),
        "CronJob" => object.pointer("/spec/jobTemplate/spec/template/spec"),
        _ if workload => object.pointer("/spec/template/spec"),
        _ => None,
    };
    let prefix = match rt.kind.as_str() {
        "Pod" => "spec",
        "CronJob" => "spec.jobTemplate.spec.template.spec",
        _ => "spec.template.spec",
    };
    if workload || matches!(rt.kind.as_str(), "Pod" | "Job" | "CronJob") {
        let containers = pod
            .and_then(|p| p.get("containers"))
            .and_then(Value::as_array);
        match containers {
            None => causes.push((format!("{prefix}.containers"), "Required value".into())),
            Some(list) if list.is_empty() => {
                causes.push((format!("{prefix}.containers"), "Required value".into()))
            }
            Some(list) => {
                for (i, container) in list.iter().enumerate() {
                    match container.get("name").and_then(Value::as_str) {
                        Some(name) if is_label(name) => {}
                        _ => causes.push((
                            format!("{prefix}.containers[{i}].name"),
                            "Required value".into(),
                        )),
                    }
                    if container
                        .get("image")
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
                    {
                        causes.push((
                            format!("{prefix}.containers[{i}].image"),
                            "Required value".into(),
                        ));
                    }
                }
            }
        }
    }
    if matches!(rt.kind.as_str(), "Job" | "CronJob") {
        let policy = pod
            .and_then(|p| p.get("restartPolicy"))
            .and_then(Value::as_str);
        if !matches!(policy, Some("Never" | "OnFailure")) {
            causes.push((
                format!("{prefix}.restartPolicy"),
                format!(
                    "Unsupported value: {:?}: supported values: \"OnFailure\", \"Never\"",
                    policy.unwrap_or("Always")
                ),
            ));
        }
    }
    if rt.kind == "Service"
        && let (Some(old), Some(new)) = (
            old.and_then(|o| o.pointer("/spec/clusterIP")),
            object.pointer("/spec/clusterIP"),
        )
        && old != new
    {
        causes.push((
            "spec.clusterIP".into(),
            "Invalid value: field is immutable".into(),
        ));
    }
    causes
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn validate_schema(schema: &Value, value: &Value, path: &str, causes: &mut Vec<Cause>) {
    let field = if path.is_empty() {
        "<root>".to_owned()
    } else {
        path.to_owned()
    };
    if path == ".metadata" || path == ".apiVersion" || path == ".kind" {
        return;
    }
    if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        if !matches!(type_name(value), "integer" | "string") {
            causes.push((
                field.trim_start_matches('.').into(),
                format!("Invalid value: {value}: must be an integer or a string"),
            ));
        }
        return;
    }
    if let Some(expected) = schema.get("type").and_then(Value::as_str) {
        let actual = type_name(value);
        let fits = actual == expected || expected == "number" && actual == "integer";
        let allowed_null = value.is_null() && schema.get("nullable") == Some(&Value::Bool(true));
        if !(fits || allowed_null) {
            causes.push((
                field.trim_start_matches('.').into(),
                format!("Invalid value: \"{actual}\": {} in body must be of type {expected}: \"{actual}\"", field.trim_start_matches('.')),
            ));
            return;
        }
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.contains(value)
    {
        let allowed: Vec<String> = options.iter().map(Value::to_string).collect();
        causes.push((
            field.trim_start_matches('.').into(),
            format!(
                "Unsupported value: {value}: supported values: {}",
                allowed.join(", ")
            ),
        ));
    }
    match value {
        Value::Object(map) => {
            if let Some(Value::Array(required)) = schema.get("required") {
                for name in required.iter().filter_map(Value::as_str) {
                    if !map.contains_key(name) {
                        causes.push((
                            format!("{path}.{name}").trim_start_matches('.').into(),
                            "Required value".into(),
                        ));
                    }
                }
            }
            let properties = schema.get("properties").and_then(Value::as_object);
            for (name, child) in map {
                let child_schema = properties
                    .and_then(|p| p.get(name))
                    .or_else(|| schema.get("additionalProperties").filter(|s| s.is_object()));
                if let Some(child_schema) = child_schema {
                    validate_schema(child_schema, child, &format!("{path}.{name}"), causes);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    validate_schema(item_schema, item, &format!("{path}[{i}]"), causes);
                }
            }
        }
        _ => {}
    }
}

/// Structural-schema processing of a custom resource: drops fields the schema
/// does not know (unless it preserves unknown fields) and, when `fill` is
/// set, fills `default`s. Returns the dropped fields (`spec.bogus`).
pub fn custom(schema: &Value, object: &mut Value, fill: bool) -> Vec<String> {
    let mut dropped = Vec::new();
    if let Some(map) = object.as_object_mut() {
        let properties = schema.get("properties").and_then(Value::as_object);
        let preserve =
            schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
        for (name, child) in map.iter_mut() {
            if matches!(name.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(child_schema) = properties.and_then(|p| p.get(name)) {
                structural(child_schema, child, fill, name, &mut dropped);
            }
        }
        if !preserve {
            map.retain(|name, _| {
                let keep = matches!(name.as_str(), "apiVersion" | "kind" | "metadata")
                    || properties.is_some_and(|p| p.contains_key(name));
                if !keep {
                    dropped.push(name.clone());
                }
                keep
            });
        }
        if fill {
            apply_defaults(schema, map);
        }
    }
    dropped
}

fn apply_defaults(schema: &Value, map: &mut Map<String, Value>) {
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            if let Some(default) = property.get("default")
                && !map.contains_key(name)
            {
                map.insert(name.clone(), default.clone());
            }
        }
    }
}

fn structural(
    schema: &Value,
    value: &mut Value,
    fill: bool,
    path: &str,
    dropped: &mut Vec<String>,
) {
    let preserve = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|s| s.is_object());
            for (name, child) in map.iter_mut() {
                if let Some(child_schema) = properties.and_then(|p| p.get(name)).or(additional) {
                    structural(
                        child_schema,
                        child,
                        fill,
                        &format!("{path}.{name}"),
                        dropped,
                    );
                }
            }
            let open = preserve
                || additional.is_some()
                || schema.get("additionalProperties") == Some(&Value::Bool(true));
            if !open {
                map.retain(|name, _| {
                    let keep = properties.is_some_and(|p| p.contains_key(name));
                    if !keep {
                        dropped.push(format!("{path}.{name}"));
                    }
                    keep
                });
            }
            if fill {
                apply_defaults(schema, map);
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    structural(item_schema, item, fill, &format!("{path}[{i}]"), dropped);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_defaults_match_the_api_server() {
        let mut d = json!({"metadata": {"name": "web"}, "spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}, {"name": "b", "image": "busybox"}]}}}});
        builtin("Deployment", &mut d, &mut || unreachable!());
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        let containers = &d["spec"]["template"]["spec"]["containers"];
        assert_eq!(containers[0]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(containers[1]["imagePullPolicy"], "Always");
        assert_eq!(containers[0]["ports"][0]["protocol"], "TCP");
        assert_eq!(
            containers[0]["terminationMessagePath"],
            "/dev/termination-log"
        );
    }

    #[test]
    fn custom_resources_are_pruned_and_defaulted() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "size": {"type": "integer", "default": 3}, "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}});
        let mut cr = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"}, "spec": {"unknown": 1, "extra": {"any": true}}, "bogus": 1});
        assert_eq!(
            custom(&schema, &mut cr, true),
            vec!["spec.unknown", "bogus"]
        );
        assert_eq!(
            cr,
            json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"}, "spec": {"extra": {"any": true}, "size": 3}})
        );
    }

    #[test]
    fn names() {
        assert!(name_problem("ConfigMap", "a.b-c").is_none());
        assert!(name_problem("Namespace", "a.b").is_some());
        assert!(name_problem("ConfigMap", "Upper").is_some());
    }
}
