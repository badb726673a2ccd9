//! What `kiln dev-cluster` stores for built-in kinds is what a real API
//! server stores: the body decoded into the kind's Go type (explicit nulls
//! gone, quantities canonical, undeclared fields dropped or refused per
//! `fieldValidation`), defaulted and validated, with the API server's codes
//! and messages.

mod support;

use reqwest::Method;
use serde_json::{Value, json};
use support::cluster::Cluster;

/// One HTTP request to the cluster: status, `Warning` headers, body.
async fn send(
    cluster: &Cluster,
    method: Method,
    path: &str,
    content_type: &str,
    body: &Value,
) -> (u16, Vec<String>, Value) {
    let response = reqwest::Client::new()
        .request(method, format!("{}{path}", cluster.server.url()))
        .header("content-type", content_type)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, warnings, body)
}

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

fn deployment(name: &str, container: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}}}})
}

#[tokio::test]
async fn explicit_nulls_are_not_stored() {
    let cluster = Cluster::start().await;
    let object = deployment(
        "probe",
        json!({"name": "a", "image": "a:1", "env": null,
            "livenessProbe": {"httpGet": {"httpHeaders": null, "path": "/", "port": 8080}}}),
    );
    let (status, _, created) = send(
        &cluster,
        Method::POST,
        DEPLOYMENTS,
        "application/json",
        &object,
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let container = &created["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["livenessProbe"]["httpGet"],
        json!({"path": "/", "port": 8080, "scheme": "HTTP"})
    );
    assert!(container.get("env").is_none(), "{container}");
    // The same apply twice is a no-op, not a write that keeps a null.
    let apply = format!("{DEPLOYMENTS}/probe?fieldManager=kiln&force=true");
    let (_, _, first) = send(
        &cluster,
        Method::PATCH,
        &apply,
        "application/apply-patch+yaml",
        &object,
    )
    .await;
    let (_, _, second) = send(
        &cluster,
        Method::PATCH,
        &apply,
        "application/apply-patch+yaml",
        &object,
    )
    .await;
    assert_eq!(
        first["metadata"]["resourceVersion"],
        second["metadata"]["resourceVersion"]
    );
}

#[tokio::test]
async fn quantities_are_stored_canonically_and_int_or_string_as_given() {
    let cluster = Cluster::start().await;
    let object = deployment(
        "sizes",
        json!({"name": "a", "image": "a:1",
            "resources": {"limits": {"cpu": 0.5, "memory": "1024Mi"}, "requests": {"cpu": "100m", "memory": "1e3"}},
            "ports": [{"name": "http", "containerPort": 80}],
            "readinessProbe": {"httpGet": {"path": "/", "port": "http"}}}),
    );
    let (status, _, created) = send(
        &cluster,
        Method::POST,
        DEPLOYMENTS,
        "application/json",
        &object,
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let container = &created["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["resources"],
        json!({"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "1e3"}})
    );
    assert_eq!(container["readinessProbe"]["httpGet"]["port"], "http");
    let pvc = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "0.5Gi"}}}});
    let (status, _, created) = send(
        &cluster,
        Method::POST,
        "/api/v1/namespaces/default/persistentvolumeclaims",
        "application/json",
        &pvc,
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["spec"]["resources"]["requests"]["storage"], "512Mi");
}

