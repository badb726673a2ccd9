//! The Application controller end to end: a real `git daemon`, the dev
//! cluster, the controller running in-process. Given/When/Then.

mod support;

use std::sync::Arc;
use std::time::Duration;

use kiln::api::Application;
use kiln::controller::{self, Context, ControllerConfig};
use kiln::source::git::GitConfig;
use kiln_devcluster::Config;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::cluster::{Cluster, app_status};
use support::git::{Fixture, GitDaemon};

struct World {
    cluster: Cluster,
    _daemon: GitDaemon,
    repo: Fixture,
    url: String,
    _dir: tempfile::TempDir,
    stop: tokio::sync::oneshot::Sender<()>,
    ctx: Arc<Context>,
}

const CONFIGMAP: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  color: blue\n";

async fn world() -> World {
    world_with(Duration::from_millis(300)).await
}

async fn world_with(resync: Duration) -> World {
    world_tuned(ControllerConfig {
        resync,
        ..ControllerConfig::default()
    })
    .await
}

async fn world_tuned(tuned: ControllerConfig) -> World {
    world_git(tuned, Duration::ZERO).await
}

/// A world whose controller runs with `tuned` (resync, back-off) and
/// reuses ref lookups for `lookup_ttl`; the caches and health timeout are
/// the test's.
async fn world_git(tuned: ControllerConfig, lookup_ttl: Duration) -> World {
    world_full(tuned, lookup_ttl, true).await
}

/// [`world_git`], saying whether Plugins may name files.
async fn world_full(tuned: ControllerConfig, lookup_ttl: Duration, file_plugins: bool) -> World {
    world_crds(tuned, lookup_ttl, file_plugins, true).await
}

/// [`world_full`], saying whether the cluster serves the PolicyReport CRDs.
async fn world_crds(
    tuned: ControllerConfig,
    lookup_ttl: Duration,
    file_plugins: bool,
    policy_reports: bool,
) -> World {
    let cluster = Cluster::with_kiln_crds(
        Config {
            simulate_readiness: Some(Duration::from_millis(20)),
            ..Config::default()
        },
        &["kiln", "guestbook"],
        policy_reports,
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let repo = Fixture::new(dir.path(), "apps");
    repo.commit(
        "first",
        &[
            ("guestbook/settings.yaml", CONFIGMAP),
            ("README.md", "apps\n"),
        ],
    );
    repo.publish();
    let daemon = GitDaemon::start(dir.path());
    let url = daemon.url("apps");
    let mut git = GitConfig::new(dir.path().join("cache"));
    git.lookup_ttl = lookup_ttl;
    let config = ControllerConfig {
        render_cache_dir: Some(dir.path().join("renders")),
        health_timeout: Duration::from_secs(10),
        catalog: controller::CatalogConfig {
            store: dir.path().join("plugins"),
            // The tests' catalogs name the plugins built in plugins/dist.
            allow_file_plugins: file_plugins,
            ..tuned.catalog.clone()
        },
        ..tuned
    };
    let support::controller::Running { ctx, stop, .. } =
        support::controller::start(cluster.client.clone(), git, config);
    World {
        cluster,
        _daemon: daemon,
        repo,
        url,
        _dir: dir,
        stop,
        ctx,
    }
}

fn application(name: &str, url: &str, project: &str) -> Application {
    serde_json::from_value(
        json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Application",
        "metadata": {"name": name, "namespace": "kiln"},
        "spec": {"project": project, "source": {"repoURL": url, "path": "guestbook"},
            "destination": {"namespace": "guestbook"},
            "syncPolicy": {"automated": {"prune": true, "selfHeal": true}}}}),
    )
    .unwrap()
}

/// Polls `check` until it returns Some, for up to 20 s.
async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..200 {
        if let Some(value) = check().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

/// Waits until the live `settings` ConfigMap has `color`.
async fn wait_for_color(cluster: &Cluster, color: &str) {
    eventually(&format!("the color {color}"), async || {
        live_configmap(cluster, "settings")
            .await
            .filter(|cm| cm["data"]["color"] == color)
    })
    .await;
}

/// Commits and publishes `guestbook/settings.yaml` with `color`.
fn push_color(repo: &Fixture, color: &str) {
    repo.commit(
        color,
        &[("guestbook/settings.yaml", &CONFIGMAP.replace("blue", color))],
    );
    repo.publish();
}

async fn live_configmap(cluster: &Cluster, name: &str) -> Option<Value> {
    cluster
        .get("v1", "ConfigMap", "configmaps", Some("guestbook"), name)
        .await
        .ok()
}

/// The status of Application `name` once it has a condition.
async fn status_with_a_condition(cluster: &Cluster, what: &str, name: &str) -> Value {
    eventually(what, async || {
        let status = app_status(cluster, name).await;
        status["conditions"]
            .as_array()
            .filter(|c| !c.is_empty())
            .map(|_| status.clone())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushed_commit_is_synced_and_drift_is_reverted() {
    let w = world().await;
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    // Given an automated application.
    apps.create(
        &PostParams::default(),
        &application("guestbook", &w.url, "default"),
    )
    .await
    .unwrap();
    // Then its manifests are applied and its status says so.
    let live = eventually("the ConfigMap", async || {
        live_configmap(&w.cluster, "settings").await
    })
    .await;
    assert_eq!(live["data"]["color"], "blue");
    let first = w.repo.rev_parse("HEAD");
    let status = eventually("Synced", async || {
        let status = app_status(&w.cluster, "guestbook").await;
        (status["sync"]["status"] == "Synced" && status["health"]["status"] == "Healthy")
            .then_some(status)
    })
    .await;
    assert_eq!(status["sync"]["revision"], first.as_str());
    assert_eq!(status["history"][0]["revision"], first.as_str());

    // When a commit changes the manifest, then it is synced within a refresh.
    push_color(&w.repo, "green");
    wait_for_color(&w.cluster, "green").await;

    // When someone edits the live object, then self-heal reverts it.
    let cms = w
        .cluster
        .api("v1", "ConfigMap", "configmaps", Some("guestbook"));
    let edit = kube::api::PatchParams {
        field_manager: Some("kubectl-edit".into()),
        ..Default::default()
    };
    cms.patch(
        "settings",
        &edit,
        &kube::api::Patch::Merge(json!({"data": {"color": "red"}})),
    )
    .await
    .unwrap();
    wait_for_color(&w.cluster, "green").await;

    // When a file is deleted from Git, then prune deletes the object.
    w.repo.commit(
        "more",
        &[(
            "guestbook/extra.yaml",
            &CONFIGMAP.replace("settings", "extra"),
        )],
    );
    w.repo.publish();
    eventually("extra created", async || {
        live_configmap(&w.cluster, "extra").await
    })
    .await;
    w.repo.git(&["rm", "-q", "guestbook/extra.yaml"]);
    w.repo.commit("less", &[]);
    w.repo.publish();
    eventually("extra pruned", async || {
        live_configmap(&w.cluster, "extra")
            .await
            .is_none()
            .then_some(())
    })
    .await;
    let _ = w.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn project_rules_and_bad_specs_become_conditions_and_nothing_is_applied() {
    let w = world().await;
    let projects = w.cluster.api(
        "kiln.dev/v1alpha1",
        "AppProject",
        "appprojects",
        Some("kiln"),
    );
    projects
        .create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "AppProject",
            "metadata": {"name": "locked"}, "spec": {"sourceRepos": ["https://git.example.com/*"], "destinations": [{"namespace": "*"}]}})).unwrap())
        .await
        .unwrap();
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    apps.create(
        &PostParams::default(),
        &application("locked-out", &w.url, "locked"),
    )
    .await
    .unwrap();
    apps.create(
        &PostParams::default(),
        &application("no-project", &w.url, "missing"),
    )
    .await
    .unwrap();
    let mut missing_repo = application("no-repo", "git://127.0.0.1:1/nothing.git", "default");
    missing_repo.spec.source.path = "x".into();
    apps.create(&PostParams::default(), &missing_repo)
        .await
        .unwrap();
    // A Helm repository chart renders with the catalog's Plugin `helm`
    // (none here, which is said), not polled as a Git repository.
    let mut chart = application("chart", "https://charts.example.com", "default");
    chart.spec.source.chart = Some("web".into());
    apps.create(&PostParams::default(), &chart).await.unwrap();
    for (app, kind, words) in [
        ("locked-out", "ProjectViolation", "sourceRepos"),
        ("no-project", "InvalidSpec", "\"missing\" does not exist"),
        ("no-repo", "ComparisonError", "127.0.0.1:1"),
        (
            "chart",
            "InvalidSpec",
            "plugin \"helm\" is not in the catalog",
        ),
    ] {
        let status = status_with_a_condition(&w.cluster, kind, app).await;
        let condition = &status["conditions"][0];
        assert_eq!(condition["type"], kind, "{app}: {status}");
        assert!(
            condition["message"].as_str().unwrap().contains(words),
            "{app}: {status}"
        );
    }
    assert!(
        live_configmap(&w.cluster, "settings").await.is_none(),
        "nothing was applied"
    );
    let _ = w.stop.send(());
}

/// A team's repository cannot write outside its project: not into a
/// namespace its destinations do not allow (whatever the Application's own
/// destination), and not into the controller's namespace (an Application
/// there could claim any project) unless the project says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendered_objects_are_held_to_the_project_by_their_own_namespace() {
    let w = world().await;
    let escape = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: planted\n  namespace: kube-system\ndata: {a: b}\n";
    let claim = format!(
        "apiVersion: kiln.dev/v1alpha1\nkind: Application\nmetadata:\n  name: claimed\n  namespace: kiln\nspec:\n  project: default\n  source: {{repoURL: \"{}\", path: guestbook}}\n  destination: {{namespace: guestbook}}\n",
        w.url
    );
    w.repo.commit(
        "escapes",
        &[
            ("escape/settings.yaml", CONFIGMAP),
            ("escape/planted.yaml", escape),
            ("claim/app.yaml", &claim),
        ],
    );
    w.repo.publish();
    let projects = w.cluster.api(
        "kiln.dev/v1alpha1",
        "AppProject",
        "appprojects",
        Some("kiln"),
    );
    let project = |name: &str, namespace: &str, allow: bool| -> DynamicObject {
        serde_json::from_value(
            json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "AppProject",
            "metadata": {"name": name}, "spec": {"sourceRepos": ["*"],
                "destinations": [{"namespace": namespace}], "allowControllerNamespace": allow}}),
        )
        .unwrap()
    };
    for (name, namespace) in [("team", "guestbook"), ("wide", "*")] {
        projects
            .create(&PostParams::default(), &project(name, namespace, false))
            .await
            .unwrap();
    }
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    let mut escaping = application("escaping", &w.url, "team");
    escaping.spec.source.path = "escape".into();
    apps.create(&PostParams::default(), &escaping)
        .await
        .unwrap();
    let mut claiming = application("claiming", &w.url, "wide");
    claiming.spec.source.path = "claim".into();
    claiming.spec.destination.namespace = Some("kiln".into());
    apps.create(&PostParams::default(), &claiming)
        .await
        .unwrap();

    for (app, words) in [
        ("escaping", "ConfigMap kube-system/planted"),
        ("escaping", "\"kube-system\""),
        ("claiming", "allowControllerNamespace"),
    ] {
        let status = status_with_a_condition(&w.cluster, "a ProjectViolation", app).await;
        let condition = &status["conditions"][0];
        assert_eq!(condition["type"], "ProjectViolation", "{app}: {status}");
        assert!(
            condition["message"].as_str().unwrap().contains(words),
            "{app}: {words}: {status}"
        );
    }
    // The whole sync was refused: not even the allowed ConfigMap is there.
    assert!(live_configmap(&w.cluster, "settings").await.is_none());
    let planted = w
        .cluster
        .api("v1", "ConfigMap", "configmaps", Some("kube-system"));
    assert!(planted.get_opt("planted").await.unwrap().is_none());
    assert!(apps.get_opt("claimed").await.unwrap().is_none());

    // A project that allows the controller's namespace may do App-of-Apps.
    projects
        .patch(
            "wide",
            &PatchParams::apply("test").force(),
            &Patch::Apply(project("wide", "*", true)),
        )
        .await
        .unwrap();
    eventually("the claimed Application", async || {
        apps.get_opt("claimed").await.unwrap()
    })
    .await;
    let _ = w.stop.send(());
}

