//! The controller's live watches: a watch no Application of this replica
//! needs any more is stopped (the Application deleted, the kind no longer
//! rendered, the shard handed to another replica), and the caches stay
//! within their byte budget when a tenant creates large labelled objects,
//! the Applications syncing on by reading the API server.
//! Controllers run in-process against the dev cluster and a real
//! `git daemon`.

mod support;

use std::sync::Arc;
use std::time::Duration;

use kiln::controller::live::LiveConfig;
use kiln::controller::shard::{ShardingConfig, shard_of};
use kiln::controller::{self, Context, ControllerConfig, ControllerSecrets};
use kiln::plugin::{HostConfig, PluginHost};
use kiln::source::git::{GitConfig, GitSource};
use kiln_devcluster::Config;
use serde_json::{Value, json};
use support::cluster::{Cluster, app_status};
use support::git::{Fixture, GitDaemon};

/// How long an unneeded watch runs on in these tests.
const GRACE: Duration = Duration::from_millis(300);

/// The key of the CronJob and ConfigMap watches on the in-cluster server.
fn key(kind: &str) -> (String, String) {
    (kiln::api::IN_CLUSTER.to_owned(), kind.to_owned())
}
const CRONJOBS: &str = "batch/v1/cronjobs";
const CONFIGMAPS: &str = "v1/configmaps";

/// One controller running in-process.
struct Replica {
    ctx: Arc<Context>,
    stop: tokio::sync::oneshot::Sender<()>,
    done: tokio::task::JoinHandle<()>,
}

impl Replica {
    fn start(
        cluster: &Cluster,
        dir: &std::path::Path,
        identity: &str,
        sharding: ShardingConfig,
        live: LiveConfig,
    ) -> Self {
        let secrets = ControllerSecrets::watch(cluster.client.clone(), "kiln");
        let git = GitSource::new(
            GitConfig::new(dir.join(format!("cache-{identity}"))),
            Arc::new(secrets.repo_credentials()),
        )
        .unwrap();
        let config = ControllerConfig {
            resync: Duration::from_millis(500),
            health_timeout: Duration::from_secs(10),
            sharding: ShardingConfig {
                identity: identity.into(),
                ..sharding
            },
            live,
            ..ControllerConfig::default()
        };
        let ctx = Arc::new(Context::new(
            cluster.client.clone(),
            git,
            PluginHost::new(HostConfig::default()).unwrap(),
            config,
            secrets,
        ));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let done = tokio::spawn(controller::run(ctx.clone(), async move {
            let _ = stopped.await;
        }));
        Self { ctx, stop, done }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.done.await.unwrap();
    }

    fn watches(&self, kind: &str) -> bool {
        self.ctx.live.watching().contains(&key(kind))
    }

    /// `kiln_live_watches{cluster="https://kubernetes.default.svc"}`.
    fn watches_metric(&self) -> Option<i64> {
        let text = self.ctx.metrics.encode()?;
        let prefix = format!(
            "kiln_live_watches{{cluster=\"{}\"}} ",
            kiln::api::IN_CLUSTER
        );
        text.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .and_then(|n| n.trim().parse().ok())
    }
}

