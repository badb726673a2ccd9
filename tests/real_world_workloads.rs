//! Real-world workloads sync and stay in sync: sixteen applications written
//! for the project in the shape real charts render (tests/data/workloads, see
//! its README for the constructs each covers) are synced into a
//! dev cluster with Kiln's sync engine; right after, `kiln diff` reports every
//! object in sync — both with the server's prediction (a `dryRun=All` apply)
//! and with the structural comparison used where no prediction is possible —
//! and a second sync writes nothing (no watch event, every `resourceVersion`
//! unchanged).

mod support;

use std::time::Duration;

use kiln::cluster::Cluster as KubeCluster;
use kiln::diff::{self, DiffOptions, SyncStatus};
use kiln::sync::{Application, Engine, Outcome, SyncOptions};
use kiln_devcluster::Config;
use serde_json::Value;
use support::cluster::Cluster;

fn objects(workload: &str) -> Vec<Value> {
    let path = format!(
        "{}/tests/data/workloads/{workload}.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    kiln::manifest::parse(&text, Some(&path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .into_iter()
        .map(|object| Value::Object(object.value().clone()))
        .collect()
}

fn options() -> SyncOptions {
    SyncOptions {
        create_namespace: true,
        poll_interval: Duration::from_millis(20),
        health_timeout: Duration::from_secs(20),
        ..SyncOptions::default()
    }
}

/// Syncs `workload`, diffs it twice (predicted and structural), syncs again;
/// panics with every problem found.
async fn sync_then_diff(workload: &str) {
    let cluster = Cluster::with(Config {
        simulate_readiness: Some(Duration::from_millis(10)),
        ..Config::default()
    })
    .await;
    let kube = KubeCluster::new(cluster.client.clone());
    let app = Application {
        name: workload.into(),
        namespace: Some(workload.into()),
    };
    let engine = Engine::new(&kube, app, options());
    let desired = objects(workload);
    let mut problems = Vec::new();

    let first = engine.sync(desired.clone()).await.unwrap();
    if first.outcome != Outcome::Succeeded {
        problems.push(format!("first sync: {}", first.message));
    }

    let report = engine
        .diff(desired.clone(), &DiffOptions::default())
        .await
        .unwrap();
    if !report.in_sync() {
        problems.push(format!(
            "diff right after the sync:\n{}",
            diff::output::text(&report, false)
        ));
    }

    // The structural comparison (what `kiln diff` does where the server
    // cannot predict): live objects against the prepared desired ones.
    let mut structural = diff::Report::default();
    for object in engine.prepare(desired.clone()).await {
        let key = kiln::manifest::ObjectKey::of(&object);
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let Ok(resolved) = kube.resolve(api_version, &key.kind).await else {
            problems.push(format!("{api_version} {} is not served", key.kind));
            continue;
        };
        let live = kube
            .api(&resolved, key.namespace.as_deref())
            .get_opt(&key.name)
            .await
            .unwrap()
            .map(|o| serde_json::to_value(o).unwrap());
        let compared = diff::compare(Some(&object), live.as_ref(), None, &DiffOptions::default())
            .await
            .unwrap();
        if compared.status != SyncStatus::Synced {
            structural.objects.push(compared);
        }
    }
    if !structural.objects.is_empty() {
        problems.push(format!(
            "structural diff right after the sync:\n{}",
            diff::output::text(&structural, false)
        ));
    }

    // Let the simulated readiness settle, then watch for any write.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut feed = cluster.server.store().subscribe();
    let second = engine.sync(desired).await.unwrap();
    if second.outcome != Outcome::Succeeded {
        problems.push(format!("second sync: {}", second.message));
    }
    let mut writes = Vec::new();
    while let Ok(event) = feed.try_recv() {
        writes.push(format!(
            "{:?} {} {}",
            event.kind, event.object["kind"], event.object["metadata"]["name"]
        ));
    }
    if !writes.is_empty() {
        problems.push(format!("the second sync wrote: {writes:?}"));
    }
    assert!(
        problems.is_empty(),
        "{workload}:\n{}",
        problems.join("\n\n")
    );
}

macro_rules! workloads {
    ($($test:ident => $workload:literal),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            sync_then_diff($workload).await;
        }
    )*};
}

workloads! {
    cache_is_in_sync_after_a_sync => "cache",
    certificate_manager_is_in_sync_after_a_sync => "certificate-manager",
    dashboard_is_in_sync_after_a_sync => "dashboard",
    dashboards_is_in_sync_after_a_sync => "dashboards",
    database_is_in_sync_after_a_sync => "database",
    gitops_controller_is_in_sync_after_a_sync => "gitops-controller",
    ingress_controller_is_in_sync_after_a_sync => "ingress-controller",
    log_shipper_is_in_sync_after_a_sync => "log-shipper",
    metrics_adapter_is_in_sync_after_a_sync => "metrics-adapter",
    metrics_exporter_is_in_sync_after_a_sync => "metrics-exporter",
    metrics_server_is_in_sync_after_a_sync => "metrics-server",
    monitoring_stack_is_in_sync_after_a_sync => "monitoring-stack",
    node_agent_is_in_sync_after_a_sync => "node-agent",
    probe_exporter_is_in_sync_after_a_sync => "probe-exporter",
    pushgateway_is_in_sync_after_a_sync => "pushgateway",
    workflow_engine_is_in_sync_after_a_sync => "workflow-engine",
}
