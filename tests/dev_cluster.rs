//! `kiln dev-cluster` driven through `kube::Client`, as Kiln and any other
//! Kubernetes client would drive it.
//!
//! Expectations come from the Kubernetes documentation: "Server-Side Apply"
//! (field management, conflicts, merge strategy) and "Kubernetes API
//! Concepts" (resource versions, watch, bookmarks, dry run, chunking).

mod support;

use std::time::Duration;

use futures_util::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kiln_devcluster::{Config, StoreConfig};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::{Value, json};
use support::cluster::{Cluster, code, fields_of, managers, message};

fn manager(name: &str) -> PatchParams {
    PatchParams {
        field_manager: Some(name.to_owned()),
        ..PatchParams::default()
    }
}

fn configmap(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}, "data": data})
}

fn deployment(name: &str, containers: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": containers}},
        },
    })
}

const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1beta1
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [color]
            properties:
              color: {type: string, enum: [red, green, blue]}
              size: {type: integer, default: 3}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name, protocol]
                items:
                  type: object
                  properties:
                    name: {type: string}
                    protocol: {type: string, default: TCP}
                    port: {type: integer}
              tags: {type: array, x-kubernetes-list-type: set, items: {type: string}}
              args: {type: array, items: {type: string}}
          status:
            type: object
            properties:
              ready: {type: boolean}
"#;

async fn install_widgets(cluster: &Cluster) {
    let crd: Value = serde_yaml::from_str(WIDGET_CRD).unwrap();
    cluster
        .apply("customresourcedefinitions", crd, "test", false)
        .await
        .expect("the CRD applies");
}

fn widget(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

// ---------------------------------------------------------------- discovery

#[tokio::test]
async fn discovery_finds_builtin_kinds_and_crds_at_once() {
    let cluster = Cluster::start().await;
    install_widgets(&cluster).await;
    for aggregated in [false, true] {
        let discovery = kube::Discovery::new(cluster.client.clone());
        let discovery = if aggregated {
            discovery.run_aggregated().await
        } else {
            discovery.run().await
        }
        .expect("discovery runs");
        for (group, version, kind) in [
            ("", "v1", "Namespace"),
            ("", "v1", "Secret"),
            ("apps", "v1", "Deployment"),
            ("batch", "v1", "CronJob"),
            ("networking.k8s.io", "v1", "Ingress"),
            ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
            ("coordination.k8s.io", "v1", "Lease"),
            ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            ("example.com", "v1", "Widget"),
            ("example.com", "v1beta1", "Widget"),
        ] {
            let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
            let (resource, caps) = discovery.resolve_gvk(&gvk).unwrap_or_else(|| {
                panic!("{kind} in {group}/{version} (aggregated: {aggregated})")
            });
            assert_eq!(resource.kind, kind);
            assert!(caps.supports_operation(kube::discovery::verbs::WATCH));
        }
        let widgets = discovery.get("example.com").unwrap();
        assert_eq!(
            widgets.preferred_version_or_latest(),
            "v1",
            "GA is preferred over beta"
        );
    }
    let version = cluster.client.apiserver_version().await.unwrap();
    assert_eq!(
        (version.major.as_str(), version.minor.as_str()),
        ("1", "32")
    );
}

// ------------------------------------------------------------ reads, lists

#[tokio::test]
async fn label_and_field_selectors_and_chunked_lists() {
    let cluster = Cluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    for (name, tier, env) in [
        ("a", "web", Some("prod")),
        ("b", "web", None),
        ("c", "db", Some("dev")),
        ("d", "cache", Some("prod")),
    ] {
        let mut labels = json!({"tier": tier});
        if let Some(env) = env {
            labels["env"] = env.into();
        }
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    let names = |list: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        list.items
            .into_iter()
            .map(|cm| cm.metadata.name.unwrap())
            .collect()
    };
    for (selector, expected) in [
        ("tier=web", vec!["a", "b"]),
        ("tier!=web", vec!["c", "d"]),
        ("tier in (db,cache)", vec!["c", "d"]),
        ("env notin (prod)", vec!["b", "c"]),
        ("env", vec!["a", "c", "d"]),
        ("!env", vec!["b"]),
        ("tier=web,env=prod", vec!["a"]),
    ] {
        let list = api
            .list(&ListParams::default().labels(selector))
            .await
            .unwrap();
        assert_eq!(names(list), expected, "{selector}");
    }
    let by_name = api
        .list(&ListParams::default().fields("metadata.name=c"))
        .await
        .unwrap();
    assert_eq!(names(by_name), vec!["c"]);
    let all: Api<ConfigMap> = Api::all(cluster.client.clone());
    let elsewhere = all
        .list(&ListParams::default().fields("metadata.namespace!=default"))
        .await
        .unwrap();
    assert!(elsewhere.items.is_empty());
    let bad = api
        .list(&ListParams::default().fields("spec.nodeName=x"))
        .await
        .unwrap_err();
    assert_eq!(code(&bad), 400);

    // Chunks of two, following `continue`.
    let first = api.list(&ListParams::default().limit(2)).await.unwrap();
    let token = first.metadata.continue_.clone().expect("a continue token");
    assert_eq!(names(first), vec!["a", "b"]);
    let second = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert!(
        second
            .metadata
            .continue_
            .as_deref()
            .unwrap_or_default()
            .is_empty(),
        "last chunk"
    );
    assert_eq!(names(second), vec!["c", "d"]);
}

// -------------------------------------------------------------------- watch

async fn next_event(
    stream: &mut (impl futures_util::Stream<Item = Result<WatchEvent<ConfigMap>, kube::Error>> + Unpin),
) -> WatchEvent<ConfigMap> {
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("an event within 10s")
        .expect("the stream is open")
        .expect("a decodable event")
}

fn describe(event: &WatchEvent<ConfigMap>) -> String {
    match event {
        WatchEvent::Added(o) => format!("ADDED {}", o.metadata.name.as_deref().unwrap()),
        WatchEvent::Modified(o) => format!("MODIFIED {}", o.metadata.name.as_deref().unwrap()),
        WatchEvent::Deleted(o) => format!("DELETED {}", o.metadata.name.as_deref().unwrap()),
        WatchEvent::Bookmark(b) => format!("BOOKMARK {}", b.metadata.resource_version),
        WatchEvent::Error(e) => format!("ERROR {}", e.code),
    }
}

#[tokio::test]
async fn watch_resumes_after_a_version_without_replaying_older_events() {
    let cluster = Cluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let cm = |name: &str| {
        serde_json::from_value::<ConfigMap>(json!({"metadata": {"name": name}})).unwrap()
    };
    api.create(&PostParams::default(), &cm("before"))
        .await
        .unwrap();
    let marker = api
        .create(&PostParams::default(), &cm("marker"))
        .await
        .unwrap();
    let rv = marker.metadata.resource_version.unwrap();
    api.create(&PostParams::default(), &cm("after"))
        .await
        .unwrap();
    api.delete("before", &DeleteParams::default())
        .await
        .unwrap();

    let mut stream = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    assert_eq!(describe(&next_event(&mut stream).await), "ADDED after");
    assert_eq!(describe(&next_event(&mut stream).await), "DELETED before");
    // Live events follow.
    api.patch(
        "after",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}})),
    )
    .await
    .unwrap();
    assert_eq!(describe(&next_event(&mut stream).await), "MODIFIED after");
}

