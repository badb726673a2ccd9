//! `kiln diff` and `kiln sync` as people run them: the guestbook example,
//! rendered by the `values` plugin, against an in-process dev cluster.

mod support;

use std::path::Path;
use std::process::Output;

use kiln_devcluster::{Config, DevCluster};
use support::{component, guestbook};

struct Setup {
    server: DevCluster,
    dir: tempfile::TempDir,
}

impl Setup {
    async fn start() -> Self {
        let server = DevCluster::start(Config::default()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        server
            .write_kubeconfig(&dir.path().join("kubeconfig"))
            .unwrap();
        Self { server, dir }
    }

    /// Runs `kiln SUBCOMMAND` on the guestbook with the values plugin.
    async fn kiln(&self, subcommand: &str, extra: &[&str]) -> Output {
        let kubeconfig = self.dir.path().join("kubeconfig");
        let values = component("values");
        let mut args: Vec<String> = vec![
            subcommand.into(),
            guestbook().display().to_string(),
            "--plugin".into(),
            values.display().to_string(),
            "--namespace".into(),
            "guestbook".into(),
            "--kubeconfig".into(),
            kubeconfig.display().to_string(),
        ];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let home = self.dir.path().to_owned();
        // The server runs on this runtime: run the CLI off it.
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            support::kiln_as_user(Path::new(env!("CARGO_MANIFEST_DIR")), &home, &args)
        })
        .await
        .unwrap()
    }
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_and_sync_exit_codes_follow_the_cluster() {
    let setup = Setup::start().await;
    let missing = setup.kiln("sync", &[]).await;
    assert_eq!(
        missing.status.code(),
        Some(2),
        "no namespace yet: {}",
        text(&missing)
    );
    assert!(
        text(&missing).contains("namespaces \"guestbook\" not found"),
        "{}",
        text(&missing)
    );

    let diff = setup.kiln("diff", &[]).await;
    assert_eq!(
        diff.status.code(),
        Some(1),
        "everything is missing: {}",
        text(&diff)
    );
    assert!(
        String::from_utf8_lossy(&diff.stdout)
            .contains("Missing     apps/Deployment guestbook/guestbook-frontend")
    );

    let dry = setup
        .kiln(
            "sync",
            &["--sync-option", "CreateNamespace=true", "--dry-run"],
        )
        .await;
    assert_eq!(dry.status.code(), Some(0), "{}", text(&dry));
    assert!(String::from_utf8_lossy(&dry.stdout).contains("(dry run)"));
    let before = setup.server.store().resource_version();

    let synced = setup
        .kiln("sync", &["--sync-option", "CreateNamespace=true"])
        .await;
    assert_eq!(synced.status.code(), Some(0), "{}", text(&synced));
    assert!(setup.server.store().resource_version() > before);
    let stdout = String::from_utf8_lossy(&synced.stdout);
    assert!(
        stdout.contains("Created        Sync/0      apps/Deployment guestbook/guestbook-frontend"),
        "{stdout}"
    );
    assert!(stdout.contains("sync succeeded: 3 created"), "{stdout}");

    let diff = setup.kiln("diff", &["-o", "json"]).await;
    assert_eq!(diff.status.code(), Some(0), "{}", text(&diff));
    let report: serde_json::Value = serde_json::from_slice(&diff.stdout).unwrap();
    assert!(
        report["objects"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["status"] == "Synced")
    );

    let json = setup.kiln("sync", &["-o", "json"]).await;
    let result: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(result["outcome"], "Succeeded");
    assert!(
        result["objects"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["action"] == "Unchanged")
    );

    // Drift (`kubectl scale` to 7; Git says 3): a dry run says what the
    // sync would do, Configured, and writes nothing.
    let client =
        kube::Client::try_from(kube::Config::new(setup.server.url().parse().unwrap())).unwrap();
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(client, "guestbook");
    let scale = serde_json::json!({"spec": {"replicas": 7}});
    deployments
        .patch(
            "guestbook-frontend",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&scale),
        )
        .await
        .unwrap();
    let before = setup.server.store().resource_version();
    let dry = setup.kiln("sync", &["--dry-run", "-o", "json"]).await;
    assert_eq!(dry.status.code(), Some(0), "{}", text(&dry));
    let result: serde_json::Value = serde_json::from_slice(&dry.stdout).unwrap();
    let action = |name: &str| {
        result["objects"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["key"]["name"] == name && o["key"]["kind"] == "Deployment")
            .map(|o| o["action"].clone())
    };
    assert_eq!(
        action("guestbook-frontend"),
        Some(serde_json::json!("Configured")),
        "{result:#}"
    );
    assert_eq!(
        setup.server.store().resource_version(),
        before,
        "a dry run writes nothing"
    );
    let live = deployments.get("guestbook-frontend").await.unwrap();
    assert_eq!(live.spec.replicas, Some(7));

    let bad = setup.kiln("sync", &["--sync-option", "Bogus=true"]).await;
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad).contains("Bogus"), "{}", text(&bad));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_another_application_tracks_is_never_taken_silently() {
    let setup = Setup::start().await;
    // Plain manifests whose names do not depend on the application's name.
    let src = support::tree(&[(
        "shared/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared}\ndata: {a: '1'}\n",
    )]);
    let sync = |name: &'static str, extra: &'static [&'static str]| {
        let dir = src.path().join("shared").display().to_string();
        let kubeconfig = setup.dir.path().join("kubeconfig").display().to_string();
        let home = setup.dir.path().to_owned();
        tokio::task::spawn_blocking(move || {
            let mut args = vec![
                "sync",
                &dir,
                "--name",
                name,
                "--namespace",
                "default",
                "--kubeconfig",
                &kubeconfig,
            ];
            args.extend_from_slice(extra);
            support::kiln_as_user(Path::new(env!("CARGO_MANIFEST_DIR")), &home, &args)
        })
    };
    let prod = sync("prod", &[]).await.unwrap();
    assert_eq!(prod.status.code(), Some(0), "{}", text(&prod));

    // FailOnSharedResource=true: refused, nothing taken.
    let refused = sync("shop", &["--sync-option", "FailOnSharedResource=true"])
        .await
        .unwrap();
    assert_ne!(refused.status.code(), Some(0), "{}", text(&refused));
    assert!(
        text(&refused).contains("shared with another application (prod:"),
        "{}",
        text(&refused)
    );

    // Without it the object changes hands as in Argo CD, but the result
    // says so, naming the other application.
    let shop = sync("shop", &[]).await.unwrap();
    assert_eq!(shop.status.code(), Some(0), "{}", text(&shop));
    let out = text(&shop);
    assert!(
        out.contains(
            "ConfigMap default/shared: shared resource: it was tracked by application prod"
        ),
        "{out}"
    );
    // And again: it is shop's now, nothing to say.
    let again = sync("shop", &[]).await.unwrap();
    assert!(
        !text(&again).contains("shared resource"),
        "{}",
        text(&again)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_namespace_without_a_namespace_is_a_warning() {
    let setup = Setup::start().await;
    let src = support::tree(&[(
        "app/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\n",
    )]);
    let dir = src.path().join("app").display().to_string();
    let kubeconfig = setup.dir.path().join("kubeconfig").display().to_string();
    let home = setup.dir.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        let args = [
            "sync",
            &dir,
            "--sync-option",
            "CreateNamespace=true",
            "--kubeconfig",
            &kubeconfig,
        ];
        support::kiln_as_user(Path::new(env!("CARGO_MANIFEST_DIR")), &home, &args)
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("warning: CreateNamespace=true creates the destination namespace, and none was given (--namespace)"),
        "{}",
        text(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enforced_policy_stops_the_sync_before_anything_is_applied() {
    let setup = Setup::start().await;
    let policy = component("required-labels");
    let before = setup.server.store().resource_version();
    let blocked = setup
        .kiln(
            "sync",
            &[
                "--sync-option",
                "CreateNamespace=true",
                "--policy",
                &policy.display().to_string(),
                "--setting",
                "labels=cost-center",
            ],
        )
        .await;
    assert_eq!(blocked.status.code(), Some(1), "{}", text(&blocked));
    assert!(
        text(&blocked).contains("nothing was applied"),
        "{}",
        text(&blocked)
    );
    assert_eq!(
        setup.server.store().resource_version(),
        before,
        "not a single write"
    );
}

/// What real charts ship beside their workloads: kinds the dev cluster did
/// not serve before it served all of Kubernetes 1.32's ("the cluster does
/// not serve PodDisruptionBudget in policy/v1" stopped the sync).
const PLATFORM: &str = r#"
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 5
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: shop-critical}
value: 100000
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: shop}
spec: {controller: example.com/ingress}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: shop-fast}
provisioner: example.com/csi
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: shop}
spec: {hard: {pods: "50"}}
---
apiVersion: v1
kind: LimitRange
metadata: {name: shop}
spec:
  limits: [{type: Container, default: {cpu: 200m}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-extra, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints: [{addresses: [10.0.0.9]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: shop}
webhooks:
- name: shop.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: "https://shop.example.com/validate"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: shop-replicas}
spec:
  matchConstraints:
    resourceRules:
    - {operations: [CREATE, UPDATE], apiGroups: [apps], apiVersions: [v1], resources: [deployments]}
  validations: [{expression: "object.spec.replicas <= 5"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: shop-replicas}
spec: {policyName: shop-replicas, validationActions: [Deny]}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.example.com}
spec:
  group: metrics.example.com
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  service: {name: metrics, namespace: shop}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_applies_the_platform_kinds_charts_ship() {
    let setup = Setup::start().await;
    let app = setup.dir.path().join("shop");
    std::fs::create_dir(&app).unwrap();
    std::fs::write(app.join("values.yaml"), "team: shop\n").unwrap();
    std::fs::write(app.join("platform.yaml"), PLATFORM).unwrap();
    let kubeconfig = setup.dir.path().join("kubeconfig");
    let values = component("values");
    let args: Vec<String> = [
        "sync",
        app.to_str().unwrap(),
        "--plugin",
        values.to_str().unwrap(),
        "--namespace",
        "shop",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--sync-option",
        "CreateNamespace=true",
    ]
    .iter()
    .map(|a| (*a).to_owned())
    .collect();
    let home = setup.dir.path().to_owned();
    let synced = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        support::kiln_as_user(Path::new(env!("CARGO_MANIFEST_DIR")), &home, &args)
    })
    .await
    .unwrap();
    assert_eq!(synced.status.code(), Some(0), "{}", text(&synced));
    let stdout = String::from_utf8_lossy(&synced.stdout);
    assert!(stdout.contains("sync succeeded: 12 created"), "{stdout}");
    for line in [
        "policy/PodDisruptionBudget shop/web",
        "autoscaling/HorizontalPodAutoscaler shop/web",
        "scheduling.k8s.io/PriorityClass shop-critical",
        "admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding shop-replicas",
        "apiregistration.k8s.io/APIService v1beta1.metrics.example.com",
    ] {
        assert!(stdout.contains(line), "`{line}` in:\n{stdout}");
    }
}
