//! # `kiln-cel-k8s`: the Kubernetes CEL environment for Kiln's policies
//!
//! A plain library on top of the [`cel`] crate: it compiles CEL expressions
//! the way the Kubernetes API server's CEL environment accepts them, with the
//! Kubernetes CEL libraries this crate provides ([`library`]), and refuses
//! **by name** at compile time what it does not provide (a function such as
//! `authorizer.check` or `url`, a variable the caller did not declare), so
//! that a policy using it is rejected instead of being silently true.
//!
//! Every compiled expression is bounded ([`Limits`]): source size, parser
//! nesting, node count at compile time; at run time a cost budget counts
//! every element a comprehension (`all`, `exists`, `map`, `filter`, ...)
//! iterates over, so a hostile expression fails closed with
//! [`EvalError::CostExceeded`] instead of running away.
//!
//! Used by the `validating-admission-policy` component, and meant for any
//! other CEL engine of Kiln (Gatekeeper's `K8sNativeValidation`).

pub mod compile;
pub mod convert;
pub mod library;
pub mod limits;
pub mod scope;

pub use cel::Value;
pub use compile::{CompileError, Compiled, Environment, EvalError, Evaluation};
pub use convert::{from_json, to_json};
pub use limits::Limits;
pub use scope::{Scope, failure_message};
