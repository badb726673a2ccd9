//! Deleting an Application as an Argo CD + Helm user expects it: objects
//! marked `Delete=false` (Argo CD's or Kiln's sync option) or Helm's
//! `helm.sh/resource-policy: keep` stay in the cluster, a kept object is
//! never pruned either, and PostDelete hooks (Argo CD's, Helm's
//! `post-delete`) run once the Application's objects are gone, before its
//! finalizers go. The controller runs in-process on the dev cluster, the
//! charts come from a Helm repository served on loopback. The dev cluster
//! runs no Job: the tests write the hook Jobs' status themselves.

mod support;

use std::sync::Arc;
use std::time::Duration;

use kiln::api::{Application, POST_DELETE_FINALIZER, PRE_DELETE_FINALIZER, RESOURCES_FINALIZER};
use kiln::controller::{self, Context, ControllerConfig};
use kiln::source::git::GitConfig;
use kiln_devcluster::Config;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::chart_repo::{ChartRepo, index, package, sha256};
use support::cluster::{Cluster, app_status};

const NS: &str = "guestbook";

struct World {
    cluster: Cluster,
    _ctx: Arc<Context>,
    _dir: tempfile::TempDir,
    stop: tokio::sync::oneshot::Sender<()>,
}

/// The dev cluster (no readiness simulation: a Job finishes when the test
/// says so) and the controller with the catalog Plugin `helm`.
async fn world(config: ControllerConfig) -> World {
    let cluster = Cluster::with_kiln(Config::default(), &["kiln", NS, "kube-system"]).await;
    let dir = tempfile::tempdir().unwrap();
    let config = ControllerConfig {
        resync: Duration::from_millis(300),
        render_cache_dir: Some(dir.path().join("renders")),
        chart_cache_dir: Some(dir.path().join("charts")),
        catalog: controller::CatalogConfig {
            store: dir.path().join("plugins"),
            allow_file_plugins: true,
            ..controller::CatalogConfig::default()
        },
        ..config
    };
    cluster.register_helm_plugin().await;
    let support::controller::Running { ctx, stop, .. } = support::controller::start(
        cluster.client.clone(),
        GitConfig::new(dir.path().join("git")),
        config,
    );
    World {
        cluster,
        _ctx: ctx,
        _dir: dir,
        stop,
    }
}

fn default_config() -> ControllerConfig {
    ControllerConfig {
        health_timeout: Duration::from_secs(60),
        ..ControllerConfig::default()
    }
}

/// A ConfigMap template with `annotations` (YAML lines, indented 4).
fn configmap(name: &str, annotations: &str) -> String {
    let annotations = if annotations.is_empty() {
        String::new()
    } else {
        format!("  annotations:\n{annotations}")
    };
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{annotations}data:\n  a: b\n"
    )
}

