//! The YAML kustomize prints, byte for byte: go-yaml v2's emitter, as
//! reproduced by [`kiln_goyaml`] (shared with the host, which prints every
//! renderer's objects with it).

pub use kiln_goyaml::{document, stream};