#[tokio::test]
async fn watch_from_zero_lists_current_objects_and_selectors_follow_label_changes() {
    let cluster = Cluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let cm = |name: &str, app: &str| {
        serde_json::from_value::<ConfigMap>(
            json!({"metadata": {"name": name, "labels": {"app": app}}}),
        )
        .unwrap()
    };
    api.create(&PostParams::default(), &cm("x", "web"))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("y", "db"))
        .await
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default().labels("app=web"), "0")
        .await
        .unwrap()
        .boxed();
    assert_eq!(describe(&next_event(&mut stream).await), "ADDED x");
    // y starts matching: ADDED; x stops matching: DELETED.
    api.patch(
        "y",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "web"}}})),
    )
    .await
    .unwrap();
    assert_eq!(describe(&next_event(&mut stream).await), "ADDED y");
    api.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "db"}}})),
    )
    .await
    .unwrap();
    assert_eq!(describe(&next_event(&mut stream).await), "DELETED x");
}

#[tokio::test]
async fn watch_from_a_compacted_version_is_gone() {
    let config = Config {
        store: StoreConfig { history: 3 },
        ..Config::default()
    };
    let cluster = Cluster::with(config).await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let first = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "c0"}})).unwrap(),
        )
        .await
        .unwrap();
    for i in 1..6 {
        let cm = serde_json::from_value(json!({"metadata": {"name": format!("c{i}")}})).unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    let old = first.metadata.resource_version.unwrap();
    let mut stream = api
        .watch(&WatchParams::default(), &old)
        .await
        .unwrap()
        .boxed();
    match next_event(&mut stream).await {
        WatchEvent::Error(status) => {
            assert_eq!(status.code, 410);
            assert!(
                status.message.contains("too old resource version"),
                "{}",
                status.message
            );
        }
        other => panic!("expected 410 Gone, got {}", describe(&other)),
    }
}

#[tokio::test]
async fn watch_sends_bookmarks_and_the_initial_events_end_marker() {
    let mut config = Config::default();
    config.http.bookmark_interval = Duration::from_millis(200);
    let cluster = Cluster::with(config).await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    api.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "a"}})).unwrap(),
    )
    .await
    .unwrap();
    let params = WatchParams {
        bookmarks: true,
        ..WatchParams::default()
    }
    .initial_events();
    let mut stream = api.watch(&params, "").await.unwrap().boxed();
    assert_eq!(describe(&next_event(&mut stream).await), "ADDED a");
    match next_event(&mut stream).await {
        WatchEvent::Bookmark(bookmark) => {
            assert_eq!(
                bookmark
                    .metadata
                    .annotations
                    .get("k8s.io/initial-events-end")
                    .map(String::as_str),
                Some("true")
            );
        }
        other => panic!(
            "expected the initial-events-end bookmark, got {}",
            describe(&other)
        ),
    }
    assert!(
        describe(&next_event(&mut stream).await).starts_with("BOOKMARK"),
        "a periodic bookmark"
    );
}

// ------------------------------------------------------------------- writes

