//! Controller sharding: two controller replicas split the Applications by
//! shard Lease; when one stops, the other takes its shard and keeps its
//! Applications syncing; when it comes back, it gets its shard back.
//! Replicas run in-process against the dev cluster and a real `git daemon`;
//! the hard loss (SIGKILL, no Lease released) runs two `kiln controller`
//! processes.

mod support;

use std::sync::Arc;
use std::time::Duration;

use kiln::controller::shard::{ShardingConfig, lease_name, shard_of};
use kiln::controller::{Context, ControllerConfig};
use kiln::source::git::GitConfig;
use kiln_devcluster::Config;
use serde_json::{Value, json};
use support::cluster::Cluster;
use support::git::{Fixture, GitDaemon};

/// One controller replica running in-process.
struct Replica {
    ctx: Arc<Context>,
    stop: tokio::sync::oneshot::Sender<()>,
    done: tokio::task::JoinHandle<()>,
}

impl Replica {
    /// Starts replica `identity` preferring shard `index` of 2.
    fn start(cluster: &Cluster, dir: &std::path::Path, identity: &str, index: u32) -> Self {
        let config = ControllerConfig {
            resync: Duration::from_millis(500),
            health_timeout: Duration::from_secs(10),
            sharding: ShardingConfig {
                shards: 2,
                index,
                identity: identity.into(),
                lease_duration: Duration::from_secs(2),
                renew_every: Duration::from_millis(400),
            },
            ..ControllerConfig::default()
        };
        let support::controller::Running { ctx, stop, done } = support::controller::start(
            cluster.client.clone(),
            GitConfig::new(dir.join(format!("cache-{identity}"))),
            config,
        );
        Self { ctx, stop, done }
    }

    /// Stops it the way SIGTERM does: running reconciles finish, its
    /// Leases are released.
    async fn stop(self) {
        let _ = self.stop.send(());
        self.done.await.unwrap();
    }
}

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

fn configmap(name: &str, color: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  color: {color}\n")
}

/// Commits every application's ConfigMap with `color`.
fn push(repo: &Fixture, apps: &[String], color: &str) {
    let files: Vec<(String, String)> = apps
        .iter()
        .map(|app| (format!("{app}/cm.yaml"), configmap(app, color)))
        .collect();
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    repo.commit(color, &files);
    repo.publish();
}

async fn live(cluster: &Cluster, name: &str) -> Option<Value> {
    cluster
        .get("v1", "ConfigMap", "configmaps", Some("guestbook"), name)
        .await
        .ok()
}

/// Waits until every application's ConfigMap has `color`; returns them.
async fn wait_for(cluster: &Cluster, apps: &[String], color: &str) -> Vec<Value> {
    let mut found = Vec::new();
    for app in apps {
        found.push(
            eventually(&format!("{app} {color}"), async || {
                live(cluster, app)
                    .await
                    .filter(|cm| cm["data"]["color"] == color)
            })
            .await,
        );
    }
    found
}

/// The Applications `replica` rendered (it records what each render read).
fn rendered_by(replica: &Replica, apps: &[String]) -> Vec<String> {
    apps.iter()
        .filter(|app| replica.ctx.read_paths.get(app).is_some())
        .cloned()
        .collect()
}