/// Commits the guestbook example (for the values renderer) under `dir`.
fn commit_guestbook(repo: &Fixture, dir: &str) {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(support::guestbook()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        files.push((
            format!("{dir}/{name}"),
            std::fs::read_to_string(&path).unwrap(),
        ));
    }
    let borrowed: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    repo.commit(dir, &borrowed);
    repo.publish();
}

/// A registry that accepts connections and never answers.
fn hanging_registry() -> (std::net::SocketAddr, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let thread = std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    (address, thread)
}

/// One plugin whose registry hangs must not stall the applications that
/// use other plugins: the catalog loads plugins one flight per reference,
/// not under one lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_plugin_registry_stalls_only_the_applications_that_use_it() {
    let w = world_tuned(ControllerConfig {
        resync: Duration::from_millis(300),
        catalog: controller::CatalogConfig {
            timeout: Duration::from_secs(600),
            ..controller::CatalogConfig::default()
        },
        ..ControllerConfig::default()
    })
    .await;
    let (registry, _thread) = hanging_registry();
    commit_guestbook(&w.repo, "web");
    let values = support::component("values").display().to_string();
    for (name, reference) in [
        ("hanging", format!("oci://{registry}/kiln/hanging:1.0")),
        ("values", values),
    ] {
        w.cluster
            .apply(
                "plugins",
                json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Plugin",
                    "metadata": {"name": name, "namespace": "kiln"},
                    "spec": {"kind": "renderer", "ref": reference, "verify": {"insecure": true}}}),
                "operator",
                false,
            )
            .await
            .unwrap();
    }
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    let mut stuck = application("stuck", &w.url, "default");
    stuck.spec.source.plugins = serde_json::from_value(json!([{"name": "hanging"}])).unwrap();
    apps.create(&PostParams::default(), &stuck).await.unwrap();
    // Let the stuck application's fetch start first.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut web = application("web", &w.url, "default");
    web.spec.source.path = "web".into();
    web.spec.destination.namespace = Some("guestbook".into());
    web.spec.source.plugins = serde_json::from_value(json!([{"name": "values"}])).unwrap();
    apps.create(&PostParams::default(), &web).await.unwrap();
    eventually("web Synced while the other registry hangs", async || {
        (app_status(&w.cluster, "web").await["sync"]["status"] == "Synced").then_some(())
    })
    .await;
    assert_ne!(
        app_status(&w.cluster, "stuck").await["sync"]["status"],
        "Synced"
    );
    let _ = w.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_repository_is_refused_unless_the_controller_allows_it() {
    // Given a controller with default settings and an application whose
    // repository is a path on the controller's own filesystem.
    let w = world().await;
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    let file_url = format!("file://{}", w.repo.bare.display());
    apps.create(
        &PostParams::default(),
        &application("local", &file_url, "default"),
    )
    .await
    .unwrap();
    // Then it is refused by name, and nothing is applied.
    let status = status_with_a_condition(&w.cluster, "the refusal", "local").await;
    let condition = &status["conditions"][0];
    assert_eq!(condition["type"], "InvalidSpec", "{status}");
    assert!(
        condition["message"]
            .as_str()
            .unwrap()
            .contains("--allow-file-repositories"),
        "{status}"
    );
    assert!(live_configmap(&w.cluster, "settings").await.is_none());
    let _ = w.stop.send(());

    // Given a controller that allows them (local trials): it syncs.
    let w = world_tuned(ControllerConfig {
        resync: Duration::from_millis(300),
        allow_file_repositories: true,
        ..ControllerConfig::default()
    })
    .await;
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    let file_url = format!("file://{}", w.repo.bare.display());
    apps.create(
        &PostParams::default(),
        &application("local", &file_url, "default"),
    )
    .await
    .unwrap();
    wait_for_color(&w.cluster, "blue").await;
    let _ = w.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_webhook_secret_deliveries_are_refused() {
    let w = world_with(Duration::from_secs(3600)).await;
    let state = Arc::new(controller::http::HttpState {
        ctx: w.ctx.clone(),
        webhook: controller::http::WebhookAuth::default(),
        ready: std::sync::atomic::AtomicBool::new(true),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, controller::http::router(state)).await });
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    apps.create(
        &PostParams::default(),
        &application("guestbook", &w.url, "default"),
    )
    .await
    .unwrap();
    let body = json!({"ref": "refs/heads/main", "repository": {"clone_url": w.url},
        "commits": [{"added": [], "modified": ["guestbook/settings.yaml"], "removed": []}]});
    let response = reqwest::Client::new()
        .post(format!("{endpoint}/api/webhook"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 403);
    let text = response.text().await.unwrap();
    assert!(text.contains("no webhook secret"), "{text}");
    let metrics = w.ctx.metrics.encode().unwrap();
    assert!(
        metrics.contains("kiln_webhooks_total{result=\"unconfigured\"} 1"),
        "{metrics}"
    );

    // Unless unsigned deliveries are allowed (local trials).
    let state = Arc::new(controller::http::HttpState {
        ctx: w.ctx.clone(),
        webhook: controller::http::WebhookAuth::new(None, true),
        ready: std::sync::atomic::AtomicBool::new(true),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, controller::http::router(state)).await });
    let response = reqwest::Client::new()
        .post(format!("{endpoint}/api/webhook"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let _ = w.stop.send(());
}

/// Every failure class ends in a condition that says why, down to the
/// cause: the path, the file and line, the plugin's own words, the
/// repository, the policy's complaint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditions_carry_the_whole_cause_of_each_failure() {
    let w = world().await;
    w.repo.commit(
        "broken",
        &[(
            "broken/bad.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x\n",
        )],
    );
    w.repo.publish();
    for (name, kind, reference) in [
        (
            "misbehave",
            "renderer",
            support::component("fixture-misbehave"),
        ),
        (
            "required-labels",
            "policy",
            support::component("required-labels"),
        ),
    ] {
        w.cluster
            .apply(
                "plugins",
                json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Plugin",
                    "metadata": {"name": name, "namespace": "kiln"},
                    "spec": {"kind": kind, "ref": reference.display().to_string(),
                        "verify": {"insecure": true}}}),
                "operator",
                false,
            )
            .await
            .unwrap();
    }
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    let mut missing = application("missing-path", &w.url, "default");
    missing.spec.source.path = "nowhere".into();
    let mut broken = application("invalid-yaml", &w.url, "default");
    broken.spec.source.path = "broken".into();
    let mut panics = application("plugin-error", &w.url, "default");
    panics.spec.source.plugins =
        serde_json::from_value(json!([{"name": "misbehave", "parameters": {"mode": "panic"}}]))
            .unwrap();
    let gone = application(
        "git-error",
        &w.url.replace("apps.git", "gone.git"),
        "default",
    );
    let mut policy = application("policy-error", &w.url, "default");
    policy.spec.policies = serde_json::from_value(json!([{"name": "required-labels"}])).unwrap();
    for app in [&missing, &broken, &panics, &gone, &policy] {
        apps.create(&PostParams::default(), app).await.unwrap();
    }
    for (app, words) in [
        (
            "missing-path",
            &["nowhere", "no such file or directory"][..],
        ),
        ("invalid-yaml", &["broken/bad.yaml:4", "invalid YAML"][..]),
        ("plugin-error", &["misbehave", "panics on purpose"][..]),
        ("git-error", &["gone.git"][..]),
        (
            "policy-error",
            &["required-labels", "setting `labels` is required"][..],
        ),
    ] {
        let status = status_with_a_condition(&w.cluster, app, app).await;
        let text = status.to_string();
        for word in words {
            assert!(text.contains(word), "{app}: {word:?} not in {text}");
        }
    }
    let _ = w.stop.send(());
}

/// A Plugin naming a file on the controller's filesystem is refused unless
/// the controller allows it: whoever writes Plugins must not make the
/// controller read its own files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_naming_controller_files_are_refused_by_default() {
    let w = world_full(ControllerConfig::default(), Duration::ZERO, false).await;
    w.cluster
        .apply(
            "plugins",
            json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Plugin",
                "metadata": {"name": "snoop", "namespace": "kiln"},
                "spec": {"kind": "renderer", "ref": "/etc/passwd", "verify": {"insecure": true}}}),
            "operator",
            false,
        )
        .await
        .unwrap();
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    let mut app = application("snooping", &w.url, "default");
    app.spec.source.plugins = serde_json::from_value(json!([{"name": "snoop"}])).unwrap();
    apps.create(&PostParams::default(), &app).await.unwrap();
    let status = status_with_a_condition(&w.cluster, "FilePluginNotAllowed", "snooping").await;
    assert_eq!(
        status["conditions"][0]["reason"], "FilePluginNotAllowed",
        "{status}"
    );
    let _ = w.stop.send(());
}

