//! API errors as the Kubernetes API reports them: `Status` objects with a
//! reason and an HTTP code.

use serde_json::{Value, json};

/// A failed request, answered with a `Status` object.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// The machine-readable reason (`NotFound`, `Conflict`, …).
    pub reason: &'static str,
    /// The human-readable message.
    pub message: String,
    details: Option<Value>,
}

/// What an error is about: `deployments.apps "web"`.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    /// API group.
    pub group: &'a str,
    /// Resource (plural) name.
    pub resource: &'a str,
    /// Object name.
    pub name: &'a str,
}

impl Target<'_> {
    fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.to_owned()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    fn details(&self) -> Value {
        json!({"name": self.name, "group": self.group, "kind": self.resource})
    }
}

/// The result of an API operation.
pub type Result<T, E = ApiError> = std::result::Result<T, E>;

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// 404: the object does not exist.
    pub fn not_found(target: Target<'_>) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", target.qualified(), target.name),
        )
        .with_details(target.details())
    }

    /// 404: no such resource type or path.
    pub fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// 409: creating an object that exists.
    pub fn already_exists(target: Target<'_>) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{}\" already exists", target.qualified(), target.name),
        )
        .with_details(target.details())
    }

    /// 409: an update based on a stale `resourceVersion`.
    pub fn conflict(target: Target<'_>, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": {why}",
                target.qualified(),
                target.name
            ),
        )
        .with_details(target.details())
    }

    /// 409: server-side apply conflicts, one cause per field.
    pub fn apply_conflict(
        target: Target<'_>,
        message: String,
        causes: Vec<(String, String)>,
    ) -> Self {
        let mut details = target.details();
        details["causes"] = causes
            .into_iter()
            .map(|(message, field)| json!({"reason": "FieldManagerConflict", "message": message, "field": field}))
            .collect();
        Self::new(409, "Conflict", message).with_details(details)
    }

    /// 422: the object is invalid; `causes` are `(field, message)` pairs.
    pub fn invalid(kind: &str, target: Target<'_>, causes: Vec<(String, String)>) -> Self {
        let summary: Vec<String> = causes
            .iter()
            .map(|(field, message)| format!("{field}: {message}"))
            .collect();
        let message = format!(
            "{kind}.{} \"{}\" is invalid: {}",
            if target.group.is_empty() {
                ""
            } else {
                target.group
            },
            target.name,
            if summary.len() == 1 {
                summary[0].clone()
            } else {
                format!("[{}]", summary.join(", "))
            }
        )
        .replace(". \"", " \"");
        let mut details = json!({"name": target.name, "group": target.group, "kind": kind});
        details["causes"] = causes
            .into_iter()
            .map(|(field, message)| json!({"reason": "FieldValueInvalid", "message": message, "field": field}))
            .collect();
        Self::new(422, "Invalid", message).with_details(details)
    }

    /// 400: a malformed request.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 403: forbidden by the server's own rules (e.g. a terminating namespace).
    pub fn forbidden(target: Target<'_>, why: &str) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!(
                "{} \"{}\" is forbidden: {why}",
                target.qualified(),
                target.name
            ),
        )
        .with_details(target.details())
    }

    /// 405: the verb is not supported on this path.
    pub fn method_not_allowed(method: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        )
    }

    /// 410: a resource version that is no longer in the history.
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 413: the body is larger than the server accepts.
    pub fn too_large() -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            "Request entity too large: limit is 3145728",
        )
    }

    /// 415: a content type the verb does not take.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got {content_type:?})"
            ),
        )
    }

    /// 415 with a message of its own.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    /// 500: something the server could not do.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}

/// The `Status` a successful delete returns.
pub fn success(target: Target<'_>, uid: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": target.name, "group": target.group, "kind": target.resource, "uid": uid},
    })
}
