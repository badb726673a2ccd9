//! # `appset`: ApplicationSet templates, rendered inside the sandbox
//!
//! What Argo CD's ApplicationSet controller does with a template and the
//! parameter sets its generators give: every string of the template
//! (keys included) rendered with each set, in one of Argo's two dialects:
//!
//! - `{{ name }}` ([`fasttemplate`]): a parameter's string value in place
//!   of the tag; a tag no string parameter names is left as written;
//! - `goTemplate: true` ([`gotemplate`]): Go's `text/template` with Sprig
//!   (the helm plugin's engine: its steps, output and call depth bounded),
//!   Argo's extra functions (`normalize`, `slugify`, `toYaml`, `fromYaml`,
//!   `fromYamlArray`) and `goTemplateOptions` (`missingkey=error`), plus
//!   `templatePatch`, a Go template whose YAML is merged into each result.
//!
//! The host sends one `TemplateRequest` object ([`request`]) and gets one
//! object per parameter set, in order. Plain Rust: the component glue is
//! [`plugin`] (wasm only), the engine runs natively in tests.

pub mod fasttemplate;
pub mod gotemplate;
pub mod request;

#[cfg(target_arch = "wasm32")]
mod plugin;

/// The guest's allocator (as the helm plugin's, which this one shares the
/// engine of): dlmalloc called directly.
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

pub use request::{Request, render};
