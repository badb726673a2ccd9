//! `kiln dev-cluster`: an in-memory Kubernetes API server for tests and local
//! trials.
//!
//! It speaks the real Kubernetes HTTP API — discovery, list/watch with
//! resource versions and bookmarks, create/update/patch (JSON, merge,
//! strategic, server-side apply with managed fields), delete with finalizers,
//! propagation and garbage collection, dry runs, the status subresource, CRDs
//! served as soon as they are applied — so that `kube::Client` and `kubectl`
//! work against it unchanged. It is **not** a Kubernetes: there is no
//! scheduler, no kubelet, and no pod ever runs. See `docs/dev-cluster.md` for
//! what differs from a real cluster.
//!
//! ```no_run
//! # async fn demo() -> Result<(), kiln_devcluster::Error> {
//! use kiln_devcluster::{Config, DevCluster};
//!
//! let cluster = DevCluster::start(Config::default()).await?;
//! println!("serving at {}", cluster.url());
//! let kubeconfig = cluster.kubeconfig(); // YAML for kubectl or kube::Config
//! # let _ = kubeconfig;
//! cluster.shutdown().await?;
//! # Ok(()) }
//! ```

pub mod builtin;
mod decode;
mod defaults;
mod fields;
mod managed;
mod merge;
mod protobuf;
mod readiness;
mod resources;
mod reviews;
mod schema;
mod selector;
mod server;
mod status;
mod store;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_util::sync::CancellationToken;

pub use server::{HttpConfig, MAX_BODY};
pub use store::{Event, EventKind, Store, StoreConfig};

/// Why the dev cluster could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The listening socket could not be bound.
    #[error("cannot listen on {address}")]
    Bind {
        /// The address asked for.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The self-signed certificate could not be made.
    #[error("cannot set up TLS: {0}")]
    Tls(String),
    /// The embedded built-in API data is broken (a bad data change).
    #[error("cannot serve the built-in kinds")]
    BuiltinApi(#[source] &'static builtin::LoadError),
    /// The data file could not be read, parsed or written.
    #[error("data file {}: {message}", path.display())]
    Data {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// The result of dev-cluster operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How to run a dev cluster. Defaults: a random loopback port, plain HTTP,
/// state in memory only, no simulated readiness.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where to listen. Default `127.0.0.1:0` (a free port).
    pub address: SocketAddr,
    /// Serve HTTPS with a freshly made self-signed CA. Default off.
    pub tls: bool,
    /// Persist the state to this file (JSON) and load it at start. Default none.
    pub data: Option<PathBuf>,
    /// Give workloads a ready status after this delay. Default off.
    pub simulate_readiness: Option<Duration>,
    /// Store tunables (watch history length).
    pub store: StoreConfig,
    /// HTTP tunables (bookmark interval, default watch timeout).
    pub http: HttpConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: false,
            data: None,
            simulate_readiness: None,
            store: StoreConfig::default(),
            http: HttpConfig::default(),
        }
    }
}

/// A running dev cluster. Dropping it stops serving; [`DevCluster::shutdown`]
/// also writes the data file one last time.
pub struct DevCluster {
    address: SocketAddr,
    url: String,
    ca_pem: Option<String>,
    store: Arc<Store>,
    shutdown: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    data: Option<PathBuf>,
}

impl DevCluster {
    /// Starts serving.
    pub async fn start(config: Config) -> Result<Self> {
        builtin::catalog().map_err(Error::BuiltinApi)?;
        let store = Store::new(config.store.clone());
        if let Some(path) = &config.data {
            load(&store, path)?;
        }
        store.seed_namespaces();
        if let Some(path) = &config.data {
            // Written once now: a data file that cannot be written stops
            // the start, naming it, instead of a warning at every change.
            save(&store, path)?;
        }
        let listener = TcpListener::bind(config.address)
            .await
            .map_err(|source| Error::Bind {
                address: config.address,
                source,
            })?;
        let address = listener.local_addr().map_err(|source| Error::Bind {
            address: config.address,
            source,
        })?;
        let (acceptor, ca_pem) = if config.tls {
            let (acceptor, ca) = tls(address)?;
            (Some(acceptor), Some(ca))
        } else {
            (None, None)
        };
        let scheme = if config.tls { "https" } else { "http" };
        let url = format!("{scheme}://{address}");
        let shutdown = CancellationToken::new();
        let app = Arc::new(server::App {
            store: store.clone(),
            config: config.http.clone(),
            shutdown: shutdown.clone(),
            address: address.to_string(),
        });
        let mut tasks = vec![tokio::spawn(serve(
            listener,
            acceptor,
            server::router(app),
            shutdown.clone(),
        ))];
        if let Some(path) = &config.data {
            tasks.push(tokio::spawn(persist(
                store.clone(),
                path.clone(),
                shutdown.clone(),
            )));
        }
        if let Some(delay) = config.simulate_readiness {
            tasks.push(tokio::spawn(readiness::run(
                store.clone(),
                delay,
                shutdown.clone(),
            )));
        }
        tracing::info!(%url, "dev cluster serving");
        Ok(Self {
            address,
            url,
            ca_pem,
            store,
            shutdown,
            tasks,
            data: config.data,
        })
    }

