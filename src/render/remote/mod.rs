//! Rendering in another process: the controller's client of
//! `kiln render-server` ([`Client`]), the server ([`server`]), their
//! messages ([`protocol`]) and mutual TLS ([`tls`]).
//!
//! The render server does all source work (Git, plugin fetching and
//! verification, the compile and render caches, plugin calls) and holds no
//! Kubernetes credentials; the controller sends it one request per render,
//! with the credentials of that one repository. See docs/controller.md.

pub mod client;
pub mod pool;
pub mod protocol;
pub mod server;
pub mod tls;

use std::time::Duration;

pub use client::{Client, ClientError};
pub use pool::{Discovery, Pool, PoolConfig, PoolError, Routed};
pub use protocol::*;

/// Default bound of a request body: 8 MiB (a request carries plugin
/// descriptions, parameters and credentials, never manifests).
pub const DEFAULT_MAX_REQUEST: usize = 8 << 20;
/// Default bound of a response body: 64 MiB (the rendered objects).
pub const DEFAULT_MAX_RESPONSE: usize = 64 << 20;
/// Default deadline of one render request, from sending it to the last
/// byte of the answer: 5 min (a cold clone and a plugin fetch and compile
/// may all happen in it).
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);
/// Default deadline of connecting (TCP and TLS) to the render server: 10 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default number of requests one connection may have in flight at once
/// on the server (HTTP/2 streams): 64.
pub const DEFAULT_MAX_STREAMS: u32 = 64;
/// Default number of connections the server holds open at once (being
/// set up or serving): 256. Past it, connections wait in the kernel's
/// accept queue, costing the server nothing.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// Default number of TLS handshakes the server runs at once: 32. A peer
/// that connects and sends nothing holds one for at most the connect
/// timeout.
pub const DEFAULT_MAX_HANDSHAKES: usize = 32;
/// Default number of TLS handshakes one peer address may have in flight:
/// 8 (a controller opens a connection or two; a flood from one address
/// holds no more than these).
pub const DEFAULT_MAX_HANDSHAKES_PER_PEER: usize = 8;
/// Default bound of the JSON nodes of one response (its objects' values
/// and everything else), counted as the body streams before anything is
/// built: 8,000,000, twice what one render may parse
/// ([`crate::manifest::ParseLimits`]); 64 MiB of `[1,1,…]` would be 32
/// million.
pub const DEFAULT_MAX_RESPONSE_NODES: u64 = 8_000_000;

/// Bounds of the protocol, on either side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of one request body. Default: [`DEFAULT_MAX_REQUEST`].
    pub max_request: usize,
    /// Bytes of one response body. Default: [`DEFAULT_MAX_RESPONSE`].
    pub max_response: usize,
    /// Deadline of one render. The server stops working on a render past
    /// it; the client stops waiting. Default: [`DEFAULT_DEADLINE`].
    pub deadline: Duration,
    /// Deadline of connecting (the client), and of a TLS handshake (the
    /// server). Default: [`DEFAULT_CONNECT_TIMEOUT`].
    pub connect_timeout: Duration,
    /// Connections open at once (server). Default:
    /// [`DEFAULT_MAX_CONNECTIONS`].
    pub max_connections: usize,
    /// TLS handshakes at once (server). Default:
    /// [`DEFAULT_MAX_HANDSHAKES`].
    pub max_handshakes: usize,
    /// TLS handshakes at once from one peer address (server); a connection
    /// past it is closed at once. Default:
    /// [`DEFAULT_MAX_HANDSHAKES_PER_PEER`].
    pub max_handshakes_per_peer: usize,
    /// Concurrent requests per connection (server). Default:
    /// [`DEFAULT_MAX_STREAMS`].
    pub max_streams: u32,
    /// JSON nodes of one response (client). Default:
    /// [`DEFAULT_MAX_RESPONSE_NODES`].
    pub max_response_nodes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_request: DEFAULT_MAX_REQUEST,
            max_response: DEFAULT_MAX_RESPONSE,
            deadline: DEFAULT_DEADLINE,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_handshakes: DEFAULT_MAX_HANDSHAKES,
            max_handshakes_per_peer: DEFAULT_MAX_HANDSHAKES_PER_PEER,
            max_streams: DEFAULT_MAX_STREAMS,
            max_response_nodes: DEFAULT_MAX_RESPONSE_NODES,
        }
    }
}
