//! Kiln's API types: the CRDs in `deploy/crds/` are the ones the types
//! generate, and a cluster serves them.

mod support;

use std::path::Path;

use kiln::api::{AppProject, Application, ApplicationStatus, HealthInfo, Plugin, SyncInfo};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use support::cluster::Cluster;

#[test]
fn deploy_crds_match_the_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crds");
    for (name, yaml) in kiln::api::crds() {
        let path = dir.join(format!("{name}.yaml"));
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|_| panic!("{} is missing", path.display()));
        assert_eq!(
            committed,
            yaml,
            "{} is stale: run `kiln crds --output-dir deploy/crds`",
            path.display()
        );
    }
}

#[tokio::test]
async fn the_crds_are_served_and_round_trip_typed_objects() {
    let cluster = Cluster::start().await;
    for (_, yaml) in kiln::api::crds() {
        let crd: serde_json::Value = serde_yaml::from_str(&yaml).unwrap();
        cluster
            .apply("customresourcedefinitions", crd, "kiln", false)
            .await
            .unwrap();
    }
    let apps: Api<Application> = Api::namespaced(cluster.client.clone(), "default");
    let app: Application = serde_json::from_value(json!({
        "apiVersion": "kiln.dev/v1alpha1", "kind": "Application",
        "metadata": {"name": "guestbook", "finalizers": ["resources-finalizer.kiln.dev"]},
        "spec": {
            "source": {"repoURL": "https://git.example.com/apps.git", "path": "guestbook",
                "plugins": [{"name": "values", "parameters": {"replicas": "3"}}]},
            "destination": {"server": "https://kubernetes.default.svc", "namespace": "guestbook"},
            "syncPolicy": {"automated": {"prune": true, "selfHeal": true}, "syncOptions": ["CreateNamespace=true"],
                "retry": {"limit": 3, "backoff": {"duration": "5s", "factor": 2, "maxDuration": "1m"}}},
            "ignoreDifferences": [{"group": "apps", "kind": "Deployment", "jsonPointers": ["/spec/replicas"]}],
            "policies": [{"name": "required-labels", "mode": "warn", "settings": {"labels": "team"}}]
        }
    }))
    .unwrap();
    let created = apps.create(&PostParams::default(), &app).await.unwrap();
    assert_eq!(
        created.spec, app.spec,
        "nothing pruned or changed by the schema"
    );
    assert_eq!(created.spec.project, "default");
    assert_eq!(created.spec.source.target_revision, "HEAD");

    let status = ApplicationStatus {
        sync: Some(SyncInfo {
            status: "Synced".into(),
            revision: Some("0123abcd".into()),
            compared_to: None,
        }),
        health: Some(HealthInfo {
            status: "Healthy".into(),
            message: None,
        }),
        observed_generation: created.metadata.generation,
        ..Default::default()
    };
    let patched = apps
        .patch_status(
            "guestbook",
            &PatchParams::apply("kiln").force(),
            &Patch::Apply(json!({
            "apiVersion": "kiln.dev/v1alpha1", "kind": "Application", "status": status})),
        )
        .await
        .unwrap();
    assert_eq!(patched.status, Some(status));

    let invalid = json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Application", "metadata": {"name": "bad", "namespace": "default"},
        "spec": {"destination": {}}});
    let error = cluster
        .apply("applications", invalid, "kiln", false)
        .await
        .unwrap_err();
    assert_eq!(support::cluster::code(&error), 422, "source is required");

    let projects: Api<AppProject> = Api::namespaced(cluster.client.clone(), "default");
    let project: AppProject = serde_json::from_value(json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "AppProject",
        "metadata": {"name": "team"}, "spec": {"sourceRepos": ["https://git.example.com/*"],
            "destinations": [{"namespace": "team-*"}], "clusterResourceWhitelist": [{"group": "", "kind": "Namespace"}],
            "plugins": ["values"], "policies": [{"name": "required-labels", "mode": "enforce"}]}})).unwrap();
    assert_eq!(
        projects
            .create(&PostParams::default(), &project)
            .await
            .unwrap()
            .spec,
        project.spec
    );

    let plugins: Api<Plugin> = Api::namespaced(cluster.client.clone(), "default");
    let plugin: Plugin =
        serde_json::from_value(json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Plugin",
        "metadata": {"name": "values"}, "spec": {"kind": "renderer", "ref": "/plugins/values.wasm",
            "limits": {"memory": "128Mi", "timeout": "5s"}, "defaults": {"replicas": "1"}}}))
        .unwrap();
    assert_eq!(
        plugins
            .create(&PostParams::default(), &plugin)
            .await
            .unwrap()
            .spec,
        plugin.spec
    );
}
