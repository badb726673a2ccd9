//! Health assessment: is an applied object doing its job? The rules follow
//! Argo CD's built-in checks, so its users read the same verdicts.

use serde::Serialize;
use serde_json::Value;

/// Health of one object or of an application, from best to worst.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[non_exhaustive]
pub enum Health {
    /// Doing its job.
    Healthy,
    /// Paused or suspended on purpose.
    Suspended,
    /// Not there yet (rolling out, starting, pending).
    Progressing,
    /// Desired but absent.
    Missing,
    /// Failed (a failed Job, a crash-looping Pod, a rollout past its deadline).
    Degraded,
    /// Cannot be told.
    Unknown,
}

impl std::fmt::Display for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Healthy => "Healthy",
            Self::Suspended => "Suspended",
            Self::Progressing => "Progressing",
            Self::Missing => "Missing",
            Self::Degraded => "Degraded",
            Self::Unknown => "Unknown",
        })
    }
}

/// A verdict with the reason a person needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Assessment {
    /// The verdict.
    pub status: Health,
    /// Why (empty when healthy).
    pub message: String,
}

impl Assessment {
    fn new(status: Health, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    fn healthy() -> Self {
        Self::new(Health::Healthy, "")
    }
}

/// The worst of several healths: an application's health.
pub fn aggregate(healths: impl IntoIterator<Item = Health>) -> Health {
    healths.into_iter().max().unwrap_or(Health::Healthy)
}

fn int(object: &Value, pointer: &str) -> Option<i64> {
    object.pointer(pointer).and_then(Value::as_i64)
}

fn text<'a>(object: &'a Value, pointer: &str) -> Option<&'a str> {
    object.pointer(pointer).and_then(Value::as_str)
}

fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    object
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
}

fn condition_is(object: &Value, kind: &str, status: &str) -> bool {
    condition(object, kind).is_some_and(|c| c.get("status").and_then(Value::as_str) == Some(status))
}

/// `observedGeneration` behind `generation`: the controller has not seen
/// the latest spec yet.
fn stale(object: &Value) -> bool {
    let generation = int(object, "/metadata/generation").unwrap_or(0);
    int(object, "/status/observedGeneration").unwrap_or(0) < generation
}

/// Assesses one live object.
pub fn assess(object: &Value) -> Assessment {
    if object.pointer("/metadata/deletionTimestamp").is_some() {
        return Assessment::new(Health::Progressing, "Pending deletion");
    }
    let group = text(object, "/apiVersion")
        .and_then(|v| v.rsplit_once('/'))
        .map_or("", |(g, _)| g);
    let kind = text(object, "/kind").unwrap_or_default();
    match (group, kind) {
        ("apps", "Deployment") => deployment(object),
        ("apps", "StatefulSet") => statefulset(object),
        ("apps", "DaemonSet") => daemonset(object),
        ("apps", "ReplicaSet") => replicaset(object),
        ("batch", "Job") => job(object),
        ("batch", "CronJob") => {
            if object.pointer("/spec/suspend") == Some(&Value::Bool(true)) {
                Assessment::new(Health::Suspended, "CronJob is suspended")
            } else {
                Assessment::healthy()
            }
        }
        ("", "Pod") => pod(object),
        ("", "Service") => {
            if text(object, "/spec/type") == Some("LoadBalancer") && !has_ingress(object) {
                Assessment::new(
                    Health::Progressing,
                    "Waiting for the load balancer's address",
                )
            } else {
                Assessment::healthy()
            }
        }
        ("networking.k8s.io", "Ingress") => {
            if has_ingress(object) {
                Assessment::healthy()
            } else {
                Assessment::new(Health::Progressing, "Waiting for the ingress's address")
            }
        }
        ("", "PersistentVolumeClaim") => match text(object, "/status/phase") {
            Some("Bound") => Assessment::healthy(),
            Some("Lost") => Assessment::new(Health::Degraded, "The claim lost its volume"),
            _ => Assessment::new(Health::Progressing, "Waiting for the claim to be bound"),
        },
        _ => generic(object),
    }
}

fn has_ingress(object: &Value) -> bool {
    object
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .is_some_and(|i| !i.is_empty())
}