/// A Job template with `annotations` (YAML lines, indented 4), in
/// `namespace` when given.
fn job(name: &str, namespace: Option<&str>, annotations: &str) -> String {
    let namespace = namespace
        .map(|ns| format!("  namespace: {ns}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n{namespace}  annotations:\n{annotations}\
         spec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: run\n          \
         image: busybox\n"
    )
}

/// Chart `name` at `version` with `templates` (file name, text).
fn chart(name: &str, version: &str, templates: &[(&str, String)]) -> Vec<u8> {
    let chart_yaml = format!("apiVersion: v2\nname: {name}\nversion: {version}\n");
    let paths: Vec<(String, &str)> = templates
        .iter()
        .map(|(file, text)| (format!("templates/{file}"), text.as_str()))
        .collect();
    let mut files: Vec<(&str, &str)> = vec![("Chart.yaml", chart_yaml.as_str())];
    files.extend(paths.iter().map(|(p, t)| (p.as_str(), *t)));
    package(name, &files)
}

/// Serves `versions` of chart `name` (each its archive).
fn publish(repo: &ChartRepo, name: &str, versions: &[(&str, Vec<u8>)]) {
    let mut entries = Vec::new();
    for (version, archive) in versions {
        let file = format!("{name}-{version}.tgz");
        repo.put(&file, archive.clone());
        entries.push((name, *version, file, Some(sha256(archive))));
    }
    let entries: Vec<(&str, &str, &str, Option<String>)> = entries
        .iter()
        .map(|(n, v, f, d)| (*n, *v, f.as_str(), d.clone()))
        .collect();
    repo.put("index.yaml", index(&entries));
}

/// An automated Application of chart `chart` (any 1.x), with the resources
/// finalizer, in `project`.
async fn create_app(cluster: &Cluster, name: &str, repo: &ChartRepo, chart: &str, project: &str) {
    let app: Application = serde_json::from_value(json!({
        "apiVersion": "kiln.dev/v1alpha1", "kind": "Application",
        "metadata": {"name": name, "namespace": "kiln", "finalizers": [RESOURCES_FINALIZER]},
        "spec": {
            "project": project,
            "source": {"repoURL": repo.url(), "chart": chart, "targetRevision": "1.*"},
            "destination": {"namespace": NS},
            "syncPolicy": {"automated": {"prune": true}}
        }
    }))
    .unwrap();
    apps(cluster)
        .create(&PostParams::default(), &app)
        .await
        .unwrap();
}

fn apps(cluster: &Cluster) -> Api<Application> {
    Api::namespaced(cluster.client.clone(), "kiln")
}

async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..400 {
        if let Some(value) = check().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn live_configmap(cluster: &Cluster, name: &str) -> Option<Value> {
    cluster
        .get("v1", "ConfigMap", "configmaps", Some(NS), name)
        .await
        .ok()
}

async fn live_job(cluster: &Cluster, namespace: &str, name: &str) -> Option<Value> {
    cluster
        .get("batch/v1", "Job", "jobs", Some(namespace), name)
        .await
        .ok()
}

/// Writes a finished Job's status: `Complete` or `Failed`.
async fn finish_job(cluster: &Cluster, name: &str, condition: &str) {
    let status = json!({"status": {"conditions": [{"type": condition, "status": "True",
        "message": format!("the test says {condition}")}]}});
    cluster
        .api("batch/v1", "Job", "jobs", Some(NS))
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

async fn app_gone(cluster: &Cluster, name: &str) -> Option<()> {
    apps(cluster)
        .get_opt(name)
        .await
        .unwrap()
        .is_none()
        .then_some(())
}

fn finalizers(app: &Application) -> Vec<String> {
    app.metadata.finalizers.clone().unwrap_or_default()
}

/// The first condition of an Application's status whose message contains
/// `text`.
async fn condition_with(cluster: &Cluster, name: &str, text: &str) -> Option<Value> {
    let status = app_status(cluster, name).await;
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["message"].as_str().is_some_and(|m| m.contains(text)))
        .cloned()
}

/// Deleting an Application with the resources finalizer leaves what says
/// `Delete=false` (Argo CD's and Kiln's sync options) or Helm's
/// `resource-policy: keep`, and deletes the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_objects_stay_when_their_application_is_deleted() {
    let w = world(default_config()).await;
    let repo = ChartRepo::start(None);
    publish(
        &repo,
        "kept",
        &[(
            "1.0.0",
            chart(
                "kept",
                "1.0.0",
                &[
                    ("plain.yaml", configmap("plain", "")),
                    (
                        "argo.yaml",
                        configmap(
                            "argo-delete-false",
                            "    argocd.argoproj.io/sync-options: Delete=false\n",
                        ),
                    ),
                    (
                        "kiln.yaml",
                        configmap(
                            "kiln-delete-false",
                            "    kiln.dev/sync-options: Prune=true,Delete=false\n",
                        ),
                    ),
                    (
                        "helm.yaml",
                        configmap("helm-keep", "    helm.sh/resource-policy: keep\n"),
                    ),
                ],
            ),
        )],
    );
    create_app(&w.cluster, "kept", &repo, "kept", "default").await;
    let names = [
        "plain",
        "argo-delete-false",
        "kiln-delete-false",
        "helm-keep",
    ];
    eventually("every ConfigMap applied", async || {
        for name in names {
            live_configmap(&w.cluster, name).await?;
        }
        Some(())
    })
    .await;

    apps(&w.cluster)
        .delete("kept", &Default::default())
        .await
        .unwrap();
    eventually("the Application gone", async || {
        app_gone(&w.cluster, "kept").await
    })
    .await;
    assert!(
        live_configmap(&w.cluster, "plain").await.is_none(),
        "the rest is deleted"
    );
    for name in &names[1..] {
        assert!(
            live_configmap(&w.cluster, name).await.is_some(),
            "{name} stays"
        );
    }
    let _ = w.stop.send(());
}

/// A `helm.sh/resource-policy: keep` object that leaves the chart is not
/// pruned (Helm never deletes it), and the sync says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_object_dropped_from_the_chart_is_not_pruned() {
    let w = world(default_config()).await;
    let repo = ChartRepo::start(None);
    let first = chart(
        "drop",
        "1.0.0",
        &[
            ("plain.yaml", configmap("plain", "")),
            (
                "helm.yaml",
                configmap("helm-keep", "    helm.sh/resource-policy: keep\n"),
            ),
            ("stays.yaml", configmap("stays", "")),
        ],
    );
    publish(&repo, "drop", &[("1.0.0", first.clone())]);
    create_app(&w.cluster, "drop", &repo, "drop", "default").await;
    eventually("applied", async || {
        live_configmap(&w.cluster, "helm-keep").await?;
        live_configmap(&w.cluster, "plain").await
    })
    .await;

    let second = chart("drop", "1.0.1", &[("stays.yaml", configmap("stays", ""))]);
    publish(&repo, "drop", &[("1.0.0", first), ("1.0.1", second)]);
    let status = eventually("1.0.1 synced", async || {
        let status = app_status(&w.cluster, "drop").await;
        (status["operationState"]["revision"] == "1.0.1").then_some(status)
    })
    .await;
    assert!(
        live_configmap(&w.cluster, "plain").await.is_none(),
        "pruned"
    );
    assert!(
        live_configmap(&w.cluster, "helm-keep").await.is_some(),
        "kept"
    );
    let resources = status["operationState"]["resources"].as_array().unwrap();
    let kept = resources
        .iter()
        .find(|r| r["name"] == "helm-keep")
        .unwrap_or_else(|| panic!("reported: {status}"));
    assert_eq!(kept["action"], "PruneSkipped", "{status}");
    assert!(
        kept["message"]
            .as_str()
            .unwrap()
            .contains("helm.sh/resource-policy: keep"),
        "{status}"
    );
    let _ = w.stop.send(());
}

