//! The controller's side: one HTTP/2 connection pool to the render server,
//! mutual TLS, bounded bodies, a deadline per request.

use std::net::SocketAddr;

use super::Limits;
use super::protocol::{RENDER_PATH, RenderFailure, RenderRequest, RenderResponse};
use super::tls::{Identity, TlsError};

/// A render over the network failed. [`ClientError::Refused`] is the
/// server's answer (a condition of the Application); every other variant
/// means the render server could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The client could not be set up.
    #[error("render server client for {url}")]
    Setup {
        /// The render server.
        url: String,
        /// Why.
        #[source]
        source: TlsError,
    },
    /// The HTTP client could not be built.
    #[error("render server client for {url}")]
    Build {
        /// The render server.
        url: String,
        /// Why.
        #[source]
        source: reqwest::Error,
    },
    /// The server could not be reached, or the exchange broke off.
    #[error("render server {url} is unreachable")]
    Unreachable {
        /// The render server.
        url: String,
        /// Why (connection refused, TLS handshake, reset…).
        #[source]
        source: reqwest::Error,
    },
    /// No answer within the deadline.
    #[error("render server {url} did not answer within {deadline:?}")]
    DeadlineExceeded {
        /// The render server.
        url: String,
        /// The deadline.
        deadline: std::time::Duration,
    },
    /// The answer holds more JSON nodes than the limit (not parsed).
    #[error("render server {url} answered with more than {limit} JSON nodes")]
    ResponseTooComplex {
        /// The render server.
        url: String,
        /// The limit.
        limit: u64,
    },
    /// The request is larger than the limit (not sent).
    #[error(
        "the render request is {size} bytes, more than the limit of {limit} (--render-max-request)"
    )]
    RequestTooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The answer is larger than the limit (read no further).
    #[error("render server {url} answered more than {limit} bytes (--render-max-response)")]
    ResponseTooLarge {
        /// The render server.
        url: String,
        /// The limit.
        limit: usize,
    },
    /// The server answered an HTTP error that is not a render failure.
    #[error("render server {url} answered HTTP {status}: {body}")]
    Status {
        /// The render server.
        url: String,
        /// The status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The answer is not a render.
    #[error("render server {url} answered something that is not a render")]
    Decode {
        /// The render server.
        url: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The server did the work and refused (a condition).
    #[error("{}: {}", .0.reason, .0.message)]
    Refused(RenderFailure),
}

/// A client of one render server.
#[derive(Clone, Debug)]
pub struct Client {
    url: String,
    endpoint: String,
    http: reqwest::Client,
    limits: Limits,
}

impl Client {
    /// A client of the render server at `url` (`https://host:port`).
    pub fn new(url: &str, identity: &Identity, limits: Limits) -> Result<Self, ClientError> {
        Self::at(url, None, identity, limits)
    }

    /// A client of the render server at `url` that connects to `address`
    /// instead of resolving the URL's host (one replica behind a headless
    /// Service); the server's certificate is still checked against the
    /// URL's host name.
    pub fn at(
        url: &str,
        address: Option<SocketAddr>,
        identity: &Identity,
        limits: Limits,
    ) -> Result<Self, ClientError> {
        let tls = super::tls::client_config(identity).map_err(|source| ClientError::Setup {
            url: url.to_owned(),
            source,
        })?;
        Self::build(url, address, tls, limits)
    }

    /// A client with a TLS configuration of the caller's (tests use one
    /// without a client certificate).
    pub fn with_tls(
        url: &str,
        tls: tokio_rustls::rustls::ClientConfig,
        limits: Limits,
    ) -> Result<Self, ClientError> {
        Self::build(url, None, tls, limits)
    }

    fn build(
        url: &str,
        address: Option<SocketAddr>,
        tls: tokio_rustls::rustls::ClientConfig,
        limits: Limits,
    ) -> Result<Self, ClientError> {
        let mut builder = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .http2_prior_knowledge()
            .connect_timeout(limits.connect_timeout)
            .timeout(limits.deadline)
            .no_proxy();
        let trimmed = url.trim_end_matches('/');
        let mut name = trimmed.to_owned();
        if let Some(address) = address {
            let host = reqwest::Url::parse(trimmed)
                .ok()
                .and_then(|u| u.host_str().map(str::to_owned))
                .unwrap_or_default();
            builder = builder.resolve(&host, address);
            name = format!("{trimmed} ({address})");
        }
        let http = builder.build().map_err(|source| ClientError::Build {
            url: url.to_owned(),
            source,
        })?;
        Ok(Self {
            endpoint: format!("{trimmed}{RENDER_PATH}"),
            url: name,
            http,
            limits,
        })
    }

    /// The render server's URL (with the replica's address when the
    /// client connects to one: `https://host:port (10.0.0.7:8443)`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Renders `request` on the server.
    pub async fn render(&self, request: &RenderRequest) -> Result<RenderResponse, ClientError> {
        let body = serde_json::to_vec(request).map_err(|source| ClientError::Decode {
            url: self.url.clone(),
            source,
        })?;
        if body.len() > self.limits.max_request {
            return Err(ClientError::RequestTooLarge {
                size: body.len(),
                limit: self.limits.max_request,
            });
        }
        let failed = |source: reqwest::Error| {
            if source.is_timeout() {
                ClientError::DeadlineExceeded {
                    url: self.url.clone(),
                    deadline: self.limits.deadline,
                }
            } else {
                ClientError::Unreachable {
                    url: self.url.clone(),
                    source,
                }
            }
        };
        let mut response = self
            .http
            .post(&self.endpoint)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .map_err(failed)?;
        let status = response.status();
        if response
            .content_length()
            .is_some_and(|n| n > self.limits.max_response as u64)
        {
            return Err(ClientError::ResponseTooLarge {
                url: self.url.clone(),
                limit: self.limits.max_response,
            });
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            if bytes.len() + chunk.len() > self.limits.max_response {
                return Err(ClientError::ResponseTooLarge {
                    url: self.url.clone(),
                    limit: self.limits.max_response,
                });
            }
            bytes.extend_from_slice(&chunk);
        }
        let decode = |source| ClientError::Decode {
            url: self.url.clone(),
            source,
        };
        // Counted as it streams before anything is built (a body of
        // `[1,1,…]` is two nodes per byte, each tens of bytes once parsed).
        let max_nodes = self.limits.max_response_nodes;
        if kiln_yaml_limits::most_nodes_without_aliases(bytes.len()) > max_nodes
            && let Ok(None) = kiln_yaml_limits::count_nodes(
                &mut serde_json::Deserializer::from_slice(&bytes),
                max_nodes,
            )
        {
            return Err(ClientError::ResponseTooComplex {
                url: self.url.clone(),
                limit: max_nodes,
            });
        }
        if status.is_success() {
            return serde_json::from_slice(&bytes).map_err(decode);
        }
        if status == reqwest::StatusCode::UNPROCESSABLE_ENTITY {
            return Err(ClientError::Refused(
                serde_json::from_slice(&bytes).map_err(decode)?,
            ));
        }
        Err(ClientError::Status {
            url: self.url.clone(),
            status: status.as_u16(),
            body: crate::text::bounded(&String::from_utf8_lossy(&bytes), 512),
        })
    }
}
