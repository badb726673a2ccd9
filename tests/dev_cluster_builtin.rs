//! The dev cluster's built-in API is Kubernetes 1.32's, as data
//! (`devcluster/data/k8s-1.32/`, `devcluster/src/builtin/`): every kind a
//! 1.32 cluster serves by default is served, discovered and stored.

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use futures_util::{StreamExt as _, TryStreamExt as _};
use kiln_devcluster::builtin::{self, BuiltinResource};
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Scope;
use support::cluster::Cluster;

/// `definitions.json` is exactly what `scripts/k8s-api-data` makes from the
/// committed upstream file: nobody edited the generated data by hand.
#[test]
fn builtin_data_is_what_the_generator_makes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new("python3")
        .arg(root.join("scripts/k8s-api-data"))
        .arg("check")
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn catalog() -> &'static builtin::Catalog {
    builtin::catalog().expect("the embedded data loads")
}

fn api_version(resource: &BuiltinResource) -> String {
    if resource.group.is_empty() {
        resource.version.clone()
    } else {
        format!("{}/{}", resource.group, resource.version)
    }
}

/// Both discoveries (`/api` + `/apis` per group version, and the aggregated
/// `apidiscovery.k8s.io/v2`) show every built-in resource with its scope
/// and verbs.
#[tokio::test]
async fn both_discoveries_show_every_builtin_resource() {
    let cluster = Cluster::start().await;
    for aggregated in [false, true] {
        let discovery = kube::Discovery::new(cluster.client.clone());
        let discovery = if aggregated {
            discovery.run_aggregated().await
        } else {
            discovery.run().await
        }
        .expect("discovery runs");
        for resource in catalog().resources() {
            let gvk = GroupVersionKind::gvk(&resource.group, &resource.version, &resource.kind);
            let found = discovery
                .groups()
                .flat_map(|group| group.versioned_resources(&resource.version))
                .find(|(ar, _)| ar.group == resource.group && ar.plural == resource.name);
            let (ar, caps) = found.unwrap_or_else(|| panic!("{gvk:?} (aggregated: {aggregated})"));
            assert_eq!(ar.kind, resource.kind);
            let scope = if resource.namespaced {
                Scope::Namespaced
            } else {
                Scope::Cluster
            };
            assert_eq!(
                caps.scope, scope,
                "{} (aggregated: {aggregated})",
                resource.name
            );
            let verbs: BTreeSet<&str> = caps.operations.iter().map(String::as_str).collect();
            let expected: BTreeSet<&str> = resource.verbs.iter().map(String::as_str).collect();
            assert_eq!(
                verbs, expected,
                "{} (aggregated: {aggregated})",
                resource.name
            );
            let subresources: BTreeSet<&str> = caps
                .subresources
                .iter()
                .map(|(ar, _)| ar.plural.as_str())
                .collect();
            for sub in ["status", "scale"] {
                assert_eq!(
                    subresources.iter().any(|s| s.ends_with(sub)),
                    resource.subresource(sub).is_some(),
                    "{}/{sub} (aggregated: {aggregated})",
                    resource.name
                );
            }
        }
    }
}

/// The sample objects of `tests/data/k8s-1.32-samples.yaml`.
fn samples() -> Vec<DynamicObject> {
    let text = include_str!("data/k8s-1.32-samples.yaml");
    serde_yaml::Deserializer::from_str(text)
        .map(|document| {
            serde::Deserialize::deserialize(document).expect("a sample parses as an object")
        })
        .collect()
}

