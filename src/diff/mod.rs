//! The diff stage: is the cluster what Git says?
//!
//! Both sides are normalized before they are compared ([`normalize`]):
//! server-populated fields go, fields the desired object does not set are
//! not drift (the live object's defaults, other writers' fields), and fields
//! Kiln's field manager owns but the desired object no longer sets *are*
//! drift (the next apply removes them). Where a cluster is reachable, the
//! desired side is the server's own prediction — a `dryRun=All` server-side
//! apply — which removes defaulting and mutating-webhook noise entirely.
//! `ignoreDifferences` ([`ignore`]) then drops chosen fields, and Secret
//! values are masked ([`secret`]) before anything can be printed.

pub mod ignore;
pub mod jq;
pub mod normalize;
pub mod output;
pub mod secret;

use serde::Serialize;
use serde_json::Value;

use crate::manifest::ObjectKey;
pub use ignore::{IgnoreDifferences, IgnoreError, IgnoreRules};
pub use jq::{Jq, JqConfig, JqError};
pub use secret::Masker;

/// The result type of the diff stage.
pub type Result<T, E = IgnoreError> = std::result::Result<T, E>;

/// How one object compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum SyncStatus {
    /// Live equals desired.
    Synced,
    /// Both exist and differ.
    OutOfSync,
    /// Desired but not in the cluster.
    Missing,
    /// In the cluster, tracked as this application's, no longer desired:
    /// a prune would delete it.
    Extraneous,
}

impl std::fmt::Display for SyncStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Synced => "Synced",
            Self::OutOfSync => "OutOfSync",
            Self::Missing => "Missing",
            Self::Extraneous => "Extraneous",
        })
    }
}

/// What the comparison needs besides the objects.
#[derive(Clone, Debug)]
pub struct DiffOptions {
    /// Fields to leave out.
    pub ignore: IgnoreRules,
    /// Kiln's field manager: its fields on the live object that the desired
    /// object no longer sets are drift.
    pub manager: String,
    /// Masks Secret values.
    pub masker: Masker,
}

impl Default for DiffOptions {
    fn default() -> Self {
        Self {
            ignore: IgnoreRules::default(),
            manager: "kiln".into(),
            masker: Masker::default(),
        }
    }
}

/// The comparison of one object. `desired` and `live` are normalized, with
/// ignored fields removed and Secret values masked: safe to print.
#[derive(Clone, Debug, Serialize)]
pub struct ObjectDiff {
    /// Which object.
    pub key: ObjectKey,
    /// The verdict.
    pub status: SyncStatus,
    /// What the object should be (the server's prediction when available).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desired: Option<Value>,
    /// What it is, seen through the desired object's fields.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<Value>,
}

/// Compares one object. `jqPathExpressions` run in worker processes
/// ([`jq`]): this awaits them.
///
/// - `desired`: the rendered object (`None` for an extraneous live object);
/// - `live`: the cluster's object (`None` when missing);
/// - `predicted`: the result of a `dryRun=All` server-side apply of
///   `desired`, when a cluster could be asked; it replaces the structural
///   comparison.
pub async fn compare(
    desired: Option<&Value>,
    live: Option<&Value>,
    predicted: Option<&Value>,
    options: &DiffOptions,
) -> Result<ObjectDiff> {
    let key = ObjectKey::of(desired.or(live).unwrap_or(&Value::Null));
    // Masking first: it also folds a Secret's `stringData` into `data`, so
    // both sides have the same shape before they are projected.
    let clean = |object: &Value| {
        let mut object = normalize::normalize(object);
        options.masker.mask(&mut object);
        object
    };
    let ignore = async |mut object: Value| -> Result<Value> {
        options.ignore.apply(&key, live, &mut object).await?;
        Ok(object)
    };
    let (status, desired_view, live_view) = match (desired, live) {
        (None, None) => (SyncStatus::Synced, None, None),
        (Some(desired), None) => (
            SyncStatus::Missing,
            Some(ignore(clean(desired)).await?),
            None,
        ),
        (None, Some(live)) => (
            SyncStatus::Extraneous,
            None,
            Some(ignore(clean(live)).await?),
        ),
        (Some(desired), Some(live)) => {
            let live_clean = clean(live);
            let (target, seen) = match predicted {
                Some(predicted) => (clean(predicted), live_clean),
                None => {
                    let mut target = clean(desired);
                    normalize::prune_unset(&mut target, &live_clean);
                    let mut seen = normalize::project(&live_clean, &target);
                    if let Some(fields) = owned_fields(live, &options.manager) {
                        add_stale(&mut seen, &live_clean, &target, fields);
                    }
                    (target, seen)
                }
            };
            let (target, seen) = (ignore(target).await?, ignore(seen).await?);
            let status = if target == seen {
                SyncStatus::Synced
            } else {
                SyncStatus::OutOfSync
            };
            (status, Some(target), Some(seen))
        }
    };
    Ok(ObjectDiff {
        key,
        status,
        desired: desired_view,
        live: live_view,
    })
}