fn deployment(object: &Value) -> Assessment {
    if object.pointer("/spec/paused") == Some(&Value::Bool(true)) {
        return Assessment::new(Health::Suspended, "Deployment is paused");
    }
    if stale(object) {
        return Assessment::new(
            Health::Progressing,
            "Waiting for rollout to finish: observed deployment generation less than desired generation",
        );
    }
    if condition(object, "Progressing")
        .and_then(|c| c.get("reason"))
        .and_then(Value::as_str)
        == Some("ProgressDeadlineExceeded")
    {
        let name = text(object, "/metadata/name").unwrap_or_default();
        return Assessment::new(
            Health::Degraded,
            format!("Deployment {name:?} exceeded its progress deadline"),
        );
    }
    let replicas = int(object, "/spec/replicas").unwrap_or(1);
    let updated = int(object, "/status/updatedReplicas").unwrap_or(0);
    let total = int(object, "/status/replicas").unwrap_or(0);
    let available = int(object, "/status/availableReplicas").unwrap_or(0);
    if updated < replicas {
        return Assessment::new(
            Health::Progressing,
            format!(
                "Waiting for rollout to finish: {updated} out of {replicas} new replicas have been updated..."
            ),
        );
    }
    if total > updated {
        return Assessment::new(
            Health::Progressing,
            format!(
                "Waiting for rollout to finish: {} old replicas are pending termination...",
                total - updated
            ),
        );
    }
    if available < updated {
        return Assessment::new(
            Health::Progressing,
            format!(
                "Waiting for rollout to finish: {available} of {updated} updated replicas are available..."
            ),
        );
    }
    Assessment::healthy()
}

fn statefulset(object: &Value) -> Assessment {
    if stale(object) {
        return Assessment::new(
            Health::Progressing,
            "Waiting for statefulset spec update to be observed...",
        );
    }
    let replicas = int(object, "/spec/replicas").unwrap_or(1);
    let ready = int(object, "/status/readyReplicas").unwrap_or(0);
    if ready < replicas {
        return Assessment::new(
            Health::Progressing,
            format!("Waiting for {} pods to be ready...", replicas - ready),
        );
    }
    if text(object, "/spec/updateStrategy/type") == Some("OnDelete") {
        return Assessment::healthy();
    }
    if text(object, "/status/currentRevision") != text(object, "/status/updateRevision") {
        return Assessment::new(
            Health::Progressing,
            "Waiting for rolling update to complete...",
        );
    }
    Assessment::healthy()
}

fn daemonset(object: &Value) -> Assessment {
    if stale(object) {
        return Assessment::new(
            Health::Progressing,
            "Waiting for daemon set spec update to be observed...",
        );
    }
    let desired = int(object, "/status/desiredNumberScheduled").unwrap_or(0);
    let updated = int(object, "/status/updatedNumberScheduled").unwrap_or(0);
    let available = int(object, "/status/numberAvailable").unwrap_or(0);
    if updated < desired {
        return Assessment::new(
            Health::Progressing,
            format!(
                "Waiting for daemon set rollout to finish: {updated} out of {desired} new pods have been updated..."
            ),
        );
    }
    if available < desired {
        return Assessment::new(
            Health::Progressing,
            format!(
                "Waiting for daemon set rollout to finish: {available} of {desired} updated pods are available..."
            ),
        );
    }
    Assessment::healthy()
}