#[tokio::test]
async fn a_malformed_quantity_is_a_bad_request() {
    let cluster = Cluster::start().await;
    let object = deployment(
        "bad",
        json!({"name": "a", "image": "a:1", "resources": {"limits": {"memory": "1 Gi"}}}),
    );
    let (status, _, body) = send(
        &cluster,
        Method::POST,
        DEPLOYMENTS,
        "application/json",
        &object,
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["message"],
        "Deployment in version \"v1\" cannot be handled as a Deployment: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    );
}

#[tokio::test]
async fn unknown_fields_of_builtin_kinds_follow_field_validation() {
    let cluster = Cluster::start().await;
    let mut object = deployment(
        "unknown",
        json!({"name": "a", "image": "a:1", "bogus": true}),
    );
    object["spec"]["foo"] = json!(1);

    let strict = format!("{DEPLOYMENTS}?fieldValidation=Strict");
    let (status, _, body) =
        send(&cluster, Method::POST, &strict, "application/json", &object).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["reason"], "BadRequest");
    assert_eq!(
        body["message"],
        "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: unknown field \"spec.foo\", unknown field \"spec.template.spec.containers[0].bogus\""
    );

    // Warn, the default: stored without them, one warning each.
    let (status, warnings, created) = send(
        &cluster,
        Method::POST,
        DEPLOYMENTS,
        "application/json",
        &object,
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        warnings,
        vec![
            r#"299 - "unknown field \"spec.foo\"""#,
            r#"299 - "unknown field \"spec.template.spec.containers[0].bogus\"""#,
        ]
    );
    assert!(created["spec"].get("foo").is_none());
    assert!(
        created["spec"]["template"]["spec"]["containers"][0]
            .get("bogus")
            .is_none()
    );

    // Ignore: dropped silently. Server-side apply decodes the same way.
    let apply = format!("{DEPLOYMENTS}/unknown?fieldManager=kiln&fieldValidation=Ignore");
    let (status, warnings, applied) = send(
        &cluster,
        Method::PATCH,
        &apply,
        "application/apply-patch+yaml",
        &object,
    )
    .await;
    assert_eq!(status, 200, "{applied}");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(applied["spec"].get("foo").is_none());
    let apply = format!("{DEPLOYMENTS}/unknown?fieldManager=kiln&fieldValidation=Strict");
    let (status, _, body) = send(
        &cluster,
        Method::PATCH,
        &apply,
        "application/apply-patch+yaml",
        &object,
    )
    .await;
    assert_eq!(status, 400, "{body}");
}

/// The `(field, message)` causes of a 422.
fn causes(body: &Value) -> Vec<(String, String)> {
    body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["field"].as_str().unwrap_or_default().to_owned(),
                c["message"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn ports_out_of_range_are_invalid() {
    let cluster = Cluster::start().await;
    let object = deployment(
        "ports",
        json!({"name": "a", "image": "a:1", "ports": [{"containerPort": 70000}]}),
    );
    let (status, _, body) = send(
        &cluster,
        Method::POST,
        DEPLOYMENTS,
        "application/json",
        &object,
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (422, Some("Invalid")),
        "{body}"
    );
    assert_eq!(
        causes(&body),
        vec![(
            "spec.template.spec.containers[0].ports[0].containerPort".to_owned(),
            "Invalid value: 70000: must be between 1 and 65535, inclusive".to_owned()
        )]
    );
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}, {"port": 0}]}});
    let (status, _, body) = send(
        &cluster,
        Method::POST,
        "/api/v1/namespaces/default/services",
        "application/json",
        &service,
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        causes(&body),
        vec![
            ("spec.ports[0].nodePort".to_owned(), "Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767".to_owned()),
            ("spec.ports[1].port".to_owned(), "Invalid value: 0: must be between 1 and 65535, inclusive".to_owned()),
            // The target port defaults to the port, and is checked too.
            ("spec.ports[1].targetPort".to_owned(), "Invalid value: 0: must be between 1 and 65535, inclusive".to_owned()),
        ]
    );
}