/// A chart's `post-delete` hook runs once the Application's objects are
/// gone; the Application stays until it completed; then the hook goes
/// (`hook-succeeded`) and so does the Application.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_delete_hook_runs_after_the_objects_are_gone() {
    let w = world(default_config()).await;
    let repo = ChartRepo::start(None);
    publish(
        &repo,
        "hooked",
        &[(
            "1.0.0",
            chart(
                "hooked",
                "1.0.0",
                &[
                    ("plain.yaml", configmap("plain", "")),
                    (
                        "cleanup.yaml",
                        job(
                            "cleanup",
                            None,
                            "    helm.sh/hook: post-delete\n    helm.sh/hook-delete-policy: hook-succeeded\n",
                        ),
                    ),
                ],
            ),
        )],
    );
    create_app(&w.cluster, "hooked", &repo, "hooked", "default").await;
    // A sync never runs it; the Application gets Kiln's post-delete
    // finalizer (as Argo CD adds its own).
    eventually("synced with the post-delete finalizer", async || {
        live_configmap(&w.cluster, "plain").await?;
        let app = apps(&w.cluster).get("hooked").await.unwrap();
        finalizers(&app)
            .iter()
            .any(|f| f == POST_DELETE_FINALIZER)
            .then_some(())
    })
    .await;
    assert!(live_job(&w.cluster, NS, "cleanup").await.is_none());

    apps(&w.cluster)
        .delete("hooked", &Default::default())
        .await
        .unwrap();
    eventually("the hook created", async || {
        live_job(&w.cluster, NS, "cleanup").await
    })
    .await;
    assert!(
        live_configmap(&w.cluster, "plain").await.is_none(),
        "the hook runs once the objects are gone"
    );
    // The Application waits for it.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let app = apps(&w.cluster)
        .get_opt("hooked")
        .await
        .unwrap()
        .expect("the Application waits for its hook");
    assert!(
        finalizers(&app).iter().any(|f| f == POST_DELETE_FINALIZER),
        "{:?}",
        app.metadata
    );

    finish_job(&w.cluster, "cleanup", "Complete").await;
    eventually("the Application gone", async || {
        app_gone(&w.cluster, "hooked").await
    })
    .await;
    assert!(
        live_job(&w.cluster, NS, "cleanup").await.is_none(),
        "hook-succeeded: deleted"
    );
    let _ = w.stop.send(());
}

