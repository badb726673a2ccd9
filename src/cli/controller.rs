//! `kiln controller`: run the Application controller.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use kiln::controller::known_hosts::SshKnownHosts;
use kiln::controller::{self, Context, ControllerConfig, ControllerSecrets};
use kiln::render::remote::{Discovery, Pool, PoolConfig};
use kiln::source::git::{GitConfig, GitSource};

use super::args::parse_duration;
use super::{HostArgs, default_cache_dir, exit};

/// Run the Application controller: keep every Application of a namespace
/// equal to what Git says.
///
/// Reconciles on a timer (with jitter), when an Application changes, and
/// when one is annotated kiln.dev/refresh, and when something it manages
/// changes live (self-heal reverts drift at once, backing off from drift
/// that keeps coming back). Plugins and projects come from the Plugin and
/// AppProject resources of the same namespace; repository credentials and
/// destination clusters from its Secrets labeled kiln.dev/secret-type
/// (repository, repo-creds, cluster: see docs/controller.md), SSH host keys
/// from its ConfigMap kiln-ssh-known-hosts (docs/security.md). Install the
/// CRDs first (`kiln crds | kubectl apply --server-side -f -`).
///
/// On SIGINT/SIGTERM no new reconcile starts; running syncs finish their
/// current wave and record the rest as Terminated for the next leader.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  kiln controller --namespace kiln
  kiln controller --kubeconfig kiln-dev.yaml --resync 10s --allow-file-repositories
  kiln controller --render-server https://kiln-render-server.kiln.svc:8443 \\
      --render-ca ca.crt --render-client-cert client.crt --render-client-key client.key

Exit status: 0 stopped by SIGINT or SIGTERM, 2 it could not start or had to stop (no CRDs, no
namespace, no permission to watch, a cluster that does not answer: the message says what to run).")]
pub(crate) struct ControllerArgs {
    /// Kubeconfig file. Default: $KUBECONFIG, ~/.kube/config, in-cluster.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,

    /// Kubeconfig context.
    #[arg(long, value_name = "NAME")]
    context: Option<String>,

    /// The namespace of Applications, AppProjects and Plugins.
    #[arg(short = 'n', long, default_value = "kiln")]
    namespace: String,

    /// How long the controller may take to stop after SIGTERM or SIGINT
    /// (running syncs finish their current wave); then, or at a second
    /// signal, it exits at once (giving blocking work 2 s more). Keep it
    /// and those 2 s under the pod's terminationGracePeriodSeconds (30 s
    /// by default).
    #[arg(long, value_name = "DURATION", default_value = "25s", value_parser = parse_duration)]
    shutdown_grace: Duration,

    /// How often every Application is reconciled (plus up to 10% jitter).
    #[arg(long, value_name = "DURATION", default_value = "180s", value_parser = parse_duration)]
    resync: Duration,

    /// How often every ApplicationSet is generated again without a change
    /// (its generators polled; Argo CD's `requeueAfterSeconds`).
    #[arg(long, value_name = "DURATION", default_value = "180s", value_parser = parse_duration)]
    appset_resync: Duration,

    /// How long a sync waits for a wave to become healthy, and how long
    /// an Application's PostDelete hooks may run before its deletion stops
    /// with a condition.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    health_timeout: Duration,

    /// Where to serve /healthz, /readyz, /metrics and POST /api/webhook.
    /// The webhook secret comes from KILN_WEBHOOK_SECRET (HMAC key for
    /// GitHub and Gitea, token for GitLab); without it deliveries are
    /// refused (see --webhook-allow-unsigned).
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8080")]
    listen: std::net::SocketAddr,

    /// Act without holding the `kiln-controller` Lease (only for a single
    /// replica, e.g. local trials).
    #[arg(long, conflicts_with = "shards")]
    no_leader_election: bool,

