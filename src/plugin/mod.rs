//! The plugin host: runs renderers and policies, WebAssembly components
//! implementing the contract in `wit/plugin.wit`, in a wasmtime sandbox.
//!
//! A plugin gets nothing ambient. Its only window on the world is the
//! contract's `source` interface (a read-only [`SourceView`](crate::source::SourceView))
//! and `log`; WASI guests get a WASI with nothing in it. Every call runs in a
//! fresh store with a memory cap, a CPU deadline and an output cap
//! ([`Limits`]); each way a call can go wrong is its own [`PluginError`]
//! variant naming the plugin.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use kiln::plugin::{AppContext, HostConfig, PluginHost, World};
//! use kiln::source::LocalDir;
//!
//! let host = PluginHost::new(HostConfig::default())?;
//! let values = host.load_file("plugins/dist/values.wasm".as_ref(), World::Renderer, None)?;
//! let view = Arc::new(LocalDir::open("examples/guestbook")?);
//! let context = AppContext { name: "guestbook".into(), ..Default::default() };
//! let objects = values.render(view, context, vec![("replicas".into(), "3".into())], vec![]).await?;
//! # Ok(()) }
//! ```

mod bindings;
mod cache;
mod call;
pub mod cluster;
mod config;
pub mod contract;
mod error;
mod host;
mod state;
mod types;

pub use cache::CacheOutcome;
pub use call::Plugin;
pub use config::{HostConfig, Limits};
pub use contract::{ComponentInfo, World, inspect};
pub use error::{GuestFailure, PluginError, Result};
pub use host::{HostError, PluginHost};
pub use types::{
    AppContext, Finding, ObjectRef, Params, RuleOutcome, RuleRef, RuleResult, Severity,
};
