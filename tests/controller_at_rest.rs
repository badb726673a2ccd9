//! A controller at rest costs the API server almost nothing: once its
//! Applications are synced, a resync reads live state from its watches,
//! predicts nothing it predicted before, and writes no status that did not
//! change. Every request of the controller's clients is counted (the
//! `kiln_kube_requests_total` counters) while the Applications resync many
//! times.

mod support;

use std::time::Duration;

use kiln::cluster::requests::{ClientOptions, RequestCounts};
use kiln::controller::{Context, ControllerConfig};
use kiln::source::git::GitConfig;
use kiln_devcluster::Config;
use serde_json::json;
use support::cluster::{Cluster, app_status};
use support::git::{Fixture, GitDaemon};

/// Polls `check` until it returns Some, for up to 30 s.
async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..300 {
        if let Some(value) = check().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

/// Requests counted so far, by verb.
fn counts(requests: &RequestCounts, cluster: &str) -> Vec<(String, u64)> {
    [
        "get",
        "list",
        "watch",
        "create",
        "update",
        "patch",
        "apply",
        "dry-run",
        "delete",
        "discovery",
        "other",
    ]
    .iter()
    .map(|verb| {
        let n = requests
            .get_or_create(&vec![
                ("cluster".into(), cluster.to_owned()),
                ("verb".into(), (*verb).to_owned()),
            ])
            .get();
        ((*verb).to_owned(), n)
    })
    .collect()
}

fn reconciles(ctx: &Context) -> u64 {
    ctx.metrics
        .reconciles
        .get_or_create(&vec![("result".into(), "ok".into())])
        .get()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resyncs_of_synced_applications_cost_almost_no_api_requests() {
    // Given three Applications of five objects each, synced.
    let cluster = Cluster::with_kiln(
        Config {
            simulate_readiness: Some(Duration::from_millis(20)),
            ..Config::default()
        },
        &["kiln", "guestbook"],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let repo = Fixture::new(dir.path(), "apps");
    let apps = ["one", "two", "three"];
    let files: Vec<(String, String)> = apps
        .iter()
        .flat_map(|app| {
            (0..5).map(move |i| {
                (
                    format!("{app}/cm-{i}.yaml"),
                    format!(
                        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {app}-{i}\ndata:\n  color: blue\n"
                    ),
                )
            })
        })
        .collect();
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    repo.commit("first", &files);
    repo.publish();
    let daemon = GitDaemon::start(dir.path());
    let url = daemon.url("apps");
    for app in apps {
        cluster
            .automated_app(app, "default", json!({"repoURL": url, "path": app}))
            .await;
    }
    let (controller, options, server) =
        counted_controller(&cluster, dir.path(), Duration::from_millis(200)).await;
    let ctx = controller.ctx.clone();
    for app in apps {
        eventually(&format!("{app} Synced"), async || {
            let status = app_status(&cluster, app).await;
            (status["sync"]["status"] == "Synced" && status["health"]["status"] == "Healthy")
                .then_some(())
        })
        .await;
    }
    // (No settling: what a sync applied is not predicted again.)
    // When every Application resyncs ten more times.
    let before = counts(&options.requests, &server);
    let start = reconciles(&ctx);
    let target = start + 10 * apps.len() as u64;
    eventually("ten resyncs each", async || {
        (reconciles(&ctx) >= target).then_some(())
    })
    .await;
    let after = counts(&options.requests, &server);
    let resyncs = reconciles(&ctx) - start;

    // Then they cost at most 0.1 API requests per Application per resync.
    let spent: Vec<(String, u64)> = before
        .iter()
        .zip(&after)
        .map(|((verb, b), (_, a))| (verb.clone(), a - b))
        .filter(|(_, n)| *n > 0)
        .collect();
    let total: u64 = spent.iter().map(|(_, n)| n).sum();
    let per_resync = total as f64 / resyncs as f64;
    assert!(
        per_resync <= 0.1,
        "{per_resync:.2} requests per Application per resync over {resyncs} resyncs: {spent:?}"
    );
    controller.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_sync_reads_each_object_once_and_lists_no_kind_cluster_wide() {
    // Given three Applications of five objects each, never synced.
    let cluster = Cluster::with_kiln(Config::default(), &["kiln", "guestbook"]).await;
    let dir = tempfile::tempdir().unwrap();
    let repo = Fixture::new(dir.path(), "apps");
    let apps = ["one", "two", "three"];
    let files: Vec<(String, String)> = apps
        .iter()
        .flat_map(|app| {
            (0..5).map(move |i| {
                (
                    format!("{app}/cm-{i}.yaml"),
                    format!(
                        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {app}-{i}\ndata:\n  color: blue\n"
                    ),
                )
            })
        })
        .collect();
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    repo.commit("first", &files);
    repo.publish();
    let daemon = GitDaemon::start(dir.path());
    let url = daemon.url("apps");
    for app in apps {
        cluster
            .apply(
                "applications",
                json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Application",
                    "metadata": {"name": app, "namespace": "kiln"},
                    "spec": {"project": "default",
                        "source": {"repoURL": url, "path": app},
                        "destination": {"namespace": "guestbook"},
                        "syncPolicy": {"automated": {"prune": true}}}}),
                "operator",
                false,
            )
            .await
            .unwrap();
    }
    // (A resync longer than the test: every reconcile counted is the
    // cold one.) When the controller syncs them from cold.
    let (controller, options, server) =
        counted_controller(&cluster, dir.path(), Duration::from_secs(600)).await;
    for app in apps {
        eventually(&format!("{app} Synced"), async || {
            let status = app_status(&cluster, app).await;
            (status["sync"]["status"] == "Synced" && status["health"]["status"] == "Healthy")
                .then_some(())
        })
        .await;
    }
    let spent: Vec<(String, u64)> = counts(&options.requests, &server)
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect();
    controller.shutdown().await;

    // Then prune candidates came from the watches' caches: the only lists
    // are the watches' own first lists (one per watched kind: Applications,
    // Secrets, ConfigMaps, AppProjects, Plugins and the managed kinds), not
    // one per served kind per sync.
    let verb = |name: &str| spent.iter().find(|(v, _)| v == name).map_or(0, |(_, n)| *n);
    let watches = verb("watch");
    assert!(
        verb("list") <= watches + 2,
        "{} lists for {watches} watches: {spent:?}",
        verb("list")
    );
    // And each object was read once (the comparison, before it existed)
    // and applied once: the sync reuses what the comparison read, and
    // judges health from what it wrote.
    let objects = 15;
    assert!(
        verb("get") <= objects + 3,
        "{} GETs for {objects} objects: {spent:?}",
        verb("get")
    );
}

/// A controller in-process whose client counts every request it sends
/// (no client-side pacing), with the API server's URL the counts are keyed
/// by.
async fn counted_controller(
    cluster: &Cluster,
    dir: &std::path::Path,
    resync: Duration,
) -> (support::controller::Running, ClientOptions, String) {
    let options = ClientOptions {
        qps: 0,
        ..ClientOptions::default()
    };
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&cluster.server.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let server = config.cluster_url.to_string();
    let client = kiln::cluster::requests::client(config, &options).unwrap();
    let controller = support::controller::start(
        client,
        GitConfig::new(dir.join("cache")),
        ControllerConfig {
            resync,
            health_timeout: Duration::from_secs(10),
            kube_client: options.clone(),
            ..ControllerConfig::default()
        },
    );
    (controller, options, server)
}
