//! Simulated readiness: without kubelets nothing ever becomes ready, so when
//! asked, the dev cluster writes a plausible `status` on workloads after a
//! delay, as their controllers would once the pods were up; and it plays
//! a load balancer and an ingress controller: LoadBalancer Services and
//! Ingresses get an address (from 203.0.113.0/24, documentation space), as
//! on a cloud cluster. Health assessment can then be tested and
//! demonstrated.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::store::{EventKind, Store, now};

const WORKLOADS: [(&str, &str); 5] = [
    ("apps", "deployments"),
    ("apps", "statefulsets"),
    ("apps", "daemonsets"),
    ("apps", "replicasets"),
    ("batch", "jobs"),
];

/// Addressed objects: LoadBalancer Services and Ingresses.
const ADDRESSED: [(&str, &str); 2] = [("", "services"), ("networking.k8s.io", "ingresses")];

/// Runs until `shutdown`: every workload whose status lags its generation
/// gets a ready status `delay` later, and every LoadBalancer Service or
/// Ingress without an address gets one.
pub async fn run(store: Arc<Store>, delay: Duration, shutdown: CancellationToken) {
    let mut feed = store.subscribe();
    loop {
        let event = tokio::select! {
            () = shutdown.cancelled() => return,
            event = feed.recv() => event,
        };
        let event = match event {
            Ok(event) => event,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(_) => return,
        };
        let bucket = (event.bucket.0.as_str(), event.bucket.1.as_str());
        if event.kind == EventKind::Deleted {
            continue;
        }
        if ADDRESSED.contains(&bucket) {
            address(&store, &event.object, bucket, delay, &shutdown);
            continue;
        }
        if !WORKLOADS.contains(&bucket) {
            continue;
        }
        let object = &event.object;
        let generation = object
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let settled = if event.bucket.1 == "jobs" {
            object.pointer("/status/completionTime").is_some()
        } else {
            object
                .pointer("/status/observedGeneration")
                .and_then(Value::as_i64)
                == Some(generation)
        };
        if settled || object.pointer("/metadata/deletionTimestamp").is_some() {
            continue;
        }
        let Some(rt) = store.resolve(&event.bucket.0, "v1", &event.bucket.1) else {
            continue;
        };
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let status = ready_status(&rt.kind, object, generation);
        let store = store.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = tokio::time::sleep(delay) => {
                    tracing::debug!(kind = %rt.kind, %name, "simulated readiness");
                    store.set_status(&rt, namespace.as_deref(), &name, generation, status);
                }
            }
        });
    }
}

/// Gives a LoadBalancer Service or an Ingress without an address one,
/// `delay` later (as a cloud load balancer or an ingress controller would).
fn address(
    store: &Arc<Store>,
    object: &Value,
    bucket: (&str, &str),
    delay: Duration,
    shutdown: &CancellationToken,
) {
    let is_service = bucket.1 == "services";
    if is_service && object.pointer("/spec/type").and_then(Value::as_str) != Some("LoadBalancer") {
        return;
    }
    let addressed = object
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .is_some_and(|list| !list.is_empty());
    if addressed || object.pointer("/metadata/deletionTimestamp").is_some() {
        return;
    }
    let Some(rt) = store.resolve(bucket.0, "v1", bucket.1) else {
        return;
    };
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let namespace = text("/metadata/namespace");
    let name = text("/metadata/name").unwrap_or_default();
    // The status is written at the object's generation (absent: 0, as
    // `set_status` reads it).
    let generation = object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let ip = documentation_address(namespace.as_deref().unwrap_or_default(), &name);
    let mut status = object.get("status").cloned().unwrap_or_else(|| json!({}));
    if !status.is_object() {
        status = json!({});
    }
    let mut entry = json!({"ip": ip});
    if is_service {
        // What cloud load balancers report for each port.
        entry["ipMode"] = json!("VIP");
    }
    status["loadBalancer"] = json!({"ingress": [entry]});
    let store = store.clone();
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = tokio::time::sleep(delay) => {
                tracing::debug!(kind = %rt.kind, %name, %ip, "simulated load balancer address");
                store.set_status(&rt, namespace.as_deref(), &name, generation, status);
            }
        }
    });
}

/// A stable address in 203.0.113.0/24 (TEST-NET-3) for one object.
fn documentation_address(namespace: &str, name: &str) -> String {
    let mut hash: u32 = 2_166_136_261;
    for byte in namespace.bytes().chain([b'/']).chain(name.bytes()) {
        hash = (hash ^ u32::from(byte)).wrapping_mul(16_777_619);
    }
    format!("203.0.113.{}", 1 + hash % 254)
}

fn ready_status(kind: &str, object: &Value, generation: i64) -> Value {
    let replicas = object
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let time = now();
    match kind {
        "Deployment" => json!({
            "observedGeneration": generation,
            "replicas": replicas, "updatedReplicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                 "message": "Deployment has minimum availability.", "lastUpdateTime": time, "lastTransitionTime": time},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                 "message": format!("ReplicaSet \"{name}\" has successfully progressed."), "lastUpdateTime": time, "lastTransitionTime": time},
            ],
        }),
        "StatefulSet" => json!({
            "observedGeneration": generation, "replicas": replicas, "readyReplicas": replicas,
            "currentReplicas": replicas, "updatedReplicas": replicas, "availableReplicas": replicas,
            "currentRevision": format!("{name}-{generation}"), "updateRevision": format!("{name}-{generation}"),
            "collisionCount": 0,
        }),
        "DaemonSet" => json!({
            "observedGeneration": generation, "currentNumberScheduled": 1, "desiredNumberScheduled": 1,
            "numberAvailable": 1, "numberMisscheduled": 0, "numberReady": 1, "updatedNumberScheduled": 1,
        }),
        "ReplicaSet" => json!({
            "observedGeneration": generation, "replicas": replicas, "readyReplicas": replicas,
            "availableReplicas": replicas, "fullyLabeledReplicas": replicas,
        }),
        _ => {
            let completions = object
                .pointer("/spec/completions")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            json!({
                "startTime": time, "completionTime": time, "succeeded": completions, "ready": 0, "terminating": 0,
                "uncountedTerminatedPods": {},
                "conditions": [
                    {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                     "message": "Reached expected number of succeeded pods", "lastProbeTime": time, "lastTransitionTime": time},
                    {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                     "message": "Reached expected number of succeeded pods", "lastProbeTime": time, "lastTransitionTime": time},
                ],
            })
        }
    }
}