/// Deleting an Application whose project does not exist deletes nothing:
/// whoever recreates an Application under an old name with a made-up
/// project must not be able to delete what it once wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_an_application_of_a_missing_project_leaves_its_resources() {
    let w = world().await;
    let projects = w.cluster.api(
        "kiln.dev/v1alpha1",
        "AppProject",
        "appprojects",
        Some("kiln"),
    );
    projects
        .create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "AppProject",
            "metadata": {"name": "temp"}, "spec": {"sourceRepos": ["*"], "destinations": [{"namespace": "*"}]}})).unwrap())
        .await
        .unwrap();
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    let mut app = application("orphaned", &w.url, "temp");
    app.metadata.finalizers = Some(vec![kiln::api::RESOURCES_FINALIZER.into()]);
    apps.create(&PostParams::default(), &app).await.unwrap();
    eventually("the ConfigMap", async || {
        live_configmap(&w.cluster, "settings").await
    })
    .await;
    projects.delete("temp", &Default::default()).await.unwrap();
    apps.delete("orphaned", &Default::default()).await.unwrap();
    eventually("the Application gone", async || {
        apps.get_opt("orphaned")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        live_configmap(&w.cluster, "settings").await.is_some(),
        "left in place"
    );
    let _ = w.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_of_apps_creates_children_and_the_finalizer_cascades() {
    let w = world().await;
    // Given a root application whose directory holds a child Application.
    let child = format!(
        "apiVersion: kiln.dev/v1alpha1\nkind: Application\nmetadata:\n  name: child\n  namespace: kiln\n  finalizers: [resources-finalizer.kiln.dev]\nspec:\n  source: {{repoURL: \"{}\", path: guestbook}}\n  destination: {{namespace: guestbook}}\n  syncPolicy: {{automated: {{prune: true}}}}\n",
        w.url
    );
    w.repo.commit("apps", &[("apps/child.yaml", &child)]);
    w.repo.publish();
    let mut root = application("root", &w.url, "default");
    root.spec.source.path = "apps".into();
    root.spec.destination.namespace = Some("kiln".into());
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    apps.create(&PostParams::default(), &root).await.unwrap();
    // Then the child is created, and syncs its own source.
    eventually("the child's ConfigMap", async || {
        live_configmap(&w.cluster, "settings").await
    })
    .await;
    eventually("the child Synced", async || {
        (app_status(&w.cluster, "child").await["sync"]["status"] == "Synced").then_some(())
    })
    .await;

    // When the child leaves Git, then (prune) it is deleted, and its
    // finalizer deletes its resources first.
    w.repo.git(&["rm", "-q", "apps/child.yaml"]);
    w.repo.commit(
        "no more child",
        &[(
            "apps/placeholder.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: placeholder}\n",
        )],
    );
    w.repo.publish();
    eventually("the child deleted", async || {
        apps.get_opt("child").await.unwrap().is_none().then_some(())
    })
    .await;
    eventually("its ConfigMap deleted", async || {
        live_configmap(&w.cluster, "settings")
            .await
            .is_none()
            .then_some(())
    })
    .await;
    let _ = w.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_push_webhook_refreshes_only_the_applications_it_touches() {
    use hmac::Mac as _;
    // Polling is slow here: only the webhook can make this fast.
    let w = world_with(Duration::from_secs(3600)).await;
    let state = Arc::new(controller::http::HttpState {
        ctx: w.ctx.clone(),
        webhook: controller::http::WebhookAuth::new(Some("s3cret".into()), false),
        ready: std::sync::atomic::AtomicBool::new(true),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, controller::http::router(state)).await });
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    apps.create(
        &PostParams::default(),
        &application("guestbook", &w.url, "default"),
    )
    .await
    .unwrap();
    eventually("the first sync", async || {
        live_configmap(&w.cluster, "settings").await
    })
    .await;

    let http = reqwest::Client::new();
    let deliver = |files: Vec<&str>, secret: &str| {
        let body = json!({"ref": "refs/heads/main", "repository": {"clone_url": w.url},
            "commits": [{"added": [], "modified": files, "removed": []}]})
        .to_string();
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(body.as_bytes());
        let signature = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
        http.post(format!("{endpoint}/api/webhook"))
            .header("x-hub-signature-256", signature)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let forged = deliver(vec!["guestbook/settings.yaml"], "wrong")
        .await
        .unwrap();
    assert_eq!(forged.status().as_u16(), 401);

    // A README-only push refreshes nothing.
    w.repo.commit("docs", &[("README.md", "more docs\n")]);
    w.repo.publish();
    let readme: Value = deliver(vec!["README.md"], "s3cret")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(readme["refreshed"], json!([]));

    // A push touching the app's path refreshes it at once.
    push_color(&w.repo, "green");
    let touched: Value = deliver(vec!["guestbook/settings.yaml"], "s3cret")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(touched["refreshed"], json!(["guestbook"]));
    wait_for_color(&w.cluster, "green").await;

    let metrics = http
        .get(format!("{endpoint}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("kiln_reconciles_total{result=\"ok\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("kiln_webhooks_total{result=\"unauthorized\"} 1"),
        "{metrics}"
    );
    assert_eq!(
        http.get(format!("{endpoint}/healthz"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        200
    );
    let _ = w.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_under_what_an_overlay_read_refreshes_it() {
    use hmac::Mac as _;
    // Given an overlay at apps/prod that reads ../../base through the
    // kustomize plugin, and a controller that only polls hourly.
    let w = world_with(Duration::from_secs(3600)).await;
    w.repo.commit(
        "overlay",
        &[
            (
                "apps/prod/kustomization.yaml",
                "resources: [../../base]\nnamePrefix: prod-\n",
            ),
            ("base/kustomization.yaml", "resources: [settings.yaml]\n"),
            ("base/settings.yaml", CONFIGMAP),
        ],
    );
    w.repo.publish();
    let plugin = support::component("kustomize");
    w.cluster
        .apply(
            "plugins",
            json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Plugin",
                "metadata": {"name": "kustomize", "namespace": "kiln"},
                "spec": {"kind": "renderer", "ref": plugin.display().to_string(), "verify": {"insecure": true}}}),
            "operator",
            false,
        )
        .await
        .unwrap();
    let state = Arc::new(controller::http::HttpState {
        ctx: w.ctx.clone(),
        webhook: controller::http::WebhookAuth::new(Some("s3cret".into()), false),
        ready: std::sync::atomic::AtomicBool::new(true),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, controller::http::router(state)).await });
    let mut prod = application("prod", &w.url, "default");
    prod.spec.source.path = "apps/prod".into();
    prod.spec.source.plugins = serde_json::from_value(json!([{"name": "kustomize"}])).unwrap();
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    apps.create(&PostParams::default(), &prod).await.unwrap();
    eventually("the first sync", async || {
        live_configmap(&w.cluster, "prod-settings").await
    })
    .await;

    let http = reqwest::Client::new();
    let deliver = |files: Vec<&str>| {
        let body = json!({"ref": "refs/heads/main", "repository": {"clone_url": w.url},
            "commits": [{"added": [], "modified": files, "removed": []}]})
        .to_string();
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"s3cret").unwrap();
        mac.update(body.as_bytes());
        let signature = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
        http.post(format!("{endpoint}/api/webhook"))
            .header("x-hub-signature-256", signature)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    // A push elsewhere refreshes nothing.
    let readme: Value = deliver(vec!["README.md", "apps/staging/x.yaml"])
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(readme["refreshed"], json!([]));
    // When a push changes only the base the overlay read,
    w.repo.commit(
        "green base",
        &[("base/settings.yaml", &CONFIGMAP.replace("blue", "green"))],
    );
    w.repo.publish();
    let touched: Value = deliver(vec!["base/settings.yaml"])
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // Then the overlay is refreshed and synced at once.
    assert_eq!(touched["refreshed"], json!(["prod"]));
    eventually("the green base", async || {
        live_configmap(&w.cluster, "prod-settings")
            .await
            .filter(|cm| cm["data"]["color"] == "green")
    })
    .await;
    let _ = w.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_one_replica_leads_and_another_takes_over_when_it_stops() {
    use kiln::controller::leader::{Elector, LeaseConfig};
    let cluster = Cluster::start().await;
    let config = |identity: &str| LeaseConfig {
        identity: identity.into(),
        duration: Duration::from_secs(1),
        renew_every: Duration::from_millis(200),
        retry_every: Duration::from_millis(100),
        ..LeaseConfig::default()
    };
    let a = Elector::new(cluster.client.clone(), "default", config("a"));
    let b = Elector::new(cluster.client.clone(), "default", config("b"));
    assert!(
        a.try_acquire_or_renew().await.unwrap(),
        "a acquires the free lease"
    );
    assert!(
        !b.try_acquire_or_renew().await.unwrap(),
        "b cannot while a holds it"
    );
    assert!(a.try_acquire_or_renew().await.unwrap(), "a renews");
    // a stops renewing; b takes over once the lease has expired.
    tokio::time::timeout(Duration::from_secs(10), b.acquire())
        .await
        .expect("b leads after expiry");
    let lease = cluster
        .get(
            "coordination.k8s.io/v1",
            "Lease",
            "leases",
            Some("default"),
            "kiln-controller",
        )
        .await
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "b");
    assert_eq!(lease["spec"]["leaseTransitions"], 1);
    assert!(
        !a.try_acquire_or_renew().await.unwrap(),
        "a is not the leader any more"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_that_touches_nothing_the_app_read_costs_no_render() {
    let w = world().await;
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    apps.create(
        &PostParams::default(),
        &application("guestbook", &w.url, "default"),
    )
    .await
    .unwrap();
    eventually("the first sync", async || {
        live_configmap(&w.cluster, "settings").await
    })
    .await;
    let renders = w.ctx.metrics.renders.get();
    assert_eq!(renders, 1);

    // Given a commit that only changes the README, when it is reconciled,
    // then the render is reused.
    let readme = w.repo.commit("docs", &[("README.md", "new docs\n")]);
    w.repo.publish();
    eventually("the README commit compared", async || {
        (app_status(&w.cluster, "guestbook").await["sync"]["revision"] == readme.as_str())
            .then_some(())
    })
    .await;
    assert_eq!(
        w.ctx.metrics.renders.get(),
        renders,
        "no render for a README-only commit"
    );
    let (hits, _) = w.ctx.renderer.cache_stats();
    assert!(hits >= 1);

    // A commit inside the app's directory renders again.
    push_color(&w.repo, "green");
    wait_for_color(&w.cluster, "green").await;
    assert_eq!(w.ctx.metrics.renders.get(), renders + 1);
    let _ = w.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_every_cache_mid_run_changes_nothing_but_time() {
    let w = world().await;
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    apps.create(
        &PostParams::default(),
        &application("guestbook", &w.url, "default"),
    )
    .await
    .unwrap();
    eventually("the first sync", async || {
        live_configmap(&w.cluster, "settings").await
    })
    .await;
    // Given both caches deleted while the controller runs,
    for cache in ["cache", "renders"] {
        std::fs::remove_dir_all(w._dir.path().join(cache)).unwrap();
    }
    // when a commit arrives, then it is still synced.
    push_color(&w.repo, "green");
    wait_for_color(&w.cluster, "green").await;
    // The status is written when the reconcile ends, after the apply.
    let head = w.repo.rev_parse("HEAD");
    let status = eventually("the status at the new revision", async || {
        let status = app_status(&w.cluster, "guestbook").await;
        (status["sync"]["revision"] == head.as_str()).then_some(status)
    })
    .await;
    // (The catalog's plugin is unverified: that is the only condition.)
    assert!(
        status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|c| c["type"] == "InsecurePlugin"),
        "{status}"
    );
    assert_eq!(status["health"]["status"], "Healthy", "{status}");
    let _ = w.stop.send(());
}

/// Patches the live `settings` ConfigMap's color as another writer.
async fn edit_color(cluster: &Cluster, manager: &str, color: &str) {
    let cms = cluster.api("v1", "ConfigMap", "configmaps", Some("guestbook"));
    let params = kube::api::PatchParams {
        field_manager: Some(manager.into()),
        ..Default::default()
    };
    cms.patch(
        "settings",
        &params,
        &kube::api::Patch::Merge(json!({"data": {"color": color}})),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_edit_is_reverted_at_once_and_a_fighting_writer_is_backed_off() {
    // Given a resync of an hour: only the live watch can notice an edit.
    let w = world_tuned(ControllerConfig {
        resync: Duration::from_secs(3600),
        self_heal_backoff: controller::SelfHealBackoff {
            duration: Duration::from_millis(500),
            factor: 2,
            max: Duration::from_secs(20),
        },
        ..ControllerConfig::default()
    })
    .await;
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    apps.create(
        &PostParams::default(),
        &application("guestbook", &w.url, "default"),
    )
    .await
    .unwrap();
    eventually("Synced", async || {
        let status = app_status(&w.cluster, "guestbook").await;
        (status["sync"]["status"] == "Synced").then_some(())
    })
    .await;

    // When someone edits a managed object, then it is reverted within
    // seconds, not at the next resync.
    edit_color(&w.cluster, "kubectl-edit", "red").await;
    wait_for_color(&w.cluster, "blue").await;

    // When another controller keeps writing the field back, then Kiln
    // reverts it ever more slowly (0.5 s, 1 s, 2 s, 4 s, ...) instead of
    // fighting in a tight loop.
    let fight = std::time::Instant::now();
    let mut reverts = 0;
    while fight.elapsed() < Duration::from_secs(8) {
        let live = live_configmap(&w.cluster, "settings").await.unwrap();
        if live["data"]["color"] != "red" {
            reverts += 1;
            edit_color(&w.cluster, "fighter", "red").await;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    // The first write counts as one; without back-off a revert follows each
    // write within a debounce (~0.5 s): 12 or more (14 measured).
    assert!(
        (2..=7).contains(&reverts),
        "{reverts} reverts in 8 s against a writer that never gives up"
    );
    let backed_off = w
        .ctx
        .metrics
        .self_heals
        .get_or_create(&vec![("result".into(), "backed_off".into())])
        .get();
    assert!(
        backed_off > 0,
        "the back-off shows in kiln_self_heals_total"
    );
    let _ = w.stop.send(());
}

/// Runs the kiln binary against the world's cluster (blocking, off the
/// runtime's workers).
async fn kiln_cli(w: &World, home: &std::path::Path, args: &[&str]) -> std::process::Output {
    let kubeconfig = home.join("kubeconfig");
    if !kubeconfig.exists() {
        w.cluster.server.write_kubeconfig(&kubeconfig).unwrap();
    }
    let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    all.extend(["--kubeconfig".into(), kubeconfig.display().to_string()]);
    let home = home.to_owned();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = all.iter().map(String::as_str).collect();
        support::kiln_as_user(&home, &home, &args)
    })
    .await
    .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_sync_diff_and_rollback_from_the_cli() {
    let w = world_with(Duration::from_secs(3600)).await;
    let home = tempfile::tempdir().unwrap();
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    // Given an application without automated sync.
    let mut manual = application("manual", &w.url, "default");
    manual.spec.sync_policy = None;
    apps.create(&PostParams::default(), &manual).await.unwrap();
    eventually("OutOfSync", async || {
        let status = app_status(&w.cluster, "manual").await;
        (status["sync"]["status"] == "OutOfSync").then_some(())
    })
    .await;
    assert!(live_configmap(&w.cluster, "settings").await.is_none());

    // `kiln app diff` runs the controller's comparison here: Missing, exit 1;
    // it reads what it needs and starts no watch (the controller's are
    // already running).
    let watches = w.cluster.server.store().watches_started();
    let out = kiln_cli(
        &w,
        home.path(),
        &["app", "diff", "manual", "--color", "never"],
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        w.cluster.server.store().watches_started(),
        watches,
        "kiln app diff started watches"
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("Missing     ConfigMap guestbook/settings"),
        "{stdout}"
    );
    assert!(stdout.contains("+  color: blue"), "{stdout}");

    // `kiln app sync` asks the controller and prints its result.
    let out = kiln_cli(
        &w,
        home.path(),
        &["app", "sync", "manual", "--timeout", "20s"],
    )
    .await;
    let stdout = support::assert_success(&out);
    assert!(stdout.contains("ConfigMap/settings"), "{stdout}");
    assert!(stdout.contains("Created"), "{stdout}");
    assert!(stdout.contains("Succeeded: 1 created"), "{stdout}");
    assert_eq!(
        live_configmap(&w.cluster, "settings").await.unwrap()["data"]["color"],
        "blue"
    );
    let first = w.repo.rev_parse("HEAD");

    // A new commit is not applied by itself; a second sync applies it.
    push_color(&w.repo, "green");
    let out = kiln_cli(
        &w,
        home.path(),
        &["app", "diff", "manual", "--color", "never"],
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("OutOfSync   ConfigMap guestbook/settings"));
    let out = kiln_cli(
        &w,
        home.path(),
        &["app", "sync", "manual", "--timeout", "20s"],
    )
    .await;
    assert!(support::assert_success(&out).contains("Configured"));
    assert_eq!(
        live_configmap(&w.cluster, "settings").await.unwrap()["data"]["color"],
        "green"
    );
    let out = kiln_cli(
        &w,
        home.path(),
        &["app", "diff", "manual", "--color", "never"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "in sync: {}", text(&out.stdout));

    // `kiln app rollback` returns to the previous entry of the history.
    let out = kiln_cli(&w, home.path(), &["app", "history", "manual"]).await;
    let history = support::assert_success(&out);
    assert_eq!(history.lines().count(), 3, "{history}");

    // `list` and `get` print as kubectl users expect: -o wide, json, yaml.
    let out = kiln_cli(
        &w,
        home.path(),
        &["app", "list", "-n", "kiln", "-o", "wide"],
    )
    .await;
    let table = support::assert_success(&out);
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.contains("DESTINATION") && header.contains("REPO"),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("manual ") && l.contains(&w.url)),
        "{table}"
    );
    let out = kiln_cli(&w, home.path(), &["app", "get", "manual", "-o", "json"]).await;
    let app: serde_json::Value = serde_json::from_str(&support::assert_success(&out)).unwrap();
    assert_eq!(app["metadata"]["name"], "manual");
    assert_eq!(app["kind"], "Application");
    let out = kiln_cli(&w, home.path(), &["app", "list", "-o", "yaml"]).await;
    let list: serde_json::Value = serde_yaml::from_str(&support::assert_success(&out)).unwrap();
    assert_eq!(list["kind"], "ApplicationList");
    assert_eq!(list["items"][0]["metadata"]["name"], "manual", "{list}");
    // A missing one: one plain line, as kubectl says it.
    let out = kiln_cli(&w, home.path(), &["app", "get", "nope"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).trim_end(),
        "error: Application nope: applications.kiln.dev \"nope\" not found"
    );
    let out = kiln_cli(
        &w,
        home.path(),
        &["app", "rollback", "manual", "--timeout", "20s"],
    )
    .await;
    let stdout = support::assert_success(&out);
    assert!(stdout.contains("Succeeded"), "{stdout}");
    assert!(text(&out.stderr).contains(&format!("history id 1 (revision {first})")));
    assert_eq!(
        live_configmap(&w.cluster, "settings").await.unwrap()["data"]["color"],
        "blue"
    );
    let status = app_status(&w.cluster, "manual").await;
    assert_eq!(
        status["operationState"]["initiatedBy"],
        "kiln app rollback 1"
    );
    assert_eq!(status["history"][2]["revision"], first.as_str());
    // The next comparison is against the target revision again.
    eventually("OutOfSync against HEAD after the rollback", async || {
        let status = app_status(&w.cluster, "manual").await;
        (status["sync"]["status"] == "OutOfSync").then_some(())
    })
    .await;
    let app = apps.get("manual").await.unwrap();
    assert!(
        !app.metadata
            .annotations
            .unwrap_or_default()
            .contains_key("kiln.dev/operation"),
        "the request is removed once carried out"
    );

    // A dry run reports and changes nothing.
    let out = kiln_cli(
        &w,
        home.path(),
        &["app", "sync", "manual", "--dry-run", "--timeout", "20s"],
    )
    .await;
    let stdout = support::assert_success(&out);
    assert_eq!(
        stdout.matches("(dry run)").count(),
        1,
        "said once: {stdout}"
    );
    assert_eq!(
        live_configmap(&w.cluster, "settings").await.unwrap()["data"]["color"],
        "blue"
    );

    // Refusals: rollback or a revision pin with automated sync enabled, an
    // unknown history id, a garbled request.
    apps.create(
        &PostParams::default(),
        &application("auto", &w.url, "default"),
    )
    .await
    .unwrap();
    let out = kiln_cli(&w, home.path(), &["app", "rollback", "auto"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("cannot roll back Application auto: automated sync is enabled"),
        "{}",
        text(&out.stderr)
    );
    let out = kiln_cli(
        &w,
        home.path(),
        &["app", "sync", "auto", "--revision", &first],
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("automated sync is enabled and follows targetRevision \"HEAD\"")
    );
    let out = kiln_cli(&w, home.path(), &["app", "rollback", "manual", "9"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("has no history id 9 (it has: 1, 2, 3)"),
        "{}",
        text(&out.stderr)
    );
    apps.patch(
        "manual",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(
            json!({"metadata": {"annotations": {"kiln.dev/operation": "{\"sync\": 1}"}}}),
        ),
    )
    .await
    .unwrap();
    let condition = eventually("InvalidOperation", async || {
        let status = app_status(&w.cluster, "manual").await;
        status["conditions"].as_array().and_then(|c| {
            c.iter()
                .find(|c| c["reason"] == "InvalidOperation")
                .cloned()
        })
    })
    .await;
    assert!(
        condition["message"]
            .as_str()
            .unwrap()
            .contains("kiln.dev/operation is not a valid operation")
    );
    let _ = w.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destination_clusters_and_repository_credentials_come_from_secrets() {
    use base64::Engine as _;
    use k8s_openapi::api::core::v1::Secret;
    use kiln::controller::secrets::{SecretType, labeled};

    let w = world().await;
    // A second cluster, over TLS with its own CA and token.
    let staging = Cluster::with(Config {
        tls: true,
        ..Config::default()
    })
    .await;
    staging
        .apply(
            "namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "guestbook"}}),
            "test",
            false,
        )
        .await
        .unwrap();
    // A private repository behind basic auth.
    let root = tempfile::tempdir().unwrap();
    let private = Fixture::new(root.path(), "private");
    private.commit(
        "first",
        &[(
            "guestbook/settings.yaml",
            &CONFIGMAP.replace("blue", "private"),
        )],
    );
    private.publish();
    let http = support::git::HttpBackend::start(root.path(), Some("kiln:s3cr3t-t0ken"));
    let url = http.url("private");

    // Given an application aimed at a cluster nobody registered: a
    // condition naming it, nothing applied anywhere.
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    let mut app = application("remote", &url, "default");
    app.spec.destination.name = Some("staging".into());
    apps.create(&PostParams::default(), &app).await.unwrap();
    let reason = |wanted: &'static str| {
        let cluster = &w.cluster;
        async move {
            eventually(wanted, async || {
                let status = app_status(cluster, "remote").await;
                status["conditions"]
                    .as_array()
                    .and_then(|c| c.iter().find(|c| c["reason"] == wanted).cloned())
            })
            .await
        }
    };
    let condition = reason("UnknownDestination").await;
    assert!(
        condition["message"]
            .as_str()
            .unwrap()
            .contains("destination name \"staging\" is not registered"),
        "{condition}"
    );

    // When the cluster is registered (Argo CD's Secret layout) but the
    // repository's credentials are wrong: an authentication condition that
    // never shows the password.
    let secrets: Api<Secret> = Api::namespaced(w.cluster.client.clone(), "kiln");
    let ca = base64::engine::general_purpose::STANDARD.encode(staging.server.ca_pem().unwrap());
    let config = json!({"bearerToken": "kiln-dev", "tlsClientConfig": {"caData": ca}}).to_string();
    secrets
        .create(
            &PostParams::default(),
            &labeled(
                "staging",
                SecretType::Cluster,
                &[
                    ("name", "staging"),
                    ("server", staging.server.url()),
                    ("config", &config),
                ],
            ),
        )
        .await
        .unwrap();
    let base = url.trim_end_matches("private").to_owned();
    let creds = |password: &str| {
        labeled(
            "team-repos",
            SecretType::RepoCreds,
            &[("url", &base), ("username", "kiln"), ("password", password)],
        )
    };
    secrets
        .create(&PostParams::default(), &creds("wrong-password"))
        .await
        .unwrap();
    let condition = reason("SourceUnavailable").await;
    let status = app_status(&w.cluster, "remote").await.to_string();
    assert!(!status.contains("wrong-password"), "{status}");
    assert!(
        condition["message"].as_str().unwrap().contains(&url),
        "{condition}"
    );

    // When the credentials are fixed, then the app syncs to the other
    // cluster, and only there.
    secrets
        .replace("team-repos", &PostParams::default(), &{
            let mut fixed = creds("s3cr3t-t0ken");
            fixed.metadata.resource_version = secrets
                .get("team-repos")
                .await
                .unwrap()
                .metadata
                .resource_version;
            fixed
        })
        .await
        .unwrap();
    eventually("Synced on staging", async || {
        let status = app_status(&w.cluster, "remote").await;
        (status["sync"]["status"] == "Synced").then_some(())
    })
    .await;
    let remote = live_configmap(&staging, "settings").await.unwrap();
    assert_eq!(remote["data"]["color"], "private");
    assert!(live_configmap(&w.cluster, "settings").await.is_none());
    let _ = w.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_app_of_apps_settles_with_a_plugin_chain_and_a_blocked_child() {
    // Given the README demo's tree (examples/gitops + examples/guestbook)
    // in a Git repository, and its plugin catalog and project.
    let w = world().await;
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let read = |path: &std::path::Path| {
        std::fs::read_to_string(path)
            .unwrap()
            .replace("REPO_URL", &w.url)
    };
    let mut files = Vec::new();
    for (dir, into) in [
        ("gitops/apps", "apps"),
        ("gitops/settings", "settings"),
        ("guestbook", "guestbook"),
    ] {
        for entry in std::fs::read_dir(examples.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            files.push((format!("{into}/{name}"), read(&path)));
        }
    }
    w.repo.git(&["rm", "-rq", "guestbook"]);
    let borrowed: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    w.repo.commit("the demo's applications", &borrowed);
    w.repo.publish();
    // The plugins signed with a release key, as scripts/demo does.
    let signed = tempfile::tempdir().unwrap();
    let key = kiln::trust::PrivateKey::generate();
    std::fs::write(signed.path().join("release.pub"), key.public_key().to_pem()).unwrap();
    for name in ["values", "required-labels"] {
        let bytes = std::fs::read(support::component(name)).unwrap();
        let file = signed.path().join(format!("{name}.wasm"));
        std::fs::write(&file, &bytes).unwrap();
        std::fs::write(
            signed.path().join(format!("{name}.wasm.sig")),
            key.sign(&bytes),
        )
        .unwrap();
    }
    let dir = signed.path().display().to_string();
    let catalog = read(&examples.join("gitops/catalog.yaml"))
        .replace("PLUGINS", &dir)
        .replace("KEYS", &dir);
    for document in serde_yaml::Deserializer::from_str(&catalog) {
        let object: Value = serde::Deserialize::deserialize(document).unwrap();
        let plural = match object["kind"].as_str().unwrap() {
            "Plugin" => "plugins",
            "AppProject" => "appprojects",
            _ => "applications",
        };
        w.cluster
            .apply(plural, object, "operator", false)
            .await
            .unwrap();
    }

    // Then the root creates its three children: the plugin-rendered one and
    // the plain one become Synced and Healthy, the one whose project policy
    // fails is blocked with its findings, and nothing of it is applied.
    for name in ["guestbook", "settings"] {
        eventually(name, async || {
            let status = app_status(&w.cluster, name).await;
            (status["sync"]["status"] == "Synced" && status["health"]["status"] == "Healthy")
                .then_some(())
        })
        .await;
    }
    let deployments = w
        .cluster
        .api("apps/v1", "Deployment", "deployments", Some("guestbook"));
    let web = deployments.get("guestbook-frontend").await.unwrap();
    assert_eq!(
        web.data["spec"]["replicas"], 2,
        "the Application's parameter"
    );
    let billing = eventually("billing blocked", async || {
        let status = app_status(&w.cluster, "billing").await;
        let blocked = status["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "PolicyBlocked"));
        blocked.then_some(status)
    })
    .await;
    let findings = billing["policy"]["findings"].to_string();
    assert!(findings.contains("cost-center"), "{findings}");
    let blocked = w
        .cluster
        .api("apps/v1", "Deployment", "deployments", Some("billing"));
    assert!(
        blocked
            .get_opt("guestbook-frontend")
            .await
            .unwrap()
            .is_none()
    );
    let metrics = w.ctx.metrics.encode().unwrap();
    for series in [
        "kiln_plugin_call_duration_seconds_count{plugin=\"values\",world=\"renderer\"}",
        "kiln_plugin_call_duration_seconds_count{plugin=\"required-labels\",world=\"policy\"}",
        "kiln_syncs_total{outcome=\"succeeded\"}",
    ] {
        assert!(metrics.contains(series), "{series} in {metrics}");
    }
    let _ = w.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_asks_git_at_once() {
    // Given ref lookups reused for an hour and a resync of an hour.
    let w = world_git(
        ControllerConfig {
            resync: Duration::from_secs(3600),
            ..ControllerConfig::default()
        },
        Duration::from_secs(3600),
    )
    .await;
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    apps.create(
        &PostParams::default(),
        &application("guestbook", &w.url, "default"),
    )
    .await
    .unwrap();
    wait_for_color(&w.cluster, "blue").await;
    push_color(&w.repo, "green");
    // When someone asks for a refresh (what `kiln app refresh` writes), then
    // the new commit is found without waiting for the lookup to expire.
    apps.patch(
        "guestbook",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(
            json!({"metadata": {"annotations": {"kiln.dev/refresh": "2026-12-01T08:00:00Z"}}}),
        ),
    )
    .await
    .unwrap();
    wait_for_color(&w.cluster, "green").await;
    // The same request again changes nothing: a newer commit waits for the
    // lookup to expire (or for the next request).
    w.repo.commit(
        "red",
        &[("guestbook/settings.yaml", &CONFIGMAP.replace("blue", "red"))],
    );
    w.repo.publish();
    apps.patch(
        "guestbook",
        &kube::api::PatchParams::default(),
        // Another annotation: a reconcile, with the same refresh request.
        &kube::api::Patch::Merge(json!({"metadata": {"annotations": {"example.com/note": "x"}}})),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        live_configmap(&w.cluster, "settings").await.unwrap()["data"]["color"],
        "green"
    );
    let _ = w.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_plugins_run_only_when_their_signatures_verify() {
    use kiln::artifact::{CosignSignature, Fetcher, PluginRef, RegistryCredentials, Store};
    use kiln::trust::PrivateKey;

    let Some(registry) = support::require(support::Tool::DockerRegistry) else {
        return;
    };
    let registry = support::registry::Registry::start(&registry, None);
    // Tags resolved again at every reconcile, so a moved tag shows at once.
    let w = world_tuned(ControllerConfig {
        resync: Duration::from_millis(300),
        catalog: controller::CatalogConfig {
            resolve_interval: Duration::ZERO,
            ..controller::CatalogConfig::default()
        },
        ..ControllerConfig::default()
    })
    .await;
    // The guestbook example, for the values renderer.
    commit_guestbook(&w.repo, "web");

    // The component in a registry, under a tag.
    let store = tempfile::tempdir().unwrap();
    let fetcher = Fetcher::new(
        Store::open(store.path()).unwrap(),
        RegistryCredentials::none(),
        Duration::from_secs(10),
    );
    let tag = PluginRef::parse(&format!("oci://{}/kiln/values:1.0", registry.host())).unwrap();
    let values = std::fs::read(support::component("values")).unwrap();
    let manifest = fetcher.push(&values, &tag).await.unwrap();
    let release = PrivateKey::generate();
    let stranger = PrivateKey::generate();
    let sign = async |key: &PrivateKey, manifest| {
        let PluginRef::Oci {
            repository, tag: t, ..
        } = &tag
        else {
            unreachable!()
        };
        let resolved = PluginRef::Oci {
            repository: repository.clone(),
            tag: t.clone(),
            digest: Some(manifest),
        };
        let payload = CosignSignature::payload_for(repository, &manifest);
        let signature = CosignSignature {
            signature: key.sign(&payload),
            payload,
        };
        fetcher
            .push_cosign_signature(&resolved, signature)
            .await
            .unwrap();
    };

    // The catalog: one plugin per way of trusting it.
    let key = |k: &PrivateKey| json!({"anyOf": [{"key": k.public_key().to_pem()}]});
    for (name, verify) in [
        ("signed", Some(key(&release))),
        ("stranger", Some(key(&stranger))),
        ("dev", Some(json!({"insecure": true}))),
        ("unconfigured", None),
    ] {
        let mut spec = json!({"kind": "renderer", "ref": tag.to_string()});
        if let Some(verify) = verify {
            spec["verify"] = verify;
        }
        w.cluster
            .apply(
                "plugins",
                json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Plugin",
                "metadata": {"name": name, "namespace": "kiln"}, "spec": spec}),
                "operator",
                false,
            )
            .await
            .unwrap();
    }
    w.cluster
        .apply(
            "appprojects",
            json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "AppProject",
            "metadata": {"name": "secure", "namespace": "kiln"},
            "spec": {"sourceRepos": ["*"], "destinations": [{"namespace": "*"}],
                "clusterResourceWhitelist": [{"group": "*", "kind": "*"}],
                "pluginVerification": key(&release)}}),
            "operator",
            false,
        )
        .await
        .unwrap();
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    for (app, plugin, project) in [
        ("web", "signed", "default"),
        ("other", "stranger", "default"),
        ("dev", "dev", "default"),
        ("raw", "unconfigured", "default"),
        ("strict", "dev", "secure"),
    ] {
        let app: Application = serde_json::from_value(json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": app, "namespace": "kiln"},
            "spec": {"project": project, "source": {"repoURL": w.url, "path": "web", "plugins": [{"name": plugin}]},
                "destination": {"namespace": app},
                "syncPolicy": {"automated": {"prune": true}, "syncOptions": ["CreateNamespace=true"]}}}))
        .unwrap();
        apps.create(&PostParams::default(), &app).await.unwrap();
    }
    // The message of condition `reason` once it says `needle`.
    let condition = async |app: &str, reason: &str, needle: &str| -> String {
        eventually(&format!("{app}: {reason}: {needle}"), async || {
            let status = app_status(&w.cluster, app).await;
            status["conditions"].as_array().and_then(|c| {
                c.iter()
                    .filter(|c| c["reason"] == reason)
                    .map(|c| c["message"].as_str().unwrap_or_default().to_owned())
                    .find(|m| m.contains(needle))
            })
        })
        .await
    };

    // Unsigned: refused, naming the plugin and where signatures were looked for.
    let message = condition("web", "SignatureVerificationFailed", "no signature found").await;
    assert!(message.contains("plugin \"signed\""), "{message}");
    assert!(
        message.contains("no signature found (looked for the cosign signature tag sha256-"),
        "{message}"
    );
    // No verify at all; insecure in a project that requires signatures.
    let message = condition("raw", "VerificationNotConfigured", "").await;
    assert!(
        message.contains("plugin \"unconfigured\" has no spec.verify"),
        "{message}"
    );
    let message = condition("strict", "InsecurePluginRefused", "").await;
    assert!(
        message.contains("project \"secure\" requires its plugins to be signed"),
        "{message}"
    );
    // Insecure: runs, and says so on the Application.
    let message = condition("dev", "VerificationDisabled", "").await;
    assert!(
        message.contains("plugin \"dev\" runs unverified"),
        "{message}"
    );

    // Signed by the release key: runs. Signed by another key only: refused.
    sign(&release, manifest).await;
    let deployments = |ns: &str| {
        w.cluster
            .api("apps/v1", "Deployment", "deployments", Some(ns))
    };
    eventually("web deployed", async || {
        deployments("web").get_opt("web-frontend").await.unwrap()
    })
    .await;
    let message = condition(
        "other",
        "SignatureVerificationFailed",
        "not by a trusted key",
    )
    .await;
    assert!(
        message.contains("signed, but not by a trusted key"),
        "{message}"
    );
    assert!(
        deployments("other")
            .get_opt("other-frontend")
            .await
            .unwrap()
            .is_none()
    );

    // The tag moves to another component: detected, verified, refused, and
    // what runs stays as it was.
    let other = std::fs::read(support::component("required-labels")).unwrap();
    let moved = fetcher.push(&other, &tag).await.unwrap();
    assert_ne!(moved, manifest);
    let message = condition(
        "web",
        "SignatureVerificationFailed",
        &kiln::digest::Digest::of(&other).to_string(),
    )
    .await;
    assert!(
        message.contains(&kiln::digest::Digest::of(&other).to_string()),
        "{message}"
    );
    assert!(message.contains("no signature found"), "{message}");
    assert!(
        deployments("web")
            .get_opt("web-frontend")
            .await
            .unwrap()
            .is_some()
    );
    let _ = w.stop.send(());
}

/// Registers the required-labels policy plugin (unverified, as the tests'
/// catalogs are).
async fn required_labels_plugin(cluster: &Cluster) {
    cluster
        .apply(
            "plugins",
            json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Plugin",
                "metadata": {"name": "required-labels", "namespace": "kiln"},
                "spec": {"kind": "policy",
                    "ref": support::component("required-labels").display().to_string(),
                    "verify": {"insecure": true}}}),
            "operator",
            false,
        )
        .await
        .unwrap();
}

/// An Application whose settings ConfigMap must carry a `team` label, in
/// warn mode (it syncs anyway), deleted with its resources.
fn labelled_application(name: &str, url: &str) -> Application {
    let mut app = application(name, url, "default");
    app.spec.policies = serde_json::from_value(
        json!([{"name": "required-labels", "mode": "warn", "settings": {"labels": "team"}}]),
    )
    .unwrap();
    app.metadata.finalizers = Some(vec![kiln::api::RESOURCES_FINALIZER.into()]);
    app
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_report_follows_the_findings_and_goes_with_the_application() {
    // Given a cluster serving the PolicyReport CRD, and an Application
    // whose ConfigMap lacks the label its policy requires.
    let w = world().await;
    required_labels_plugin(&w.cluster).await;
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    apps.create(
        &PostParams::default(),
        &labelled_application("labelled", &w.url),
    )
    .await
    .unwrap();
    let reports = w.cluster.api(
        "wgpolicyk8s.io/v1alpha2",
        "PolicyReport",
        "policyreports",
        Some("guestbook"),
    );
    // Then its findings are a PolicyReport in the destination namespace.
    let report = eventually("the report", async || {
        let found = reports.get_opt("kiln-labelled").await.ok().flatten()?;
        let value = serde_json::to_value(found).unwrap();
        value["results"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
            .then_some(value)
    })
    .await;
    assert_eq!(
        report["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "kiln"
    );
    assert_eq!(
        report["metadata"]["annotations"]["kiln.dev/application"],
        "kiln/labelled"
    );
    assert_eq!(
        report["summary"],
        json!({"pass": 0, "fail": 0, "warn": 1, "error": 0, "skip": 0})
    );
    let result = &report["results"][0];
    assert_eq!(result["policy"], "required-labels");
    assert_eq!(result["result"], "warn");
    assert_eq!(result["severity"], "high");
    // Named where it lands: policies review objects as they will be applied.
    assert_eq!(
        result["resources"][0],
        json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "settings", "namespace": "guestbook"})
    );
    assert!(
        result["message"]
            .as_str()
            .unwrap()
            .contains("missing required label `team`")
    );
    let series =
        "kiln_policy_findings{policy=\"required-labels\",severity=\"error\",mode=\"warn\"} 1\n";
    let metrics = w.ctx.metrics.encode().unwrap();
    assert!(metrics.contains(series), "{metrics}");

    // When Git gives the ConfigMap its label, then the report is emptied.
    w.repo.commit(
        "labelled",
        &[(
            "guestbook/settings.yaml",
            &CONFIGMAP.replace("name: settings", "name: settings\n  labels: {team: a}"),
        )],
    );
    w.repo.publish();
    eventually("the report emptied", async || {
        let found = reports.get_opt("kiln-labelled").await.ok().flatten()?;
        let value = serde_json::to_value(found).unwrap();
        (value["results"].as_array().is_none_or(Vec::is_empty) && value["summary"]["warn"] == 0)
            .then_some(())
    })
    .await;
    let metrics = w.ctx.metrics.encode().unwrap();
    assert!(!metrics.contains("kiln_policy_findings{"), "{metrics}");

    // When the Application is deleted, then its report goes with it.
    apps.delete("labelled", &Default::default()).await.unwrap();
    eventually("the report deleted", async || {
        reports
            .get_opt("kiln-labelled")
            .await
            .ok()
            .filter(Option::is_none)
            .map(|_| ())
    })
    .await;
    let _ = w.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_policy_report_crd_the_findings_stay_in_the_status() {
    // Given a cluster that does not serve the PolicyReport CRD.
    let w = world_crds(
        ControllerConfig {
            resync: Duration::from_millis(300),
            ..ControllerConfig::default()
        },
        Duration::ZERO,
        true,
        false,
    )
    .await;
    required_labels_plugin(&w.cluster).await;
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    apps.create(
        &PostParams::default(),
        &labelled_application("labelled", &w.url),
    )
    .await
    .unwrap();
    // Then the Application syncs, its findings in its status, no condition.
    let status = eventually("synced with findings", async || {
        let status = app_status(&w.cluster, "labelled").await;
        (status["sync"]["status"] == "Synced"
            && status["policy"]["findings"]
                .as_array()
                .is_some_and(|f| !f.is_empty()))
        .then_some(status)
    })
    .await;
    // (The catalog's plugin is unverified: that is the only condition.)
    assert!(
        status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|c| c["type"] == "InsecurePlugin"),
        "{status}"
    );
    assert_eq!(status["health"]["status"], "Healthy", "{status}");
    let _ = w.stop.send(());
}

const PRIVILEGED_WEB: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 10
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: nginx:1.27
        securityContext: {privileged: true}
";

const RESTRICTED_WEB: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 10
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: nginx:1.27
        securityContext:
          allowPrivilegeEscalation: false
          runAsNonRoot: true
          capabilities: {drop: [ALL]}
          seccompProfile: {type: RuntimeDefault}
";

/// The security team's ValidatingAdmissionPolicy: at most `max` replicas.
fn replicas_policy(max: u32) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: replicas.example.com}}
spec:
  matchConstraints:
    resourceRules:
    - {{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}}
  validations:
  - expression: object.spec.replicas <= {max}
"
    )
}

const REPLICAS_BINDING: &str = "\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replicas-binding}
spec:
  policyName: replicas.example.com
  validationActions: [Deny]
";

/// What an application team would ship to defeat a policy reading its tree:
/// a policy that allows everything, at the paths the settings name.
const PERMISSIVE_POLICY: &str = "\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replicas.example.com}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: ['*'], apiVersions: ['*'], operations: [CREATE], resources: ['*']}
  validations:
  - expression: 'true'
";

/// The security team's repository `policies`, served beside the apps',
/// with `files` committed: the fixture and its URL.
fn policy_repository(w: &World, files: &[(&str, &str)]) -> (Fixture, String) {
    let repo = Fixture::new(w._dir.path(), "policies");
    repo.commit("policies", files);
    repo.publish();
    (repo, w._daemon.url("policies"))
}

/// Registers the first-party policy component `name` as the Plugin `name`
/// (unverified: tests only).
async fn install_policy_plugin(cluster: &Cluster, name: &str) {
    cluster
        .apply(
            "plugins",
            json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Plugin",
                "metadata": {"name": name, "namespace": "kiln"},
                "spec": {"kind": "policy", "ref": support::component(name).display().to_string(),
                    "verify": {"insecure": true}}}),
            "operator",
            false,
        )
        .await
        .unwrap();
}

/// The AppProject `secure`: the world's repository, any namespace, and
/// `policies`.
async fn secure_project(w: &World, policies: Value) {
    w.cluster
        .apply(
            "appprojects",
            json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "AppProject",
                "metadata": {"name": "secure", "namespace": "kiln"},
                "spec": {"sourceRepos": [w.url.clone()], "destinations": [{"namespace": "*"}],
                    "policies": policies}}),
            "security",
            false,
        )
        .await
        .unwrap();
}