/// A chart's `pre-delete` hook (Argo CD 3's PreDelete) runs before the
/// Application's objects are deleted; they stay until it completed; then
/// the hook (no delete policy: deleted, as Argo CD does) and the objects
/// go, and so does the Application.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_delete_hook_runs_before_the_objects_are_deleted() {
    let w = world(default_config()).await;
    let repo = ChartRepo::start(None);
    publish(
        &repo,
        "pre",
        &[(
            "1.0.0",
            chart(
                "pre",
                "1.0.0",
                &[
                    ("plain.yaml", configmap("plain", "")),
                    (
                        "prepare.yaml",
                        job(
                            "prepare",
                            None,
                            "    helm.sh/hook: pre-delete
",
                        ),
                    ),
                ],
            ),
        )],
    );
    create_app(&w.cluster, "pre", &repo, "pre", "default").await;
    eventually("synced with the pre-delete finalizer", async || {
        live_configmap(&w.cluster, "plain").await?;
        let app = apps(&w.cluster).get("pre").await.unwrap();
        finalizers(&app)
            .iter()
            .any(|f| f == PRE_DELETE_FINALIZER)
            .then_some(())
    })
    .await;
    assert!(live_job(&w.cluster, NS, "prepare").await.is_none());

    apps(&w.cluster)
        .delete("pre", &Default::default())
        .await
        .unwrap();
    eventually("the hook created", async || {
        live_job(&w.cluster, NS, "prepare").await
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        live_configmap(&w.cluster, "plain").await.is_some(),
        "the objects wait for the hook"
    );
    finish_job(&w.cluster, "prepare", "Complete").await;
    eventually("the Application gone", async || {
        app_gone(&w.cluster, "pre").await
    })
    .await;
    assert!(live_configmap(&w.cluster, "plain").await.is_none());
    assert!(live_job(&w.cluster, NS, "prepare").await.is_none());
    let _ = w.stop.send(());
}