    /// Split the Applications over this many controller replicas (a
    /// StatefulSet): each Application belongs to one shard (a stable hash
    /// of its namespace and name), each shard has a Lease
    /// (kiln-controller-shard-I) and only its holder reconciles it. A
    /// shard whose replica is gone is taken over by another after one
    /// lease duration and handed back when it returns (docs/controller.md).
    #[arg(long, value_name = "N", default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..=i64::from(kiln::controller::shard::MAX_SHARDS)))]
    shards: u32,

    /// The shard this replica prefers (0 to N-1). Default: the ordinal of
    /// a StatefulSet pod, the number ending $HOSTNAME (kiln-controller-1).
    #[arg(long, value_name = "I", requires = "shards")]
    shard_index: Option<u32>,

    /// Sustained requests per second to each API server (the controller's
    /// own cluster and every destination; 0: unlimited). Counted per verb
    /// in kiln_kube_requests_total.
    #[arg(long, value_name = "N", default_value_t = kiln::cluster::requests::DEFAULT_QPS)]
    kube_qps: u32,

    /// Requests allowed at once above --kube-qps.
    #[arg(long, value_name = "N", default_value_t = kiln::cluster::requests::DEFAULT_BURST)]
    kube_burst: u32,

    /// How long a Lease (the leader's, or a shard's) holds without renewal;
    /// renewed every third of it.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    lease_duration: Duration,

    /// Directory of the render cache (renders reused while what they read
    /// holds). Default: ~/.cache/kiln/renders.
    #[arg(long, value_name = "DIR")]
    render_cache: Option<PathBuf>,

    /// Bytes of serialized renders the render cache keeps in memory (and at
    /// most as much again on disk), e.g. `256Mi`.
    #[arg(long, value_name = "SIZE", default_value = "256Mi", value_parser = super::args::parse_size)]
    render_cache_size: u64,

    /// How long the watch of a kind no Application needs any more keeps
    /// running (an Application that needs it again meanwhile finds its
    /// cache warm) before it is stopped and its cache freed.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    live_watch_grace: Duration,

    /// Bytes (JSON) of live objects the watches' caches hold together, e.g.
    /// `512Mi`: a kind whose cache would go over it is read from the API
    /// server instead (kiln_live_cache_dropped_total), and watched again
    /// 10 minutes later if still needed.
    #[arg(long, value_name = "SIZE", default_value = "512Mi", value_parser = super::args::parse_size)]
    live_cache_size: u64,

    /// Directory of the unpacked-chart cache of `spec.source.chart`
    /// (created 0700). Default: ~/.cache/kiln/charts.
    #[arg(long, value_name = "DIR")]
    chart_cache: Option<PathBuf>,

