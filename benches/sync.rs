//! Diff and sync benchmarks. In one run, side by side:
//! - the structural diff of 1,000 objects, all in sync and with 10% drift;
//! - the cluster diff (server-side dry-run per object) of 1,000 objects in
//!   the dev cluster;
//! - a full `kiln sync` of 500 objects into the dev cluster, next to
//!   `kubectl apply --server-side` of the same 500 objects into another,
//!   and the no-op second sync.
//!
//! Run with `cargo bench --bench sync`; results are recorded in
//! `docs/benchmarks.md`.

use std::time::{Duration, Instant};

use kiln::cluster::Cluster;
use kiln::diff::{self, DiffOptions};
use kiln::sync::{Action, Application, Engine, SyncOptions};
use kiln_devcluster::{Config, DevCluster};
use serde_json::{Value, json};

fn object(i: usize) -> Value {
    if i.is_multiple_of(2) {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("settings-{i}"), "namespace": "default",
            "labels": {"app": "bench", "index": i.to_string()}},
            "data": {"LOG_LEVEL": "info", "FEATURE": format!("f{i}"), "URL": format!("https://svc-{i}.example.com")}})
    } else {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": format!("web-{i}"), "namespace": "default",
            "labels": {"app": format!("web-{i}")}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": format!("web-{i}")}},
                "template": {"metadata": {"labels": {"app": format!("web-{i}")}}, "spec": {"containers": [
                    {"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}],
                     "env": [{"name": "INDEX", "value": i.to_string()}],
                     "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}}}]}}}})
    }
}

/// What the API server would hold: defaults and server fields added.
fn live(desired: &Value, drift: bool) -> Value {
    let mut live = desired.clone();
    live["metadata"]["uid"] = json!("6b1f0c1e-0000-4000-8000-000000000000");
    live["metadata"]["resourceVersion"] = json!("12345");
    live["metadata"]["creationTimestamp"] = json!("2026-12-01T00:00:00Z");
    live["metadata"]["managedFields"] = json!([{"manager": "kiln", "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {}}}}]);
    if live["kind"] == "Deployment" {
        live["spec"]["revisionHistoryLimit"] = json!(10);
        live["spec"]["strategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}});
        live["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] =
            json!("IfNotPresent");
        live["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"] = json!("TCP");
        live["status"] = json!({"replicas": 2, "readyReplicas": 2});
        if drift {
            live["spec"]["replicas"] = json!(5);
        }
    } else if drift {
        live["data"]["LOG_LEVEL"] = json!("debug");
    }
    live
}

fn per_second(count: usize, elapsed: Duration) -> String {
    format!("{:.0}/s", count as f64 / elapsed.as_secs_f64())
}

async fn cluster() -> (DevCluster, Cluster) {
    let server = DevCluster::start(Config::default()).await.unwrap();
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    (server, Cluster::new(client))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // Structural diff, CPU only.
    let options = DiffOptions::default();
    let desired: Vec<Value> = (0..1000).map(object).collect();
    for (label, drift_every) in [("in sync", None), ("10% drift", Some(10))] {
        let lives: Vec<Value> = desired
            .iter()
            .enumerate()
            .map(|(i, d)| live(d, drift_every.is_some_and(|n| i.is_multiple_of(n))))
            .collect();
        let mut best = Duration::MAX;
        let mut drifted = 0;
        for _ in 0..5 {
            let begin = Instant::now();
            drifted = 0;
            for (d, l) in desired.iter().zip(&lives) {
                let result = diff::compare(Some(d), Some(l), None, &options)
                    .await
                    .unwrap();
                if result.status != diff::SyncStatus::Synced {
                    drifted += 1;
                }
            }
            best = best.min(begin.elapsed());
        }
        println!(
            "structural diff of 1000 objects ({label}, {drifted} out of sync): {:?}, {}",
            best,
            per_second(1000, best)
        );
    }

    // Sync of 500 objects, then kubectl apply --server-side of the same set.
    let objects: Vec<Value> = (0..500).map(object).collect();
    let app = Application {
        name: "bench".into(),
        namespace: Some("default".into()),
    };
    let (server, kube) = cluster().await;
    let engine = Engine::new(&kube, app.clone(), SyncOptions::default());
    let begin = Instant::now();
    let first = engine.sync(objects.clone()).await.unwrap();
    let sync_time = begin.elapsed();
    assert_eq!(first.count(Action::Created), 500, "{}", first.message);
    let begin = Instant::now();
    let second = engine.sync(objects.clone()).await.unwrap();
    let noop_time = begin.elapsed();
    assert_eq!(second.count(Action::Unchanged), 500);

    let (kubectl_server, _) = cluster().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    kubectl_server.write_kubeconfig(&kubeconfig).unwrap();
    let manifests = dir.path().join("objects.yaml");
    let stream: Vec<String> = objects
        .iter()
        .map(|o| serde_yaml::to_string(o).unwrap())
        .collect();
    std::fs::write(&manifests, stream.join("---\n")).unwrap();
    let begin = Instant::now();
    let status = tokio::task::spawn_blocking(move || {
        std::process::Command::new("kubectl")
            .args([
                "--kubeconfig",
                kubeconfig.to_str().unwrap(),
                "--cache-dir",
                dir.path().join("cache").to_str().unwrap(),
            ])
            .args([
                "apply",
                "--server-side",
                "--field-manager",
                "bench",
                "-f",
                manifests.to_str().unwrap(),
            ])
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap()
    })
    .await
    .unwrap();
    let kubectl_time = begin.elapsed();
    assert!(status.success());
    println!(
        "kiln sync of 500 objects (created): {:?}, {}",
        sync_time,
        per_second(500, sync_time)
    );
    println!(
        "kubectl apply --server-side of the same 500 objects: {:?}, {}",
        kubectl_time,
        per_second(500, kubectl_time)
    );
    println!(
        "kiln / kubectl time ratio: {:.2}x",
        sync_time.as_secs_f64() / kubectl_time.as_secs_f64()
    );
    println!(
        "kiln sync of the same 500 objects again (no writes): {:?}, {}",
        noop_time,
        per_second(500, noop_time)
    );

    // Cluster diff: a server-side dry-run per object, 1000 objects.
    let more: Vec<Value> = (0..1000).map(object).collect();
    engine.sync(more.clone()).await.unwrap();
    let begin = Instant::now();
    let report = engine.diff(more, &options).await.unwrap();
    let diff_time = begin.elapsed();
    assert!(report.in_sync());
    println!(
        "cluster diff of 1000 objects (dry-run apply each, in sync): {:?}, {}",
        diff_time,
        per_second(1000, diff_time)
    );
    server.shutdown().await.unwrap();
    kubectl_server.shutdown().await.unwrap();
}
