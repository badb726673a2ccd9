//! Holds the kyverno benchmark (`benches/kyverno.rs`); no code.