async fn holder(cluster: &Cluster, shard: u32) -> Option<String> {
    cluster
        .get(
            "coordination.k8s.io/v1",
            "Lease",
            "leases",
            Some("kiln"),
            &lease_name(shard),
        )
        .await
        .ok()
        .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_owned))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_split_the_applications_and_a_stopped_replica_s_shard_is_taken_over() {
    // Given four Applications, two in each shard.
    let cluster = Cluster::with_kiln(
        Config {
            simulate_readiness: Some(Duration::from_millis(20)),
            ..Config::default()
        },
        &["kiln", "guestbook"],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut apps: Vec<Vec<String>> = vec![Vec::new(), Vec::new()];
    for i in 0.. {
        let name = format!("app-{i}");
        let shard = shard_of("kiln", &name, 2) as usize;
        if apps[shard].len() < 2 {
            apps[shard].push(name);
        }
        if apps.iter().all(|a| a.len() == 2) {
            break;
        }
    }
    let all: Vec<String> = apps.concat();
    let repo = Fixture::new(dir.path(), "apps");
    push(&repo, &all, "blue");
    let daemon = GitDaemon::start(dir.path());
    let url = daemon.url("apps");
    for app in &all {
        cluster
            .automated_app(app, "default", json!({"repoURL": url, "path": app}))
            .await;
    }

    // When two replicas run, each preferring its shard.
    let a = Replica::start(&cluster, dir.path(), "a", 0);
    let b = Replica::start(&cluster, dir.path(), "b", 1);

    // Then each syncs only its own shard's Applications.
    wait_for(&cluster, &all, "blue").await;
    assert_eq!(rendered_by(&a, &all), apps[0]);
    assert_eq!(rendered_by(&b, &all), apps[1]);
    assert_eq!(holder(&cluster, 0).await.as_deref(), Some("a"));
    assert_eq!(holder(&cluster, 1).await.as_deref(), Some("b"));
    assert_eq!(a.ctx.shards.owned(), vec![0]);
    assert_eq!(b.ctx.shards.owned(), vec![1]);

    // When replica a stops, b takes shard 0 and syncs its Applications.
    a.stop().await;
    eventually("b to take shard 0", async || {
        (b.ctx.shards.owned() == [0, 1]).then_some(())
    })
    .await;
    assert_eq!(holder(&cluster, 0).await.as_deref(), Some("b"));
    push(&repo, &all, "green");
    wait_for(&cluster, &all, "green").await;
    assert_eq!(rendered_by(&b, &all), all);

    // When a replica preferring shard 0 comes back, b hands the shard
    // back and the new replica syncs it.
    let a2 = Replica::start(&cluster, dir.path(), "a2", 0);
    eventually("shard 0 handed back", async || {
        (holder(&cluster, 0).await.as_deref() == Some("a2")).then_some(())
    })
    .await;
    assert_eq!(b.ctx.shards.owned(), vec![1]);
    push(&repo, &all, "yellow");
    wait_for(&cluster, &all, "yellow").await;
    assert_eq!(rendered_by(&a2, &all), apps[0]);
    assert_eq!(a2.ctx.shards.owned(), vec![0]);
    a2.stop().await;
    b.stop().await;
}

/// A `kiln controller` process, killed (SIGKILL) when dropped.
struct Process(std::process::Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `kiln controller --shards 2 --shard-index index` as the process
/// `name` (its Lease identity is `name-PID`), its files under `dir/name`.
fn controller_process(
    dir: &std::path::Path,
    kubeconfig: &std::path::Path,
    name: &str,
    index: u32,
) -> Process {
    let home = dir.join(name);
    std::fs::create_dir_all(&home).unwrap();
    let port = support::git::free_port();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_kiln"))
        .env_remove("KUBECONFIG")
        .env("HOME", &home)
        .env("HOSTNAME", name)
        .arg("controller")
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(["--namespace=kiln", "--shards=2", "--resync=1s"])
        .arg(format!("--shard-index={index}"))
        .arg(format!("--lease-duration={}s", PROCESS_LEASE.as_secs()))
        .arg(format!("--listen=127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(match std::env::var_os("KILN_TEST_CONTROLLER_LOG") {
            Some(path) => {
                std::process::Stdio::from(std::fs::File::create(home.join(path)).unwrap())
            }
            None => std::process::Stdio::null(),
        })
        .spawn()
        .unwrap();
    Process(child)
}

/// The Lease duration of the controller processes.
const PROCESS_LEASE: Duration = Duration::from_secs(2);

async fn lease_spec(cluster: &Cluster, shard: u32) -> Value {
    cluster
        .get(
            "coordination.k8s.io/v1",
            "Lease",
            "leases",
            Some("kiln"),
            &lease_name(shard),
        )
        .await
        .map(|l| l["spec"].clone())
        .unwrap_or_default()
}

fn timestamp(spec: &Value, field: &str) -> jiff::Timestamp {
    spec[field].as_str().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_controller_process_s_shard_is_taken_over_after_its_lease_expires() {
    // Given four Applications, two in each shard, and two `kiln
    // controller` processes, each preferring one shard.
    let cluster = Cluster::with_kiln(
        Config {
            simulate_readiness: Some(Duration::from_millis(20)),
            ..Config::default()
        },
        &["kiln", "guestbook"],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut apps: Vec<Vec<String>> = vec![Vec::new(), Vec::new()];
    for i in 0.. {
        let name = format!("app-{i}");
        let shard = shard_of("kiln", &name, 2) as usize;
        if apps[shard].len() < 2 {
            apps[shard].push(name);
        }
        if apps.iter().all(|a| a.len() == 2) {
            break;
        }
    }
    let all: Vec<String> = apps.concat();
    let repo = Fixture::new(dir.path(), "apps");
    push(&repo, &all, "blue");
    let daemon = GitDaemon::start(dir.path());
    let url = daemon.url("apps");
    for app in &all {
        cluster
            .automated_app(app, "default", json!({"repoURL": url, "path": app}))
            .await;
    }
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.server.write_kubeconfig(&kubeconfig).unwrap();
    let mut a = controller_process(dir.path(), &kubeconfig, "replica-a", 0);
    let b = controller_process(dir.path(), &kubeconfig, "replica-b", 1);
    let (a_id, b_id) = (
        format!("replica-a-{}", a.0.id()),
        format!("replica-b-{}", b.0.id()),
    );
    wait_for(&cluster, &all, "blue").await;
    eventually("each process holding its shard", async || {
        (holder(&cluster, 0).await.as_deref() == Some(a_id.as_str())
            && holder(&cluster, 1).await.as_deref() == Some(b_id.as_str()))
        .then_some(())
    })
    .await;

    // When process a is killed (SIGKILL: no Lease released)...
    a.0.kill().unwrap();
    a.0.wait().unwrap();
    let left = lease_spec(&cluster, 0).await;
    assert_eq!(
        left["holderIdentity"],
        a_id.as_str(),
        "the dead process's Lease stays"
    );

    // ...then b takes shard 0 once the Lease has been expired for a
    // further lease duration (never before: the seconds are those the
    // controllers compare)...
    eventually("b to take shard 0", async || {
        (holder(&cluster, 0).await.as_deref() == Some(b_id.as_str())).then_some(())
    })
    .await;
    let taken = lease_spec(&cluster, 0).await;
    let last_renewal = timestamp(&left, "renewTime");
    let acquired = timestamp(&taken, "acquireTime");
    let lease = i64::try_from(PROCESS_LEASE.as_secs()).unwrap();
    assert!(
        acquired.as_second() >= last_renewal.as_second() + 2 * lease,
        "shard 0 taken at {acquired}, its Lease last renewed at {last_renewal}"
    );
    assert_eq!(holder(&cluster, 1).await.as_deref(), Some(b_id.as_str()));

    // ...and syncs the dead process's Applications: a new commit to them
    // is Synced.
    let commit = {
        push(&repo, &all, "green");
        repo.rev_parse("HEAD")
    };
    wait_for(&cluster, &all, "green").await;
    for app in &apps[0] {
        eventually(&format!("{app} Synced at the new commit"), async || {
            let status = support::cluster::app_status(&cluster, app).await;
            (status["sync"]["status"] == "Synced" && status["sync"]["revision"] == commit.as_str())
                .then_some(())
        })
        .await;
    }
    drop(b);
}