/// A PostDelete hook (Argo CD's annotation) that fails leaves the
/// Application and its finalizer in place, with a condition naming the
/// hook; the failed hook is deleted and run again (as Argo CD 3 does), and
/// once a run completes the Application goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_post_delete_hook_keeps_the_finalizer_and_says_why() {
    let w = world(default_config()).await;
    let repo = ChartRepo::start(None);
    publish(
        &repo,
        "failing",
        &[(
            "1.0.0",
            chart(
                "failing",
                "1.0.0",
                &[
                    ("plain.yaml", configmap("plain", "")),
                    (
                        "cleanup.yaml",
                        job(
                            "failing-cleanup",
                            None,
                            "    argocd.argoproj.io/hook: PostDelete\n    argocd.argoproj.io/hook-delete-policy: HookSucceeded\n",
                        ),
                    ),
                ],
            ),
        )],
    );
    create_app(&w.cluster, "failing", &repo, "failing", "default").await;
    eventually("synced", async || live_configmap(&w.cluster, "plain").await).await;
    eventually("the post-delete finalizer", async || {
        let app = apps(&w.cluster).get("failing").await.unwrap();
        finalizers(&app)
            .iter()
            .any(|f| f == POST_DELETE_FINALIZER)
            .then_some(())
    })
    .await;
    apps(&w.cluster)
        .delete("failing", &Default::default())
        .await
        .unwrap();
    eventually("the hook created", async || {
        live_job(&w.cluster, NS, "failing-cleanup").await
    })
    .await;
    finish_job(&w.cluster, "failing-cleanup", "Failed").await;
    let condition = eventually("a condition naming the hook", async || {
        condition_with(&w.cluster, "failing", "failing-cleanup").await
    })
    .await;
    assert_eq!(condition["type"], "DeletionError", "{condition}");
    assert_eq!(condition["reason"], "PostDeleteHookFailed", "{condition}");
    assert!(
        condition["message"]
            .as_str()
            .unwrap()
            .contains("the test says Failed"),
        "{condition}"
    );
    let app = apps(&w.cluster).get("failing").await.unwrap();
    assert!(
        finalizers(&app).iter().any(|f| f == POST_DELETE_FINALIZER),
        "{:?}",
        app.metadata
    );
    eventually("the hook run again", async || {
        let job = live_job(&w.cluster, NS, "failing-cleanup").await?;
        job["status"]["conditions"].is_null().then_some(())
    })
    .await;
    finish_job(&w.cluster, "failing-cleanup", "Complete").await;
    eventually("the Application gone", async || {
        app_gone(&w.cluster, "failing").await
    })
    .await;
    assert!(live_job(&w.cluster, NS, "failing-cleanup").await.is_none());
    let _ = w.stop.send(());
}

/// Attack: a PostDelete hook that never completes holds its own
/// Application only, and only for the health timeout: another Application
/// syncs meanwhile (one reconcile at a time), and the stuck one ends with a
/// condition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_delete_hook_that_never_completes_blocks_nothing_else() {
    let w = world(ControllerConfig {
        concurrency: 1,
        health_timeout: Duration::from_secs(4),
        ..ControllerConfig::default()
    })
    .await;
    let repo = ChartRepo::start(None);
    publish(
        &repo,
        "stuck",
        &[(
            "1.0.0",
            chart(
                "stuck",
                "1.0.0",
                &[
                    ("plain.yaml", configmap("stuck-plain", "")),
                    (
                        "cleanup.yaml",
                        job("forever", None, "    helm.sh/hook: post-delete\n"),
                    ),
                ],
            ),
        )],
    );
    create_app(&w.cluster, "stuck", &repo, "stuck", "default").await;
    eventually("the post-delete finalizer", async || {
        let app = apps(&w.cluster).get("stuck").await.unwrap();
        finalizers(&app)
            .iter()
            .any(|f| f == POST_DELETE_FINALIZER)
            .then_some(())
    })
    .await;
    apps(&w.cluster)
        .delete("stuck", &Default::default())
        .await
        .unwrap();
    eventually("the hook created", async || {
        live_job(&w.cluster, NS, "forever").await
    })
    .await;

    // Another Application syncs while the hook runs.
    let other = ChartRepo::start(None);
    publish(
        &other,
        "other",
        &[(
            "1.0.0",
            chart(
                "other",
                "1.0.0",
                &[("plain.yaml", configmap("other-plain", ""))],
            ),
        )],
    );
    create_app(&w.cluster, "other", &other, "other", "default").await;
    eventually("the other Application synced", async || {
        live_configmap(&w.cluster, "other-plain").await
    })
    .await;
    assert!(
        apps(&w.cluster).get_opt("stuck").await.unwrap().is_some(),
        "still waiting for its hook"
    );

    let condition = eventually("the timeout's condition", async || {
        condition_with(&w.cluster, "stuck", "did not complete within").await
    })
    .await;
    assert!(
        condition["message"].as_str().unwrap().contains("forever"),
        "{condition}"
    );
    let app = apps(&w.cluster).get("stuck").await.unwrap();
    assert!(finalizers(&app).iter().any(|f| f == POST_DELETE_FINALIZER));
    let _ = w.stop.send(());
}

