//! A Helm chart repository on loopback, served by the test: files by path
//! (`index.yaml`, archives), `ETag`/`If-None-Match` on every file, optional
//! basic auth, and a log of every request, so tests count what Kiln
//! fetched and see which requests carried credentials.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The path.
    pub path: String,
    /// Whether it carried an `Authorization` header.
    pub authorized: bool,
    /// The user name of the basic credentials it carried, if any.
    pub user: Option<String>,
    /// The status answered.
    pub status: u16,
}

#[derive(Default)]
struct Shared {
    files: BTreeMap<String, Vec<u8>>,
    /// `user:password` every request must carry, if set.
    auth: Option<String>,
    log: Vec<Request>,
}

/// The server; stops with the test process (its thread is detached).
pub struct ChartRepo {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
}

impl ChartRepo {
    /// Starts an empty repository; `auth` is `user:password` if required.
    pub fn start(auth: Option<&str>) -> Self {
        let shared = Arc::new(Mutex::new(Shared {
            auth: auth.map(str::to_owned),
            ..Shared::default()
        }));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let state = shared.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app = axum::Router::new().fallback(serve).with_state(state);
                axum::serve(listener, app).await.unwrap();
            });
        });
        ChartRepo { addr, shared }
    }

    /// The repository's URL (no trailing `/`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Serves `bytes` at `/path`.
    pub fn put(&self, path: &str, bytes: impl Into<Vec<u8>>) {
        self.shared
            .lock()
            .unwrap()
            .files
            .insert(format!("/{}", path.trim_start_matches('/')), bytes.into());
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.lock().unwrap().log.clone()
    }

    /// The requests of `path` answered with `status`.
    pub fn count(&self, path: &str, status: u16) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.path == path && r.status == status)
            .count()
    }
}

async fn serve(State(shared): State<Arc<Mutex<Shared>>>, uri: Uri, headers: HeaderMap) -> Response {
    use base64::Engine as _;
    let mut shared = shared.lock().unwrap();
    let path = uri.path().to_owned();
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let expected = shared.auth.as_ref().map(|pair| {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    });
    let (status, response) = if expected.is_some() && given != expected {
        let r = (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Basic realm=\"charts\"")],
        )
            .into_response();
        (401, r)
    } else {
        match shared.files.get(&path) {
            None => (404, StatusCode::NOT_FOUND.into_response()),
            Some(bytes) => {
                let etag = format!("\"{}\"", kiln::digest::Digest::of(bytes).hex());
                let matches = headers
                    .get(header::IF_NONE_MATCH)
                    .and_then(|v| v.to_str().ok())
                    == Some(etag.as_str());
                if matches {
                    (304, StatusCode::NOT_MODIFIED.into_response())
                } else {
                    (200, ([(header::ETAG, etag)], bytes.clone()).into_response())
                }
            }
        }
    };
    let user = given
        .as_deref()
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|pair| String::from_utf8(pair).ok())
        .map(|pair| pair.split(':').next().unwrap_or_default().to_owned());
    shared.log.push(Request {
        path,
        authorized: given.is_some(),
        user,
        status,
    });
    response
}

/// A chart archive (`NAME/...` entries, as `helm package` writes them) of
/// `files` (path inside the chart, text).
pub fn package(name: &str, files: &[(&str, &str)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut builder = tar::Builder::new(gz);
    for (path, text) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(text.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(&mut header, format!("{name}/{path}"), text.as_bytes())
            .unwrap();
    }
    let mut gz = builder.into_inner().unwrap();
    gz.flush().unwrap();
    gz.finish().unwrap()
}

/// An `index.yaml` listing (name, version, archive URL, digest or `None`).
pub fn index(entries: &[(&str, &str, &str, Option<String>)]) -> String {
    let mut by_name: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (name, version, url, digest) in entries {
        let digest = digest
            .as_ref()
            .map(|d| format!(", digest: {d}"))
            .unwrap_or_default();
        by_name.entry(name).or_default().push(format!(
            "  - {{apiVersion: v2, name: {name}, version: \"{version}\", urls: [\"{url}\"]{digest}}}\n"
        ));
    }
    let mut text = String::from("apiVersion: v1\nentries:\n");
    for (name, versions) in by_name {
        text.push_str(&format!("  {name}:\n"));
        for v in versions {
            text.push_str(&v);
        }
    }
    text
}

/// The hex SHA-256 of `bytes` (an index's `digest`).
pub fn sha256(bytes: &[u8]) -> String {
    kiln::digest::Digest::of(bytes).hex()
}