/// Create, get, list, watch and delete one object of every built-in kind
/// that is stored, through `kube`'s `DynamicObject`.
#[tokio::test]
async fn every_builtin_kind_creates_gets_lists_watches_and_deletes() {
    let cluster = Cluster::start().await;
    let samples = samples();
    // Every stored kind has a sample, and every sample a kind.
    let stored: BTreeSet<(String, String)> = catalog()
        .resources()
        .iter()
        .filter(|r| {
            ["create", "get", "list", "watch", "delete"]
                .iter()
                .all(|verb| r.verbs.iter().any(|v| v == verb))
        })
        .map(|r| (api_version(r), r.kind.clone()))
        .collect();
    let sampled: BTreeSet<(String, String)> = samples
        .iter()
        .map(|s| {
            let types = s.types.as_ref().expect("a sample has apiVersion and kind");
            (types.api_version.clone(), types.kind.clone())
        })
        .collect();
    assert_eq!(sampled, stored);

    let mut failures = Vec::new();
    for sample in samples {
        let types = sample.types.clone().unwrap();
        let resource = catalog()
            .resources()
            .iter()
            .find(|r| api_version(r) == types.api_version && r.kind == types.kind)
            .unwrap();
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&resource.group, &resource.version, &resource.kind),
            &resource.name,
        );
        let api: Api<DynamicObject> = if resource.namespaced {
            Api::namespaced_with(cluster.client.clone(), "default", &ar)
        } else {
            Api::all_with(cluster.client.clone(), &ar)
        };
        let label = format!("{} {}", types.api_version, types.kind);
        if let Err(error) = round_trip(&api, &sample).await {
            failures.push(format!("{label}: {error}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

async fn round_trip(api: &Api<DynamicObject>, sample: &DynamicObject) -> Result<(), String> {
    let name = sample.metadata.name.clone().unwrap();
    let created = api
        .create(&PostParams::default(), sample)
        .await
        .map_err(|e| format!("create: {e}"))?;
    let version = created
        .metadata
        .resource_version
        .clone()
        .unwrap_or_default();
    let got = api.get(&name).await.map_err(|e| format!("get: {e}"))?;
    if got.metadata.uid != created.metadata.uid {
        return Err("get: another object".into());
    }
    let listed = api
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("list: {e}"))?;
    if !listed
        .items
        .iter()
        .any(|o| o.metadata.name.as_deref() == Some(&name))
    {
        return Err("list: the object is missing".into());
    }
    let params = WatchParams::default().fields(&format!("metadata.name={name}"));
    let mut events = api
        .watch(&params, &version)
        .await
        .map_err(|e| format!("watch: {e}"))?
        .boxed();
    api.delete(&name, &DeleteParams::default())
        .await
        .map_err(|e| format!("delete: {e}"))?;
    // Deleted at once, or (with finalizers, like a namespace) marked for
    // deletion: either way the watch sees it.
    let event = tokio::time::timeout(std::time::Duration::from_secs(10), events.try_next())
        .await
        .map_err(|_| "watch: no event after delete".to_owned())?
        .map_err(|e| format!("watch: {e}"))?;
    match event {
        Some(WatchEvent::Deleted(o) | WatchEvent::Modified(o))
            if o.metadata.name.as_deref() == Some(&name) =>
        {
            Ok(())
        }
        other => Err(format!("watch: unexpected {other:?}")),
    }
}

fn webhook_configuration(webhook: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "policies"},
        "webhooks": [{
            "name": webhook,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "clientConfig": {"url": format!("https://{webhook}/validate")},
        }],
    })
}

/// Server-side apply merges the lists of a kind the old hand-kept tables
/// never knew by the keys its published schema declares: two managers'
/// webhooks (a map keyed by `name`) both stay, each owned by its manager.
#[tokio::test]
async fn server_side_apply_merges_by_the_published_list_keys() {
    let cluster = Cluster::start().await;
    let plural = "validatingwebhookconfigurations";
    cluster
        .apply(
            plural,
            webhook_configuration("a.example.com"),
            "team-a",
            false,
        )
        .await
        .expect("team a applies");
    let merged = cluster
        .apply(
            plural,
            webhook_configuration("b.example.com"),
            "team-b",
            false,
        )
        .await
        .expect("team b applies its own webhook without a conflict");
    let names: Vec<&str> = merged["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a.example.com", "b.example.com"]);
    let team_b = support::cluster::fields_of(&merged, "team-b");
    assert!(
        team_b["f:webhooks"]
            .as_object()
            .unwrap()
            .contains_key(r#"k:{"name":"b.example.com"}"#),
        "{team_b}"
    );
}
