//! # kiln-plugin-sdk
//!
//! Write Kiln renderers and policies as plain Rust: implement [`Renderer`] or
//! [`Policy`] and export it with one macro. The SDK hides the WIT bindings
//! (`wit/plugin.wit`, package `kiln:plugin@0.1.2`) and adds helpers to read the
//! source tree ([`source`]), log ([`log`]), parse or emit manifests
//! ([`yaml`]) and, for a policy, read its destination cluster ([`cluster`]).
//!
//! Enable exactly one of the crate features `renderer`, `policy` or
//! `rule-policy` (a policy that also reports each rule's result, passes and
//! skips included: [`RulePolicy`]): a component implements exactly one world.
//!
//! ```ignore
//! use kiln_plugin_sdk::{AppContext, Manifest, Param, RenderError, Renderer};
//!
//! struct Hello;
//!
//! impl Renderer for Hello {
//!     fn render(ctx: AppContext, _params: Vec<Param>, _input: Vec<Manifest>)
//!         -> Result<Vec<Manifest>, RenderError>
//!     {
//!         let text = kiln_plugin_sdk::source::read_to_string(&ctx.join("hello.yaml"))?;
//!         Ok(vec![Manifest::new(text, Some(ctx.join("hello.yaml")))])
//!     }
//! }
//!
//! kiln_plugin_sdk::export_renderer!(Hello);
//! ```
//!
//! Build for `wasm32-wasip2` (`rustup target add wasm32-wasip2`, then
//! `cargo build --release --target wasm32-wasip2`): the result is a component
//! `kiln plugin inspect` and `kiln render --plugin` accept as is.

#[cfg(any(
    all(feature = "renderer", feature = "policy"),
    all(feature = "renderer", feature = "rule-policy"),
    all(feature = "policy", feature = "rule-policy"),
))]
compile_error!(
    "enable exactly one of the features `renderer`, `policy` and `rule-policy`: a component implements one world"
);
#[cfg(not(any(feature = "renderer", feature = "policy", feature = "rule-policy")))]
compile_error!("enable one of the features `renderer`, `policy` or `rule-policy`");

// The export macros name this crate by its absolute path; make that path
// valid inside the crate itself too.
extern crate self as kiln_plugin_sdk;

/// The generated WIT bindings. Public only so that the export macros can
/// reach them; plugin code uses the re-exports at the crate root.
#[doc(hidden)]
pub mod bindings {
    #[cfg(feature = "renderer")]
    wit_bindgen::generate!({
        path: "../../wit",
        world: "renderer",
        pub_export_macro: true,
        export_macro_name: "export",
        runtime_path: "::kiln_plugin_sdk::__rt::wit_bindgen::rt",
        additional_derives: [Clone, PartialEq],
    });
    #[cfg(feature = "policy")]
    wit_bindgen::generate!({
        path: "../../wit",
        world: "policy",
        pub_export_macro: true,
        export_macro_name: "export",
        runtime_path: "::kiln_plugin_sdk::__rt::wit_bindgen::rt",
        additional_derives: [Clone, PartialEq],
    });
    #[cfg(feature = "rule-policy")]
    wit_bindgen::generate!({
        path: "../../wit",
        world: "rule-policy",
        pub_export_macro: true,
        export_macro_name: "export",
        runtime_path: "::kiln_plugin_sdk::__rt::wit_bindgen::rt",
        additional_derives: [Clone, PartialEq],
    });
}

/// Re-exports used by the macros; not part of the API.
#[doc(hidden)]
pub mod __rt {
    pub use wit_bindgen;
}

pub mod log;
mod params;
pub mod source;
pub mod yaml;

pub use bindings::kiln::plugin::types::{AppContext, Manifest, Param};
pub use params::Params;

#[cfg(feature = "renderer")]
mod renderer;
#[cfg(feature = "renderer")]
pub use renderer::{InputError, RenderError, Renderer};

#[cfg(any(feature = "policy", feature = "rule-policy"))]
pub mod cluster;
#[cfg(any(feature = "policy", feature = "rule-policy"))]
mod policy;
#[cfg(feature = "policy")]
pub use policy::Policy;
#[cfg(any(feature = "policy", feature = "rule-policy"))]
pub use policy::{Finding, ObjectRef, ReviewRequest, Severity};

#[cfg(feature = "rule-policy")]
mod rules;
#[cfg(feature = "rule-policy")]
pub use rules::{Outcome, RulePolicy, RuleResult};
#[cfg(feature = "rule-policy")]
#[doc(hidden)]
pub use rules::{review as __review_from_rules, review_rules as __review_rules};

impl AppContext {
    /// Joins `relative` to the Application's path, giving a path relative to
    /// the source root, as the [`source`] functions expect.
    pub fn join(&self, relative: &str) -> String {
        source::join(&self.path, relative)
    }
}

impl Manifest {
    /// A manifest from YAML or JSON text, with the path it came from.
    pub fn new(content: impl Into<String>, source: Option<String>) -> Self {
        Manifest {
            content: content.into(),
            source,
        }
    }
}
