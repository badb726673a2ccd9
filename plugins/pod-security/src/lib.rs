//! # `pod-security`: the Pod Security Standards, before apply
//!
//! Checks every pod and pod template of the rendered set (Pod, PodTemplate,
//! ReplicationController, ReplicaSet, Deployment, StatefulSet, DaemonSet,
//! Job, CronJob) against the Kubernetes Pod Security Standards, with the
//! checks, versions and wording of Pod Security Admission
//! (kubernetes/pod-security-admission): a workload whose pods the admission
//! controller would refuse is refused before it is applied.
//!
//! Settings ([`settings`]): `level`, `version`, `exemptRuntimeClasses`,
//! `namespaceLabels`. Each finding names the check (`[privileged]`), the
//! first offending field (`spec.template.spec.containers[0].securityContext.privileged`)
//! and Pod Security Admission's reason and detail.
//!
//! The engine is plain Rust ([`review::review`]); the component glue is
//! compiled for wasm only, so the same engine runs natively in tests and
//! benchmarks.

pub mod checks;
pub mod level;
pub mod model;
pub mod namespaces;
pub mod review;
pub mod settings;
pub mod workload;

#[cfg(all(target_arch = "wasm32", feature = "component"))]
mod plugin;

pub use level::{LATEST_MINOR, Level, LevelVersion, Version};
pub use review::{Finding, Manifest, ObjectId, ReviewError, Severity, review};
pub use settings::{Settings, SettingsError};