#[tokio::test]
async fn objects_get_what_the_api_server_sets() {
    let cluster = Cluster::start().await;
    let api: Api<Deployment> = Api::namespaced(cluster.client.clone(), "default");
    let body: Deployment = serde_json::from_value(deployment(
        "web",
        json!([
        {"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}]},
        {"name": "sidecar", "image": "busybox"}]),
    ))
    .unwrap();
    let created = api.create(&PostParams::default(), &body).await.unwrap();
    let meta = &created.metadata;
    assert!(
        meta.uid.is_some() && meta.creation_timestamp.is_some() && meta.resource_version.is_some()
    );
    assert_eq!(meta.generation, Some(1));
    assert_eq!(
        meta.namespace.as_deref(),
        Some("default"),
        "namespace from the URL"
    );
    let value = serde_json::to_value(&created).unwrap();
    assert_eq!(value["spec"]["replicas"], 1);
    assert_eq!(value["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(
        value["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
    );
    let containers = &value["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers[0]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(
        containers[1]["imagePullPolicy"], "Always",
        "untagged images are pulled always"
    );
    assert_eq!(
        containers[0]["terminationMessagePath"],
        "/dev/termination-log"
    );
    assert_eq!(containers[0]["ports"][0]["protocol"], "TCP");
    assert_eq!(value["spec"]["template"]["spec"]["restartPolicy"], "Always");
    let recorded = managers(&value);
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(
        recorded[0].1, "Update",
        "a create is an update by the user agent's manager"
    );
    assert!(
        fields_of(&value, &recorded[0].0)["f:spec"]["f:replicas"].is_object(),
        "updaters own the defaults they sent back"
    );

    // Generation follows the spec only.
    let labelled = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(1));
    let scaled = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.metadata.generation, Some(2));

    let services = cluster.api("v1", "Service", "services", Some("default"));
    let svc = services
        .create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})).unwrap())
        .await
        .unwrap();
    let svc = serde_json::to_value(svc).unwrap();
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(svc["spec"]["sessionAffinity"], "None");
    assert_eq!(
        svc["spec"]["ports"][0],
        json!({"port": 80, "protocol": "TCP", "targetPort": 80})
    );
    assert!(
        svc["spec"]["clusterIP"]
            .as_str()
            .unwrap()
            .starts_with("10.96.")
    );

    let secrets = cluster.api("v1", "Secret", "secrets", Some("default"));
    let secret = secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s"}, "stringData": {"password": "hunter2"}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let secret = serde_json::to_value(secret).unwrap();
    assert_eq!(secret["data"]["password"], "aHVudGVyMg==");
    assert_eq!(secret["type"], "Opaque");
    assert!(secret.get("stringData").is_none());
}

#[tokio::test]
async fn updates_with_a_stale_resource_version_conflict() {
    let cluster = Cluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "c"}, "data": {"a": "1"}})).unwrap();
    let created = api.create(&PostParams::default(), &cm).await.unwrap();
    let mut first = created.clone();
    first.data = Some([("a".to_owned(), "2".to_owned())].into());
    api.replace("c", &PostParams::default(), &first)
        .await
        .unwrap();
    let mut stale = created;
    stale.data = Some([("a".to_owned(), "3".to_owned())].into());
    let error = api
        .replace("c", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert_eq!(code(&error), 409);
    assert!(
        message(&error).contains("the object has been modified"),
        "{}",
        message(&error)
    );
    let again = api.create(&PostParams::default(), &cm).await.unwrap_err();
    assert_eq!(code(&again), 409, "AlreadyExists");
}

#[tokio::test]
async fn json_merge_json_patch_and_strategic_merge_patches() {
    let cluster = Cluster::start().await;
    let api: Api<Deployment> = Api::namespaced(cluster.client.clone(), "default");
    let body: Deployment = serde_json::from_value(deployment(
        "web",
        json!([
        {"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]),
    ))
    .unwrap();
    api.create(&PostParams::default(), &body).await.unwrap();

    // Strategic merge: containers merge by name.
    let patched = api
        .patch("web", &PatchParams::default(), &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b:2"}]}}}})))
        .await
        .unwrap();
    let images: Vec<String> = patched
        .spec
        .template
        .spec
        .unwrap()
        .containers
        .into_iter()
        .map(|c| c.image.unwrap())
        .collect();
    assert_eq!(images, vec!["a:1", "b:2"]);

    // JSON merge patch: lists are replaced.
    let merged = api
        .patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "c:1"}]}}}})))
        .await
        .unwrap();
    assert_eq!(merged.spec.template.spec.unwrap().containers.len(), 1);

    // JSON patch, with a failing test operation.
    let patch: json_patch::Patch =
        serde_json::from_value(json!([{"op": "replace", "path": "/spec/replicas", "value": 4}]))
            .unwrap();
    let replaced = api
        .patch("web", &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
        .unwrap();
    assert_eq!(replaced.spec.replicas, Some(4));
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/spec/replicas", "value": 9}]))
            .unwrap();
    let error = api
        .patch("web", &PatchParams::default(), &Patch::Json::<()>(failing))
        .await
        .unwrap_err();
    assert_eq!(code(&error), 400);
}

// ------------------------------------------------------- server-side apply

#[tokio::test]
async fn apply_creates_and_records_leaf_ownership() {
    let cluster = Cluster::start().await;
    let applied = cluster
        .apply("deployments", deployment("web", json!([{"name": "web", "image": "nginx:1.27", "env": [{"name": "A", "value": "1"}]}])), "kiln", false)
        .await
        .unwrap();
    assert_eq!(
        managers(&applied),
        vec![("kiln".to_owned(), "Apply".to_owned())]
    );
    assert_eq!(
        fields_of(&applied, "kiln"),
        json!({"f:spec": {"f:selector": {}, "f:template": {
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:env": {"k:{\"name\":\"A\"}": {".": {}, "f:name": {}, "f:value": {}}}, "f:image": {}, "f:name": {}}}}}}})
    );
    // Defaults are set but owned by nobody.
    assert_eq!(applied["spec"]["replicas"], 1);
}

