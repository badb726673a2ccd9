//! Downloading from a Helm repository over HTTP(S): `index.yaml` (with
//! `If-None-Match`, so an unchanged index costs one small request) and
//! chart archives, each capped in size and bounded in time.
//!
//! Credentials are those of the repository (matched by URL prefix, as
//! repository Secrets are) and are sent only to the repository's own
//! origin: an index may point its archives at any host, and Helm too keeps
//! credentials to the repository unless told otherwise. Basic credentials
//! never travel over plain HTTP except to a loopback address.

use std::sync::Arc;
use std::time::Duration;

use crate::source::git::{CredentialProvider, Credentials, RepoUrl};

/// Default deadline of one HTTP request (connect, headers and body): 60 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// A download failed. Each names the URL (never a credential).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// The URL is not an absolute http(s) URL.
    #[error("{url}: not an http:// or https:// URL")]
    BadUrl {
        /// The URL.
        url: String,
    },
    /// The server refused the credentials, or wants some (401).
    #[error("{url}: unauthorized (401): check the repository's credentials")]
    Unauthorized {
        /// The URL.
        url: String,
    },
    /// The credentials lack permission (403).
    #[error("{url}: forbidden (403)")]
    Forbidden {
        /// The URL.
        url: String,
    },
    /// Nothing there (404).
    #[error("{url}: not found (404)")]
    NotFound {
        /// The URL.
        url: String,
    },
    /// Another HTTP status.
    #[error("{url}: HTTP {status}")]
    Status {
        /// The URL.
        url: String,
        /// The status code.
        status: u16,
    },
    /// The body is larger than the limit (declared or sent).
    #[error("{url}: larger than the {limit}-byte limit")]
    TooLarge {
        /// The URL.
        url: String,
        /// The limit.
        limit: u64,
    },
    /// The server did not answer in time.
    #[error("{url}: timed out after {after:?}")]
    Timeout {
        /// The URL.
        url: String,
        /// The deadline.
        after: Duration,
    },
    /// Connection or protocol failure.
    #[error("{url}: {message}")]
    Transport {
        /// The URL.
        url: String,
        /// What went wrong.
        message: String,
    },
}

/// What a conditional GET returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Download {
    /// The server says the copy we hold (by its `ETag`) is current.
    NotModified,
    /// A body, and its `ETag` if the server sent one.
    Body {
        /// The bytes.
        bytes: Vec<u8>,
        /// The entity tag, for the next request's `If-None-Match`.
        etag: Option<String>,
    },
}

/// Downloads from Helm repositories.
#[derive(Debug, Clone)]
pub struct HttpFetcher {
    client: reqwest::Client,
    credentials: Arc<dyn CredentialProvider>,
    timeout: Duration,
}

impl HttpFetcher {
    /// A fetcher whose every request ends within `timeout`, with extra
    /// trusted CA certificates (PEM, may be empty).
    pub fn new(
        credentials: Arc<dyn CredentialProvider>,
        timeout: Duration,
        tls_roots_pem: &[u8],
    ) -> Result<Self, FetchError> {
        let transport = |message: String| FetchError::Transport {
            url: "(client)".into(),
            message,
        };
        let roots = if tls_roots_pem.is_empty() {
            Vec::new()
        } else {
            reqwest::Certificate::from_pem_bundle(tls_roots_pem)
                .map_err(|e| transport(e.to_string()))?
        };
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .no_proxy()
            .tls_certs_merge(roots)
            // reqwest drops Authorization on a redirect to another host.
            .redirect(reqwest::redirect::Policy::limited(5))
            .build()
            .map_err(|e| transport(e.to_string()))?;
        Ok(HttpFetcher {
            client,
            credentials,
            timeout,
        })
    }

    /// GETs `url` (of the repository `repo`), at most `max` bytes. With
    /// `etag`, asks `If-None-Match` and may get [`Download::NotModified`].
    /// `credentials`: where the repository's credentials are looked up for
    /// this request (`None`: the fetcher's own provider).
    pub async fn get(
        &self,
        repo: &str,
        url: &str,
        max: u64,
        etag: Option<&str>,
        credentials: Option<&dyn CredentialProvider>,
    ) -> Result<Download, FetchError> {
        let parsed = url::Url::parse(url).map_err(|_| FetchError::BadUrl { url: url.into() })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(FetchError::BadUrl { url: url.into() });
        }
        let mut request = self.client.get(parsed.clone());
        let provider = credentials.unwrap_or(self.credentials.as_ref());
        if let Some((username, password)) = basic_for(provider, repo, &parsed) {
            request = request.basic_auth(username, Some(password));
        }
        if let Some(etag) = etag {
            request = request.header(reqwest::header::IF_NONE_MATCH, etag);
        }
        let failed = |e: reqwest::Error| {
            if e.is_timeout() {
                FetchError::Timeout {
                    url: url.into(),
                    after: self.timeout,
                }
            } else {
                FetchError::Transport {
                    url: url.into(),
                    message: error_chain(&e),
                }
            }
        };
        let mut response = request.send().await.map_err(failed)?;
        let url = url.to_owned();
        match response.status().as_u16() {
            304 if etag.is_some() => return Ok(Download::NotModified),
            200..=299 => {}
            401 => return Err(FetchError::Unauthorized { url }),
            403 => return Err(FetchError::Forbidden { url }),
            404 => return Err(FetchError::NotFound { url }),
            status => return Err(FetchError::Status { url, status }),
        }
        if response.content_length().is_some_and(|n| n > max) {
            return Err(FetchError::TooLarge { url, limit: max });
        }
        let etag = response
            .headers()
            .get(reqwest::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // Sized once when the length is declared (within the cap): growing
        // by doubling would hold up to twice the body while it copies.
        let declared = response.content_length().unwrap_or(0).min(max);
        let mut bytes = Vec::with_capacity(usize::try_from(declared).unwrap_or(0));
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            if (bytes.len() + chunk.len()) as u64 > max {
                return Err(FetchError::TooLarge { url, limit: max });
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Download::Body { bytes, etag })
    }
}

/// The repository's basic credentials from `provider`, if `target` is on
/// the repository's origin and the transport is fit for them.
fn basic_for(
    provider: &dyn CredentialProvider,
    repo: &str,
    target: &url::Url,
) -> Option<(String, String)> {
    let repo_url = url::Url::parse(repo).ok()?;
    if repo_url.origin() != target.origin() {
        return None;
    }
    let loopback = matches!(
        target.host(),
        Some(url::Host::Ipv4(ip)) if ip.is_loopback()
    ) || matches!(target.host(), Some(url::Host::Ipv6(ip)) if ip.is_loopback())
        || target.host_str() == Some("localhost");
    if target.scheme() != "https" && !loopback {
        tracing::warn!(
            repo,
            "credentials not sent over plain http to a remote host"
        );
        return None;
    }
    let key = index_key(repo)?;
    match provider.credentials(&key)? {
        Credentials::Basic { username, password } => Some((username, password.expose().to_owned())),
        _ => None,
    }
}

/// What the credentials of Helm repository `repo` are looked up by: its
/// `index.yaml` URL (the repository URL itself may have no path, which a
/// [`RepoUrl`] needs). `None`: not a URL credentials can be kept for.
pub fn index_key(repo: &str) -> Option<RepoUrl> {
    RepoUrl::parse(&format!("{}/index.yaml", repo.trim_end_matches('/'))).ok()
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
