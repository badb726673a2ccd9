//! Applications whose source is a Helm chart (`spec.source.chart`) with
//! Argo CD's `spec.source.helm` block, synced by the controller (running
//! in-process) on the dev cluster from a Helm repository the test serves on
//! loopback (`support::chart_repo`, which counts every request).

mod support;

use std::sync::Arc;
use std::time::Duration;

use kiln::api::Application;
use kiln::controller::{self, Context, ControllerConfig};
use kiln::source::git::GitConfig;
use kiln_devcluster::Config;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use support::chart_repo::{ChartRepo, index, package, sha256};
use support::cluster::{Cluster, app_status};

/// The chart's template: what the values, the release and the cluster's
/// capabilities came to.
const TEMPLATE: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  color: {{ .Values.color | quote }}
  size: {{ .Values.size | quote }}
  port: {{ .Values.port | toJson | quote }}
  replicas: {{ .Values.replicas | toJson | quote }}
  kube: {{ .Capabilities.KubeVersion.Version | quote }}
  kiln: {{ .Capabilities.APIVersions.Has "kiln.dev/v1alpha1/Application" | quote }}
  chart: {{ .Chart.Version | quote }}
"#;

/// The `web` chart at `version`.
fn chart(version: &str) -> Vec<u8> {
    package(
        "web",
        &[
            (
                "Chart.yaml",
                &format!("apiVersion: v2\nname: web\nversion: {version}\n"),
            ),
            (
                "values.yaml",
                "color: blue\nsize: small\nport: 80\nreplicas: 1\n",
            ),
            ("values-prod.yaml", "color: green\n"),
            ("templates/settings.yaml", TEMPLATE),
        ],
    )
}

struct World {
    cluster: Cluster,
    ctx: Arc<Context>,
    _dir: tempfile::TempDir,
    stop: tokio::sync::oneshot::Sender<()>,
}

