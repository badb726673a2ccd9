//! The stages of a comparison, each a function with typed input and
//! output: [`admit`] (project, source, destination) → [`plan`] (chain,
//! policies, chart, as one request) → [`render`] (here or on the render
//! server) → [`admit::admit_objects`] (every rendered object held to the
//! project) → [`diff`] (against the live state). `compare` is their
//! sequence; none of them changes anything anywhere.

pub mod admit;
pub mod diff;
pub mod plan;
pub mod render;
