//! Where the pods of an object are: the Pod itself, or the pod template of
//! a workload (every kind of the Kubernetes API that creates pods from a
//! template).

use serde_json::Value;

/// A pod template inside an object, and where its parts are.
#[derive(Debug, Clone, Copy)]
pub struct TemplateAt<'v> {
    /// The value holding `metadata` and `spec` (the whole object for a Pod).
    pub value: &'v Value,
    /// Field path of that value in the object (`""` for a Pod).
    pub path: &'static str,
    /// Field path of the pod metadata.
    pub meta_path: &'static str,
    /// Field path of the pod spec.
    pub spec_path: &'static str,
}

/// The kinds this policy checks, with the API groups they belong to and the
/// JSON pointer and field paths of their pod template.
const KINDS: &[(&str, &[&str], &str, &str)] = &[
    ("Pod", &[""], "", ""),
    ("PodTemplate", &[""], "/template", "template"),
    (
        "ReplicationController",
        &[""],
        "/spec/template",
        "spec.template",
    ),
    (
        "ReplicaSet",
        &["apps", "extensions"],
        "/spec/template",
        "spec.template",
    ),
    (
        "Deployment",
        &["apps", "extensions"],
        "/spec/template",
        "spec.template",
    ),
    (
        "DaemonSet",
        &["apps", "extensions"],
        "/spec/template",
        "spec.template",
    ),
    ("StatefulSet", &["apps"], "/spec/template", "spec.template"),
    ("Job", &["batch"], "/spec/template", "spec.template"),
    (
        "CronJob",
        &["batch"],
        "/spec/jobTemplate/spec/template",
        "spec.jobTemplate.spec.template",
    ),
];

/// Whether objects of this kind and API version hold pods.
pub fn is_pod_bearing(api_version: &str, kind: &str) -> bool {
    entry(api_version, kind).is_some()
}

fn entry(
    api_version: &str,
    kind: &str,
) -> Option<&'static (
    &'static str,
    &'static [&'static str],
    &'static str,
    &'static str,
)> {
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    KINDS
        .iter()
        .find(|(k, groups, _, _)| *k == kind && groups.contains(&group))
}

/// The pod template of an object of a pod-bearing kind; `None` for other
/// kinds and for workloads without a template (they create no pod).
pub fn pod_template<'v>(
    object: &'v Value,
    api_version: &str,
    kind: &str,
) -> Option<TemplateAt<'v>> {
    let &(_, _, pointer, path) = entry(api_version, kind)?;
    let value = object.pointer(pointer).filter(|v| !v.is_null())?;
    let (meta_path, spec_path) = match path {
        "" => ("metadata", "spec"),
        "template" => ("template.metadata", "template.spec"),
        "spec.template" => ("spec.template.metadata", "spec.template.spec"),
        _ => (
            "spec.jobTemplate.spec.template.metadata",
            "spec.jobTemplate.spec.template.spec",
        ),
    };
    Some(TemplateAt {
        value,
        path,
        meta_path,
        spec_path,
    })
}

/// The object of a pod-bearing `kind` whose pod template is `pod`'s
/// metadata and spec (named after the pod): what a fixture pod becomes when
/// it is reviewed as a workload. `None` for other kinds.
pub fn wrap_pod(pod: &Value, kind: &str) -> Option<Value> {
    use serde_json::json;
    let name = pod
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::Null);
    let template = json!({
        "metadata": pod.get("metadata").cloned().unwrap_or(Value::Null),
        "spec": pod.get("spec").cloned().unwrap_or(Value::Null),
    });
    let (api_version, wrapped) = match kind {
        "Pod" => return Some(pod.clone()),
        "PodTemplate" => ("v1", json!({"template": template})),
        "ReplicationController" => ("v1", json!({"spec": {"template": template}})),
        "ReplicaSet" | "Deployment" | "DaemonSet" | "StatefulSet" => (
            "apps/v1",
            json!({"spec": {"selector": {"matchLabels": {}}, "template": template}}),
        ),
        "Job" => ("batch/v1", json!({"spec": {"template": template}})),
        "CronJob" => (
            "batch/v1",
            json!({"spec": {"schedule": "@daily", "jobTemplate": {"spec": {"template": template}}}}),
        ),
        _ => return None,
    };
    let mut object = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
    object.as_object_mut()?.extend(wrapped.as_object()?.clone());
    Some(object)
}

/// Every kind this policy checks.
pub fn kinds() -> impl Iterator<Item = &'static str> {
    KINDS.iter().map(|k| k.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_are_found_per_kind_and_group() {
        let cron =
            serde_json::json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {}}}}}});
        let t = pod_template(&cron, "batch/v1", "CronJob").unwrap();
        assert_eq!(t.spec_path, "spec.jobTemplate.spec.template.spec");
        assert!(pod_template(&cron, "example.com/v1", "CronJob").is_none());
        let deploy = serde_json::json!({"spec": {"template": null}});
        assert!(pod_template(&deploy, "apps/v1", "Deployment").is_none());
        assert!(is_pod_bearing("v1", "Pod"));
        assert!(!is_pod_bearing("apps/v1", "Pod"));
    }
}