/// The dev cluster, the controller with the catalog Plugin `helm`
/// (plugins/dist/helm.wasm).
async fn world() -> World {
    let cluster = Cluster::with_kiln(
        Config {
            simulate_readiness: Some(Duration::from_millis(20)),
            ..Config::default()
        },
        &["kiln", "guestbook"],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = ControllerConfig {
        resync: Duration::from_millis(300),
        health_timeout: Duration::from_secs(10),
        render_cache_dir: Some(dir.path().join("renders")),
        chart_cache_dir: Some(dir.path().join("charts")),
        catalog: controller::CatalogConfig {
            store: dir.path().join("plugins"),
            allow_file_plugins: true,
            ..controller::CatalogConfig::default()
        },
        ..ControllerConfig::default()
    };
    cluster.register_helm_plugin().await;
    let support::controller::Running { ctx, stop, .. } = support::controller::start(
        cluster.client.clone(),
        GitConfig::new(dir.path().join("git")),
        config,
    );
    World {
        cluster,
        ctx,
        _dir: dir,
        stop,
    }
}

/// An Argo CD-style Application of chart `chart` of `repo`.
fn application(name: &str, repo: &str, chart: &str) -> Application {
    serde_json::from_value(json!({
        "apiVersion": "kiln.dev/v1alpha1", "kind": "Application",
        "metadata": {"name": name, "namespace": "kiln"},
        "spec": {
            "project": "default",
            "source": {
                "repoURL": repo, "chart": chart, "targetRevision": "1.2.*",
                "helm": {
                    "releaseName": format!("{name}-release"),
                    "valueFiles": ["values-prod.yaml"],
                    "values": "size: large\n",
                    "parameters": [
                        {"name": "port", "value": "8080", "forceString": true},
                        {"name": "replicas", "value": "3"}
                    ]
                }
            },
            "destination": {"namespace": "guestbook"},
            "syncPolicy": {"automated": {"prune": true, "selfHeal": true}}
        }
    }))
    .unwrap()
}

async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..300 {
        if let Some(value) = check().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn settings(cluster: &Cluster, name: &str) -> Option<Value> {
    cluster
        .get("v1", "ConfigMap", "configmaps", Some("guestbook"), name)
        .await
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_argo_cd_helm_application_syncs_from_a_helm_repository_and_follows_its_constraint() {
    let w = world().await;
    let repo = ChartRepo::start(None);
    let first = chart("1.2.0");
    // An archive whose bytes are not what the index pins.
    let broken = package(
        "broken",
        &[(
            "Chart.yaml",
            "apiVersion: v2\nname: broken\nversion: 1.2.0\n",
        )],
    );
    repo.put("web-1.2.0.tgz", first.clone());
    repo.put("broken-1.2.0.tgz", broken);
    let wrong = sha256(b"something else");
    repo.put(
        "index.yaml",
        index(&[
            ("web", "1.2.0", "web-1.2.0.tgz", Some(sha256(&first))),
            ("broken", "1.2.0", "broken-1.2.0.tgz", Some(wrong)),
        ]),
    );
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    apps.create(
        &PostParams::default(),
        &application("web", &repo.url(), "web"),
    )
    .await
    .unwrap();
    apps.create(
        &PostParams::default(),
        &application("bad", &repo.url(), "broken"),
    )
    .await
    .unwrap();

    // Then the chart renders with the block mapped onto the helm plugin,
    // and the cluster's version and API versions in `.Capabilities`.
    let live = eventually("web synced", async || {
        let live = settings(&w.cluster, "web-release-settings").await;
        let status = app_status(&w.cluster, "web").await;
        let failed = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] != "InsecurePlugin");
        assert!(!failed, "{status}");
        live
    })
    .await;
    let data = &live["data"];
    assert_eq!(data["color"], "green", "valueFiles: {live}");
    assert_eq!(data["size"], "large", "inline values: {live}");
    assert_eq!(data["port"], "\"8080\"", "forceString: {live}");
    assert_eq!(data["replicas"], "3", "set: {live}");
    assert_eq!(data["chart"], "1.2.0");
    assert!(
        data["kube"].as_str().unwrap().starts_with("v1.32.0"),
        "kubeVersion from the dev cluster: {live}"
    );
    assert_eq!(data["kiln"], "true", "apiVersions from discovery: {live}");
    let status = eventually("revision 1.2.0", async || {
        let status = app_status(&w.cluster, "web").await;
        (status["sync"]["revision"] == "1.2.0").then_some(status)
    })
    .await;
    assert_eq!(status["sync"]["status"], "Synced", "{status}");

    // A digest mismatch is a condition, and nothing is applied.
    let bad = eventually("bad's condition", async || {
        let status = app_status(&w.cluster, "bad").await;
        status["conditions"]
            .as_array()
            .filter(|c| !c.is_empty())
            .map(|_| status.clone())
    })
    .await;
    let condition = &bad["conditions"][0];
    assert_eq!(condition["type"], "ComparisonError", "{bad}");
    assert!(
        condition["message"]
            .as_str()
            .unwrap()
            .contains("digest mismatch"),
        "{bad}"
    );
    assert!(settings(&w.cluster, "bad-release-settings").await.is_none());

    // Polls of an unchanged index fetch no archive and cost no render.
    let archives = repo.count("/web-1.2.0.tgz", 200);
    let unchanged = repo.count("/index.yaml", 304);
    let renders = w.ctx.metrics.renders.get();
    eventually("three unchanged index polls", async || {
        (repo.count("/index.yaml", 304) >= unchanged + 6).then_some(())
    })
    .await;
    assert_eq!(archives, 1, "{:?}", repo.requests());
    assert_eq!(
        repo.count("/web-1.2.0.tgz", 200),
        1,
        "{:?}",
        repo.requests()
    );
    assert_eq!(w.ctx.metrics.renders.get(), renders, "render cache hits");

    // A new version within the constraint is picked up; one outside is not.
    let next = chart("1.2.1");
    let major = chart("1.3.0");
    repo.put("web-1.2.1.tgz", next.clone());
    repo.put("web-1.3.0.tgz", major.clone());
    repo.put(
        "index.yaml",
        index(&[
            ("web", "1.2.0", "web-1.2.0.tgz", Some(sha256(&first))),
            ("web", "1.2.1", "web-1.2.1.tgz", Some(sha256(&next))),
            ("web", "1.3.0", "web-1.3.0.tgz", Some(sha256(&major))),
        ]),
    );
    eventually("1.2.1 synced", async || {
        let live = settings(&w.cluster, "web-release-settings").await?;
        (live["data"]["chart"] == "1.2.1").then_some(())
    })
    .await;
    eventually("revision 1.2.1", async || {
        (app_status(&w.cluster, "web").await["sync"]["revision"] == "1.2.1").then_some(())
    })
    .await;
    assert_eq!(repo.count("/web-1.3.0.tgz", 200), 0);
    let _ = w.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_charts_dependency_repositories_are_held_to_the_projects_source_repos() {
    use k8s_openapi::api::core::v1::Secret;
    use kiln::controller::secrets::{SecretType, labeled};
    let w = world().await;
    let lib = package(
        "lib",
        &[
            ("Chart.yaml", "apiVersion: v2\nname: lib\nversion: 1.0.0\n"),
            (
                "templates/lib.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-lib\n",
            ),
        ],
    );
    // B (private, user bob) and a public repository outside the project
    // both hold the library; A (private, user alice) holds two charts,
    // one depending on each.
    let b = ChartRepo::start(Some("bob:b-s3cret"));
    let outside = ChartRepo::start(None);
    for repo in [&b, &outside] {
        repo.put("lib-1.0.0.tgz", lib.clone());
        repo.put(
            "index.yaml",
            index(&[("lib", "1.0.0", "lib-1.0.0.tgz", Some(sha256(&lib)))]),
        );
    }
    let a = ChartRepo::start(Some("alice:a-s3cret"));
    let parent = |name: &str, repository: &str| {
        package(
            name,
            &[
                (
                    "Chart.yaml",
                    &format!(
                        "apiVersion: v2\nname: {name}\nversion: 1.2.0\ndependencies:\n\
                         - name: lib\n  version: 1.0.0\n  repository: {repository}\n"
                    ),
                ),
                (
                    "templates/app.yaml",
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-app\n",
                ),
            ],
        )
    };
    let (app, leaky) = (parent("app", &b.url()), parent("leaky", &outside.url()));
    a.put("app-1.2.0.tgz", app.clone());
    a.put("leaky-1.2.0.tgz", leaky.clone());
    a.put(
        "index.yaml",
        index(&[
            ("app", "1.2.0", "app-1.2.0.tgz", Some(sha256(&app))),
            ("leaky", "1.2.0", "leaky-1.2.0.tgz", Some(sha256(&leaky))),
        ]),
    );
    let secrets: Api<Secret> = Api::namespaced(w.cluster.client.clone(), "kiln");
    for (name, repo, user, password) in [
        ("charts-a", &a, "alice", "a-s3cret"),
        ("charts-b", &b, "bob", "b-s3cret"),
    ] {
        let data = [
            ("url", repo.url()),
            ("type", "helm".into()),
            ("username", user.into()),
            ("password", password.into()),
        ];
        let data: Vec<(&str, &str)> = data.iter().map(|(k, v)| (*k, v.as_str())).collect();
        secrets
            .create(
                &PostParams::default(),
                &labeled(name, SecretType::Repository, &data),
            )
            .await
            .unwrap();
    }
    w.cluster
        .apply(
            "appprojects",
            json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "AppProject",
                "metadata": {"name": "fenced", "namespace": "kiln"},
                "spec": {"sourceRepos": [a.url(), b.url()],
                    "destinations": [{"namespace": "*"}]}}),
            "operator",
            false,
        )
        .await
        .unwrap();
    let apps: Api<Application> = Api::namespaced(w.cluster.client.clone(), "kiln");
    for name in ["app", "leaky"] {
        let app: Application = serde_json::from_value(json!({
            "apiVersion": "kiln.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": name, "namespace": "kiln"},
            "spec": {
                "project": "fenced",
                "source": {"repoURL": a.url(), "chart": name, "targetRevision": "1.2.*",
                    "helm": {"releaseName": name}},
                "destination": {"namespace": "guestbook"},
                "syncPolicy": {"automated": {"prune": true}}
            }
        }))
        .unwrap();
        apps.create(&PostParams::default(), &app).await.unwrap();
    }

    // A's chart renders with B's library, each fetched with its own
    // repository's credentials.
    eventually("app synced with its library", async || {
        let status = app_status(&w.cluster, "app").await;
        let failed = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] != "InsecurePlugin");
        assert!(failed.is_none(), "{status}");
        settings(&w.cluster, "app-lib").await
    })
    .await;
    assert!(
        b.requests()
            .iter()
            .all(|r| r.user.is_none() || r.user.as_deref() == Some("bob")),
        "{:?}",
        b.requests()
    );
    assert!(
        a.requests()
            .iter()
            .all(|r| r.user.is_none() || r.user.as_deref() == Some("alice")),
        "{:?}",
        a.requests()
    );

    // The dependency outside sourceRepos is refused before anything is
    // asked of its repository, naming the chart, dependency and URL.
    let refused = eventually("leaky refused", async || {
        let status = app_status(&w.cluster, "leaky").await;
        status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] != "InsecurePlugin"))
            .cloned()
    })
    .await;
    let message = refused["message"].as_str().unwrap();
    assert_eq!(refused["type"], "ProjectViolation", "{refused}");
    assert!(message.contains("leaky: dependency `lib`"), "{message}");
    assert!(message.contains(&outside.url()), "{message}");
    assert!(message.contains("sourceRepos"), "{message}");
    assert!(outside.requests().is_empty(), "{:?}", outside.requests());
    assert!(settings(&w.cluster, "leaky-app").await.is_none());
    w.stop.send(()).ok();
}