/// Attack: a chart whose PostDelete hook names a namespace outside the
/// project's destinations never gets it created — not even at deletion,
/// when the chart changed after the last sync — and the Application says
/// why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_delete_hook_is_held_to_the_project() {
    let w = world(default_config()).await;
    w.cluster
        .apply(
            "appprojects",
            json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "AppProject",
                "metadata": {"name": "tight", "namespace": "kiln"},
                "spec": {"sourceRepos": ["*"], "destinations": [{"server": "*", "namespace": NS}]}}),
            "operator",
            false,
        )
        .await
        .unwrap();
    let repo = ChartRepo::start(None);
    let benign = chart(
        "hostile",
        "1.0.0",
        &[
            ("plain.yaml", configmap("plain", "")),
            (
                "cleanup.yaml",
                job("escape", None, "    helm.sh/hook: post-delete\n"),
            ),
        ],
    );
    publish(&repo, "hostile", &[("1.0.0", benign.clone())]);
    create_app(&w.cluster, "hostile", &repo, "hostile", "tight").await;
    eventually("synced with the post-delete finalizer", async || {
        live_configmap(&w.cluster, "plain").await?;
        let app = apps(&w.cluster).get("hostile").await.unwrap();
        finalizers(&app)
            .iter()
            .any(|f| f == POST_DELETE_FINALIZER)
            .then_some(())
    })
    .await;
    // The chart now sends its hook elsewhere; the Application is deleted.
    let hostile = chart(
        "hostile",
        "1.0.1",
        &[
            ("plain.yaml", configmap("plain", "")),
            (
                "cleanup.yaml",
                job(
                    "escape",
                    Some("kube-system"),
                    "    helm.sh/hook: post-delete\n",
                ),
            ),
        ],
    );
    publish(&repo, "hostile", &[("1.0.0", benign), ("1.0.1", hostile)]);
    apps(&w.cluster)
        .delete("hostile", &Default::default())
        .await
        .unwrap();
    let condition = eventually("a condition naming the violation", async || {
        condition_with(&w.cluster, "hostile", "kube-system").await
    })
    .await;
    assert_eq!(condition["type"], "DeletionError", "{condition}");
    assert!(
        live_job(&w.cluster, "kube-system", "escape")
            .await
            .is_none()
    );
    assert!(live_job(&w.cluster, NS, "escape").await.is_none());
    let app = apps(&w.cluster).get("hostile").await.unwrap();
    assert!(finalizers(&app).iter().any(|f| f == POST_DELETE_FINALIZER));
    let _ = w.stop.send(());
}

