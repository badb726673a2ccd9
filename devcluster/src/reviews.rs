//! The create-only resources: access and token reviews, and pod bindings.
//! A real API server computes an answer and stores nothing; so does the dev
//! cluster, which lets every request through as the one user its
//! kubeconfig names.

use serde_json::{Value, json};

use super::resources::ResourceType;
use super::status::ApiError;
use super::store::{PatchKind, PatchRequest, Store, WriteOptions};

/// The user every request is taken to come from (the kubeconfig's user).
pub const USER: &str = "kiln-dev";
/// Its groups: an administrator's.
pub const GROUPS: [&str; 2] = ["system:masters", "system:authenticated"];
/// Why every access review is allowed.
const REASON: &str = "the kiln dev cluster allows every request";

/// The answer to creating `object` as a create-only `rt` in `namespace`:
/// the object with its `status` filled in (or, for a pod binding, the pod
/// bound). Nothing is stored.
pub fn answer(
    store: &Store,
    rt: &ResourceType,
    namespace: Option<&str>,
    mut object: Value,
    options: &WriteOptions,
) -> Result<Value, ApiError> {
    if !object.is_object() {
        return Err(ApiError::bad_request(format!(
            "a {} must be a JSON object",
            rt.kind
        )));
    }
    object["apiVersion"] = rt.api_version().into();
    object["kind"] = rt.kind.clone().into();
    let status = match (rt.group.as_str(), rt.kind.as_str()) {
        ("authorization.k8s.io", "SelfSubjectRulesReview") => json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        }),
        ("authorization.k8s.io", _) => json!({"allowed": true, "reason": REASON}),
        ("authentication.k8s.io", "SelfSubjectReview") => {
            json!({"userInfo": {"username": USER, "groups": GROUPS}})
        }
        ("authentication.k8s.io", "TokenReview") => json!({
            "authenticated": true,
            "user": {"username": USER, "groups": GROUPS},
            "audiences": object.pointer("/spec/audiences").cloned().unwrap_or(json!([])),
        }),
        ("", "Binding") => return bind(store, namespace, object, options),
        _ => json!({}),
    };
    object["status"] = status;
    Ok(object)
}

/// `POST .../bindings`: sets the pod's `spec.nodeName` to the target's
/// name, as the scheduler's binding does; answers with a `Status`.
fn bind(
    store: &Store,
    namespace: Option<&str>,
    object: Value,
    options: &WriteOptions,
) -> Result<Value, ApiError> {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::bad_request("a Binding needs metadata.name (the pod)"))?;
    let node = object
        .pointer("/target/name")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::bad_request("a Binding needs target.name (the node)"))?;
    let pods = store
        .resolve("", "v1", "pods")
        .ok_or_else(|| ApiError::no_route("/api/v1/pods"))?;
    let patch = PatchRequest {
        kind: PatchKind::Merge,
        body: json!({"spec": {"nodeName": node}}),
    };
    store.patch(&pods, namespace, name, patch, options, false)?;
    Ok(
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    )
}