    /// A repository no Application has read for this long leaves the Git
    /// cache.
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = parse_duration)]
    git_cache_idle: Duration,

    /// Directory of the Git cache. Default: ~/.cache/kiln/repos.
    #[arg(long, value_name = "DIR")]
    git_cache: Option<PathBuf>,

    /// The file in which SSH hosts are recorded on first use, when the
    /// ConfigMap kiln-ssh-known-hosts does not list the known hosts. Put it
    /// on storage that survives restarts (deploy/ uses a PersistentVolume):
    /// an empty file trusts whatever key a host presents next. Default:
    /// known_hosts in the Git cache.
    #[arg(long, value_name = "FILE")]
    ssh_known_hosts_store: Option<PathBuf>,

    /// Let Plugin references name files on the controller's filesystem
    /// (development only: anyone who writes Plugins could make the
    /// controller read any file it can read).
    #[arg(long)]
    allow_file_plugins: bool,

    /// Directory of fetched plugin components, by digest. Default:
    /// ~/.cache/kiln/plugins.
    #[arg(long, value_name = "DIR")]
    plugin_store: Option<PathBuf>,

    /// Sigstore trusted_root.json for keyless plugin signatures (verified
    /// offline). Default: the Sigstore public-good root built into kiln.
    #[arg(long, value_name = "FILE")]
    trusted_root: Option<PathBuf>,

    /// How often a plugin tag (or unpinned file) is resolved again; a tag
    /// moved to another component is verified before it runs.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    plugin_resolve_interval: Duration,

    /// Accept Applications whose repository is on the controller's
    /// filesystem (file:// URLs, plain paths). Off by default: such a
    /// repository lets an Application read whatever the controller can
    /// read. For local trials only.
    #[arg(long)]
    allow_file_repositories: bool,

    /// Accept unsigned webhook deliveries when KILN_WEBHOOK_SECRET is not
    /// set. Off by default: without a secret every delivery is refused
    /// (anyone reaching the endpoint could otherwise make the controller
    /// ask Git servers at will). For local trials only.
    #[arg(long)]
    webhook_allow_unsigned: bool,

    /// Send every render to this `kiln render-server` (https://host:port)
    /// instead of rendering in this process: Git, plugins and the render
    /// cache then live there, away from this process's cluster
    /// credentials (docs/controller.md). Repeat for several replicas: each
    /// repository's renders go to one of them (rendezvous hashing, so its
    /// caches stay warm) and move to the next when it cannot be reached.
    /// Needs --render-ca, --render-client-cert and --render-client-key.
    #[arg(long = "render-server", value_name = "URL", requires_all = ["render_ca", "render_client_cert", "render_client_key"])]
    render_servers: Vec<String>,

    /// Treat the one --render-server URL's host as a headless Service:
    /// every address it resolves to is a replica (re-resolved every
    /// --render-server-refresh), reached by address and checked against
    /// the URL's host name.
    #[arg(long, requires = "render_servers")]
    render_server_dns: bool,

    /// Interval between two resolutions of --render-server-dns.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    render_server_refresh: Duration,

    /// How long a render server replica that could not be reached is
    /// passed over (it is still tried when every replica fails).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    render_server_cooldown: Duration,

    /// The CA the render server's certificate must chain to (PEM).
    #[arg(long, value_name = "FILE")]
    render_ca: Option<PathBuf>,

    /// The controller's client certificate for the render server (PEM).
    #[arg(long, value_name = "FILE")]
    render_client_cert: Option<PathBuf>,

    /// The key of --render-client-cert (PEM).
    #[arg(long, value_name = "FILE")]
    render_client_key: Option<PathBuf>,

    /// Deadline of one remote render (from sending it to the last byte of
    /// the answer).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    render_deadline: Duration,

    /// Largest render request sent.
    #[arg(long, value_name = "SIZE", default_value = "8Mi", value_parser = super::args::parse_size)]
    render_max_request: u64,

    /// Largest render answer read.
    #[arg(long, value_name = "SIZE", default_value = "64Mi", value_parser = super::args::parse_size)]
    render_max_response: u64,

    #[command(flatten)]
    host: HostArgs,

    #[command(flatten)]
    jq: super::JqArgs,
}

/// The render servers the flags ask for, if any, and the discovery that
/// keeps a headless Service's replicas current.
async fn render_pool(
    args: &ControllerArgs,
) -> anyhow::Result<Option<(Arc<Pool>, Option<Discovery>)>> {
    if args.render_servers.is_empty() {
        return Ok(None);
    }
    let (Some(ca), Some(cert), Some(key)) = (
        &args.render_ca,
        &args.render_client_cert,
        &args.render_client_key,
    ) else {
        anyhow::bail!(
            "--render-server needs --render-ca, --render-client-cert and --render-client-key"
        );
    };
    let identity = Arc::new(kiln::render::remote::tls::Identity::from_files(
        cert, key, ca,
    )?);
    let limits = kiln::render::remote::Limits {
        max_request: usize::try_from(args.render_max_request).unwrap_or(usize::MAX),
        max_response: usize::try_from(args.render_max_response).unwrap_or(usize::MAX),
        deadline: args.render_deadline,
        ..kiln::render::remote::Limits::default()
    };
    let config = PoolConfig {
        cooldown: args.render_server_cooldown,
        refresh: args.render_server_refresh,
    };
    let name = args.render_servers.join(", ");
    if args.render_server_dns {
        let [url] = args.render_servers.as_slice() else {
            anyhow::bail!("--render-server-dns takes exactly one --render-server URL");
        };
        let discovery = Discovery {
            url: url.clone(),
            identity,
            limits,
        };
        // A Service with no address yet is not fatal: renders fail with a
        // condition until the next resolution finds replicas.
        let clients = match discovery.resolve().await {
            Ok(clients) => clients,
            Err(e) => {
                tracing::warn!(error = %kiln::text::chain(&e), "no render server replica yet");
                Vec::new()
            }
        };
        let pool = Arc::new(Pool::new(name, clients, config));
        return Ok(Some((pool, Some(discovery))));
    }
    let clients = args
        .render_servers
        .iter()
        .map(|url| kiln::render::remote::Client::new(url, &identity, limits))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some((Arc::new(Pool::new(name, clients, config)), None)))
}

