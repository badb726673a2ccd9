//! `kiln render-server`: the source work, away from cluster credentials;
//! `kiln certs`: the certificates it and the controller use.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use kiln::render::engine::{Catalog, CatalogConfig, Granted, RenderCache};
use kiln::render::remote::server::RenderServer;
use kiln::render::remote::tls::{Identity, Issued};
use kiln::render::remote::{self, Limits};
use kiln::source::git::{GitConfig, GitSource, NoCredentials};
use kiln::source::helm::{ChartFetcher, HelmConfig};

use super::args::{parse_duration, parse_size};
use super::{HostArgs, default_cache_dir, exit};

/// Where Kubernetes mounts a Pod's service-account token.
pub(crate) const SERVICE_ACCOUNT_TOKEN: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// Serve renders for `kiln controller --render-server`: Git polling and
/// fetching, Helm chart fetching (Helm repositories and OCI registries),
/// plugin fetching and verification, the compile, chart and render caches,
/// plugin calls. Holds no Kubernetes credentials: it refuses to
/// start when it finds some (a service-account token at the default path,
/// KUBECONFIG, ~/.kube/config), and never reads them. Repository and
/// registry credentials arrive with each request, for that request.
///
/// HTTP/2 with mutual TLS only: clients must present a certificate from
/// --client-ca (see `kiln certs`).
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  kiln certs --out certs/ --server-name 127.0.0.1
  env -u KUBECONFIG kiln render-server --listen 127.0.0.1:8443 --tls-cert certs/server.crt \\
      --tls-key certs/server.key --client-ca certs/ca.crt --cache-dir /tmp/kiln-render

Exit status: 0 stopped by SIGINT or SIGTERM, 2 it could not start (Kubernetes credentials found,
an unreadable certificate, an address in use: the message names it).")]
pub(crate) struct RenderServerArgs {
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8443")]
    listen: std::net::SocketAddr,

    /// The server's certificate chain (PEM).
    #[arg(long, value_name = "FILE")]
    tls_cert: PathBuf,

    /// The server's private key (PEM).
    #[arg(long, value_name = "FILE")]
    tls_key: PathBuf,

    /// The CA that issues client (controller) certificates (PEM).
    #[arg(long, value_name = "FILE")]
    client_ca: PathBuf,

    /// Directory of the Git, plugin, chart and render caches. Default:
    /// $XDG_CACHE_HOME/kiln or ~/.cache/kiln.
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,

    /// Bytes of serialized renders the render cache keeps in memory (and at
    /// most as much again on disk).
    #[arg(long, value_name = "SIZE", default_value = "256Mi", value_parser = parse_size)]
    render_cache_size: u64,

    /// Largest request body accepted.
    #[arg(long, value_name = "SIZE", default_value = "8Mi", value_parser = parse_size)]
    max_request: u64,

    /// Largest render answered (larger ones fail with RenderTooLarge).
    #[arg(long, value_name = "SIZE", default_value = "64Mi", value_parser = parse_size)]
    max_response: u64,

    /// Deadline of one render; past it the work stops and the controller
    /// gets RenderDeadlineExceeded.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    deadline: Duration,

    /// Requests one connection may have in flight.
    #[arg(long, value_name = "N", default_value_t = remote::DEFAULT_MAX_STREAMS)]
    max_streams: u32,

    /// Connections held open at once; past it, new ones wait in the
    /// kernel's accept queue.
    #[arg(long, value_name = "N", default_value_t = remote::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,

    /// TLS handshakes run at once.
    #[arg(long, value_name = "N", default_value_t = remote::DEFAULT_MAX_HANDSHAKES)]
    max_handshakes: usize,

    /// TLS handshakes run at once from one address; more are closed at
    /// once.
    #[arg(long, value_name = "N", default_value_t = remote::DEFAULT_MAX_HANDSHAKES_PER_PEER)]
    max_handshakes_per_peer: usize,

    /// Deadline of a TLS handshake: a peer that connects and sends nothing
    /// is dropped after it.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    handshake_timeout: Duration,

    /// Accept requests for repositories on this filesystem (file:// URLs,
    /// plain paths). For local trials and tests only.
    #[arg(long)]
    allow_file_repositories: bool,

    /// Let Plugin references name files on this filesystem. For local
    /// trials and tests only.
    #[arg(long)]
    allow_file_plugins: bool,

    /// Sigstore trusted_root.json for keyless plugin signatures.
    #[arg(long, value_name = "FILE")]
    trusted_root: Option<PathBuf>,

