//! The render engine: the source work of one render request, source →
//! render → policy ([`work`](mod@work)), with what it uses: the render cache
//! ([`cache`]), the plugin catalog and its verification ([`catalog`]), and
//! the request's own grants for a chart's dependencies ([`access`]).
//!
//! The controller (rendering in-process) and `kiln render-server` both run
//! it; it knows nothing of the controller: a request
//! ([`RenderRequest`](crate::render::remote::RenderRequest)) is all it is
//! told, and what goes wrong is a [`Stop`](crate::condition::Stop) the
//! controller records as a condition.

pub mod access;
pub mod cache;
pub mod catalog;
pub mod work;

pub use cache::RenderCache;
pub use catalog::{Catalog, CatalogConfig};
pub use work::{Worked, Workshop, work};
