//! The stages of a comparison, each a function with typed input and
//! output: [`admit`] (project, source, destination) → [`plan`] (chain,
//! policies, chart, as one request) → [`render`] (here or on the render
//! server) → [`admit::admit_objects`] (every rendered object held to the
//! project) → [`diff`] (against the live state). `compare` is their
//! sequence; none of them changes anything anywhere.
//!
//! A reconcile goes on from a comparison: [`status`] (what it found) →
//! [`trigger`] (whether to sync, and why) → [`sync`] → [`health`].

pub mod admit;
pub mod compare;
pub mod diff;
pub mod health;
pub mod plan;
pub mod render;
pub mod status;
pub mod sync;
pub mod trigger;