#[tokio::test]
async fn apply_conflicts_name_the_field_and_manager_unless_forced() {
    let cluster = Cluster::start().await;
    cluster
        .apply(
            "configmaps",
            configmap("c", json!({"a": "1", "b": "1"})),
            "alice",
            false,
        )
        .await
        .unwrap();
    let error = cluster
        .apply(
            "configmaps",
            configmap("c", json!({"a": "2"})),
            "bob",
            false,
        )
        .await
        .unwrap_err();
    assert_eq!(code(&error), 409);
    let text = message(&error);
    assert!(
        text.contains("conflict with \"alice\"") && text.contains(".data.a"),
        "{text}"
    );
    let unchanged = cluster
        .get("v1", "ConfigMap", "configmaps", Some("default"), "c")
        .await
        .unwrap();
    assert_eq!(
        unchanged["data"]["a"], "1",
        "a conflicting apply changes nothing"
    );

    let forced = cluster
        .apply("configmaps", configmap("c", json!({"a": "2"})), "bob", true)
        .await
        .unwrap();
    assert_eq!(forced["data"]["a"], "2");
    assert_eq!(fields_of(&forced, "bob"), json!({"f:data": {"f:a": {}}}));
    assert_eq!(
        fields_of(&forced, "alice"),
        json!({"f:data": {"f:b": {}}}),
        "alice lost .data.a"
    );
}

#[tokio::test]
async fn apply_with_the_same_value_shares_ownership() {
    let cluster = Cluster::start().await;
    cluster
        .apply(
            "configmaps",
            configmap("c", json!({"a": "1"})),
            "alice",
            false,
        )
        .await
        .unwrap();
    let shared = cluster
        .apply(
            "configmaps",
            configmap("c", json!({"a": "1"})),
            "bob",
            false,
        )
        .await
        .unwrap();
    assert_eq!(fields_of(&shared, "alice"), json!({"f:data": {"f:a": {}}}));
    assert_eq!(fields_of(&shared, "bob"), json!({"f:data": {"f:a": {}}}));
    // When one co-owner stops applying it, the field stays for the other.
    let kept = cluster
        .apply("configmaps", configmap("c", json!({})), "alice", false)
        .await
        .unwrap();
    assert_eq!(kept["data"]["a"], "1");
}

#[tokio::test]
async fn a_field_no_longer_applied_is_removed_when_nobody_else_owns_it() {
    let cluster = Cluster::start().await;
    cluster
        .apply(
            "configmaps",
            configmap("c", json!({"a": "1", "b": "2"})),
            "alice",
            false,
        )
        .await
        .unwrap();
    // Someone else takes c with an ordinary update.
    cluster
        .api("v1", "ConfigMap", "configmaps", Some("default"))
        .patch(
            "c",
            &manager("editor"),
            &Patch::Merge(json!({"data": {"c": "3"}})),
        )
        .await
        .unwrap();
    let removed = cluster
        .apply(
            "configmaps",
            configmap("c", json!({"a": "1"})),
            "alice",
            false,
        )
        .await
        .unwrap();
    assert_eq!(
        removed["data"],
        json!({"a": "1", "c": "3"}),
        "b went; c belongs to the editor"
    );
}