/// Attack: a chart's PreDelete hooks name other teams' failed Jobs: one
/// nobody tracks, one another Application tracks. Deleting the Application
/// must not delete them "to run them again": the deletion stops with a
/// condition naming each, and both Jobs stay as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_hook_never_deletes_an_object_it_does_not_track() {
    let w = world(default_config()).await;
    let mut uids = Vec::new();
    for (name, owner) in [("victim", None), ("other-victim", Some("other"))] {
        let mut metadata = json!({"name": name, "namespace": NS});
        if let Some(app) = owner {
            metadata["labels"] = json!({"kiln.dev/app": app});
            metadata["annotations"] =
                json!({"kiln.dev/tracking-id": format!("{app}:batch/Job:{NS}/{name}")});
        }
        let victim = w
            .cluster
            .apply(
                "jobs",
                json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
                    "spec": {"template": {"spec": {"restartPolicy": "Never",
                        "containers": [{"name": "run", "image": "busybox"}]}}}}),
                "other-team",
                false,
            )
            .await
            .unwrap();
        finish_job(&w.cluster, name, "Failed").await;
        uids.push((name, victim["metadata"]["uid"].clone()));
    }
    let repo = ChartRepo::start(None);
    publish(
        &repo,
        "grabby",
        &[(
            "1.0.0",
            chart(
                "grabby",
                "1.0.0",
                &[
                    ("plain.yaml", configmap("plain", "")),
                    (
                        "victim.yaml",
                        job("victim", None, "    helm.sh/hook: pre-delete\n"),
                    ),
                    (
                        "other-victim.yaml",
                        job("other-victim", None, "    helm.sh/hook: pre-delete\n"),
                    ),
                ],
            ),
        )],
    );
    create_app(&w.cluster, "grabby", &repo, "grabby", "default").await;
    eventually("synced with the pre-delete finalizer", async || {
        live_configmap(&w.cluster, "plain").await?;
        let app = apps(&w.cluster).get("grabby").await.unwrap();
        finalizers(&app)
            .iter()
            .any(|f| f == PRE_DELETE_FINALIZER)
            .then_some(())
    })
    .await;
    apps(&w.cluster)
        .delete("grabby", &Default::default())
        .await
        .unwrap();
    let condition = eventually("a condition naming the Jobs", async || {
        condition_with(&w.cluster, "grabby", "victim").await
    })
    .await;
    assert_eq!(condition["type"], "DeletionError", "{condition}");
    let message = condition["message"].as_str().unwrap();
    for (name, uid) in &uids {
        assert!(
            message.contains(&format!(
                "batch/Job {NS}/{name} exists and is not this application's hook"
            )),
            "{condition}"
        );
        let live = live_job(&w.cluster, NS, name).await.expect("the Job stays");
        assert_eq!(&live["metadata"]["uid"], uid, "the very same Job: {live}");
        assert!(live["metadata"]["deletionTimestamp"].is_null(), "{live}");
    }
    assert!(live_configmap(&w.cluster, "plain").await.is_some());
    let app = apps(&w.cluster).get("grabby").await.unwrap();
    assert!(finalizers(&app).iter().any(|f| f == PRE_DELETE_FINALIZER));
    let _ = w.stop.send(());
}

/// Attack: a live PreDelete hook whose delete policy someone rewrote to
/// nonsense does not hold its Application forever: it is cleaned up as a
/// hook without a policy is, and the Application goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_whose_live_delete_policy_is_invalid_is_still_cleaned_up() {
    let w = world(default_config()).await;
    let repo = ChartRepo::start(None);
    publish(
        &repo,
        "garbled",
        &[(
            "1.0.0",
            chart(
                "garbled",
                "1.0.0",
                &[
                    ("plain.yaml", configmap("plain", "")),
                    (
                        "prepare.yaml",
                        job(
                            "garbled-prepare",
                            None,
                            "    helm.sh/hook: pre-delete\n    helm.sh/hook-delete-policy: hook-succeeded\n",
                        ),
                    ),
                ],
            ),
        )],
    );
    create_app(&w.cluster, "garbled", &repo, "garbled", "default").await;
    eventually("the pre-delete finalizer", async || {
        let app = apps(&w.cluster).get("garbled").await.unwrap();
        finalizers(&app)
            .iter()
            .any(|f| f == PRE_DELETE_FINALIZER)
            .then_some(())
    })
    .await;
    apps(&w.cluster)
        .delete("garbled", &Default::default())
        .await
        .unwrap();
    eventually("the hook created", async || {
        live_job(&w.cluster, NS, "garbled-prepare").await
    })
    .await;
    let garble =
        json!({"metadata": {"annotations": {"helm.sh/hook-delete-policy": "not-a-policy"}}});
    w.cluster
        .api("batch/v1", "Job", "jobs", Some(NS))
        .patch(
            "garbled-prepare",
            &PatchParams::default(),
            &Patch::Merge(&garble),
        )
        .await
        .unwrap();
    finish_job(&w.cluster, "garbled-prepare", "Complete").await;
    eventually("the Application gone", async || {
        app_gone(&w.cluster, "garbled").await
    })
    .await;
    assert!(live_job(&w.cluster, NS, "garbled-prepare").await.is_none());
    assert!(live_configmap(&w.cluster, "plain").await.is_none());
    let _ = w.stop.send(());
}