/// Like [`eventually`], for up to 90 s (policy components compile first).
async fn eventually_long<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..900 {
        if let Some(value) = check().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

/// The project's mandatory policies: `pod-security` (restricted) and the
/// ValidatingAdmissionPolicies of `vap/`, both read from `policies` (the
/// security team's repository), in `mode`; `pod_security_repo` overrides
/// pod-security's repository.
fn secure_policies(policies: &str, pod_security_repo: &str, mode: &str) -> Value {
    json!([
        {"name": "pod-security", "mode": mode, "settings": {"level": "restricted"},
         "source": {"repoURL": pod_security_repo, "path": "psa"}},
        {"name": "vap", "mode": mode,
         "settings": {"policy": "policy.yaml", "binding": "binding.yaml"},
         "source": {"repoURL": policies, "targetRevision": "main", "path": "vap"}},
    ])
}

/// The security team's Kyverno ClusterPolicy (`validationFailureAction`
/// as given): no privileged containers, written for Pods (autogen applies
/// it to the Deployment's template).
fn kyverno_policy(action: &str) -> String {
    format!(
        "apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {{name: disallow-privileged-containers}}
spec:
  validationFailureAction: {action}
  rules:
  - name: privileged-containers
    match:
      any:
      - resources: {{kinds: [Pod]}}
    validate:
      message: Privileged mode is disallowed.
      pattern:
        spec:
          containers:
          - =(securityContext):
              =(privileged): \"false\"
"
    )
}

/// Issue 40: a project's mandatory Kyverno policy, from the security team's
/// repository, blocks a privileged Deployment with nothing applied; when
/// the team switches it to Audit the application is applied with warnings,
/// and the PolicyReport names the Kyverno policy and rule of each result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_s_kyverno_policy_blocks_then_audits_naming_its_rules() {
    let w = world().await;
    let policies_repo = Fixture::new(w._dir.path(), "policies");
    policies_repo.commit(
        "kyverno",
        &[("kyverno/privileged.yaml", &kyverno_policy("Enforce"))],
    );
    policies_repo.publish();
    let policies = w._daemon.url("policies");
    w.repo
        .commit("privileged web", &[("guestbook/web.yaml", PRIVILEGED_WEB)]);
    w.repo.publish();
    install_policy_plugin(&w.cluster, "kyverno").await;
    secure_project(
        &w,
        json!([{"name": "kyverno", "mode": "enforce",
            "settings": {"policy": "."},
            "source": {"repoURL": policies, "targetRevision": "main", "path": "kyverno"}}]),
    )
    .await;
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    apps.create(
        &PostParams::default(),
        &application("web", &w.url, "secure"),
    )
    .await
    .unwrap();

    // Enforce: blocked, nothing applied, the finding naming its rule.
    let deployments = w
        .cluster
        .api("apps/v1", "Deployment", "deployments", Some("guestbook"));
    let blocked = eventually_long("web blocked by the Kyverno policy", async || {
        let status = app_status(&w.cluster, "web").await;
        (status["policy"]["blocked"] == true).then_some(status)
    })
    .await;
    let finding = &blocked["policy"]["findings"][0];
    assert_eq!(finding["severity"], "error", "{blocked}");
    assert_eq!(
        finding["rule"],
        json!({"policy": "disallow-privileged-containers", "name": "autogen-privileged-containers"}),
        "{blocked}"
    );
    assert!(
        finding["message"]
            .as_str()
            .unwrap()
            .contains("Privileged mode is disallowed."),
        "{finding}"
    );
    assert!(deployments.get_opt("web").await.unwrap().is_none());
    assert!(
        live_configmap(&w.cluster, "settings").await.is_none(),
        "nothing of a blocked application is applied"
    );

    // Audit: applied, the finding a warning.
    policies_repo.commit(
        "audit",
        &[("kyverno/privileged.yaml", &kyverno_policy("Audit"))],
    );
    policies_repo.publish();
    let audited = eventually_long("web applied with a warning", async || {
        deployments.get_opt("web").await.unwrap()?;
        let status = app_status(&w.cluster, "web").await;
        (status["policy"]["blocked"] == false
            && status["policy"]["findings"][0]["severity"] == "warning")
            .then_some(status)
    })
    .await;
    assert_eq!(
        audited["policy"]["findings"].as_array().unwrap().len(),
        1,
        "{audited}"
    );

    // The PolicyReport reads as Kyverno's own: its policy and rule.
    let reports = w.cluster.api(
        "wgpolicyk8s.io/v1alpha2",
        "PolicyReport",
        "policyreports",
        Some("guestbook"),
    );
    let report = eventually_long("the PolicyReport with the warning", async || {
        let found = reports.get_opt("kiln-web").await.ok().flatten()?;
        let value = serde_json::to_value(found).unwrap();
        (value["results"][0]["result"] == "warn").then_some(value)
    })
    .await;
    let result = &report["results"][0];
    assert_eq!(
        result["policy"], "disallow-privileged-containers",
        "{report}"
    );
    assert_eq!(result["rule"], "autogen-privileged-containers", "{report}");
    assert_eq!(result["properties"]["kilnPolicy"], "kyverno", "{report}");
    assert_eq!(result["resources"][0]["kind"], "Deployment", "{report}");
}

