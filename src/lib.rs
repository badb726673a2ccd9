//! Kiln: a GitOps controller whose renderers and policies are sandboxed
//! WebAssembly components.
//!
//! The modules follow the pipeline: [`source`] (what renderers may read) →
//! [`render`] (the plugin chain, run by the [`plugin`] host) → [`policy`].
#![deny(unsafe_code)]

pub mod api;
pub mod appset;
pub mod artifact;
pub mod atomic;
pub mod cluster;
pub mod condition;
pub mod controller;
pub mod diff;
pub mod digest;
pub mod glob;
pub mod health;
pub mod interrupt;
pub mod manifest;
pub mod plugin;
pub mod policy;
pub mod private_dir;
pub mod render;
pub mod source;
pub mod sync;
pub mod text;
pub mod trust;
pub mod units;