    /// How often a plugin tag (or unpinned file) is resolved again.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    plugin_resolve_interval: Duration,

    /// The file in which SSH hosts are recorded on first use, when the
    /// controller sends no known hosts (its ConfigMap kiln-ssh-known-hosts
    /// lists none). Default: known_hosts in the Git cache.
    #[arg(long, value_name = "FILE")]
    ssh_known_hosts_store: Option<PathBuf>,

    #[command(flatten)]
    charts: ChartCacheArgs,

    #[command(flatten)]
    host: HostArgs,
}

/// How the render server fetches the charts of `spec.source.chart`.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Chart cache")]
pub(crate) struct ChartCacheArgs {
    /// Directory of the unpacked-chart cache (created 0700). Default:
    /// charts in --cache-dir.
    #[arg(long, value_name = "DIR")]
    chart_cache: Option<PathBuf>,

    /// Byte budget of the chart cache (least recently used charts go first).
    #[arg(long, value_name = "SIZE", default_value = "1Gi", value_parser = parse_size)]
    chart_cache_size: u64,

    /// The largest chart archive (.tgz) accepted, compressed.
    #[arg(long, value_name = "SIZE", default_value = "16Mi", value_parser = parse_size)]
    chart_max_size: u64,

    /// The largest index.yaml of a Helm repository accepted.
    #[arg(long, value_name = "SIZE", default_value = "64Mi", value_parser = parse_size)]
    chart_max_index: u64,

    /// Deadline of a whole chart fetch (index, archive, dependencies).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    chart_timeout: Duration,

    /// Deadline of each request of a chart fetch (an index, an archive):
    /// a repository that does not answer frees its download slot at it.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    chart_request_timeout: Duration,

    /// PEM file of extra CA certificates to trust for HTTPS chart
    /// repositories.
    #[arg(long, value_name = "FILE")]
    chart_ca_file: Option<PathBuf>,
}

impl ChartCacheArgs {
    /// The fetcher's configuration, its cache under `cache` unless
    /// --chart-cache names one.
    fn config(&self, cache: &Path) -> anyhow::Result<HelmConfig> {
        let mut config = HelmConfig::new(
            self.chart_cache
                .clone()
                .unwrap_or_else(|| cache.join("charts")),
        );
        config.cache_max_bytes = self.chart_cache_size;
        config.archive.compressed = self.chart_max_size;
        config.max_index = self.chart_max_index;
        config.deadline = self.chart_timeout;
        config.timeout = self.chart_request_timeout.min(self.chart_timeout);
        if let Some(file) = &self.chart_ca_file {
            config.tls_roots_pem = std::fs::read(file)
                .with_context(|| format!("--chart-ca-file {}", file.display()))?;
        }
        Ok(config)
    }
}

/// Kubernetes credentials this process can reach, if any.
fn credentials_found() -> Vec<String> {
    let mut found = Vec::new();
    if Path::new(SERVICE_ACCOUNT_TOKEN).exists() {
        found.push(format!(
            "a service-account token at {SERVICE_ACCOUNT_TOKEN} (set automountServiceAccountToken: false)"
        ));
    }
    if std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty()) {
        found.push("KUBECONFIG is set".into());
    }
    if let Some(home) = std::env::var_os("HOME") {
        let config = PathBuf::from(home).join(".kube/config");
        if config.exists() {
            found.push(format!("a kubeconfig at {}", config.display()));
        }
    }
    found
}

