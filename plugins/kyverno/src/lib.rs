//! Kiln's `kyverno` policy: Kyverno's `ClusterPolicy` and `Policy`
//! validate rules, unchanged, evaluated on the rendered set before apply.
//!
//! The engine is written for Kiln, after Kyverno's documented semantics
//! and its behaviour on the policies people use (checked against the
//! `kyverno test` suites of kyverno/policies, `tests/corpus.rs`):
//! `match`/`exclude`, `preconditions`, `pattern` and `anyPattern` with
//! every anchor and value operator, `deny` conditions, `foreach`,
//! variables in JMESPath, and autogen for pod controllers; and the CEL
//! `ValidatingPolicy` ([`vpol`]).

pub mod anchor;
pub mod autogen;
pub mod budget;
pub mod cel;
pub mod conditions;
pub mod engine;
pub mod exception;
pub mod functions;
pub mod images;
pub mod matching;
pub mod model;
pub mod pattern;
pub mod pss;
pub mod review;
pub mod settings;
pub mod value;
pub mod variables;
pub mod vpol;
pub mod wildcard;

#[cfg(target_arch = "wasm32")]
mod plugin;

/// The guest's allocator: dlmalloc called directly, as the helm plugin
/// does (see there), in place of wasi-libc's through `malloc`: a review
/// allocates and frees a block for nearly every value it reads.
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;
