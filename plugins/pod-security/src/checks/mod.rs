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
}

impl Violation {
    /// A violation with its reason, detail and fields.
    pub fn new(reason: impl Into<String>, detail: impl Into<String>, fields: Fields) -> Self {
        Violation {
            reason: reason.into(),
            detail: detail.into(),
            fields,
        }
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
