//! The checks of the Pod Security Standards, each as Pod Security Admission
//! evaluates it (`policy/check_*.go` of kubernetes/pod-security-admission),
//! with its id, level and the versions at which its behaviour changes.

mod containers;
mod identity;
mod pod_level;
mod profiles;
mod registry;
pub mod text;

pub use registry::{CHECKS, Check, CheckFn, Versioned, checks_for};

use crate::model::{ContainerAt, ObjectMeta, PodSpec};

/// Field errors under construction.
pub(crate) type Errors = Vec<FieldError>;

/// How many offending field paths a violation keeps (the first ones, in
/// Pod Security Admission's visiting order); the rest are counted.
pub const MAX_FIELD_PATHS: usize = 16;

/// Longest field path kept, in bytes; longer ones (only an annotation key
/// can make one long, and the API server refuses keys that long) are cut
/// and end in `…`.
pub const MAX_PATH_BYTES: usize = 1024;

/// A pod (or pod template) under review and where its parts are in the
/// object that holds it.
#[derive(Debug, Clone, Copy)]
pub struct Pod<'a> {
    /// Its metadata.
    pub meta: &'a ObjectMeta,
    /// Its spec.
    pub spec: &'a PodSpec,
    /// Field path of the metadata in the object (`metadata`,
    /// `spec.template.metadata`, ...).
    pub meta_path: &'a str,
    /// Field path of the spec in the object (`spec`, `spec.template.spec`, ...).
    pub spec_path: &'a str,
}

impl Pod<'_> {
    /// Path of a field of the pod spec: `spec.hostNetwork`.
    pub fn spec_field(&self, field: &str) -> String {
        format!("{}.{field}", self.spec_path)
    }

    /// Path of a field of a container: `spec.containers[0].securityContext.privileged`.
    pub fn container_field(&self, c: &ContainerAt<'_>, field: &str) -> String {
        format!("{}.{}[{}].{field}", self.spec_path, c.list, c.index)
    }

    /// Path of an annotation: `metadata.annotations.KEY` (the form the
    /// other policies' findings use for labels).
    pub fn annotation_field(&self, key: &str) -> String {
        format!("{}.annotations.{key}", self.meta_path)
    }

    /// Path of an annotation as Kubernetes' `field.Path` writes a key:
    /// `metadata.annotations[KEY]`.
    pub fn annotation_key(&self, key: &str) -> String {
        format!("{}.annotations[{key}]", self.meta_path)
    }
}

/// How a field offends, as Kubernetes' `field.Error` types it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// A field that must be set is not (`Required value`).
    Required,
    /// A field holds what it may not (`Forbidden`).
    Forbidden,
}

/// The value a field error found (Go's `field.Error.BadValue`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadValue {
    /// None (Go's empty string).
    None,
    /// A string.
    Text(String),
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A list of strings (capabilities).
    List(Vec<String>),
}

/// One offending field, as Kyverno's build of Pod Security Admission lists
/// it (`policy.WithFieldErrors()`): what `validate.podSecurity` exclusions
/// are matched against. Paths are written as `field.Path` writes them
/// (`spec.containers[0].securityContext.capabilities.add`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Its type.
    pub kind: FieldErrorKind,
    /// Where.
    pub path: String,
    /// What was found.
    pub bad: BadValue,
}

impl FieldError {
    /// A field that must be set.
    pub fn required(path: String) -> Self {
        FieldError {
            kind: FieldErrorKind::Required,
            path,
            bad: BadValue::None,
        }
    }

    /// A field holding `bad`.
    pub fn forbidden(path: String, bad: BadValue) -> Self {
        FieldError {
            kind: FieldErrorKind::Forbidden,
            path,
            bad,
        }
    }

    /// The bad values as strings, as Kyverno reads them to match an
    /// exclusion's `values` (none for an empty string).
    pub fn bad_values(&self) -> Vec<String> {
        match &self.bad {
            BadValue::None => Vec::new(),
            BadValue::Text(t) if t.is_empty() => Vec::new(),
            BadValue::Text(t) => vec![t.clone()],
            BadValue::Bool(b) => vec![b.to_string()],
            BadValue::Int(i) => vec![i.to_string()],
            BadValue::List(items) => items.clone(),
        }
    }

    /// The error in Kyverno's words: `PATH is forbidden, forbidden values
    /// found: VALUE` for a forbidden value, else Go's `PATH: Required
    /// value` or `PATH: Forbidden`.
    pub fn describe(&self) -> String {
        let shown = match &self.bad {
            BadValue::None => None,
            BadValue::Text(t) if t.is_empty() => None,
            BadValue::Text(t) => Some(t.clone()),
            BadValue::Bool(b) => Some(b.to_string()),
            BadValue::Int(i) => Some(i.to_string()),
            BadValue::List(items) => Some(format!("[{}]", items.join(" "))),
        };
        match (self.kind, shown) {
            (FieldErrorKind::Forbidden, Some(value)) => {
                format!(
                    "{} is forbidden, forbidden values found: {value}",
                    self.path
                )
            }
            (FieldErrorKind::Forbidden, None) => format!("{}: Forbidden", self.path),
            (FieldErrorKind::Required, _) => format!("{}: Required value", self.path),
        }
    }
}

/// The field paths a check found offending: the first
/// [`MAX_FIELD_PATHS`], and how many more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fields {
    /// The first offending paths, in visiting order.
    pub paths: Vec<String>,
    /// How many more there were.
    pub more: usize,
}

impl Fields {
    /// Records one offending field; the path is only built when kept.
    pub fn push(&mut self, path: impl FnOnce() -> String) {
        if self.paths.len() < MAX_FIELD_PATHS {
            let mut path = path();
            if text::cut_at(&mut path, MAX_PATH_BYTES).is_some() {
                path.push('…');
            }
            self.paths.push(path);
        } else {
            self.more += 1;
        }
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }
}

/// A failed check, in Pod Security Admission's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// `ForbiddenReason`, e.g. `privileged`.
    pub reason: String,
    /// `ForbiddenDetail`, e.g. `container "app" must not set securityContext.privileged=true`.
    pub detail: String,
    /// Where.
    pub fields: Fields,
    /// Every offending field, as Kyverno's build of Pod Security Admission
    /// lists them; `None` for a check that lists none
    /// (`hostProbesAndHostLifecycle`).
    pub errors: Option<Vec<FieldError>>,
}

impl Violation {
    /// A violation with its reason, detail and fields.
    pub fn new(reason: impl Into<String>, detail: impl Into<String>, fields: Fields) -> Self {
        Violation {
            reason: reason.into(),
            detail: detail.into(),
            fields,
            errors: None,
        }
    }

    /// The same, with its field errors.
    pub fn with_errors(mut self, errors: Vec<FieldError>) -> Self {
        self.errors = Some(errors);
        self
    }

    /// `reason (detail)`, or `reason` alone when there is no detail: how
    /// Pod Security Admission prints one failed check.
    pub fn describe(&self) -> String {
        if self.detail.is_empty() {
            self.reason.clone()
        } else {
            format!("{} ({})", self.reason, self.detail)
        }
    }
}

/// What a check says about a pod: `None` when allowed.
pub type Outcome = Option<Violation>;
