//! # `gatekeeper`: Gatekeeper ConstraintTemplates and Constraints, before apply
//!
//! Runs a security team's Gatekeeper policies (ConstraintTemplates with
//! their Rego, and Constraints) on the rendered set, in the sandbox, before
//! anything is applied. Rego is evaluated by regorus compiled into the
//! component, as Rego v0 (the Gatekeeper library's syntax), with the
//! template's `libs`; with `engine=cel` (or `auto`), a template's
//! `K8sNativeValidation` source is evaluated instead, on the Kubernetes CEL
//! environment of `kiln-cel-k8s` ([`cel`]).
//!
//! Settings ([`settings`]): `template`, `constraint`, `inventory` (each
//! repeatable; a directory means every YAML/JSON file in it) and `engine`.
//! Each object of the rendered set is matched against every constraint's
//! `spec.match` ([`matching`]) and reviewed with `input.review` as
//! Gatekeeper builds it, `input.parameters` and `data.inventory` from the
//! whole set plus the inventory files ([`inventory`]). A violation becomes
//! a finding whose severity follows the constraint's `enforcementAction`
//! (`deny` error, `warn` warning, `dryrun` info).
//!
//! The engine is plain Rust ([`review::review`]); the component glue is
//! compiled for wasm only, so the same engine runs natively in tests and
//! benchmarks.

pub mod cel;
pub mod compat;
pub mod constraint;
pub mod files;
pub mod inventory;
pub mod matching;
pub mod policy;
pub mod review;
pub mod settings;
pub mod template;
pub mod yaml;

#[cfg(target_arch = "wasm32")]
mod plugin;

pub use policy::{LoadError, Policy};
pub use review::{Finding, Manifest, ObjectId, ReviewError, Severity, review};
pub use settings::{Settings, SettingsError};
