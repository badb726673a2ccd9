//! What the controller asks of the API servers: every request counted by
//! verb (`kiln_kube_requests_total{cluster,verb}`) and paced by a token
//! bucket per cluster (`--kube-qps`, `--kube-burst`), as client-go's
//! `QPS`/`Burst` pace its clients. Watches are counted when they start and
//! are not paced (they are one long request each).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use http::Request;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// Default sustained requests per second to one API server: 1,000. A guard
/// against a runaway loop rather than a throttle: a cold start predicts
/// and applies every object once (about 25 requests per Application of ten
/// objects), and 50 per second (Argo CD's default) would make 1,000
/// Applications take eight minutes. Lower it to shield a small API server.
pub const DEFAULT_QPS: u32 = 1000;
/// Default burst above [`DEFAULT_QPS`]: 2,000.
pub const DEFAULT_BURST: u32 = 2000;

/// Request counters by `cluster` and `verb`.
pub type RequestCounts = Family<Vec<(String, String)>, Counter>;

/// How the clients of the API servers behave.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Sustained requests per second to one API server (0: unlimited).
    /// Default: [`DEFAULT_QPS`].
    pub qps: u32,
    /// Requests allowed at once above the sustained rate. Default:
    /// [`DEFAULT_BURST`].
    pub burst: u32,
    /// Where requests are counted (shared by every client made with these
    /// options; the controller serves it on `/metrics`).
    pub requests: RequestCounts,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            qps: DEFAULT_QPS,
            burst: DEFAULT_BURST,
            requests: RequestCounts::default(),
        }
    }
}

/// What a request does, as the API server's audit log names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch=true`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH other than server-side apply.
    Patch,
    /// Server-side apply (PATCH with the apply content type).
    Apply,
    /// Any write with `dryRun=All`.
    DryRun,
    /// DELETE.
    Delete,
    /// Discovery and OpenAPI documents.
    Discovery,
    /// Anything else.
    Other,
}

impl Verb {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Apply => "apply",
            Verb::DryRun => "dry-run",
            Verb::Delete => "delete",
            Verb::Discovery => "discovery",
            Verb::Other => "other",
        }
    }

    /// The verb of `request`.
    pub fn of<B>(request: &Request<B>) -> Self {
        let uri = request.uri();
        let query = uri.query().unwrap_or_default();
        let has = |key: &str, value: &str| {
            form_urlencoded::parse(query.as_bytes()).any(|(k, v)| k == key && v == value)
        };
        let method = request.method();
        if method != http::Method::GET && has("dryRun", "All") {
            return Verb::DryRun;
        }
        match *method {
            http::Method::GET => match resource_path(uri.path()) {
                None => Verb::Discovery,
                Some(Target::Collection) if has("watch", "true") || has("watch", "1") => {
                    Verb::Watch
                }
                Some(Target::Collection) => Verb::List,
                Some(Target::Object) => Verb::Get,
            },
            http::Method::POST => Verb::Create,
            http::Method::PUT => Verb::Update,
            http::Method::PATCH => {
                let apply = request
                    .headers()
                    .get(http::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| v.starts_with("application/apply-patch"));
                if apply { Verb::Apply } else { Verb::Patch }
            }
            http::Method::DELETE => Verb::Delete,
            _ => Verb::Other,
        }
    }
}

/// Whether a resource path names a collection or one object.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    Collection,
    Object,
}

/// `/api/v1/…` or `/apis/GROUP/VERSION/…`: a collection or an object;
/// `None` for discovery and anything else.
fn resource_path(path: &str) -> Option<Target> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match segments.as_slice() {
        ["api", _version, rest @ ..] => rest,
        ["apis", _group, _version, rest @ ..] => rest,
        _ => return None,
    };
    let rest = match rest {
        // Objects in a namespace (not the namespaces themselves).
        ["namespaces", _namespace, rest @ ..] if !rest.is_empty() => rest,
        rest => rest,
    };
    match rest.len() {
        0 => None,
        1 => Some(Target::Collection),
        _ => Some(Target::Object),
    }
}

/// The layer putting [`Paced`] around a client's service.
#[derive(Clone)]
pub struct RequestLayer {
    cluster: String,
    limiter: Option<Arc<DefaultDirectRateLimiter>>,
    requests: RequestCounts,
}

impl RequestLayer {
    /// Pacing and counting for the API server `cluster` (its URL).
    pub fn new(cluster: &str, options: &ClientOptions) -> Self {
        let limiter = NonZeroU32::new(options.qps).map(|qps| {
            let burst = NonZeroU32::new(options.burst.max(options.qps)).unwrap_or(qps);
            Arc::new(RateLimiter::direct(
                Quota::per_second(qps).allow_burst(burst),
            ))
        });
        Self {
            cluster: cluster.to_owned(),
            limiter,
            requests: options.requests.clone(),
        }
    }
}