/// Issue 40: a Kyverno policy reads the destination as Kyverno reads its
/// cluster: the labels of the namespace the application lands in (not
/// rendered by it) for a namespaceSelector, and a ConfigMap of the cluster
/// for a `configMap` context entry. The namespace labelled critical: the
/// privileged Deployment is blocked, the message reading the ConfigMap;
/// relabelled (and refreshed): the rule no longer applies and the
/// application is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kyverno_policy_reads_the_destination_s_namespaces_and_config_maps() {
    let w = world().await;
    let namespace = |tier: &str| {
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "guestbook", "labels": {"tier": tier}}})
    };
    w.cluster
        .apply("namespaces", namespace("critical"), "test", false)
        .await
        .unwrap();
    w.cluster
        .apply(
            "configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "security-settings", "namespace": "kiln"},
                "data": {"level": "critical"}}),
            "test",
            false,
        )
        .await
        .unwrap();
    let policies_repo = Fixture::new(w._dir.path(), "policies");
    policies_repo.commit(
        "kyverno",
        &[(
            "kyverno/critical.yaml",
            "apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: critical-namespaces}
spec:
  validationFailureAction: Enforce
  rules:
  - name: no-privileged-in-critical
    match: {any: [{resources: {kinds: [Pod], namespaceSelector: {matchLabels: {tier: critical}}}}]}
    context:
    - name: settings
      configMap: {name: security-settings, namespace: kiln}
    validate:
      message: 'Privileged mode is disallowed in {{ settings.data.level }} namespaces.'
      pattern:
        spec:
          containers:
          - =(securityContext):
              =(privileged): \"false\"
",
        )],
    );
    policies_repo.publish();
    let policies = w._daemon.url("policies");
    w.repo
        .commit("privileged web", &[("guestbook/web.yaml", PRIVILEGED_WEB)]);
    w.repo.publish();
    install_policy_plugin(&w.cluster, "kyverno").await;
    secure_project(
        &w,
        json!([{"name": "kyverno", "mode": "enforce",
            "settings": {"policy": "."},
            "source": {"repoURL": policies, "targetRevision": "main", "path": "kyverno"}}]),
    )
    .await;
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    apps.create(
        &PostParams::default(),
        &application("web", &w.url, "secure"),
    )
    .await
    .unwrap();

    let deployments = w
        .cluster
        .api("apps/v1", "Deployment", "deployments", Some("guestbook"));
    let blocked = eventually_long("web blocked in a critical namespace", async || {
        let status = app_status(&w.cluster, "web").await;
        (status["policy"]["blocked"] == true).then_some(status)
    })
    .await;
    let finding = &blocked["policy"]["findings"][0];
    assert_eq!(
        finding["rule"]["name"], "autogen-no-privileged-in-critical",
        "{blocked}"
    );
    assert!(
        finding["message"]
            .as_str()
            .unwrap()
            .contains("Privileged mode is disallowed in critical namespaces."),
        "{finding}"
    );
    assert!(deployments.get_opt("web").await.unwrap().is_none());

    // The namespace relabelled: the rule selects it no more.
    w.cluster
        .apply("namespaces", namespace("sandbox"), "test", false)
        .await
        .unwrap();
    apps.patch(
        "web",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(
            json!({"metadata": {"annotations": {"kiln.dev/refresh": "2026-12-08T08:00:00Z"}}}),
        ),
    )
    .await
    .unwrap();
    let applied = eventually_long("web applied in a sandbox namespace", async || {
        deployments.get_opt("web").await.unwrap()?;
        Some(app_status(&w.cluster, "web").await)
    })
    .await;
    assert_eq!(applied["policy"]["blocked"], false, "{applied}");
    assert!(
        applied["policy"]["findings"]
            .as_array()
            .is_none_or(|f| f.is_empty()),
        "{applied}"
    );
}

