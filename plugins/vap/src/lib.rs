//! # `validating-admission-policy`: Kubernetes ValidatingAdmissionPolicies, before apply
//!
//! Evaluates ValidatingAdmissionPolicies with their bindings and param
//! objects (files named by the settings, [`settings`]) on every object of
//! the rendered set, as the API server would on its CREATE: the policy's and
//! the binding's match rules ([`matching`]), `matchConditions`, lazy
//! `variables`, `validations` (`message`, `messageExpression`, `reason`),
//! `auditAnnotations`, `paramKind`/`paramRef`, `validationActions` and
//! `failurePolicy` ([`engine`]). CEL comes from [`kiln_cel_k8s`]: what it
//! does not provide is refused by name when the policy is compiled.
//!
//! The engine is plain Rust; the component glue is compiled for wasm only.

pub mod documents;
pub mod engine;
pub mod matching;
pub mod model;
pub mod selector;
pub mod settings;

#[cfg(all(target_arch = "wasm32", feature = "component"))]
mod plugin;

pub use engine::{Finding, PolicySet, ReviewError, Severity};
pub use settings::{Settings, SettingsError};
