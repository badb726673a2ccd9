//! # `helm`: Helm charts, rendered inside the sandbox
//!
//! The engine of `helm template`, written for Kiln: Go's `text/template`
//! ([`lex`], [`parse`], [`exec`]) with Go's printing ([`gofmt`], [`value`]),
//! Sprig's and Helm's functions ([`funcs`]; dates: [`dates`], [`gotime`],
//! [`golayout`]), values and `--set`
//! ([`strvals`]), charts and subcharts ([`chart`]) and the rendering and
//! sorting of `helm template` ([`render`]). See `docs/helm.md` for what is
//! supported so far.
//!
//! Parameters (the names of `helm template`'s flags): `releaseName`,
//! `namespace`, `valueFiles` (comma-separated, repeatable; relative to the
//! chart), `set` and `setString` (repeatable), `kubeVersion`, `apiVersions`
//! (repeatable), `skipCrds`.

pub mod archive;
pub mod chart;
pub mod convert;
pub mod crypto;
pub mod dates;
pub mod exec;
pub mod files;
pub mod funcs;
pub mod goescape;
pub mod gofmt;
pub use kiln_gotime::layout as golayout;
pub mod goobj;
pub mod gopath;
pub mod goregex;
pub mod gostr;
pub use kiln_gotime::time as gotime;
mod head;
pub mod ignore;
pub mod incmemo;
pub mod jsonview;
pub mod lex;
pub mod parse;
pub mod random;
pub mod render;
#[cfg(test)]
mod samples;
pub mod schema;
pub mod semver;
pub mod split;
pub mod strvals;
pub mod textmap;
pub mod tplcache;
pub mod urls;
pub mod value;
pub mod xcase;
pub mod yaml11;
pub mod yamlcache;
pub mod yamltree;

#[cfg(all(target_arch = "wasm32", feature = "component"))]
mod plugin;

/// The guest's allocator: the Rust port of dlmalloc (the standard library's
/// allocator on wasm32-unknown-unknown) called directly, in place of
/// wasi-libc's dlmalloc reached through Rust's allocation shims and
/// `malloc`. A large render allocates and frees about 130,000 blocks;
/// measured in instructions per render in `docs/benchmarks.md` ("helm
/// plugin"). (rlsf's TLSF was measured too: as fast, but on wasm32 it never
/// joins the memory it grows, so a buffer that keeps doubling needs twice
/// its size.)
#[cfg(all(target_arch = "wasm32", feature = "component"))]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

pub use render::{Document, Options, RenderError, render, stream};