/// The `fieldsV1` Kiln's manager applied, from the live object.
fn owned_fields<'a>(live: &'a Value, manager: &str) -> Option<&'a Value> {
    live.pointer("/metadata/managedFields")?
        .as_array()?
        .iter()
        .find(|e| {
            e.get("manager").and_then(Value::as_str) == Some(manager)
                && e.get("operation").and_then(Value::as_str) == Some("Apply")
        })?
        .get("fieldsV1")
}

/// Adds to `seen` the live fields the manager owns that `desired` no longer
/// sets: the next apply would remove them, so they are drift.
fn add_stale(seen: &mut Value, live: &Value, desired: &Value, fields: &Value) {
    let Some(fields) = fields.as_object() else {
        return;
    };
    for (element, child) in fields {
        if let Some(name) = element.strip_prefix("f:") {
            let (Some(live_value), Value::Object(view)) = (live.get(name), &mut *seen) else {
                continue;
            };
            match desired.get(name) {
                None => {
                    view.insert(name.to_owned(), live_value.clone());
                }
                Some(wanted) => {
                    if let Some(next) = view.get_mut(name) {
                        add_stale(next, live_value, wanted, child);
                    }
                }
            }
        } else if let Some(key) = element.strip_prefix("k:") {
            let Ok(Value::Object(key)) = serde_json::from_str::<Value>(key) else {
                continue;
            };
            let matches = |item: &&Value| key.iter().all(|(k, v)| item.get(k) == Some(v));
            // The server computes list keys after defaulting: a port without
            // `protocol` is keyed as TCP (`+listMapKey=protocol`, defaulted
            // by `SetDefaults_ContainerPort`/`SetDefaults_ServicePort`).
            let matches_desired = |item: &&Value| {
                key.iter().all(|(k, v)| {
                    item.get(k) == Some(v) || k == "protocol" && item.get(k).is_none() && v == "TCP"
                })
            };
            let (Some(live_items), Some(view_items)) = (live.as_array(), seen.as_array_mut())
            else {
                continue;
            };
            let Some(live_item) = live_items.iter().find(matches) else {
                continue;
            };
            let wanted = desired
                .as_array()
                .and_then(|items| items.iter().find(matches_desired));
            if wanted.is_none() {
                view_items.push(live_item.clone());
            }
        }
    }
}

/// The diff of a whole set of objects.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// One entry per object, in the order given.
    pub objects: Vec<ObjectDiff>,
    /// Hooks: run by a sync, never compared (as in Argo CD), so they never
    /// make the set OutOfSync.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<ObjectKey>,
}

impl Report {
    /// True when every object is synced.
    pub fn in_sync(&self) -> bool {
        self.objects.iter().all(|o| o.status == SyncStatus::Synced)
    }