    /// The socket address served.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://127.0.0.1:PORT` (or `https://…`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The PEM of the CA that signed the serving certificate (TLS only).
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// The store behind the API, for in-process inspection.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// A kubeconfig (YAML) whose current context is this cluster, namespace
    /// `default`.
    pub fn kubeconfig(&self) -> String {
        use base64::Engine as _;
        let mut cluster = serde_json::json!({"server": self.url});
        if let Some(ca) = &self.ca_pem {
            cluster["certificate-authority-data"] =
                base64::engine::general_purpose::STANDARD.encode(ca).into();
        }
        let config = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kiln-dev", "cluster": cluster}],
            "users": [{"name": "kiln-dev", "user": {"token": "kiln-dev"}}],
            "contexts": [{"name": "kiln-dev", "context": {"cluster": "kiln-dev", "user": "kiln-dev", "namespace": "default"}}],
            "current-context": "kiln-dev",
        });
        serde_yaml::to_string(&config).expect("a kubeconfig serializes")
    }

    /// Writes [`DevCluster::kubeconfig`] to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig())
    }

    /// Stops serving (open watches end) and writes the data file.
    pub async fn shutdown(mut self) -> Result<()> {
        self.shutdown.cancel();
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
        if let Some(path) = &self.data {
            save(&self.store, path)?;
        }
        Ok(())
    }
}

impl Drop for DevCluster {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    router: axum::Router,
    shutdown: CancellationToken,
) {
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
        };
        let service = TowerToHyperService::new(router.clone());
        let tls = tls.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let builder = auto::Builder::new(TokioExecutor::new());
            let served = match tls {
                Some(acceptor) => match acceptor.accept(stream).await {
                    Ok(stream) => {
                        let connection =
                            builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                        tokio::select! {
                            result = connection => result,
                            () = shutdown.cancelled() => Ok(()),
                        }
                    }
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                },
                None => {
                    let connection =
                        builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                    tokio::select! {
                        result = connection => result,
                        () = shutdown.cancelled() => Ok(()),
                    }
                }
            };
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
}

/// A CA and a serving certificate for the loopback address, both made fresh.
fn tls(address: SocketAddr) -> Result<(TlsAcceptor, String)> {
    let fail = |e: &dyn std::fmt::Display| Error::Tls(e.to_string());
    let mut ca_params =
        rcgen::CertificateParams::new(Vec::<String>::new()).map_err(|e| fail(&e))?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "kiln dev-cluster CA");
    let ca_key = rcgen::KeyPair::generate().map_err(|e| fail(&e))?;
    let ca_cert = ca_params.self_signed(&ca_key).map_err(|e| fail(&e))?;
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let mut params =
        rcgen::CertificateParams::new(vec!["localhost".to_owned(), address.ip().to_string()])
            .map_err(|e| fail(&e))?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "kiln dev-cluster");
    let key = rcgen::KeyPair::generate().map_err(|e| fail(&e))?;
    let cert = params.signed_by(&key, &issuer).map_err(|e| fail(&e))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| fail(&e))?
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .map_err(|e| fail(&e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((TlsAcceptor::from(Arc::new(config)), ca_cert.pem()))
}

fn load(store: &Store, path: &Path) -> Result<()> {
    let data_error = |message: String| Error::Data {
        path: path.to_owned(),
        message,
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(data_error(e.to_string())),
    };
    let snapshot: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| data_error(format!("not a dev-cluster data file: {e}")))?;
    for skipped in store.restore(&snapshot) {
        tracing::warn!(path = %path.display(), object = %skipped, "skipped an object of a type no longer served");
    }
    Ok(())
}

fn save(store: &Store, path: &Path) -> Result<()> {
    let data_error = |message: String| Error::Data {
        path: path.to_owned(),
        message,
    };
    let text = serde_json::to_string(&store.snapshot()).map_err(|e| data_error(e.to_string()))?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // Write beside, then rename: a crash never leaves half a file.
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(|e| {
        // tempfile's message ends with its random file's name (` at path
        // "…/.tmpXXXX"`); the directory, named here, is what a person can fix.
        let message = e.to_string();
        let cause = message.split(" at path ").next().unwrap_or(&message);
        data_error(format!("cannot write in {}: {cause}", dir.display()))
    })?;
    std::io::Write::write_all(&mut file, text.as_bytes()).map_err(|e| data_error(e.to_string()))?;
    file.persist(path).map_err(|e| data_error(e.to_string()))?;
    Ok(())
}

/// Writes the data file shortly after changes (at most every 200 ms).
async fn persist(store: Arc<Store>, path: PathBuf, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = store.changed() => {}
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (store, path) = (store.clone(), path.clone());
        let saved = tokio::task::spawn_blocking(move || save(&store, &path)).await;
        match saved {
            Ok(Err(e)) => tracing::warn!(error = %e, "could not persist the dev cluster"),
            Err(e) => tracing::warn!(error = %e, "persisting panicked"),
            Ok(Ok(())) => {}
        }
    }
}
