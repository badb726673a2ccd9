//! The sync engine against `kiln dev-cluster`: waves and hooks in order,
//! prune, idempotence, drift, secrets, and honest failures.

mod support;

use std::time::Duration;

use kiln::cluster::Cluster as KubeCluster;
use kiln::diff::{self, DiffOptions, SyncStatus};
use kiln::sync::{Action, Application, Engine, Outcome, SyncOptions};
use kiln_devcluster::{Config, EventKind};
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use support::cluster::Cluster;

fn app() -> Application {
    Application {
        name: "guestbook".into(),
        namespace: Some("default".into()),
    }
}

fn fast() -> SyncOptions {
    SyncOptions {
        poll_interval: Duration::from_millis(20),
        health_timeout: Duration::from_secs(10),
        ..SyncOptions::default()
    }
}

async fn ready_cluster() -> Cluster {
    Cluster::with(Config {
        simulate_readiness: Some(Duration::from_millis(30)),
        ..Config::default()
    })
    .await
}

fn cm(name: &str, annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "annotations": annotations}, "data": {"k": name}})
}

fn deployment(name: &str, image: &str, annotations: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "annotations": annotations},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": name, "image": image}]}}}})
}

fn job(name: &str, hook: &str, policy: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name,
            "annotations": {"kiln.dev/hook": hook, "kiln.dev/hook-delete-policy": policy}},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "run", "image": "busybox"}]}}}})
}

