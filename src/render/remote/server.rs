//! `kiln render-server`'s side: HTTP/2 over mutual TLS, one endpoint
//! (`POST /v1/render`), bounded bodies, a deadline per render. The work
//! itself is [`crate::controller::work`], the same as in-process.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::Limits;
use super::protocol::{RENDER_PATH, RenderFailure, RenderRequest};
use crate::controller::cache::RenderCache;
use crate::controller::plugins::Catalog;
use crate::controller::work::{self, Workshop};
use crate::plugin::PluginHost;
use crate::source::git::KnownHostsSource;
use crate::source::git::{CredentialProvider, Credentials, GitSource, RepoUrl};
use crate::source::helm::ChartFetcher;

/// The credentials of the repositories requests named, each as its last
/// request gave them. The Git engine asks this provider; the render server
/// holds no other credentials.
/// Likewise the SSH known hosts, as the last request gave them.
#[derive(Debug, Default)]
pub struct RequestCredentials {
    by_url: Mutex<HashMap<String, Credentials>>,
    known_hosts: Mutex<Option<String>>,
}

impl KnownHostsSource for RequestCredentials {
    fn known_hosts(&self) -> Option<String> {
        self.known_hosts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl RequestCredentials {
    fn set_known_hosts(&self, known_hosts: Option<String>) {
        *self.known_hosts.lock().unwrap_or_else(|e| e.into_inner()) = known_hosts;
    }

    fn set(&self, url: &RepoUrl, credentials: Option<Credentials>) {
        let mut map = self.by_url.lock().unwrap_or_else(|e| e.into_inner());
        match credentials {
            Some(c) => {
                map.insert(url.to_string(), c);
            }
            None => {
                map.remove(&url.to_string());
            }
        }
    }
}

impl CredentialProvider for RequestCredentials {
    fn credentials(&self, url: &RepoUrl) -> Option<Credentials> {
        self.by_url
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&url.to_string())
            .cloned()
    }
}

/// What the render server serves with.
pub struct RenderServer {
    /// Git, asking [`RenderServer::credentials`].
    pub git: GitSource,
    /// The credentials requests brought.
    pub credentials: Arc<RequestCredentials>,
    /// Helm charts (`spec.source.chart`): the credentials of the chart's
    /// repository and of the dependency repositories the controller
    /// granted come with each request and serve that request only.
    pub charts: ChartFetcher,
    /// The plugin host.
    pub host: PluginHost,
    /// Verified, compiled plugins.
    pub catalog: Catalog,
    /// The render cache.
    pub cache: RenderCache,
    /// Policy reviews reused while what they depend on holds.
    pub reviews: crate::policy::ReviewCache,
    /// Whether requests may name repositories on this filesystem.
    pub allow_file_repositories: bool,
    /// Protocol bounds.
    pub limits: Limits,
}

/// The render server stopped serving.
#[derive(Debug, thiserror::Error)]
#[error("render server on {address}")]
pub struct ServeError {
    /// Where it listened.
    pub address: String,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

impl RenderServer {
    /// Serves `listener` with TLS from `acceptor` until `shutdown` is
    /// cancelled.
    pub async fn serve(
        self: Arc<Self>,
        listener: TcpListener,
        acceptor: TlsAcceptor,
        shutdown: CancellationToken,
    ) -> Result<(), ServeError> {
        loop {
            let (stream, peer) = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        continue;
                    }
                },
            };
            let (server, acceptor, shutdown) = (self.clone(), acceptor.clone(), shutdown.clone());
            tokio::spawn(async move {
                let stream = match tokio::time::timeout(
                    server.limits.connect_timeout,
                    acceptor.accept(stream),
                )
                .await
                {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(e)) => {
                        tracing::info!(%peer, error = %e, "TLS handshake refused");
                        return;
                    }
                    Err(_) => {
                        tracing::info!(%peer, "TLS handshake timed out");
                        return;
                    }
                };
                let mut builder = auto::Builder::new(TokioExecutor::new()).http2_only();
                builder
                    .http2()
                    .max_concurrent_streams(server.limits.max_streams);
                let service = hyper::service::service_fn(move |request| {
                    let server = server.clone();
                    async move { Ok::<_, Infallible>(server.handle(request).await) }
                });
                let connection = builder.serve_connection(TokioIo::new(stream), service);
                let served = tokio::select! {
                    result = connection => result,
                    () = shutdown.cancelled() => Ok(()),
                };
                if let Err(e) = served {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
            });
        }
    }

    async fn handle(&self, request: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
        if request.method() != hyper::Method::POST || request.uri().path() != RENDER_PATH {
            return plain(StatusCode::NOT_FOUND, "not found");
        }
        let limit = self.limits.max_request;
        let body = match Limited::new(request.into_body(), limit).collect().await {
            Ok(body) => body.to_bytes(),
            Err(e) => {
                if e.is::<http_body_util::LengthLimitError>() {
                    tracing::warn!(limit, "render request refused: larger than the limit");
                    return plain(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        &format!("the request is larger than {limit} bytes"),
                    );
                }
                return plain(StatusCode::BAD_REQUEST, "the request body broke off");
            }
        };
        let request: RenderRequest = match serde_json::from_slice(&body) {
            Ok(request) => request,
            Err(e) => {
                return plain(
                    StatusCode::BAD_REQUEST,
                    &format!("not a render request: {e}"),
                );
            }
        };
        let span = tracing::info_span!("render", app = %request.app.name, repo = %request.app.repo_url, revision = tracing::field::Empty);
        let deadline = self.limits.deadline;
        let worked = tokio::time::timeout(deadline, self.render(&request))
            .instrument(span)
            .await;
        match worked {
            Err(_) => failure(RenderFailure {
                kind: "ComparisonError".into(),
                reason: "RenderDeadlineExceeded".into(),
                message: format!(
                    "the render took longer than the render server's deadline of {deadline:?}"
                ),
                repositories_needed: Vec::new(),
            }),
            Ok(Err(stop)) => failure(RenderFailure {
                kind: stop.kind.into_owned(),
                reason: stop.reason.into_owned(),
                message: stop.message,
                repositories_needed: stop.repositories_needed,
            }),
            Ok(Ok(response)) => match serde_json::to_vec(&response) {
                Ok(bytes) if bytes.len() <= self.limits.max_response => Response::builder()
                    .status(StatusCode::OK)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(bytes)))
                    .unwrap_or_default(),
                Ok(bytes) => failure(RenderFailure {
                    kind: "ComparisonError".into(),
                    reason: "RenderTooLarge".into(),
                    message: format!(
                        "the render is {} bytes, more than the render server's limit of {} (--max-response)",
                        bytes.len(),
                        self.limits.max_response
                    ),
                    repositories_needed: Vec::new(),
                }),
                Err(e) => plain(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
            },
        }
    }

    async fn render(
        &self,
        request: &RenderRequest,
    ) -> Result<super::RenderResponse, crate::controller::Stop> {
        self.credentials
            .set_known_hosts(request.ssh_known_hosts.clone());
        if let Ok(url) = RepoUrl::parse(&request.app.repo_url) {
            self.credentials
                .set(&url, request.repository_credentials.clone().map(Into::into));
        }
        // The policies' own sources bring their credentials too (a policy
        // source that is the application's repository shares its entry).
        for source in request.policies.iter().filter_map(|p| p.source.as_ref()) {
            if let Ok(url) = RepoUrl::parse(&source.repo_url) {
                self.credentials
                    .set(&url, source.credentials.clone().map(Into::into));
            }
        }
        // A chart's credentials (its repository's and its granted
        // dependency repositories') serve this request only: the work
        // makes them its chart access (`chart_access: None`).
        let shop = Workshop {
            charts: Some(&self.charts),
            chart_access: None,
            git: &self.git,
            host: &self.host,
            catalog: &self.catalog,
            cache: &self.cache,
            reviews: &self.reviews,
            allow_file_repositories: self.allow_file_repositories,
        };
        let worked = work::work(shop, request).await?;
        for (plugin, world, took) in &worked.timings {
            tracing::debug!(plugin, ?world, seconds = took.as_secs_f64(), "plugin call");
        }
        Ok(worked.response)
    }
}

fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "text/plain")
        .body(Full::new(Bytes::from(text.to_owned())))
        .unwrap_or_default()
}

fn failure(failure: RenderFailure) -> Response<Full<Bytes>> {
    let body = serde_json::to_vec(&failure).unwrap_or_default();
    Response::builder()
        .status(StatusCode::UNPROCESSABLE_ENTITY)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_default()
}