impl<S> tower::Layer<S> for RequestLayer {
    type Service = Paced<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Paced {
            inner,
            layer: self.clone(),
        }
    }
}

/// A service whose requests are counted and paced.
pub struct Paced<S> {
    inner: S,
    layer: RequestLayer,
}

impl<S, B> tower::Service<Request<B>> for Paced<S>
where
    S: tower::Service<Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let verb = Verb::of(&request);
        self.layer
            .requests
            .get_or_create(&vec![
                ("cluster".into(), self.layer.cluster.clone()),
                ("verb".into(), verb.as_str().into()),
            ])
            .inc();
        // The inner future does nothing until polled: waiting for a token
        // before polling it holds the request back.
        let response = self.inner.call(request);
        let limiter = (verb != Verb::Watch)
            .then(|| self.layer.limiter.clone())
            .flatten();
        Box::pin(async move {
            if let Some(limiter) = limiter {
                limiter.until_ready().await;
            }
            response.await
        })
    }
}

/// A client for `config` whose requests are counted and paced as
/// `options` say.
pub fn client(config: kube::Config, options: &ClientOptions) -> Result<kube::Client, kube::Error> {
    let layer = RequestLayer::new(&config.cluster_url.to_string(), options);
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&layer)
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verb(method: &str, uri: &str, content_type: Option<&str>) -> Verb {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(ct) = content_type {
            request = request.header("content-type", ct);
        }
        Verb::of(&request.body(()).unwrap())
    }

    #[test]
    fn verbs_are_named_as_the_api_server_names_them() {
        for (method, uri, ct, expected) in [
            ("GET", "/api", None, Verb::Discovery),
            ("GET", "/apis/apps/v1", None, Verb::Discovery),
            ("GET", "/openapi/v3", None, Verb::Discovery),
            ("GET", "/api/v1/namespaces", None, Verb::List),
            ("GET", "/api/v1/namespaces/web", None, Verb::Get),
            ("GET", "/api/v1/namespaces/web/configmaps", None, Verb::List),
            (
                "GET",
                "/api/v1/namespaces/web/configmaps/x",
                None,
                Verb::Get,
            ),
            (
                "GET",
                "/api/v1/configmaps?watch=true&resourceVersion=1",
                None,
                Verb::Watch,
            ),
            (
                "GET",
                "/apis/apps/v1/deployments?labelSelector=a",
                None,
                Verb::List,
            ),
            (
                "GET",
                "/apis/apps/v1/namespaces/web/deployments/x/status",
                None,
                Verb::Get,
            ),
            (
                "GET",
                "/apis/rbac.authorization.k8s.io/v1/clusterroles/x",
                None,
                Verb::Get,
            ),
            (
                "POST",
                "/api/v1/namespaces/web/configmaps",
                None,
                Verb::Create,
            ),
            (
                "PUT",
                "/api/v1/namespaces/web/configmaps/x",
                None,
                Verb::Update,
            ),
            (
                "PATCH",
                "/api/v1/namespaces/web/configmaps/x",
                Some("application/merge-patch+json"),
                Verb::Patch,
            ),
            (
                "PATCH",
                "/api/v1/namespaces/web/configmaps/x?fieldManager=kiln",
                Some("application/apply-patch+yaml"),
                Verb::Apply,
            ),
            (
                "PATCH",
                "/api/v1/namespaces/web/configmaps/x?dryRun=All&fieldManager=kiln",
                Some("application/apply-patch+yaml"),
                Verb::DryRun,
            ),
            (
                "DELETE",
                "/api/v1/namespaces/web/configmaps/x",
                None,
                Verb::Delete,
            ),
        ] {
            assert_eq!(verb(method, uri, ct), expected, "{method} {uri}");
        }
    }

    #[test]
    fn requests_beyond_the_burst_wait_for_the_rate() {
        let options = ClientOptions {
            qps: 10,
            burst: 20,
            ..ClientOptions::default()
        };
        let layer = RequestLayer::new("https://cluster", &options);
        let limiter = layer.limiter.clone().unwrap();
        for _ in 0..20 {
            assert!(limiter.check().is_ok(), "within the burst");
        }
        assert!(limiter.check().is_err(), "the 21st waits");
        let unlimited = RequestLayer::new(
            "https://cluster",
            &ClientOptions {
                qps: 0,
                ..ClientOptions::default()
            },
        );
        assert!(unlimited.limiter.is_none());
    }
}