fn actions(result: &kiln::sync::SyncResult) -> Vec<String> {
    result
        .objects
        .iter()
        .map(|o| format!("{} {}", o.action, o.key))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waves_and_hooks_apply_in_order_and_hooks_are_cleaned_up() {
    let cluster = ready_cluster().await;
    let kube = KubeCluster::new(cluster.client.clone());
    let mut feed = cluster.server.store().subscribe();
    let objects = vec![
        cm("last", json!({"kiln.dev/sync-wave": "2"})),
        deployment(
            "web",
            "nginx:1.27",
            json!({"argocd.argoproj.io/sync-wave": "1"}),
        ),
        cm("config", json!({})),
        job("migrate", "PreSync", "HookSucceeded"),
        job("notify", "PostSync", "BeforeHookCreation"),
    ];
    let result = Engine::new(&kube, app(), fast())
        .sync(objects)
        .await
        .unwrap();
    assert_eq!(
        result.outcome,
        Outcome::Succeeded,
        "{}: {:?}",
        result.message,
        actions(&result)
    );
    assert_eq!(
        actions(&result),
        vec![
            "HookSucceeded batch/Job default/migrate",
            "Created ConfigMap default/config",
            "Created apps/Deployment default/web",
            "Created ConfigMap default/last",
            "HookSucceeded batch/Job default/notify",
        ]
    );
    // The order the API server saw, from its own event feed.
    let mut seen = Vec::new();
    while let Ok(event) = feed.try_recv() {
        let name = event.object["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_owned();
        match event.kind {
            EventKind::Added => seen.push(format!("+{name}")),
            EventKind::Deleted => seen.push(format!("-{name}")),
            EventKind::Modified => {}
        }
    }
    assert_eq!(
        seen,
        vec![
            "+migrate", "-migrate", "+config", "+web", "+last", "+notify"
        ]
    );
    let jobs = cluster.api("batch/v1", "Job", "jobs", Some("default"));
    assert!(
        jobs.get_opt("migrate").await.unwrap().is_none(),
        "HookSucceeded: deleted"
    );
    assert!(
        jobs.get_opt("notify").await.unwrap().is_some(),
        "BeforeHookCreation: kept until the next run"
    );

    // The next sync replaces the PostSync hook and changes nothing else.
    let again = Engine::new(&kube, app(), fast())
        .sync(vec![
            cm("config", json!({})),
            job("notify", "PostSync", "BeforeHookCreation"),
        ])
        .await
        .unwrap();
    assert_eq!(again.outcome, Outcome::Succeeded, "{}", again.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_never_replaces_an_object_the_application_does_not_track() {
    let cluster = ready_cluster().await;
    let kube = KubeCluster::new(cluster.client.clone());
    let jobs = cluster.api("batch/v1", "Job", "jobs", Some("default"));
    for policy in ["BeforeHookCreation", "HookSucceeded"] {
        // Another team's Job, with the name a chart gives its hook.
        let mut theirs = job("victim", "PreSync", policy);
        theirs["metadata"]["namespace"] = "default".into();
        theirs["metadata"]["annotations"] = json!({});
        let theirs = cluster
            .apply("jobs", theirs, "other-team", false)
            .await
            .unwrap();
        let result = Engine::new(&kube, app(), fast())
            .sync(vec![
                job("victim", "PreSync", policy),
                cm("config", json!({})),
            ])
            .await
            .unwrap();
        assert_ne!(
            result.outcome,
            Outcome::Succeeded,
            "{policy}: {}",
            result.message
        );
        assert!(
            format!("{result:?}").contains("exists and is not this application's hook"),
            "{policy}: {result:?}"
        );
        let live = jobs.get_opt("victim").await.unwrap().expect("still there");
        assert_eq!(
            live.metadata.uid,
            theirs["metadata"]["uid"].as_str().map(str::to_owned),
            "{policy}: the other team's Job was replaced"
        );
        assert!(live.metadata.deletion_timestamp.is_none());
        jobs.delete("victim", &Default::default()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_wave_stops_the_sync_and_runs_sync_fail_hooks() {
    let cluster = ready_cluster().await;
    let kube = KubeCluster::new(cluster.client.clone());
    let mut broken = deployment("broken", "nginx", json!({}));
    broken["spec"]["template"]["spec"]["containers"] = json!([]);
    let objects = vec![
        broken,
        cm("fine", json!({})),
        cm("later", json!({"kiln.dev/sync-wave": "1"})),
        job("cleanup", "SyncFail", "BeforeHookCreation"),
    ];
    let result = Engine::new(&kube, app(), fast())
        .sync(objects)
        .await
        .unwrap();
    assert_eq!(result.outcome, Outcome::Failed);
    assert!(
        result.message.contains("apps/Deployment default/broken"),
        "{}",
        result.message
    );
    let failed = result
        .objects
        .iter()
        .find(|o| o.action == Action::Failed)
        .unwrap();
    assert!(
        failed.message.contains("422") && failed.message.contains("containers"),
        "{}",
        failed.message
    );
    assert_eq!(
        actions(&result),
        vec![
            "Created ConfigMap default/fine",
            "Failed apps/Deployment default/broken",
            "HookSucceeded batch/Job default/cleanup",
        ],
        "wave 1 never ran; the SyncFail hook did"
    );
    let cms = cluster.api("v1", "ConfigMap", "configmaps", Some("default"));
    assert!(cms.get_opt("later").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_removes_what_left_git_and_nothing_else() {
    let cluster = Cluster::start().await;
    let kube = KubeCluster::new(cluster.client.clone());
    let options = SyncOptions {
        prune: true,
        ..fast()
    };
    let first = vec![
        cm("keep", json!({})),
        cm("drop", json!({})),
        cm("protected", json!({"kiln.dev/sync-options": "Prune=false"})),
    ];
    Engine::new(&kube, app(), options.clone())
        .sync(first)
        .await
        .unwrap();
    // Not Kiln's: never touched. A copied label alone does not make it Kiln's.
    cluster.apply("configmaps", json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "untracked", "namespace": "default", "labels": {"kiln.dev/app": "guestbook"}}}), "kubectl", false).await.unwrap();
    let result = Engine::new(&kube, app(), options.clone())
        .sync(vec![cm("keep", json!({}))])
        .await
        .unwrap();
    assert_eq!(result.outcome, Outcome::Succeeded);
    let mut lines = actions(&result);
    lines.sort();
    assert_eq!(
        lines,
        vec![
            "PruneSkipped ConfigMap default/protected",
            "Pruned ConfigMap default/drop",
            "Unchanged ConfigMap default/keep"
        ]
    );
    let cms = cluster.api("v1", "ConfigMap", "configmaps", Some("default"));
    assert!(cms.get_opt("drop").await.unwrap().is_none());
    assert!(cms.get_opt("untracked").await.unwrap().is_some());
    assert!(cms.get_opt("protected").await.unwrap().is_some());

    // Without --prune, the extraneous object is only reported.
    Engine::new(&kube, app(), options.clone())
        .sync(vec![cm("keep", json!({})), cm("drop", json!({}))])
        .await
        .unwrap();
    let report = Engine::new(&kube, app(), fast())
        .sync(vec![cm("keep", json!({}))])
        .await
        .unwrap();
    assert!(actions(&report).contains(&"PruneSkipped ConfigMap default/drop".to_owned()));
    assert!(cms.get_opt("drop").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sync_of_the_same_input_writes_nothing() {
    let cluster = Cluster::start().await;
    let kube = KubeCluster::new(cluster.client.clone());
    let objects = || {
        vec![
            cm("a", json!({})),
            deployment("web", "nginx:1.27", json!({})),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}),
        ]
    };
    let first = Engine::new(&kube, app(), fast())
        .sync(objects())
        .await
        .unwrap();
    assert_eq!(first.count(Action::Created), 3, "{:?}", actions(&first));
    let before = cluster.server.store().resource_version();
    let second = Engine::new(&kube, app(), fast())
        .sync(objects())
        .await
        .unwrap();
    assert_eq!(second.count(Action::Unchanged), 3, "{:?}", actions(&second));
    assert_eq!(
        cluster.server.store().resource_version(),
        before,
        "zero writes"
    );
    let skipping = SyncOptions {
        apply_out_of_sync_only: true,
        ..fast()
    };
    let third = Engine::new(&kube, app(), skipping)
        .sync(objects())
        .await
        .unwrap();
    assert_eq!(third.count(Action::Skipped), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_drift_shows_out_of_sync_and_the_next_sync_restores_it() {
    let cluster = Cluster::start().await;
    let kube = KubeCluster::new(cluster.client.clone());
    let objects = || vec![deployment("web", "nginx:1.27", json!({}))];
    Engine::new(&kube, app(), fast())
        .sync(objects())
        .await
        .unwrap();
    let engine = Engine::new(&kube, app(), fast());
    let report = engine
        .diff(objects(), &DiffOptions::default())
        .await
        .unwrap();
    assert!(
        report.in_sync(),
        "defaulted fields are not drift: {}",
        diff::output::text(&report, false)
    );

    // `kubectl edit`: an imperative change by another manager.
    let deployments = cluster.api("apps/v1", "Deployment", "deployments", Some("default"));
    let edit = PatchParams {
        field_manager: Some("kubectl-edit".into()),
        ..PatchParams::default()
    };
    deployments
        .patch("web", &edit, &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:hacked"}]}}}})))
        .await
        .unwrap();
    let report = engine
        .diff(objects(), &DiffOptions::default())
        .await
        .unwrap();
    assert_eq!(report.objects[0].status, SyncStatus::OutOfSync);
    let text = diff::output::text(&report, false);
    assert!(
        text.contains("-        image: nginx:hacked")
            && text.contains("+        image: nginx:1.27"),
        "{text}"
    );

    let result = engine.sync(objects()).await.unwrap();
    assert_eq!(result.outcome, Outcome::Succeeded, "{}", result.message);
    let live = deployments.get("web").await.unwrap();
    assert_eq!(
        live.data["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
    assert!(
        engine
            .diff(objects(), &DiffOptions::default())
            .await
            .unwrap()
            .in_sync()
    );

    // Another *declarative* owner is a conflict, reported with its name.
    cluster
        .apply("deployments", json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 4}}), "other-gitops", true)
        .await
        .unwrap();
    let conflicted = engine.sync(objects()).await.unwrap();
    assert_eq!(conflicted.outcome, Outcome::Failed);
    let failed = conflicted
        .objects
        .iter()
        .find(|o| o.action == Action::Failed)
        .unwrap();
    assert!(
        failed.message.contains("other-gitops") && failed.message.contains(".spec.replicas"),
        "{}",
        failed.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_values_never_appear_in_any_output() {
    let cluster = Cluster::start().await;
    let kube = KubeCluster::new(cluster.client.clone());
    let secret = |password: &str| json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "stringData": {"password": password}});
    let engine = Engine::new(&kube, app(), fast());
    let synced = engine.sync(vec![secret("first-Secret-1")]).await.unwrap();
    let report = engine
        .diff(vec![secret("second-Secret-2")], &DiffOptions::default())
        .await
        .unwrap();
    assert_eq!(report.objects[0].status, SyncStatus::OutOfSync);
    let outputs = [
        diff::output::text(&report, false),
        diff::output::text(&report, true),
        diff::output::json(&report),
        format!("{report:?}"),
        serde_json::to_string(&synced).unwrap(),
        format!("{synced:?}"),
    ];
    use base64::Engine as _;
    for plain in ["first-Secret-1", "second-Secret-2"] {
        let encoded = base64::engine::general_purpose::STANDARD.encode(plain);
        for output in &outputs {
            assert!(
                !output.contains(plain) && !output.contains(&encoded),
                "{plain} leaked:\n{output}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_ends_in_per_object_errors_and_an_honest_summary() {
    let cluster = Cluster::start().await;
    let kube = KubeCluster::new(cluster.client.clone());
    let unknown =
        json!({"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": "g"}});
    let result = Engine::new(&kube, app(), fast())
        .sync(vec![cm("ok", json!({})), unknown])
        .await
        .unwrap();
    assert_eq!(result.outcome, Outcome::Failed);
    let failed = result
        .objects
        .iter()
        .find(|o| o.action == Action::Failed)
        .unwrap();
    assert!(
        failed.message.contains("does not serve Gizmo"),
        "{}",
        failed.message
    );
    assert!(result.message.contains("Gizmo"), "{}", result.message);

    let elsewhere = Application {
        name: "guestbook".into(),
        namespace: Some("team-a".into()),
    };
    let missing = Engine::new(&kube, elsewhere.clone(), fast())
        .sync(vec![cm("c", json!({}))])
        .await
        .unwrap();
    assert_eq!(missing.outcome, Outcome::Failed);
    assert!(
        missing.objects[0]
            .message
            .contains("namespaces \"team-a\" not found"),
        "{}",
        missing.objects[0].message
    );
    let created = Engine::new(
        &kube,
        elsewhere,
        SyncOptions {
            create_namespace: true,
            ..fast()
        },
    )
    .sync(vec![cm("c", json!({}))])
    .await
    .unwrap();
    assert_eq!(created.outcome, Outcome::Succeeded, "{}", created.message);

    // A CRD and its custom resource in one set: the CRD goes first.
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "gizmos.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    let both = vec![
        json!({"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": "g"}}),
        crd,
    ];
    let result = Engine::new(&kube, app(), fast()).sync(both).await.unwrap();
    assert_eq!(
        result.outcome,
        Outcome::Succeeded,
        "{}: {:?}",
        result.message,
        actions(&result)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_sync_is_retried_with_backoff_and_says_how_often() {
    let cluster = Cluster::start().await;
    let kube = KubeCluster::new(cluster.client.clone());
    let options = SyncOptions {
        retry: kiln::sync::RetryPolicy {
            limit: 2,
            duration: Duration::from_millis(10),
            factor: 2,
            max_duration: Duration::from_millis(50),
        },
        ..fast()
    };
    let elsewhere = Application {
        name: "guestbook".into(),
        namespace: Some("nowhere".into()),
    };
    let result = Engine::new(&kube, elsewhere, options)
        .sync(vec![cm("c", json!({}))])
        .await
        .unwrap();
    assert_eq!(result.outcome, Outcome::Failed);
    assert_eq!(result.attempts, 3, "the first attempt and two retries");
    assert!(
        result.message.contains("namespaces \"nowhere\" not found"),
        "{}",
        result.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_ends_the_sync_cleanly_between_waves() {
    // Readiness takes long enough that the interrupt lands while the first
    // wave is being waited for.
    let cluster = Cluster::with(Config {
        simulate_readiness: Some(Duration::from_secs(30)),
        ..Config::default()
    })
    .await;
    let kube = KubeCluster::new(cluster.client.clone());
    let stale = cm("stale", json!({}));
    Engine::new(&kube, app(), fast())
        .sync(vec![stale])
        .await
        .unwrap();
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let raise = flag.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        raise.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let options = SyncOptions {
        prune: true,
        retry: kiln::sync::RetryPolicy {
            limit: 3,
            ..Default::default()
        },
        ..fast()
    };
    let result = Engine::new(&kube, app(), options)
        .with_interrupt(flag)
        .sync(vec![
            deployment("web", "nginx:1.27", json!({"kiln.dev/sync-wave": "0"})),
            cm("after", json!({"kiln.dev/sync-wave": "1"})),
        ])
        .await
        .unwrap();
    assert_eq!(result.outcome, Outcome::Terminated, "{}", result.message);
    assert_eq!(result.attempts, 1, "an interrupted sync is not retried");
    assert!(
        result
            .message
            .contains("interrupted before Sync wave 1: 1 of 2 waves applied; nothing pruned"),
        "{}",
        result.message
    );
    assert_eq!(
        actions(&result),
        vec!["Created apps/Deployment default/web"]
    );
    let cms = cluster.api("v1", "ConfigMap", "configmaps", Some("default"));
    assert!(
        cms.get_opt("after").await.unwrap().is_none(),
        "wave 1 never started"
    );
    assert!(
        cms.get_opt("stale").await.unwrap().is_some(),
        "nothing pruned"
    );
}

/// A set full of kinds the cluster does not serve costs a discovery round
/// per interval, not one per object, and a sync does not wait for kinds no
/// CRD of the set defines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_kinds_cost_one_discovery_round_not_one_per_object() {
    let cluster = ready_cluster().await;
    let kube = KubeCluster::new(cluster.client.clone());
    for i in 0..200 {
        let error = kube
            .resolve("bogus.example/v1", &format!("Bogus{i}"))
            .await
            .unwrap_err();
        assert!(error.to_string().contains("does not serve"), "{error}");
    }
    assert!(
        kube.discovery_rounds() < 20,
        "{} discovery rounds for 200 unknown kinds",
        kube.discovery_rounds()
    );
}

/// Pruning is held to a guard (the controller's: the project's rules): a
/// tracked object the guard refuses is reported, not deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_deletes_only_what_the_guard_allows() {
    let cluster = Cluster::start().await;
    let kube = KubeCluster::new(cluster.client.clone());
    let options = SyncOptions {
        prune: true,
        ..fast()
    };
    Engine::new(&kube, app(), options.clone())
        .sync(vec![cm("mine", json!({})), cm("guarded", json!({}))])
        .await
        .unwrap();
    let guard: kiln::sync::PruneGuard = std::sync::Arc::new(|key, _namespaced| {
        if key.name == "guarded" {
            Err("outside the project".to_owned())
        } else {
            Ok(())
        }
    });
    let result = Engine::new(&kube, app(), options)
        .with_prune_guard(guard)
        .sync(vec![])
        .await
        .unwrap();
    let mut lines = actions(&result);
    lines.sort();
    assert_eq!(
        lines,
        vec![
            "PruneSkipped ConfigMap default/guarded",
            "Pruned ConfigMap default/mine"
        ]
    );
    let skipped = result
        .objects
        .iter()
        .find(|o| o.action == Action::PruneSkipped)
        .unwrap();
    assert!(
        skipped.message.contains("outside the project"),
        "{}",
        skipped.message
    );
    let cms = cluster.api("v1", "ConfigMap", "configmaps", Some("default"));
    assert!(cms.get_opt("guarded").await.unwrap().is_some());
}

/// A failed discovery round counts: lookups within the interval get its
/// error at once instead of each running discovery again.
#[tokio::test]
async fn a_failed_discovery_round_is_not_repeated_by_every_lookup() {
    let unreachable = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
    let client = kube::Client::try_from(unreachable).unwrap();
    let kube = KubeCluster::new(client);
    for i in 0..20 {
        let error = kube.resolve("v1", &format!("Kind{i}")).await.unwrap_err();
        assert!(error.to_string().contains("discover"), "{error}");
    }
    assert!(kube.discovery_rounds() < 5, "{}", kube.discovery_rounds());
}