fn replicaset(object: &Value) -> Assessment {
    if stale(object) {
        return Assessment::new(
            Health::Progressing,
            "Waiting for rollout to finish: observed replica set generation less than desired generation",
        );
    }
    if condition_is(object, "ReplicaFailure", "True") {
        let message = condition(object, "ReplicaFailure")
            .and_then(|c| c.get("message"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        return Assessment::new(Health::Degraded, message);
    }
    let replicas = int(object, "/spec/replicas").unwrap_or(1);
    let available = int(object, "/status/availableReplicas").unwrap_or(0);
    if available < replicas {
        return Assessment::new(
            Health::Progressing,
            format!(
                "Waiting for rollout to finish: {available} out of {replicas} replicas are available..."
            ),
        );
    }
    Assessment::healthy()
}

fn job(object: &Value) -> Assessment {
    if condition_is(object, "Failed", "True") {
        let message = condition(object, "Failed")
            .and_then(|c| c.get("message"))
            .and_then(Value::as_str)
            .unwrap_or("Job failed");
        return Assessment::new(Health::Degraded, message);
    }
    if condition_is(object, "Complete", "True") {
        return Assessment::new(Health::Healthy, "Job completed");
    }
    if object.pointer("/spec/suspend") == Some(&Value::Bool(true)) {
        return Assessment::new(Health::Suspended, "Job is suspended");
    }
    Assessment::new(Health::Progressing, "Job is running")
}

fn pod(object: &Value) -> Assessment {
    let statuses = object
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for status in &statuses {
        if let Some(reason) = status
            .pointer("/state/waiting/reason")
            .and_then(Value::as_str)
            && matches!(
                reason,
                "CrashLoopBackOff"
                    | "ImagePullBackOff"
                    | "ErrImagePull"
                    | "CreateContainerConfigError"
                    | "InvalidImageName"
            )
        {
            return Assessment::new(
                Health::Degraded,
                format!(
                    "container {}: {reason}",
                    status["name"].as_str().unwrap_or_default()
                ),
            );
        }
    }
    match text(object, "/status/phase") {
        Some("Succeeded") => Assessment::new(Health::Healthy, "Pod completed"),
        Some("Failed") => Assessment::new(
            Health::Degraded,
            text(object, "/status/message").unwrap_or("Pod failed"),
        ),
        Some("Running")
            if !statuses.is_empty()
                && statuses
                    .iter()
                    .all(|s| s.get("ready") == Some(&Value::Bool(true))) =>
        {
            Assessment::healthy()
        }
        Some("Running") => {
            Assessment::new(Health::Progressing, "Waiting for containers to be ready")
        }
        _ => Assessment::new(Health::Progressing, "Pod is pending"),
    }
}

/// Objects with standard `Ready`/`Available` conditions; everything else
/// with no status to judge is healthy once it exists.
fn generic(object: &Value) -> Assessment {
    for kind in ["Ready", "Available"] {
        if let Some(c) = condition(object, kind) {
            let message = c.get("message").and_then(Value::as_str).unwrap_or_default();
            return match c.get("status").and_then(Value::as_str) {
                Some("True") => Assessment::healthy(),
                Some("False") => Assessment::new(Health::Degraded, message),
                _ => Assessment::new(Health::Progressing, message),
            };
        }
    }
    Assessment::healthy()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn deployment_rollouts() {
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "generation": 2},
            "spec": {"replicas": 2}, "status": {"observedGeneration": 1}});
        assert_eq!(assess(&d).status, Health::Progressing);
        d["status"] = json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2});
        assert_eq!(assess(&d).status, Health::Healthy);
        d["status"]["conditions"] = json!([{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]);
        assert_eq!(assess(&d).status, Health::Degraded);
        d["spec"]["paused"] = json!(true);
        assert_eq!(assess(&d).status, Health::Suspended);
    }

    #[test]
    fn jobs_pods_claims_and_conditions() {
        let job = |conditions: Value| json!({"apiVersion": "batch/v1", "kind": "Job", "status": {"conditions": conditions}});
        assert_eq!(
            assess(&job(json!([{"type": "Complete", "status": "True"}]))).status,
            Health::Healthy
        );
        assert_eq!(
            assess(&job(
                json!([{"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}])
            ))
            .status,
            Health::Degraded
        );
        assert_eq!(assess(&job(json!([]))).status, Health::Progressing);
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "status": {"phase": "Running", "containerStatuses": [
            {"name": "a", "ready": false, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        assert_eq!(assess(&pod).status, Health::Degraded);
        let pvc = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "status": {"phase": "Pending"}});
        assert_eq!(assess(&pvc).status, Health::Progressing);
        let custom = json!({"apiVersion": "example.com/v1", "kind": "Thing", "status": {"conditions": [{"type": "Ready", "status": "False", "message": "no"}]}});
        assert_eq!(assess(&custom), Assessment::new(Health::Degraded, "no"));
        let plain = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        assert_eq!(assess(&plain).status, Health::Healthy);
        assert_eq!(
            aggregate([Health::Healthy, Health::Progressing, Health::Suspended]),
            Health::Progressing
        );
    }
}