fn grace() -> LiveConfig {
    LiveConfig {
        grace: GRACE,
        ..LiveConfig::default()
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

fn cronjob(name: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: {name}\nspec:\n  schedule: \"0 3 * * *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers:\n          - name: job\n            image: busybox\n"
    )
}

async fn application(cluster: &Cluster, name: &str, url: &str) {
    cluster
        .automated_app(name, "default", json!({"repoURL": url, "path": name}))
        .await;
}

async fn live(cluster: &Cluster, kind: &str, name: &str) -> Option<Value> {
    let (api_version, plural) = match kind {
        "CronJob" => ("batch/v1", "cronjobs"),
        _ => ("v1", "configmaps"),
    };
    cluster
        .get(api_version, kind, plural, Some("guestbook"), name)
        .await
        .ok()
}

async fn exists(cluster: &Cluster, kind: &str, name: &str) {
    eventually(&format!("{kind} {name}"), async || {
        live(cluster, kind, name).await.map(|_| ())
    })
    .await;
}

async fn gone(cluster: &Cluster, kind: &str, name: &str) {
    eventually(&format!("{kind} {name} gone"), async || {
        live(cluster, kind, name).await.is_none().then_some(())
    })
    .await;
}

async fn colored(cluster: &Cluster, name: &str, color: &str) {
    eventually(&format!("{name} {color}"), async || {
        live(cluster, "ConfigMap", name)
            .await
            .filter(|cm| cm["data"]["color"] == color)
            .map(|_| ())
    })
    .await;
}

async fn synced_at(cluster: &Cluster, app: &str, commit: &str) {
    eventually(&format!("{app} Synced at {commit}"), async || {
        let status = app_status(cluster, app).await;
        (status["sync"]["status"] == "Synced" && status["sync"]["revision"] == commit).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_no_application_needs_any_more_is_stopped() {
    // Given `cron`, rendering a CronJob and a ConfigMap, and `web`,
    // rendering a ConfigMap.
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
    let (cj, cron_cm, web_cm) = (
        cronjob("nightly"),
        configmap("cron", "blue"),
        configmap("web", "blue"),
    );
    repo.commit(
        "blue",
        &[
            ("cron/cj.yaml", &cj),
            ("cron/cm.yaml", &cron_cm),
            ("web/cm.yaml", &web_cm),
        ],
    );
    repo.publish();
    let daemon = GitDaemon::start(dir.path());
    let url = daemon.url("apps");
    application(&cluster, "cron", &url).await;
    application(&cluster, "web", &url).await;
    let controller = Replica::start(
        &cluster,
        dir.path(),
        "c",
        ShardingConfig::default(),
        grace(),
    );

    // Then both kinds are watched.
    exists(&cluster, "CronJob", "nightly").await;
    colored(&cluster, "web", "blue").await;
    eventually("both kinds watched", async || {
        (controller.watches(CRONJOBS) && controller.watches(CONFIGMAPS)).then_some(())
    })
    .await;
    assert_eq!(controller.watches_metric(), Some(2));

    // When `cron` no longer renders its CronJob, the CronJob watch stops
    // (once the CronJob is pruned and the status no longer lists it).
    std::fs::remove_file(repo.work.join("cron/cj.yaml")).unwrap();
    repo.commit("no cronjob", &[]);
    repo.publish();
    gone(&cluster, "CronJob", "nightly").await;
    eventually("the CronJob watch stopped", async || {
        (!controller.watches(CRONJOBS)).then_some(())
    })
    .await;
    assert!(controller.watches(CONFIGMAPS));
    assert_eq!(controller.watches_metric(), Some(1));

    // When it renders one again, the kind is watched again.
    repo.commit("cronjob again", &[("cron/cj.yaml", &cj)]);
    repo.publish();
    exists(&cluster, "CronJob", "nightly").await;
    eventually("the CronJob watch again", async || {
        controller.watches(CRONJOBS).then_some(())
    })
    .await;
    assert_eq!(controller.watches_metric(), Some(2));

    // When `cron` is deleted, its CronJob watch stops; the ConfigMap
    // watch stays (`web` needs it) and `web` keeps syncing.
    cluster
        .api(
            "kiln.dev/v1alpha1",
            "Application",
            "applications",
            Some("kiln"),
        )
        .delete("cron", &Default::default())
        .await
        .unwrap();
    eventually("the CronJob watch stopped after the delete", async || {
        (!controller.watches(CRONJOBS)).then_some(())
    })
    .await;
    assert!(controller.watches(CONFIGMAPS));
    assert_eq!(controller.watches_metric(), Some(1));
    let commit = repo.commit("green", &[("web/cm.yaml", &configmap("web", "green"))]);
    repo.publish();
    colored(&cluster, "web", "green").await;
    synced_at(&cluster, "web", &commit).await;
    controller.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_handed_away_stops_the_watches_only_its_applications_needed() {
    // Given `s0` (shard 0) rendering a CronJob, and `s1` (shard 1)
    // rendering a ConfigMap, both reconciled by one replica holding both
    // shards.
    let cluster = Cluster::with_kiln(
        Config {
            simulate_readiness: Some(Duration::from_millis(20)),
            ..Config::default()
        },
        &["kiln", "guestbook"],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let name_in = |shard: u32| {
        (0..)
            .map(|i| format!("app-{i}"))
            .find(|name| shard_of("kiln", name, 2) == shard)
            .unwrap()
    };
    let (s0, s1) = (name_in(0), name_in(1));
    let repo = Fixture::new(dir.path(), "apps");
    let (cj, cm) = (cronjob("nightly"), configmap(&s1, "blue"));
    repo.commit(
        "blue",
        &[
            (&format!("{s0}/cj.yaml"), &cj),
            (&format!("{s1}/cm.yaml"), &cm),
        ],
    );
    repo.publish();
    let daemon = GitDaemon::start(dir.path());
    let url = daemon.url("apps");
    application(&cluster, &s0, &url).await;
    application(&cluster, &s1, &url).await;
    let sharding = |index| ShardingConfig {
        shards: 2,
        index,
        lease_duration: Duration::from_secs(1),
        renew_every: Duration::from_millis(300),
        ..ShardingConfig::default()
    };
    let b = Replica::start(&cluster, dir.path(), "b", sharding(1), grace());
    eventually("b to hold both shards", async || {
        (b.ctx.shards.owned() == [0, 1]).then_some(())
    })
    .await;
    exists(&cluster, "CronJob", "nightly").await;
    colored(&cluster, &s1, "blue").await;
    eventually("b watching both kinds", async || {
        (b.watches(CRONJOBS) && b.watches(CONFIGMAPS)).then_some(())
    })
    .await;

    // When the replica preferring shard 0 comes, b hands shard 0 back and
    // stops the CronJob watch only `s0` needed; the new replica watches it.
    let a = Replica::start(&cluster, dir.path(), "a", sharding(0), grace());
    eventually("shard 0 handed back", async || {
        (b.ctx.shards.owned() == [1] && a.ctx.shards.owned() == [0]).then_some(())
    })
    .await;
    eventually("b's CronJob watch stopped", async || {
        (!b.watches(CRONJOBS)).then_some(())
    })
    .await;
    assert!(b.watches(CONFIGMAPS));
    assert_eq!(b.watches_metric(), Some(1));
    eventually("a watching CronJobs", async || {
        a.watches(CRONJOBS).then_some(())
    })
    .await;
    assert!(!a.watches(CONFIGMAPS));
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_labelled_objects_keep_the_caches_within_their_budget_and_syncs_go_on() {
    // Given a controller whose live caches may hold 32 KiB, and `web`
    // rendering two ConfigMaps.
    const BUDGET: u64 = 32 * 1024;
    let cluster = Cluster::with_kiln(
        Config {
            simulate_readiness: Some(Duration::from_millis(20)),
            ..Config::default()
        },
        &["kiln", "guestbook", "tenant"],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let repo = Fixture::new(dir.path(), "apps");
    repo.commit(
        "blue",
        &[
            ("web/a.yaml", &configmap("a", "blue")),
            ("web/b.yaml", &configmap("b", "blue")),
        ],
    );
    repo.publish();
    let daemon = GitDaemon::start(dir.path());
    let url = daemon.url("apps");
    application(&cluster, "web", &url).await;
    let live_config = LiveConfig {
        cache_bytes: BUDGET,
        ..grace()
    };
    let controller = Replica::start(
        &cluster,
        dir.path(),
        "c",
        ShardingConfig::default(),
        live_config,
    );
    colored(&cluster, "a", "blue").await;
    eventually("ConfigMaps watched", async || {
        controller.watches(CONFIGMAPS).then_some(())
    })
    .await;
    // What the caches hold is sampled all along.
    let most = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let sampler = {
        let (ctx, most) = (controller.ctx.clone(), most.clone());
        tokio::spawn(async move {
            loop {
                most.fetch_max(ctx.live.cache_bytes(), std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };

    // When a tenant creates labelled ConfigMaps of 16 KiB each, 160 KiB in
    // all (labelled as `web`'s, and as nobody's).
    let payload = "x".repeat(16 * 1024);
    for i in 0..10 {
        let owner = if i % 2 == 0 { "web" } else { "nobody" };
        cluster
            .apply(
                "configmaps",
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("big-{i}"), "namespace": "tenant",
                        "labels": {"kiln.dev/app": owner},
                        "annotations": {"note": payload}},
                    "data": {"blob": payload}}),
                "tenant",
                false,
            )
            .await
            .unwrap();
    }

    // Then the ConfigMap cache is dropped (said by the metric), the caches
    // never held more than the budget...
    eventually("the ConfigMap cache dropped", async || {
        let text = controller.ctx.metrics.encode()?;
        text.lines()
            .any(|l| {
                l.starts_with("kiln_live_cache_dropped_total{")
                    && l.contains("kind=\"v1/configmaps\"")
                    && !l.ends_with(" 0")
            })
            .then_some(())
    })
    .await;
    assert!(!controller.watches(CONFIGMAPS));

    // ...and `web` keeps syncing from the API server: a new commit changes
    // one ConfigMap and removes the other (pruned), and is Synced.
    std::fs::remove_file(repo.work.join("web/b.yaml")).unwrap();
    let commit = repo.commit("green", &[("web/a.yaml", &configmap("a", "green"))]);
    repo.publish();
    colored(&cluster, "a", "green").await;
    gone(&cluster, "ConfigMap", "b").await;
    synced_at(&cluster, "web", &commit).await;
    // The tenant's objects are not `web`'s (no tracking annotation): kept.
    assert!(
        cluster
            .get("v1", "ConfigMap", "configmaps", Some("tenant"), "big-0")
            .await
            .is_ok()
    );
    // Drift (someone's edit) is still reverted, found at a resync.
    let edit = kube::api::PatchParams {
        field_manager: Some("kubectl-edit".into()),
        ..Default::default()
    };
    cluster
        .api("v1", "ConfigMap", "configmaps", Some("guestbook"))
        .patch(
            "a",
            &edit,
            &kube::api::Patch::Merge(json!({"data": {"color": "red"}})),
        )
        .await
        .unwrap();
    colored(&cluster, "a", "green").await;
    sampler.abort();
    let most = most.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        most <= BUDGET,
        "the caches held {most} bytes, over {BUDGET}"
    );
    assert!(controller.ctx.live.cache_bytes() <= BUDGET);
    controller.stop().await;
}
