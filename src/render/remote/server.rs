//! `kiln render-server`'s side: HTTP/2 over mutual TLS, one endpoint
//! (`POST /v1/render`), bounded bodies, a deadline per render. The work
//! itself is [`work`](mod@crate::render::engine::work), the same as in-process.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::Limits;
use super::protocol::{RENDER_PATH, RenderFailure, RenderRequest};
use crate::condition::{Reason, Stop};
use crate::interrupt::Interrupt;
use crate::plugin::PluginHost;
use crate::render::engine::work::{self, Workshop};
use crate::render::engine::{Catalog, Grant, RenderCache};
use crate::source::git::GitSource;
use crate::source::helm::ChartFetcher;

/// What the render server serves with.
pub struct RenderServer {
    /// Git, asking [`Granted`](crate::render::engine::Granted) for the
    /// credentials and known hosts of the request being served.
    pub git: GitSource,
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
    ///
    /// Nothing a peer does before its certificate is checked can exhaust
    /// the server: at most [`Limits::max_connections`] connections are
    /// open (the next ones wait in the kernel's queue, not accepted); at
    /// most [`Limits::max_handshakes`] of them handshaking, at most
    /// [`Limits::max_handshakes_per_peer`] from one address (more are
    /// closed at once), each for at most [`Limits::connect_timeout`]; an
    /// accept that fails (out of file descriptors) is retried after a
    /// pause that doubles up to a second, never in a busy loop; failures
    /// are logged at most once per [`LOG_INTERVAL`], with how many were
    /// not.
    pub async fn serve(
        self: Arc<Self>,
        listener: TcpListener,
        acceptor: TlsAcceptor,
        shutdown: CancellationToken,
    ) -> Result<(), ServeError> {
        let connections = Arc::new(Semaphore::new(self.limits.max_connections.max(1)));
        let handshakes = Arc::new(Semaphore::new(self.limits.max_handshakes.max(1)));
        let peers = Arc::new(Peers::new(self.limits.max_handshakes_per_peer));
        let log = Arc::new(LogLimiter::default());
        let mut backoff = Backoff::default();
        loop {
            let connection = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                permit = connections.clone().acquire_owned() => permit,
            };
            // The semaphore is never closed.
            let Ok(connection) = connection else {
                return Ok(());
            };
            let (stream, peer) = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => {
                        backoff.reset();
                        accepted
                    }
                    Err(e) => {
                        let pause = backoff.next();
                        log.warn(|suppressed| tracing::warn!(error = %e, retry_in = ?pause, suppressed, "accept failed"));
                        tokio::select! {
                            () = shutdown.cancelled() => return Ok(()),
                            () = tokio::time::sleep(pause) => continue,
                        }
                    }
                },
            };
            let Some(peer_guard) = peers.enter(peer.ip()) else {
                log.warn(|suppressed| {
                    tracing::info!(%peer, suppressed, "connection closed: too many handshakes from its address")
                });
                continue;
            };
            let (server, acceptor, shutdown, log, handshakes) = (
                self.clone(),
                acceptor.clone(),
                shutdown.clone(),
                log.clone(),
                handshakes.clone(),
            );
            tokio::spawn(async move {
                let _connection = connection;
                let Ok(handshake) = handshakes.acquire_owned().await else {
                    return;
                };
                let handshaken =
                    tokio::time::timeout(server.limits.connect_timeout, acceptor.accept(stream))
                        .await;
                drop((handshake, peer_guard));
                let stream = match handshaken {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(e)) => {
                        log.warn(|suppressed| tracing::info!(%peer, error = %e, suppressed, "TLS handshake refused"));
                        return;
                    }
                    Err(_) => {
                        log.warn(|suppressed| tracing::info!(%peer, suppressed, "TLS handshake timed out"));
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
        // Work handed to the blocking pool stops too once the answer is
        // given up on: at the deadline, or when the controller goes away.
        let interrupt = Interrupt::new();
        let _stop = interrupt.raise_on_drop();
        let worked = tokio::time::timeout(deadline, interrupt.clone().scope(self.render(&request)))
            .instrument(span)
            .await;
        match worked {
            Err(_) => failure(
                Stop::new(
                    Reason::RenderDeadlineExceeded,
                    format!(
                        "the render took longer than the render server's deadline of {deadline:?}"
                    ),
                )
                .into(),
            ),
            Ok(Err(stop)) => failure(stop.into()),
            Ok(Ok(response)) => match serde_json::to_vec(&response) {
                Ok(bytes) if bytes.len() <= self.limits.max_response => Response::builder()
                    .status(StatusCode::OK)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(bytes)))
                    .unwrap_or_default(),
                Ok(bytes) => failure(
                    Stop::new(
                        Reason::RenderTooLarge,
                        format!(
                            "the render is {} bytes, more than the render server's limit of {} (--max-response)",
                            bytes.len(),
                            self.limits.max_response
                        ),
                    )
                    .into(),
                ),
                Err(e) => plain(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
            },
        }
    }

    async fn render(&self, request: &RenderRequest) -> Result<super::RenderResponse, Stop> {
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
        // The Git credentials and known hosts of this request, for its
        // work only.
        let worked = Grant::of(request).scope(work::work(shop, request)).await?;
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

/// How often a failure the peers cause (accept errors, refused and timed
/// out handshakes) is logged at most: 10 s.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Logs one line per [`LOG_INTERVAL`] and counts the lines it held back, so
/// that a flood of connections cannot flood the log.
#[derive(Debug, Default)]
struct LogLimiter {
    state: Mutex<(Option<Instant>, u64)>,
}

impl LogLimiter {
    /// Calls `log` with the number of lines held back since the last one,
    /// if the interval has passed; else counts this one.
    fn warn(&self, log: impl FnOnce(u64)) {
        let now = Instant::now();
        let suppressed = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            match state.0 {
                Some(last) if now.duration_since(last) < LOG_INTERVAL => {
                    state.1 += 1;
                    return;
                }
                _ => std::mem::replace(&mut *state, (Some(now), 0)).1,
            }
        };
        log(suppressed);
    }
}

/// The pause after a failed accept: 5 ms, doubling up to 1 s; back to the
/// start after an accept succeeds.
#[derive(Debug, Default)]
struct Backoff {
    failures: u32,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(5);
    const MAX: Duration = Duration::from_secs(1);

    fn next(&mut self) -> Duration {
        let pause = Self::FIRST
            .saturating_mul(1 << self.failures.min(16))
            .min(Self::MAX);
        self.failures = self.failures.saturating_add(1);
        pause
    }

    fn reset(&mut self) {
        self.failures = 0;
    }
}

/// Handshakes in flight by peer address.
#[derive(Debug)]
struct Peers {
    per_peer: usize,
    in_flight: Arc<Mutex<HashMap<std::net::IpAddr, usize>>>,
}

/// One handshake of a peer, counted while it lives.
struct PeerGuard {
    ip: std::net::IpAddr,
    in_flight: Arc<Mutex<HashMap<std::net::IpAddr, usize>>>,
}

impl Peers {
    fn new(per_peer: usize) -> Self {
        Self {
            per_peer: per_peer.max(1),
            in_flight: Arc::default(),
        }
    }

    /// Counts a handshake of `ip`, unless it has its share in flight.
    fn enter(&self, ip: std::net::IpAddr) -> Option<PeerGuard> {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        let count = in_flight.entry(ip).or_default();
        if *count >= self.per_peer {
            return None;
        }
        *count += 1;
        Some(PeerGuard {
            ip,
            in_flight: self.in_flight.clone(),
        })
    }
}

impl Drop for PeerGuard {
    fn drop(&mut self) {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = in_flight.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                in_flight.remove(&self.ip);
            }
        }
    }
}