/// Issue 18: a project's mandatory policies read a repository the security
/// team owns, not the application's. The application's repository ships a
/// permissive policy at the very paths the settings name: it changes
/// nothing. The policy repository is not in `sourceRepos` (it is the
/// project's, trusted as the AppProject is); an Application's own policy
/// reading it is held to `sourceRepos`; a `file://` or escaping policy
/// source is refused; an unreachable one fails closed naming the
/// repository.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn project_policies_read_the_security_team_s_repository() {
    let w = world().await;
    // Given the security team's repository, served beside the apps'.
    let policies_repo = Fixture::new(w._dir.path(), "policies");
    policies_repo.commit(
        "policies",
        &[
            ("psa/README.md", "pod security: restricted\n"),
            ("vap/policy.yaml", &replicas_policy(5)),
            ("vap/binding.yaml", REPLICAS_BINDING),
        ],
    );
    policies_repo.publish();
    let policies = w._daemon.url("policies");
    // And an application shipping a privileged Deployment with 10 replicas
    // and, at the root of its repository, its own permissive policy files.
    w.repo.commit(
        "privileged web",
        &[
            ("guestbook/web.yaml", PRIVILEGED_WEB),
            ("policy.yaml", PERMISSIVE_POLICY),
            ("binding.yaml", REPLICAS_BINDING),
        ],
    );
    w.repo.publish();
    for name in ["pod-security", "vap"] {
        install_policy_plugin(&w.cluster, name).await;
    }
    let project = |name: &str, policies: Value| {
        json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "AppProject",
            "metadata": {"name": name, "namespace": "kiln"},
            "spec": {"sourceRepos": [w.url.clone()], "destinations": [{"namespace": "*"}],
                "policies": policies}})
    };
    w.cluster
        .apply(
            "appprojects",
            project("secure", secure_policies(&policies, &policies, "enforce")),
            "security",
            false,
        )
        .await
        .unwrap();
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    apps.create(
        &PostParams::default(),
        &application("web", &w.url, "secure"),
    )
    .await
    .unwrap();

    // Then it is blocked by both policies, reading the security team's
    // files: nothing is applied.
    let deployments = w
        .cluster
        .api("apps/v1", "Deployment", "deployments", Some("guestbook"));
    let blocked = eventually_long("web blocked by both policies", async || {
        let status = app_status(&w.cluster, "web").await;
        let findings = status["policy"]["findings"].to_string();
        (status["policy"]["blocked"] == true
            && findings.contains("privileged")
            && findings.contains("object.spec.replicas <= 5"))
        .then_some(status)
    })
    .await;
    let condition = blocked["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "PolicyBlocked")
        .unwrap_or_else(|| panic!("{blocked}"));
    assert!(
        condition["message"]
            .as_str()
            .unwrap()
            .contains("Deployment"),
        "{condition}"
    );
    assert!(deployments.get_opt("web").await.unwrap().is_none());
    assert!(
        live_configmap(&w.cluster, "settings").await.is_none(),
        "nothing of a blocked application is applied"
    );

    // When the project's policies warn instead, then the application is
    // applied and the findings stay in its status as warnings.
    w.cluster
        .apply(
            "appprojects",
            project("secure", secure_policies(&policies, &policies, "warn")),
            "security",
            false,
        )
        .await
        .unwrap();
    let warned = eventually_long("web applied with warnings", async || {
        deployments.get_opt("web").await.unwrap()?;
        let status = app_status(&w.cluster, "web").await;
        (status["policy"]["blocked"] == false).then_some(status)
    })
    .await;
    let findings = warned["policy"]["findings"].as_array().unwrap();
    assert!(findings.iter().all(|f| f["mode"] == "warn"), "{findings:?}");
    assert!(
        findings
            .iter()
            .any(|f| f["message"].as_str().unwrap().contains("privileged")),
        "{findings:?}"
    );
    // And as a PolicyReport in the destination namespace.
    let reports = w.cluster.api(
        "wgpolicyk8s.io/v1alpha2",
        "PolicyReport",
        "policyreports",
        Some("guestbook"),
    );
    let report = eventually_long("the PolicyReport", async || {
        let found = reports.get_opt("kiln-web").await.ok().flatten()?;
        let value = serde_json::to_value(found).unwrap();
        let results = value["results"].to_string();
        (results.contains("privileged") && results.contains("replicas <= 5")).then_some(value)
    })
    .await;
    assert_eq!(
        report["metadata"]["annotations"]["kiln.dev/application"],
        "kiln/web"
    );

    // When the security team commits to its repository, then the
    // application is reviewed again with the new policy, its own commit
    // unchanged.
    let revision = warned["sync"]["revision"].clone();
    policies_repo.commit("allow 20", &[("vap/policy.yaml", &replicas_policy(20))]);
    policies_repo.publish();
    eventually_long("the new policy reviewed", async || {
        let status = app_status(&w.cluster, "web").await;
        let findings = status["policy"]["findings"].to_string();
        (!findings.contains("replicas <= 5") && findings.contains("privileged")).then_some(())
    })
    .await;
    assert_eq!(
        app_status(&w.cluster, "web").await["sync"]["revision"],
        revision
    );

    // When commits touch nothing the policies read (another team's
    // directory of the policy repository, the application's README), then
    // no policy runs again: the reviews are reused.
    let (hits, misses) = w.ctx.renderer.review_stats();
    policies_repo.commit("another team", &[("other-team/policy.yaml", "x: 1\n")]);
    policies_repo.publish();
    w.repo.commit("docs", &[("README.md", "more docs\n")]);
    w.repo.publish();
    eventually_long("reconciles after the unrelated commits", async || {
        (w.ctx.renderer.review_stats().0 >= hits + 20).then_some(())
    })
    .await;
    assert_eq!(
        w.ctx.renderer.review_stats().1,
        misses,
        "no review ran for commits outside what the policies read"
    );

    // When the application is fixed, then its findings clear.
    w.repo
        .commit("restricted web", &[("guestbook/web.yaml", RESTRICTED_WEB)]);
    w.repo.publish();
    eventually_long("the findings cleared", async || {
        let status = app_status(&w.cluster, "web").await;
        (status["policy"].is_object()
            && status["policy"]["findings"]
                .as_array()
                .is_none_or(Vec::is_empty)
            && status["policy"]["blocked"] == false)
            .then_some(())
    })
    .await;
    eventually_long("the PolicyReport emptied", async || {
        let found = reports.get_opt("kiln-web").await.ok().flatten()?;
        let value = serde_json::to_value(found).unwrap();
        value["results"]
            .as_array()
            .is_none_or(Vec::is_empty)
            .then_some(())
    })
    .await;

    // When pod-security's repository cannot be reached, then the enforced
    // policy fails closed, and the condition names the repository.
    w.cluster
        .apply(
            "appprojects",
            project(
                "secure",
                secure_policies(&policies, "git://127.0.0.1:1/policies.git", "enforce"),
            ),
            "security",
            false,
        )
        .await
        .unwrap();
    let unreachable = eventually_long("web blocked by an unreachable source", async || {
        let status = app_status(&w.cluster, "web").await;
        status["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "PolicyBlocked")
            .cloned()
    })
    .await;
    let message = unreachable["message"].as_str().unwrap();
    assert!(
        message.contains("git://127.0.0.1:1/policies.git") && message.contains("pod-security"),
        "{message}"
    );

    // An Application's own policy may not read a repository its project
    // does not allow; a project's policy source on the controller's
    // filesystem, or climbing out of its repository, is refused.
    let mut sneaky = application("sneaky", &w.url, "secure");
    sneaky.spec.policies = serde_json::from_value(json!([{"name": "vap",
        "settings": {"policy": "policy.yaml", "binding": "binding.yaml"},
        "source": {"repoURL": policies}}]))
    .unwrap();
    apps.create(&PostParams::default(), &sneaky).await.unwrap();
    for (name, policies) in [
        (
            "file",
            json!([{"name": "pod-security", "source": {"repoURL": format!("file://{}", policies_repo.bare.display())}}]),
        ),
        (
            "escape",
            json!([{"name": "pod-security", "source": {"repoURL": policies, "path": "psa/../../apps"}}]),
        ),
    ] {
        w.cluster
            .apply("appprojects", project(name, policies), "security", false)
            .await
            .unwrap();
        apps.create(
            &PostParams::default(),
            &application(&format!("in-{name}"), &w.url, name),
        )
        .await
        .unwrap();
    }
    for (app, kind, words) in [
        ("sneaky", "ProjectViolation", "sourceRepos"),
        ("in-file", "InvalidSpec", "FileRepositoryNotAllowed"),
        ("in-escape", "InvalidSpec", "climbs above"),
    ] {
        let status = status_with_a_condition(&w.cluster, app, app).await;
        let text = status["conditions"].to_string();
        assert!(text.contains(kind) && text.contains(words), "{app}: {text}");
    }
    let _ = w.stop.send(());
}

/// Issue 36: a Deployment that names no namespace lands in the destination
/// namespace at apply, and Gatekeeper reviews it there. A constraint scoped
/// to namespaced objects of `guestbook` (the project's policy, read from
/// the security team's repository) blocks it: leaving `metadata.namespace`
/// out evades nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaced_constraint_reviews_objects_that_name_no_namespace() {
    let w = world().await;
    let template = r#"apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata: {name: k8srequiredteam}
spec:
  crd: {spec: {names: {kind: K8sRequiredTeam}}}
  targets:
  - target: admission.k8s.gatekeeper.sh
    rego: |
      package k8srequiredteam
      violation[{"msg": msg}] {
        not input.review.object.metadata.labels.team
        msg := sprintf("%v %v in %v has no team label", [input.review.kind.kind, input.review.name, input.review.namespace])
      }
"#;
    let constraint = "apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sRequiredTeam
metadata: {name: team}
spec:
  match:
    scope: Namespaced
    namespaces: [guestbook]
    kinds: [{apiGroups: [apps], kinds: [Deployment]}]
";
    let (_policies_repo, policies) = policy_repository(
        &w,
        &[
            ("gk/templates/team.yaml", template),
            ("gk/constraints/team.yaml", constraint),
        ],
    );
    // The Deployment names no namespace.
    w.repo
        .commit("web", &[("guestbook/web.yaml", PRIVILEGED_WEB)]);
    w.repo.publish();
    install_policy_plugin(&w.cluster, "gatekeeper").await;
    secure_project(
        &w,
        json!([{"name": "gatekeeper", "mode": "enforce",
            "settings": {"template": "templates", "constraint": "constraints"},
            "source": {"repoURL": policies, "targetRevision": "main", "path": "gk"}}]),
    )
    .await;
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    apps.create(
        &PostParams::default(),
        &application("web", &w.url, "secure"),
    )
    .await
    .unwrap();

    let blocked = eventually_long("web blocked by the namespaced constraint", async || {
        let status = app_status(&w.cluster, "web").await;
        (status["policy"]["blocked"] == true).then_some(status)
    })
    .await;
    let findings = blocked["policy"]["findings"].to_string();
    assert!(
        findings.contains("Deployment web in guestbook has no team label"),
        "{blocked}"
    );
    let deployments = w
        .cluster
        .api("apps/v1", "Deployment", "deployments", Some("guestbook"));
    assert!(deployments.get_opt("web").await.unwrap().is_none());
    let _ = w.stop.send(());
}