#[tokio::test]
async fn keyed_lists_merge_item_by_item_between_managers() {
    let cluster = Cluster::start().await;
    cluster
        .apply(
            "deployments",
            deployment(
                "web",
                json!([{"name": "web", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]}]),
            ),
            "alice",
            false,
        )
        .await
        .unwrap();
    // Bob adds a sidecar and an env var to alice's container: merged by name.
    let both = cluster
        .apply(
            "deployments",
            deployment(
                "web",
                json!([
            {"name": "web", "env": [{"name": "B", "value": "2"}]},
            {"name": "sidecar", "image": "envoy:1"}]),
            ),
            "bob",
            false,
        )
        .await
        .unwrap();
    let containers = &both["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers.as_array().unwrap().len(), 2);
    assert_eq!(containers[0]["image"], "nginx:1");
    assert_eq!(
        containers[0]["env"],
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
    );
    // Alice stops applying env A: it goes; Bob's B and sidecar stay.
    let after = cluster
        .apply(
            "deployments",
            deployment("web", json!([{"name": "web", "image": "nginx:1"}])),
            "alice",
            false,
        )
        .await
        .unwrap();
    let containers = &after["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers[0]["env"], json!([{"name": "B", "value": "2"}]));
    assert_eq!(containers[1]["name"], "sidecar");
    // Ports are keyed by containerPort and protocol (TCP when unset).
    let ports = cluster
        .apply(
            "deployments",
            deployment(
                "web",
                json!([{"name": "web", "image": "nginx:1",
            "ports": [{"containerPort": 53, "protocol": "UDP"}, {"containerPort": 53}]}]),
            ),
            "alice",
            false,
        )
        .await
        .unwrap();
    assert_eq!(
        ports["spec"]["template"]["spec"]["containers"][0]["ports"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test]
async fn crd_list_types_drive_the_merge() {
    let cluster = Cluster::start().await;
    install_widgets(&cluster).await;
    cluster
        .apply("widgets", widget("w", json!({"color": "red", "ports": [{"name": "http", "port": 80}], "tags": ["a"], "args": ["x"]})), "alice", false)
        .await
        .unwrap();
    let merged = cluster
        .apply("widgets", widget("w", json!({"color": "red", "ports": [{"name": "metrics", "port": 9090}], "tags": ["b"]})), "bob", false)
        .await
        .unwrap();
    assert_eq!(
        merged["spec"]["ports"].as_array().unwrap().len(),
        2,
        "map list: merged by name+protocol"
    );
    assert_eq!(merged["spec"]["tags"], json!(["a", "b"]), "set: union");
    assert_eq!(
        fields_of(&merged, "bob")["f:spec"]["f:ports"],
        json!({"k:{\"name\":\"metrics\",\"protocol\":\"TCP\"}": {".": {}, "f:name": {}, "f:port": {}}})
    );
    // An atomic list belongs to one manager as a whole.
    let error = cluster
        .apply(
            "widgets",
            widget("w", json!({"color": "red", "args": ["y"]})),
            "bob",
            false,
        )
        .await
        .unwrap_err();
    assert!(
        message(&error).contains(".spec.args"),
        "{}",
        message(&error)
    );
    let forced = cluster
        .apply(
            "widgets",
            widget("w", json!({"color": "red", "args": ["y", "z"]})),
            "bob",
            true,
        )
        .await
        .unwrap();
    assert_eq!(forced["spec"]["args"], json!(["y", "z"]));
    assert_eq!(forced["spec"]["size"], 3, "schema default");
}

#[tokio::test]
async fn a_no_op_apply_changes_nothing_and_emits_no_event() {
    let cluster = Cluster::start().await;
    let first = cluster
        .apply(
            "configmaps",
            configmap("c", json!({"a": "1"})),
            "kiln",
            false,
        )
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    let rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut stream = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let again = cluster
        .apply(
            "configmaps",
            configmap("c", json!({"a": "1"})),
            "kiln",
            false,
        )
        .await
        .unwrap();
    assert_eq!(
        again, first,
        "same object, same resourceVersion, same managedFields time"
    );
    // The next event on the watch is the real change that follows, not the no-op.
    cluster
        .apply(
            "configmaps",
            configmap("c", json!({"a": "2"})),
            "kiln",
            false,
        )
        .await
        .unwrap();
    match next_event(&mut stream).await {
        WatchEvent::Modified(cm) => assert_eq!(cm.data.unwrap()["a"], "2"),
        other => panic!("expected the a=2 change, got {}", describe(&other)),
    }
}

#[tokio::test]
async fn dry_run_returns_the_result_and_stores_nothing() {
    let cluster = Cluster::start().await;
    let api = cluster.api("v1", "ConfigMap", "configmaps", Some("default"));
    let before = cluster.server.store().resource_version();
    let mut params = PatchParams::apply("kiln");
    params.dry_run = true;
    let predicted = api
        .patch(
            "c",
            &params,
            &Patch::Apply(configmap("c", json!({"a": "1"}))),
        )
        .await
        .unwrap();
    assert_eq!(predicted.data["data"]["a"], "1");
    assert_eq!(
        code(&api.get("c").await.unwrap_err()),
        404,
        "a dry-run apply creates nothing"
    );

    cluster
        .apply(
            "configmaps",
            configmap("c", json!({"a": "1"})),
            "kiln",
            false,
        )
        .await
        .unwrap();
    let rv = cluster.server.store().resource_version();
    assert!(rv > before);
    let changed = api
        .patch(
            "c",
            &params,
            &Patch::Apply(configmap("c", json!({"a": "2"}))),
        )
        .await
        .unwrap();
    assert_eq!(changed.data["data"]["a"], "2");
    let post = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    api.create(
        &post,
        &serde_json::from_value(configmap("d", json!({}))).unwrap(),
    )
    .await
    .unwrap();
    let delete = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    api.delete("c", &delete).await.unwrap();
    let merge = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    api.patch("c", &merge, &Patch::Merge(json!({"data": {"a": "3"}})))
        .await
        .unwrap();
    assert_eq!(
        cluster.server.store().resource_version(),
        rv,
        "nothing was written"
    );
    assert_eq!(api.get("c").await.unwrap().data["data"]["a"], "1");
    assert_eq!(code(&api.get("d").await.unwrap_err()), 404);
}

#[tokio::test]
async fn an_update_manager_conflicts_with_a_later_apply() {
    let cluster = Cluster::start().await;
    let mut d = deployment("web", json!([{"name": "web", "image": "nginx:1"}]));
    d["spec"]["replicas"] = json!(2);
    cluster
        .apply("deployments", d.clone(), "kiln", false)
        .await
        .unwrap();
    // An autoscaler-like updater changes replicas.
    let api: Api<Deployment> = Api::namespaced(cluster.client.clone(), "default");
    api.patch(
        "web",
        &manager("hpa"),
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await
    .unwrap();
    d["spec"]["replicas"] = json!(3);
    let error = cluster
        .apply("deployments", d.clone(), "kiln", false)
        .await
        .unwrap_err();
    assert!(
        message(&error).contains("conflict with \"hpa\"")
            && message(&error).contains(".spec.replicas"),
        "{}",
        message(&error)
    );
    // Leaving replicas out of the configuration is how to let the other manager have it.
    d["spec"].as_object_mut().unwrap().remove("replicas");
    let yielded = cluster
        .apply("deployments", d, "kiln", false)
        .await
        .unwrap();
    assert_eq!(yielded["spec"]["replicas"], 5);
}

// ---------------------------------------------------------------- deletion

async fn owned_configmap(cluster: &Cluster, name: &str, owner: &Value) {
    let mut cm = configmap(name, json!({}));
    cm["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap",
        "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"], "blockOwnerDeletion": true}]);
    cluster
        .apply("configmaps", cm, "test", false)
        .await
        .unwrap();
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let cluster = Cluster::start().await;
    let mut cm = configmap("held", json!({}));
    cm["metadata"]["finalizers"] = json!(["example.com/hold"]);
    cluster
        .apply("configmaps", cm, "test", false)
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    api.delete("held", &DeleteParams::default()).await.unwrap();
    let pending = api.get("held").await.unwrap();
    assert!(pending.metadata.deletion_timestamp.is_some());
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(code(&api.get("held").await.unwrap_err()), 404);
}

#[tokio::test]
async fn propagation_policies_collect_or_orphan_dependents() {
    let cluster = Cluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    for (owner, policy) in [
        ("bg", DeleteParams::background()),
        ("fg", DeleteParams::foreground()),
        ("orph", DeleteParams::orphan()),
    ] {
        let parent = cluster
            .apply("configmaps", configmap(owner, json!({})), "test", false)
            .await
            .unwrap();
        owned_configmap(&cluster, &format!("{owner}-child"), &parent).await;
        api.delete(owner, &policy).await.unwrap();
        assert_eq!(
            code(&api.get(owner).await.unwrap_err()),
            404,
            "{owner} is gone"
        );
    }
    assert_eq!(
        code(&api.get("bg-child").await.unwrap_err()),
        404,
        "background: dependents collected"
    );
    assert_eq!(
        code(&api.get("fg-child").await.unwrap_err()),
        404,
        "foreground: dependents deleted first"
    );
    let orphan = api.get("orph-child").await.unwrap();
    assert!(
        orphan.metadata.owner_references.is_none(),
        "orphan: the owner reference is removed"
    );

    // Foreground waits for a dependent that is itself held by a finalizer.
    let parent = cluster
        .apply("configmaps", configmap("p", json!({})), "test", false)
        .await
        .unwrap();
    let mut child = configmap("p-child", json!({}));
    child["metadata"]["finalizers"] = json!(["example.com/hold"]);
    child["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "p", "uid": parent["metadata"]["uid"]}]);
    cluster
        .apply("configmaps", child, "test", false)
        .await
        .unwrap();
    api.delete("p", &DeleteParams::foreground()).await.unwrap();
    let waiting = api.get("p").await.unwrap();
    assert!(
        waiting
            .metadata
            .finalizers
            .unwrap()
            .contains(&"foregroundDeletion".to_owned())
    );
    api.patch(
        "p-child",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(
        code(&api.get("p").await.unwrap_err()),
        404,
        "the owner goes once its dependents are gone"
    );
}

#[tokio::test]
async fn deleting_a_namespace_deletes_what_is_in_it() {
    let cluster = Cluster::start().await;
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap(),
        )
        .await
        .unwrap();
    let mut cm = configmap("c", json!({}));
    cm["metadata"]["namespace"] = "team".into();
    cluster
        .apply("configmaps", cm.clone(), "test", false)
        .await
        .unwrap();
    namespaces
        .delete("team", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(code(&namespaces.get("team").await.unwrap_err()), 404);
    assert_eq!(
        code(
            &cluster
                .get("v1", "ConfigMap", "configmaps", Some("team"), "c")
                .await
                .unwrap_err()
        ),
        404
    );
    let error = cluster
        .apply("configmaps", cm, "test", false)
        .await
        .unwrap_err();
    assert_eq!(
        code(&error),
        404,
        "a missing namespace: {}",
        message(&error)
    );
}

#[tokio::test]
async fn delete_collection_honours_selectors() {
    let cluster = Cluster::start().await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    for (name, app) in [("a", "x"), ("b", "x"), ("c", "z")] {
        let mut cm = configmap(name, json!({}));
        cm["metadata"]["labels"] = json!({"app": app});
        cluster
            .apply("configmaps", cm, "test", false)
            .await
            .unwrap();
    }
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("app=x"),
    )
    .await
    .unwrap();
    let left: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect();
    assert_eq!(left, vec!["c"]);
}

// ------------------------------------------------------------------ status

#[tokio::test]
async fn the_status_subresource_separates_spec_and_status_writers() {
    let cluster = Cluster::start().await;
    install_widgets(&cluster).await;
    let mut body = widget("w", json!({"color": "red"}));
    body["status"] = json!({"ready": true});
    let created = cluster.apply("widgets", body, "kiln", false).await.unwrap();
    assert!(
        created.get("status").is_none(),
        "status is ignored on the main resource"
    );
    let api = cluster.api("example.com/v1", "Widget", "widgets", Some("default"));
    let with_status = api
        .patch_status(
            "w",
            &manager("controller"),
            &Patch::Merge(json!({"status": {"ready": true}, "spec": {"color": "blue"}})),
        )
        .await
        .unwrap();
    let with_status = serde_json::to_value(with_status).unwrap();
    assert_eq!(with_status["status"]["ready"], true);
    assert_eq!(
        with_status["spec"]["color"], "red",
        "a status write changes nothing else"
    );
    assert_eq!(
        with_status["metadata"]["generation"], 1,
        "status writes keep the generation"
    );
    let entry = with_status["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "controller")
        .unwrap()
        .clone();
    assert_eq!(entry["subresource"], "status");
    let status = api.get_status("w").await.unwrap();
    assert_eq!(status.data["status"]["ready"], true);
}

// -------------------------------------------------------------------- CRDs

#[tokio::test]
async fn crds_are_served_at_once_with_defaults_pruning_and_validation() {
    let cluster = Cluster::start().await;
    install_widgets(&cluster).await;
    let crd = cluster
        .get(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            None,
            "widgets.example.com",
        )
        .await
        .unwrap();
    let established = crd["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "Established" && c["status"] == "True");
    assert!(established);

    let mut body = widget("w", json!({"color": "green", "unknown": 1}));
    body["extra"] = json!("dropped");
    let created = cluster.apply("widgets", body, "kiln", false).await.unwrap();
    assert_eq!(
        created["spec"],
        json!({"color": "green", "size": 3}),
        "pruned and defaulted"
    );
    assert!(created.get("extra").is_none());

    let invalid = cluster
        .apply(
            "widgets",
            widget("bad", json!({"color": "purple"})),
            "kiln",
            false,
        )
        .await
        .unwrap_err();
    assert_eq!(code(&invalid), 422);
    assert!(
        message(&invalid).contains("spec.color"),
        "{}",
        message(&invalid)
    );
    let missing = cluster
        .apply("widgets", widget("bad", json!({"size": 1})), "kiln", false)
        .await
        .unwrap_err();
    assert_eq!(code(&missing), 422);

    // The same object through the other served version.
    let beta = cluster
        .get(
            "example.com/v1beta1",
            "Widget",
            "widgets",
            Some("default"),
            "w",
        )
        .await
        .unwrap();
    assert_eq!(beta["apiVersion"], "example.com/v1beta1");
    assert_eq!(beta["spec"]["color"], "green");

    // A cluster-scoped CRD.
    let scoped: Value = serde_yaml::from_str(
        &WIDGET_CRD
            .replace("Namespaced", "Cluster")
            .replace("widgets", "gadgets")
            .replace("Widget", "Gadget")
            .replace("widget", "gadget")
            .replace("[wd]", "[gd]"),
    )
    .unwrap();
    cluster
        .apply("customresourcedefinitions", scoped, "test", false)
        .await
        .unwrap();
    let gadget = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"color": "red"}});
    let created = cluster
        .apply("gadgets", gadget, "kiln", false)
        .await
        .unwrap();
    assert!(created["metadata"].get("namespace").is_none());

    // Deleting the CRD removes its objects and stops serving it.
    let crds = cluster.api(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        None,
    );
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    let gone = cluster
        .get("example.com/v1", "Widget", "widgets", Some("default"), "w")
        .await
        .unwrap_err();
    assert_eq!(code(&gone), 404);
}

// --------------------------------------------------------------- bad input

#[tokio::test]
async fn bad_requests_get_the_api_servers_status_codes() {
    let cluster = Cluster::start().await;
    let http = reqwest::Client::new();
    let url = |path: &str| format!("{}{path}", cluster.server.url());
    let cms = "/api/v1/namespaces/default/configmaps";
    let send = |method: reqwest::Method, path: &str, content_type: &str, body: Vec<u8>| {
        http.request(method, url(path))
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let cases: Vec<(&str, reqwest::Response, u16)> = vec![
        ("malformed JSON", send(reqwest::Method::POST, cms, "application/json", b"{not json".to_vec()).await.unwrap(), 400),
        ("malformed YAML apply", send(reqwest::Method::PATCH, &format!("{cms}/x?fieldManager=t"), "application/apply-patch+yaml", b"a: [".to_vec()).await.unwrap(), 400),
        ("unknown kind", send(reqwest::Method::GET, "/apis/example.com/v1/namespaces/default/nothings", "", vec![]).await.unwrap(), 404),
        ("missing namespace", send(reqwest::Method::POST, "/api/v1/namespaces/nope/configmaps", "application/json", br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#.to_vec()).await.unwrap(), 404),
        ("invalid name", send(reqwest::Method::POST, cms, "application/json", br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Not_Valid"}}"#.to_vec()).await.unwrap(), 422),
        ("wrong content type", send(reqwest::Method::POST, cms, "text/plain", b"hello".to_vec()).await.unwrap(), 415),
        ("wrong patch type", send(reqwest::Method::PATCH, &format!("{cms}/x"), "application/json", b"{}".to_vec()).await.unwrap(), 415),
        ("apply without a manager", send(reqwest::Method::PATCH, &format!("{cms}/x"), "application/apply-patch+yaml", b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n".to_vec()).await.unwrap(), 422),
        ("kind mismatch", send(reqwest::Method::POST, cms, "application/json", br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"a"}}"#.to_vec()).await.unwrap(), 400),
        ("oversized body", send(reqwest::Method::POST, cms, "application/json", vec![b' '; kiln_devcluster::MAX_BODY + 1]).await.unwrap(), 413),
        ("invalid deployment", send(reqwest::Method::POST, "/apis/apps/v1/namespaces/default/deployments", "application/json", br#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"spec":{"containers":[]}}}}"#.to_vec()).await.unwrap(), 422),
    ];
    for (what, response, expected) in cases {
        assert_eq!(response.status().as_u16(), expected, "{what}");
        let status: Value = response
            .json()
            .await
            .unwrap_or_else(|e| panic!("{what}: a Status body: {e}"));
        assert_eq!(status["kind"], "Status", "{what}");
        assert_eq!(status["code"], expected, "{what}");
        assert!(
            !status["message"].as_str().unwrap_or_default().is_empty(),
            "{what}"
        );
    }
    // Still serving.
    let ok = http.get(url(cms)).send().await.unwrap();
    assert_eq!(ok.status().as_u16(), 200);
}

// ------------------------------------------------ persistence, readiness, TLS

#[tokio::test]
async fn a_data_file_keeps_the_state_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("state.json");
    let config = Config {
        data: Some(data.clone()),
        ..Config::default()
    };
    let cluster = Cluster::with(config.clone()).await;
    install_widgets(&cluster).await;
    cluster
        .apply(
            "widgets",
            widget("w", json!({"color": "blue"})),
            "kiln",
            false,
        )
        .await
        .unwrap();
    let before = cluster
        .apply(
            "configmaps",
            configmap("c", json!({"a": "1"})),
            "kiln",
            false,
        )
        .await
        .unwrap();
    cluster.server.shutdown().await.unwrap();

    let restarted = Cluster::with(config).await;
    let after = restarted
        .get("v1", "ConfigMap", "configmaps", Some("default"), "c")
        .await
        .unwrap();
    assert_eq!(
        after, before,
        "the object, its managed fields and its resource version survive"
    );
    let w = restarted
        .get("example.com/v1", "Widget", "widgets", Some("default"), "w")
        .await
        .unwrap();
    assert_eq!(w["spec"]["color"], "blue");
    let next = restarted
        .apply(
            "configmaps",
            configmap("c", json!({"a": "2"})),
            "kiln",
            false,
        )
        .await
        .unwrap();
    let rv = |o: &Value| {
        o["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert!(rv(&next) > rv(&before), "resource versions keep increasing");

    std::fs::write(&data, "not json").unwrap();
    let broken = kiln_devcluster::DevCluster::start(Config {
        data: Some(data.clone()),
        ..Config::default()
    })
    .await;
    let error = broken
        .err()
        .expect("a corrupt data file is refused")
        .to_string();
    assert!(error.contains("state.json"), "{error}");

    // A data file that cannot be written stops the start, naming it (not a
    // warning at every change while the state is silently lost).
    let unwritable = dir.path().join("no-such-dir").join("x.json");
    let error = kiln_devcluster::DevCluster::start(Config {
        data: Some(unwritable),
        ..Config::default()
    })
    .await
    .err()
    .expect("an unwritable data file is refused at start")
    .to_string();
    assert!(error.contains("no-such-dir/x.json"), "{error}");
}

#[tokio::test]
async fn simulated_readiness_makes_workloads_ready_after_a_delay() {
    let config = Config {
        simulate_readiness: Some(Duration::from_millis(50)),
        ..Config::default()
    };
    let cluster = Cluster::with(config).await;
    let api: Api<Deployment> = Api::namespaced(cluster.client.clone(), "default");
    let mut d = deployment("web", json!([{"name": "web", "image": "nginx:1"}]));
    d["spec"]["replicas"] = json!(2);
    let created = cluster
        .apply("deployments", d, "kiln", false)
        .await
        .unwrap();
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let stream = api.watch(&WatchParams::default(), &rv).await.unwrap();
    let ready = stream
        .try_filter_map(|event| async move {
            Ok(match event {
                WatchEvent::Modified(d)
                    if d.status.as_ref().and_then(|s| s.ready_replicas) == Some(2) =>
                {
                    Some(d)
                }
                _ => None,
            })
        })
        .boxed();
    let mut ready = ready;
    let ready = tokio::time::timeout(Duration::from_secs(10), ready.next())
        .await
        .expect("ready in time")
        .unwrap()
        .unwrap();
    let status = ready.status.unwrap();
    assert_eq!(status.observed_generation, Some(1));
    assert!(status.conditions.unwrap().iter().any(|c| c.type_.as_deref() == Some("Available") && c.status.as_deref() == Some("True")));

    let jobs = cluster.api("batch/v1", "Job", "jobs", Some("default"));
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "default"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "j", "image": "busybox"}]}}}});
    cluster.apply("jobs", job, "kiln", false).await.unwrap();
    let mut complete = false;
    for _ in 0..200 {
        let job = jobs.get("j").await.unwrap();
        if job.data["status"]["succeeded"] == 1 {
            complete = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(complete, "the job completes");
}

#[tokio::test]
async fn simulated_readiness_gives_load_balancers_and_ingresses_an_address() {
    let config = Config {
        simulate_readiness: Some(Duration::from_millis(20)),
        ..Config::default()
    };
    let cluster = Cluster::with(config).await;
    let service = |name: &str, type_: &str| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
            "spec": {"type": type_, "selector": {"app": "web"}, "ports": [{"port": 80}]}})
    };
    cluster
        .apply("services", service("public", "LoadBalancer"), "kiln", false)
        .await
        .unwrap();
    cluster
        .apply("services", service("internal", "ClusterIP"), "kiln", false)
        .await
        .unwrap();
    let ingress = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"rules": [{"host": "web.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": "public", "port": {"number": 80}}}}]}}]}});
    cluster
        .apply("ingresses", ingress, "kiln", false)
        .await
        .unwrap();
    let services = cluster.api("v1", "Service", "services", Some("default"));
    let ingresses = cluster.api(
        "networking.k8s.io/v1",
        "Ingress",
        "ingresses",
        Some("default"),
    );
    let address = |object: &kube::api::DynamicObject| {
        object.data["status"]["loadBalancer"]["ingress"][0]["ip"]
            .as_str()
            .map(str::to_owned)
    };
    let mut found = (None, None);
    for _ in 0..200 {
        found = (
            address(&services.get("public").await.unwrap()),
            address(&ingresses.get("web").await.unwrap()),
        );
        if found.0.is_some() && found.1.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let (service_ip, ingress_ip) = found;
    let service_ip = service_ip.expect("the LoadBalancer Service gets an address");
    assert!(service_ip.starts_with("203.0.113."), "{service_ip}");
    assert!(
        ingress_ip
            .expect("the Ingress gets an address")
            .starts_with("203.0.113.")
    );
    // A ClusterIP Service is no load balancer.
    let internal = services.get("internal").await.unwrap();
    assert_eq!(address(&internal), None);
    // Kiln's health reads them Healthy, as on a cloud cluster.
    let public = serde_json::to_value(services.get("public").await.unwrap()).unwrap();
    assert_eq!(
        kiln::health::assess(&public).status,
        kiln::health::Health::Healthy
    );
    let web = serde_json::to_value(ingresses.get("web").await.unwrap()).unwrap();
    assert_eq!(
        kiln::health::assess(&web).status,
        kiln::health::Health::Healthy
    );
}

#[tokio::test]
async fn tls_with_the_generated_ca_in_the_kubeconfig() {
    let config = Config {
        tls: true,
        ..Config::default()
    };
    let cluster = Cluster::with(config).await;
    assert!(cluster.server.url().starts_with("https://127.0.0.1:"));
    assert!(
        cluster
            .server
            .kubeconfig()
            .contains("certificate-authority-data")
    );
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    let names: Vec<String> = namespaces
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| n.metadata.name.unwrap())
        .collect();
    assert_eq!(
        names,
        vec!["default", "kube-node-lease", "kube-public", "kube-system"]
    );
}
