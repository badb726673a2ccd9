//! `kiln dev-cluster`: serve the in-memory Kubernetes API until interrupted.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;

use super::{args, exit};

/// Run an in-memory Kubernetes API server for tests and local trials.
///
/// It serves the Kubernetes REST API (discovery, list/watch, server-side
/// apply with managed fields, strategic/merge/JSON patches, finalizers and
/// garbage collection, dry runs, CRDs) so that kubectl and Kiln work against
/// it unchanged, and writes a kubeconfig for itself.
///
/// It is NOT a Kubernetes: there is no scheduler and no kubelet, and no pod
/// ever runs. Workloads stay unready unless --simulate-readiness is given.
/// Never use it in place of a cluster. See docs/dev-cluster.md.
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
#[command(after_help = "\
Examples:
  kiln dev-cluster --kubeconfig /tmp/kiln-dev.yaml &
  kubectl --kubeconfig /tmp/kiln-dev.yaml apply --server-side -f app.yaml
  kiln dev-cluster --port 0 --data state.json --simulate-readiness=1s --tls

Exit status: 0 stopped by SIGINT or SIGTERM, 2 it could not start (the port is taken, the data
file cannot be read or written: the message names it).")]
pub(crate) struct DevClusterArgs {
    /// Port to listen on (loopback only); 0 picks a free one.
    #[arg(long, default_value_t = 6443)]
    port: u16,

    /// Address to listen on. Only loopback addresses make sense: there is no
    /// authentication.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    address: IpAddr,

    /// Where to write a kubeconfig for this server.
    /// Default: ./kiln-dev-cluster.kubeconfig
    #[arg(
        long,
        value_name = "PATH",
        default_value = "kiln-dev-cluster.kubeconfig"
    )]
    kubeconfig: PathBuf,

    /// Keep the state in this file: loaded at start, written after changes,
    /// so a restart keeps every object.
    #[arg(long, value_name = "FILE")]
    data: Option<PathBuf>,

    /// Give Deployments, StatefulSets, DaemonSets, ReplicaSets and Jobs a
    /// ready status after DELAY (default 2s), as if their pods had started;
    /// and LoadBalancer Services and Ingresses an address (203.0.113.x), as
    /// a cloud load balancer or an ingress controller would.
    #[arg(long, value_name = "DELAY", num_args = 0..=1, default_missing_value = "2s",
          require_equals = true, value_parser = args::parse_duration)]
    simulate_readiness: Option<Duration>,

    /// Serve HTTPS with a freshly made self-signed CA (written into the
    /// kubeconfig).
    #[arg(long)]
    tls: bool,
}

pub(crate) async fn run(args: &DevClusterArgs) -> anyhow::Result<u8> {
    if !args.address.is_loopback() {
        anyhow::bail!(
            "--address {}: the dev cluster has no authentication and only listens on loopback addresses",
            args.address
        );
    }
    let config = kiln_devcluster::Config {
        address: SocketAddr::new(args.address, args.port),
        tls: args.tls,
        data: args.data.clone(),
        simulate_readiness: args.simulate_readiness,
        ..Default::default()
    };
    let cluster = kiln_devcluster::DevCluster::start(config).await?;
    cluster
        .write_kubeconfig(&args.kubeconfig)
        .with_context(|| format!("cannot write the kubeconfig {}", args.kubeconfig.display()))?;
    println!("kiln dev-cluster serving at {}", cluster.url());
    println!("kubeconfig: {}", args.kubeconfig.display());
    println!(
        "try: kubectl --kubeconfig {} get namespaces",
        args.kubeconfig.display()
    );
    println!("(not a Kubernetes: nothing is scheduled and no pod runs; Ctrl-C stops)");
    tokio::signal::ctrl_c()
        .await
        .context("cannot wait for Ctrl-C")?;
    cluster.shutdown().await?;
    Ok(exit::OK)
}