/// The sharding the flags ask for.
fn sharding(args: &ControllerArgs) -> anyhow::Result<controller::shard::ShardingConfig> {
    let defaults = controller::shard::ShardingConfig {
        lease_duration: args.lease_duration,
        renew_every: args.lease_duration / 3,
        ..controller::shard::ShardingConfig::default()
    };
    if args.shards == 1 {
        return Ok(defaults);
    }
    let index = match args.shard_index {
        Some(index) => index,
        None => {
            let host = std::env::var("HOSTNAME").unwrap_or_default();
            host.rsplit_once('-')
                .and_then(|(_, ordinal)| ordinal.parse().ok())
                .with_context(|| {
                    format!("--shards {} needs --shard-index, or a StatefulSet pod name ending in its ordinal as HOSTNAME (HOSTNAME is {host:?})", args.shards)
                })?
        }
    };
    anyhow::ensure!(
        index < args.shards,
        "--shard-index {index} is not below --shards {}",
        args.shards
    );
    Ok(controller::shard::ShardingConfig {
        shards: args.shards,
        index,
        ..defaults
    })
}

pub(crate) async fn run(args: &ControllerArgs) -> anyhow::Result<u8> {
    // First: a signal during the start stops the start.
    let stopping = super::Stopping::on_signals(args.shutdown_grace);
    let kube_client = kiln::cluster::requests::ClientOptions {
        qps: args.kube_qps,
        burst: args.kube_burst,
        ..kiln::cluster::requests::ClientOptions::default()
    };
    let cluster = kiln::cluster::Cluster::connect_with(
        args.kubeconfig.as_deref(),
        args.context.as_deref(),
        &kube_client,
    )
    .await?;
    tokio::select! {
        checked = check_prerequisites(cluster.client(), &args.namespace) => checked?,
        () = stopping.asked() => return Ok(exit::OK),
    }
    let cache = match &args.git_cache {
        Some(dir) => dir.clone(),
        None => default_cache_dir()
            .context("no cache directory: set --git-cache or HOME")?
            .join("repos"),
    };
    // Repository credentials and destination clusters come from the
    // labeled Secrets of the controller's namespace.
    let secrets = ControllerSecrets::watch(cluster.client().clone(), &args.namespace);
    // SSH host keys: the ConfigMap kiln-ssh-known-hosts when it lists
    // some, trust on first use otherwise.
    let known_hosts = SshKnownHosts::watch(cluster.client().clone(), &args.namespace);
    let mut git_config = GitConfig::new(cache);
    git_config.ssh_known_hosts = Some(Arc::new(known_hosts.clone()));
    git_config.ssh_known_hosts_store = args.ssh_known_hosts_store.clone();
    let git = GitSource::new(git_config, Arc::new(secrets.repo_credentials()))?;
    let config = ControllerConfig {
        namespace: args.namespace.clone(),
        resync: args.resync,
        appset_resync: args.appset_resync,
        health_timeout: args.health_timeout,
        render_cache_dir: args
            .render_cache
            .clone()
            .or_else(|| default_cache_dir().map(|d| d.join("renders"))),
        render_cache_size: args.render_cache_size,
        chart_cache_dir: args
            .chart_cache
            .clone()
            .or_else(|| default_cache_dir().map(|d| d.join("charts"))),
        git_cache_idle: args.git_cache_idle,
        catalog: controller::CatalogConfig {
            store: args
                .plugin_store
                .clone()
                .or_else(|| default_cache_dir().map(|d| d.join("plugins")))
                .context("no cache directory: set --plugin-store or HOME")?,
            trusted_root: args.trusted_root.clone(),
            resolve_interval: args.plugin_resolve_interval,
            allow_file_plugins: args.allow_file_plugins,
            ..controller::CatalogConfig::default()
        },
        allow_file_repositories: args.allow_file_repositories,
        jq: args.jq.config(),
        sharding: sharding(args)?,
        kube_client,
        live: controller::live::LiveConfig {
            grace: args.live_watch_grace,
            cache_bytes: args.live_cache_size,
            ..controller::live::LiveConfig::default()
        },
        ..ControllerConfig::default()
    };
    if args.allow_file_repositories {
        tracing::warn!(
            "--allow-file-repositories: Applications may read the controller's filesystem"
        );
    }
    let mut ctx = Context::new(
        cluster.client().clone(),
        git,
        args.host.host()?,
        config,
        secrets.clone(),
    );
    let discovery = match render_pool(args).await? {
        Some((pool, discovery)) => {
            tracing::info!(servers = ?pool.servers(), "rendering on the render servers");
            ctx = ctx.with_render_server(pool.clone(), Some(Arc::new(known_hosts.clone())));
            discovery.map(|discovery| (discovery, pool))
        }
        None => None,
    };
    let ctx = Arc::new(ctx);
    if let Some((discovery, pool)) = discovery {
        tokio::spawn(discovery.follow(pool, ctx.shutdown.clone()));
    }
    let state = Arc::new(controller::http::HttpState {
        ctx: ctx.clone(),
        webhook: controller::http::WebhookAuth::new(
            std::env::var("KILN_WEBHOOK_SECRET")
                .ok()
                .filter(|s| !s.is_empty()),
            args.webhook_allow_unsigned,
        ),
        ready: std::sync::atomic::AtomicBool::new(true),
    });
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, controller::http::router(state)).await {
            tracing::error!(error = %e, "the HTTP endpoints stopped");
        }
    });
    tracing::info!(namespace = %args.namespace, listen = %args.listen, "controller starting");
    // Sharded replicas hold one Lease per shard instead of leading alone.
    let elector = (!args.no_leader_election && args.shards == 1).then(|| {
        controller::leader::Elector::new(
            ctx.client.clone(),
            &args.namespace,
            controller::leader::LeaseConfig {
                duration: args.lease_duration,
                renew_every: args.lease_duration / 3,
                ..controller::leader::LeaseConfig::default()
            },
        )
    });
    if let Some(elector) = &elector {
        eprintln!(
            "kiln controller waiting for the kiln-controller lease in namespace {}",
            args.namespace
        );
        tokio::select! {
            () = elector.acquire() => {}
            () = stopping.asked() => return Ok(exit::OK),
        }
    }
    tokio::select! {
        () = async { secrets.ready().await; known_hosts.ready().await } => {}
        () = stopping.asked() => return Ok(exit::OK),
    }
    eprintln!(
        "kiln controller watching Applications in namespace {} (Ctrl-C stops)",
        args.namespace
    );
    let (lost_tx, lost_rx) = tokio::sync::oneshot::channel::<()>();
    if let Some(elector) = elector {
        tokio::spawn(async move {
            elector.hold().await;
            let _ = lost_tx.send(());
        });
    }
    let lost = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = lost.clone();
    let asked = stopping.clone();
    let running = controller::run(ctx, async move {
        tokio::select! {
            () = asked.asked() => {}
            Ok(()) = lost_rx => flag.store(true, std::sync::atomic::Ordering::Relaxed),
        }
    });
    tokio::select! {
        () = running => {}
        () = stopping.forced() => anyhow::bail!(
            "did not stop within --shutdown-grace ({}) of the stop signal (or a second signal came); \
             syncs still running were cut short",
            format!("{:?}", args.shutdown_grace)
        ),
    }
    if lost.load(std::sync::atomic::Ordering::Relaxed) {
        // Another replica leads now; restarting makes this one a candidate again.
        anyhow::bail!(
            "lost the kiln-controller lease; stopped so as not to act beside the new leader"
        );
    }
    Ok(exit::OK)
}