/// A push to the security team's repository refreshes the applications
/// whose project policies read the pushed directory, and no other: a push
/// to another team's directory of the same repository refreshes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_to_a_policy_source_refreshes_the_applications_it_reviews() {
    use hmac::Mac as _;
    // Polling is slow here: only the webhook can make this fast.
    let w = world_with(Duration::from_secs(3600)).await;
    let state = Arc::new(controller::http::HttpState {
        ctx: w.ctx.clone(),
        webhook: controller::http::WebhookAuth::new(Some("s3cret".into()), false),
        ready: std::sync::atomic::AtomicBool::new(true),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, controller::http::router(state)).await });
    let (policies_repo, policies) = policy_repository(
        &w,
        &[
            ("vap/policy.yaml", &replicas_policy(20)),
            ("vap/binding.yaml", REPLICAS_BINDING),
        ],
    );
    w.repo
        .commit("web", &[("guestbook/web.yaml", RESTRICTED_WEB)]);
    w.repo.publish();
    install_policy_plugin(&w.cluster, "vap").await;
    secure_project(
        &w,
        json!([{"name": "vap",
            "settings": {"policy": "policy.yaml", "binding": "binding.yaml"},
            "source": {"repoURL": policies, "path": "vap"}}]),
    )
    .await;
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    apps.create(
        &PostParams::default(),
        &application("web", &w.url, "secure"),
    )
    .await
    .unwrap();
    eventually_long("the first sync", async || {
        live_configmap(&w.cluster, "settings").await
    })
    .await;

    let http = reqwest::Client::new();
    let deliver = |files: Vec<&str>| {
        let body = json!({"ref": "refs/heads/main", "repository": {"clone_url": policies},
            "commits": [{"added": [], "modified": files, "removed": []}]})
        .to_string();
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"s3cret").unwrap();
        mac.update(body.as_bytes());
        let signature = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
        http.post(format!("{endpoint}/api/webhook"))
            .header("x-hub-signature-256", signature)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    // Another team's directory: nothing refreshed.
    policies_repo.commit("other team", &[("other-team/policy.yaml", "x: 1\n")]);
    policies_repo.publish();
    let other: Value = deliver(vec!["other-team/policy.yaml"])
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(other["refreshed"], json!([]));
    // The policy's directory: refreshed at once, and reviewed anew.
    policies_repo.commit("at most 5", &[("vap/policy.yaml", &replicas_policy(5))]);
    policies_repo.publish();
    let touched: Value = deliver(vec!["vap/policy.yaml"])
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(touched["refreshed"], json!(["web"]));
    eventually_long("web blocked by the new policy", async || {
        let status = app_status(&w.cluster, "web").await;
        (status["policy"]["blocked"] == true
            && status["policy"]["findings"]
                .to_string()
                .contains("replicas <= 5"))
        .then_some(())
    })
    .await;
    let _ = w.stop.send(());
}

