//! Holds the gatekeeper benchmark (`benches/gatekeeper.rs`); no code.