/// What the controller needs before it starts, checked with one line each
/// that says what to run: its namespace, Kiln's CRDs served there, and the
/// right to list them. Without them it would wait on watches that can
/// never start. An API server that cannot be reached or answers 5xx is
/// asked again for up to 30 s (a cluster still coming up).
async fn check_prerequisites(client: &kube::Client, namespace: &str) -> anyhow::Result<()> {
    const PATIENCE: Duration = Duration::from_secs(30);
    let started = std::time::Instant::now();
    let mut pause = Duration::from_millis(500);
    loop {
        match check_once(client, namespace).await {
            Ok(()) => return Ok(()),
            Err(Check::Fatal(error)) => return Err(error),
            Err(Check::Transient(error)) if started.elapsed() >= PATIENCE => {
                return Err(error.context(format!("still failing after {PATIENCE:?}")));
            }
            Err(Check::Transient(error)) => {
                tracing::warn!(error = %kiln::text::chain(error.as_ref()), "the cluster is not answering yet; asking again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// Why a start-up check failed.
enum Check {
    /// Nothing changes by waiting: what to run is in the message.
    Fatal(anyhow::Error),
    /// The API server did not answer, or answered 5xx.
    Transient(anyhow::Error),
}

async fn check_once(client: &kube::Client, namespace: &str) -> Result<(), Check> {
    use k8s_openapi::api::core::v1::Namespace;
    use kiln::api::{AppProject, Application, Plugin};
    use kube::api::{Api, ListParams};

    let one = ListParams::default().limit(1);
    let unexpected = |e: kube::Error, what: String| match &e {
        kube::Error::Api(status) if status.code == 401 => Check::Fatal(anyhow::anyhow!(
            "the cluster refused the controller's credentials (401): check the kubeconfig \
             or the ServiceAccount token"
        )),
        kube::Error::Api(status) if status.code < 500 => {
            Check::Fatal(anyhow::Error::new(e).context(what))
        }
        _ => Check::Transient(anyhow::Error::new(e).context(what)),
    };
    match Api::<Namespace>::all(client.clone()).get(namespace).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {
            return Err(Check::Fatal(anyhow::anyhow!(
                "namespace {namespace} does not exist: create it (kubectl create namespace \
                 {namespace}) or pass --namespace"
            )));
        }
        // Reading namespaces may be forbidden to a namespaced controller:
        // the checks below say what matters.
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        Err(e) => return Err(unexpected(e, format!("cannot read namespace {namespace}"))),
    }
    let kinds = [
        (
            "Applications",
            Api::<Application>::namespaced(client.clone(), namespace)
                .list_metadata(&one)
                .await
                .err(),
        ),
        (
            "AppProjects",
            Api::<AppProject>::namespaced(client.clone(), namespace)
                .list_metadata(&one)
                .await
                .err(),
        ),
        (
            "Plugins",
            Api::<Plugin>::namespaced(client.clone(), namespace)
                .list_metadata(&one)
                .await
                .err(),
        ),
    ];
    for (kind, error) in kinds {
        match error {
            None => {}
            Some(kube::Error::Api(status)) if status.code == 404 => {
                return Err(Check::Fatal(anyhow::anyhow!(
                    "the cluster does not serve kiln.dev {kind}: install Kiln's CRDs first \
                     (kiln crds | kubectl apply --server-side -f -)"
                )));
            }
            Some(kube::Error::Api(status)) if status.code == 403 => {
                return Err(Check::Fatal(anyhow::anyhow!(
                    "not allowed to list {kind} in namespace {namespace}: grant the \
                     controller's ServiceAccount the RBAC of deploy/ (list and watch kiln.dev \
                     resources)"
                )));
            }
            Some(e) => {
                return Err(unexpected(
                    e,
                    format!("cannot list {kind} in namespace {namespace}"),
                ));
            }
        }
    }
    Ok(())
}