#[tokio::test]
async fn a_job_template_and_a_statefulset_spec_are_immutable() {
    let cluster = Cluster::start().await;
    let jobs = "/apis/batch/v1/namespaces/default/jobs";
    let job = |image: &str| {
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate"},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": image}]}}}})
    };
    let apply = format!("{jobs}/migrate?fieldManager=kiln");
    let (status, _, _) = send(
        &cluster,
        Method::PATCH,
        &apply,
        "application/apply-patch+yaml",
        &job("m:1"),
    )
    .await;
    assert_eq!(status, 201);
    let (status, _, body) = send(
        &cluster,
        Method::PATCH,
        &apply,
        "application/apply-patch+yaml",
        &job("m:2"),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        causes(&body),
        vec![(
            "spec.template".to_owned(),
            "Invalid value: field is immutable".to_owned()
        )]
    );

    let sets = "/apis/apps/v1/namespaces/default/statefulsets";
    let set = |size: &str| {
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
            "spec": {"serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "db", "image": "db:1"}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}}]}})
    };
    let apply = format!("{sets}/db?fieldManager=kiln");
    let (status, _, _) = send(
        &cluster,
        Method::PATCH,
        &apply,
        "application/apply-patch+yaml",
        &set("8Gi"),
    )
    .await;
    assert_eq!(status, 201);
    // The same size spelled differently is no change at all.
    let (status, _, _) = send(
        &cluster,
        Method::PATCH,
        &apply,
        "application/apply-patch+yaml",
        &set("8192Mi"),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _, body) = send(
        &cluster,
        Method::PATCH,
        &apply,
        "application/apply-patch+yaml",
        &set("16Gi"),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"),
        "{body}"
    );
}

#[tokio::test]
async fn a_selector_that_does_not_match_the_template_is_invalid() {
    let cluster = Cluster::start().await;
    let mut object = deployment("web", json!({"name": "a", "image": "a:1"}));
    object["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    let (status, _, body) = send(
        &cluster,
        Method::POST,
        DEPLOYMENTS,
        "application/json",
        &object,
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        causes(&body),
        vec![(
            "spec.template.metadata.labels".to_owned(),
            "Invalid value: `selector` does not match template `labels`".to_owned()
        )]
    );
}

/// Each normalization rule of `kiln diff`, proved against what the dev
/// cluster stored: the structural comparison (the one used where the server
/// cannot predict) finds Git's spelling and the stored object equal.
#[tokio::test]
async fn what_git_says_and_what_the_server_stored_compare_equal() {
    use kiln::diff::{DiffOptions, SyncStatus, compare};

    let cluster = Cluster::start().await;
    let desired = vec![
        // Explicit nulls, quantity spellings, ports without a protocol.
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "exporter", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "x"}}, "updateStrategy": {"type": "OnDelete", "rollingUpdate": null},
                "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"hostNetwork": false, "containers": [{
                    "name": "x", "image": "x:1", "args": [], "ports": [{"containerPort": 9100}],
                    "resources": {"limits": {"cpu": 0.5, "memory": "1024Mi"}, "requests": {"cpu": "0.0001", "memory": "0.5Gi"}},
                    "livenessProbe": {"httpGet": {"httpHeaders": null, "path": "/", "port": 9100}}}],
                    "volumes": [{"name": "t", "emptyDir": {"sizeLimit": "1.5Gi"}}]}}}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "exporter", "namespace": "default"},
            "spec": {"type": "NodePort", "selector": {"app": "x"},
                "ports": [{"name": "metrics", "port": 9100, "targetPort": 9100, "nodePort": null}]}}),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "8192Mi"}}}}),
    ];
    for object in &desired {
        let (group_version, kind) = (
            object["apiVersion"].as_str().unwrap(),
            object["kind"].as_str().unwrap(),
        );
        let plural = format!("{}s", kind.to_lowercase());
        let prefix = if group_version == "v1" {
            "/api/v1".to_owned()
        } else {
            format!("/apis/{group_version}")
        };
        let name = object["metadata"]["name"].as_str().unwrap();
        let path = format!(
            "{prefix}/namespaces/default/{plural}/{name}?fieldManager=kiln&fieldValidation=Strict"
        );
        let (status, _, live) = send(
            &cluster,
            Method::PATCH,
            &path,
            "application/apply-patch+yaml",
            object,
        )
        .await;
        assert_eq!(status, 201, "{live}");
        let diff = compare(Some(object), Some(&live), None, &DiffOptions::default())
            .await
            .unwrap();
        assert_eq!(
            diff.status,
            SyncStatus::Synced,
            "{kind}:\ndesired {}\nlive {}",
            diff.desired.unwrap_or_default(),
            diff.live.unwrap_or_default()
        );
    }
}