/// Raises this process's soft limit of open files to its hard limit (a
/// render server holds a socket per connection and files per render; the
/// common soft limit of 1,024 is reached long before the hard one).
/// Returns the limit now in force.
pub fn raise_open_files_limit() -> std::io::Result<u64> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    // `None` is unlimited; the kernel still caps open files at nr_open.
    let ceiling = limit.maximum.or_else(|| {
        std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|n| n.trim().parse().ok())
    });
    if let (Some(current), Some(ceiling)) = (limit.current, ceiling)
        && current < ceiling
    {
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(ceiling),
                maximum: limit.maximum,
            },
        )?;
    }
    Ok(getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX))
}

#[cfg(test)]
mod limits_tests {
    use super::*;

    #[test]
    fn failed_accepts_pause_longer_each_time_up_to_a_second() {
        let mut backoff = Backoff::default();
        let pauses: Vec<u128> = (0..10).map(|_| backoff.next().as_millis()).collect();
        assert_eq!(pauses, [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        backoff.reset();
        assert_eq!(backoff.next(), Backoff::FIRST);
    }

    #[test]
    fn a_flood_of_failures_logs_one_line_per_interval_and_counts_the_rest() {
        let log = LogLimiter::default();
        let mut lines = Vec::new();
        for _ in 0..1000 {
            log.warn(|suppressed| lines.push(suppressed));
        }
        assert_eq!(lines, [0]);
        // Once the interval has passed, the next line says how many were
        // held back.
        log.state.lock().unwrap().0 = Some(Instant::now() - LOG_INTERVAL);
        log.warn(|suppressed| lines.push(suppressed));
        assert_eq!(lines, [0, 999]);
    }

    #[test]
    fn the_open_files_limit_is_raised_to_the_hard_limit() {
        let limit = raise_open_files_limit().unwrap();
        match rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum {
            Some(hard) => assert_eq!(limit, hard),
            None => assert!(limit > 1024, "{limit}"),
        }
    }

    #[test]
    fn one_address_holds_at_most_its_share_of_handshakes() {
        let peers = Peers::new(2);
        let (a, b): (std::net::IpAddr, std::net::IpAddr) =
            ("127.0.0.2".parse().unwrap(), "127.0.0.1".parse().unwrap());
        let first = peers.enter(a).unwrap();
        let _second = peers.enter(a).unwrap();
        assert!(peers.enter(a).is_none(), "a third from one address");
        assert!(peers.enter(b).is_some(), "another address is not held back");
        drop(first);
        assert!(
            peers.enter(a).is_some(),
            "a finished handshake frees its share"
        );
    }
}