/// Issue 36, through the controller (the process holding the cluster's
/// credentials): an application whose path holds two files of 2,000,000
/// alias-free items (the flood that took the controller to 3.4 GB) gets a
/// ComparisonError naming the first file and the bound, nothing is applied,
/// and the process's peak memory stays a small multiple of the input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_alias_free_yaml_floods_become_a_condition_within_bounded_memory() {
    let w = world().await;
    let flood = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: flood}}\nx: {}\n",
        support::flood(2_000_000)
    );
    w.repo.commit(
        "flood",
        &[("flood/a.yaml", &flood), ("flood/b.yaml", &flood)],
    );
    w.repo.publish();
    let baseline = support::status_kib("VmRSS");
    let mut app = application("flood", &w.url, "default");
    app.spec.source.path = "flood".into();
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    apps.create(&PostParams::default(), &app).await.unwrap();
    let status = status_with_a_condition(&w.cluster, "the flood's condition", "flood").await;
    let condition = &status["conditions"][0];
    assert_eq!(condition["type"], "ComparisonError", "{status}");
    let message = condition["message"].as_str().unwrap();
    assert!(
        message.contains("flood/a.yaml") && message.contains("more than 1000000 nodes"),
        "{message}"
    );
    assert!(live_configmap(&w.cluster, "flood").await.is_none());
    let input_kib = 2 * flood.len() as u64 / 1024;
    let grown = support::status_kib("VmHWM").saturating_sub(baseline);
    assert!(
        grown < 16 * input_kib,
        "peak grew by {grown} KiB for {input_kib} KiB of input"
    );
    let _ = w.stop.send(());
}