    /// How many objects have `status`.
    pub fn count(&self, status: SyncStatus) -> usize {
        self.objects.iter().filter(|o| o.status == status).count()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}, "data": data})
    }

    #[tokio::test]
    async fn defaults_are_not_drift_but_fields_kiln_stopped_setting_are() {
        let options = DiffOptions::default();
        let desired = cm(json!({"a": "1"}));
        let mut live = cm(json!({"a": "1", "other": "x"}));
        live["metadata"]["managedFields"] = json!([
            {"manager": "kiln", "operation": "Apply", "fieldsV1": {"f:data": {"f:a": {}}}},
            {"manager": "someone", "operation": "Update", "fieldsV1": {"f:data": {"f:other": {}}}}]);
        assert_eq!(
            compare(Some(&desired), Some(&live), None, &options)
                .await
                .unwrap()
                .status,
            SyncStatus::Synced
        );
        live["metadata"]["managedFields"][0]["fieldsV1"] =
            json!({"f:data": {"f:a": {}, "f:gone": {}}});
        live["data"]["gone"] = json!("y");
        let diff = compare(Some(&desired), Some(&live), None, &options)
            .await
            .unwrap();
        assert_eq!(diff.status, SyncStatus::OutOfSync);
        assert_eq!(diff.live.unwrap()["data"], json!({"a": "1", "gone": "y"}));
    }

    #[tokio::test]
    async fn missing_and_extraneous() {
        let options = DiffOptions::default();
        let object = cm(json!({}));
        assert_eq!(
            compare(Some(&object), None, None, &options)
                .await
                .unwrap()
                .status,
            SyncStatus::Missing
        );
        assert_eq!(
            compare(None, Some(&object), None, &options)
                .await
                .unwrap()
                .status,
            SyncStatus::Extraneous
        );
    }

    async fn status_of(desired: &Value, live: &Value) -> SyncStatus {
        compare(Some(desired), Some(live), None, &DiffOptions::default())
            .await
            .unwrap()
            .status
    }

    fn daemonset(container: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d", "namespace": "default"},
            "spec": {"template": {"spec": {"containers": [container]}}}})
    }

    #[tokio::test]
    async fn an_explicit_null_in_git_is_the_field_unset() {
        // prometheus-node-exporter renders `httpHeaders: null`; the API
        // server stores the probe without it.
        let probe = |headers: bool| {
            let mut get = json!({"path": "/", "port": "metrics", "scheme": "HTTP"});
            if headers {
                get["httpHeaders"] = Value::Null;
            }
            json!({"name": "exporter", "image": "node-exporter:v1", "livenessProbe": {"httpGet": get}})
        };
        let desired = daemonset(probe(true));
        let live = daemonset(probe(false));
        assert_eq!(status_of(&desired, &live).await, SyncStatus::Synced);
        // A value where Git says null is still not drift (the server
        // allocated it: `nodePort: null`), but a real change is.
        let mut changed = live.clone();
        changed["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["path"] =
            json!("/other");
        assert_eq!(status_of(&desired, &changed).await, SyncStatus::OutOfSync);
    }

    #[tokio::test]
    async fn quantity_spellings_the_server_canonicalizes_are_equal() {
        let with = |limits: Value, volume: Value| {
            let mut object = daemonset(
                json!({"name": "a", "image": "a:1", "resources": {"limits": limits, "requests": {"memory": "128Mi"}}}),
            );
            object["spec"]["template"]["spec"]["volumes"] =
                json!([{"name": "t", "emptyDir": {"sizeLimit": volume}}]);
            object
        };
        let desired = with(json!({"cpu": 0.5, "memory": "1024Mi"}), json!("0.5Gi"));
        let live = with(json!({"cpu": "500m", "memory": "1Gi"}), json!("512Mi"));
        assert_eq!(status_of(&desired, &live).await, SyncStatus::Synced);
        let more = with(json!({"cpu": "600m", "memory": "1Gi"}), json!("512Mi"));
        assert_eq!(status_of(&desired, &more).await, SyncStatus::OutOfSync);
        // Outside quantity fields, "1000" and "1k" stay different strings.
        let desired = cm(json!({"size": "1000"}));
        assert_eq!(
            status_of(&desired, &cm(json!({"size": "1k"}))).await,
            SyncStatus::OutOfSync
        );
    }

    #[tokio::test]
    async fn zero_values_the_server_omits_are_not_drift() {
        let desired = daemonset(
            json!({"name": "a", "image": "a:1", "args": [], "env": [], "workingDir": "", "stdin": false}),
        );
        let mut live = daemonset(json!({"name": "a", "image": "a:1"}));
        assert_eq!(status_of(&desired, &live).await, SyncStatus::Synced);
        // A zero value the server kept is compared as any other.
        live["spec"]["template"]["spec"]["containers"][0]["stdin"] = json!(true);
        assert_eq!(status_of(&desired, &live).await, SyncStatus::OutOfSync);
    }

    #[tokio::test]
    async fn a_port_without_protocol_is_the_tcp_port_kiln_applied() {
        // Server-side apply keys Service ports by port and protocol, after
        // defaulting the protocol to TCP.
        let desired = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "default"},
            "spec": {"ports": [{"port": 2746, "targetPort": 2746}]}});
        let mut live = desired.clone();
        live["spec"]["ports"][0]["protocol"] = json!("TCP");
        live["metadata"]["managedFields"] = json!([{"manager": "kiln", "operation": "Apply", "fieldsV1":
            {"f:spec": {"f:ports": {"k:{\"port\":2746,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}, "f:targetPort": {}}}}}}]);
        assert_eq!(status_of(&desired, &live).await, SyncStatus::Synced);
    }
}
