//! The render engine: the source work of one render request, source →
//! render → policy ([`work`](mod@work)), with what it uses: the render cache
//! ([`cache`]), the plugin catalog and its verification ([`catalog`]), and
//! the request's own grants: a chart's dependencies ([`access`]) and the
//! Git credentials it brought ([`grant`]), never kept in shared state.
//!
//! The controller (rendering in-process) and `kiln render-server` both run
//! it; it knows nothing of the controller: a request
//! ([`RenderRequest`](crate::render::remote::RenderRequest)) is all it is
//! told, and what goes wrong is a [`Stop`](crate::condition::Stop) the
//! controller records as a condition.

pub mod access;
pub mod cache;
pub mod catalog;
pub mod grant;
pub mod work;

pub use cache::RenderCache;
pub use catalog::{Catalog, CatalogConfig};
pub use grant::{Grant, Granted};
pub use work::{Worked, Workshop, work};