pub(crate) async fn run(args: &RenderServerArgs) -> anyhow::Result<u8> {
    let found = credentials_found();
    if !found.is_empty() {
        anyhow::bail!(
            "the render server must hold no Kubernetes credentials, and found: {}",
            found.join("; ")
        );
    }
    let identity = Identity::from_files(&args.tls_cert, &args.tls_key, &args.client_ca)?;
    let tls = remote::tls::server_config(&identity)?;
    let cache = args
        .cache_dir
        .clone()
        .or_else(default_cache_dir)
        .context("no cache directory: set --cache-dir or HOME")?;
    // Git credentials and known hosts are those the request being served
    // brought (a task-local grant, never shared state).
    let mut git_config = GitConfig::new(cache.join("repos"));
    git_config.ssh_known_hosts = Some(Arc::new(Granted));
    git_config.ssh_known_hosts_store = args.ssh_known_hosts_store.clone();
    let git = GitSource::new(git_config, Arc::new(Granted))?;
    // Helm repositories' and OCI registries' credentials come with each
    // request, as its chart access.
    let charts = ChartFetcher::new(args.charts.config(&cache)?, Arc::new(NoCredentials))?;
    let catalog = Catalog::new(CatalogConfig {
        store: cache.join("plugins"),
        trusted_root: args.trusted_root.clone(),
        resolve_interval: args.plugin_resolve_interval,
        allow_file_plugins: args.allow_file_plugins,
        ..CatalogConfig::default()
    });
    let limits = Limits {
        max_request: usize::try_from(args.max_request).unwrap_or(usize::MAX),
        max_response: usize::try_from(args.max_response).unwrap_or(usize::MAX),
        deadline: args.deadline,
        max_streams: args.max_streams,
        max_connections: args.max_connections,
        max_handshakes: args.max_handshakes,
        max_handshakes_per_peer: args.max_handshakes_per_peer,
        connect_timeout: args.handshake_timeout,
        ..Limits::default()
    };
    // Each connection is a file descriptor: the hard limit, not the
    // common soft one of 1,024, is what the connection cap is held to.
    match remote::server::raise_open_files_limit() {
        Ok(limit) => tracing::info!(limit, "open files limit"),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open files limit"),
    }
    let server = Arc::new(RenderServer {
        git,
        charts,
        host: args.host.host()?,
        catalog,
        cache: RenderCache::new(args.render_cache_size).with_dir(cache.join("renders")),
        reviews: kiln::policy::ReviewCache::default(),
        allow_file_repositories: args.allow_file_repositories,
        limits,
    });
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let address = listener.local_addr()?;
    eprintln!("kiln render-server listening on {address} (HTTP/2, mutual TLS)");
    let shutdown = tokio_util::sync::CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        super::stop_signal().await;
        stop.cancel();
    });
    server
        .serve(
            listener,
            tokio_rustls::TlsAcceptor::from(Arc::new(tls)),
            shutdown,
        )
        .await?;
    Ok(exit::OK)
}

/// Make the certificates of a render server and its controller: a CA, a
/// server certificate for the given names, and a client certificate,
/// written as PEM files into a directory (ca.crt, server.crt, server.key,
/// client.crt, client.key). deploy/README.md shows how to put them in the
/// Secrets the Deployments mount.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  kiln certs --out certs/
  kiln certs --out certs/ --server-name 127.0.0.1 --server-name render.example.com

Exit status: 0 written, 2 an error (DIR already holds certificates and --force is not given: a new
CA would untrust the old one's; or DIR cannot be written).")]
pub(crate) struct CertsArgs {
    /// Directory to write into (created).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,

    /// DNS names (or IP addresses) of the render server.
    #[arg(long = "server-name", value_name = "NAME", default_values_t = [
        "kiln-render-server".to_owned(),
        "kiln-render-server.kiln.svc".to_owned(),
        "kiln-render-server.kiln.svc.cluster.local".to_owned(),
    ])]
    server_names: Vec<String>,

    /// Replace the files of an earlier run (a new CA: every certificate it
    /// issued stops being trusted). Without it, existing files are refused.
    #[arg(long)]
    force: bool,
}

/// The files `kiln certs` writes.
const CERT_FILES: [&str; 5] = [
    "ca.crt",
    "server.crt",
    "server.key",
    "client.crt",
    "client.key",
];

pub(crate) fn certs(args: &CertsArgs) -> anyhow::Result<u8> {
    let existing: Vec<&str> = CERT_FILES
        .into_iter()
        .filter(|name| args.out.join(name).symlink_metadata().is_ok())
        .collect();
    if !existing.is_empty() && !args.force {
        anyhow::bail!(
            "{} already holds {}: a new CA would untrust every certificate the old one issued; \
             pass --force to replace them, or choose another --out",
            args.out.display(),
            existing.join(", ")
        );
    }
    let issued = Issued::new(&args.server_names)?;
    let dir = kiln::private_dir::open(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let texts = [
        &issued.ca,
        &issued.server.0,
        &issued.server.1,
        &issued.client.0,
        &issued.client.1,
    ];
    let files: Vec<(&str, &[u8])> = CERT_FILES
        .into_iter()
        .zip(texts)
        .map(|(name, text)| (name, text.as_bytes()))
        .collect();
    kiln::atomic::replace_all(&dir, &files)
        .with_context(|| format!("cannot write the certificates into {}", args.out.display()))?;
    println!(
        "wrote ca.crt, server.crt, server.key, client.crt, client.key to {}",
        args.out.display()
    );
    Ok(exit::OK)
}
