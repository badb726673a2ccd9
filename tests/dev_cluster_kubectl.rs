//! `kiln dev-cluster` driven by the real `kubectl` (`/usr/bin/kubectl`, or
//! `KILN_KUBECTL`): what people type works against it unchanged.

mod support;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use kiln_devcluster::{Config, DevCluster};

struct Kubectl {
    binary: PathBuf,
    kubeconfig: PathBuf,
    dir: tempfile::TempDir,
    _server: DevCluster,
}

impl Kubectl {
    async fn start() -> Self {
        let server = DevCluster::start(Config::default())
            .await
            .expect("the dev cluster starts");
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        server.write_kubeconfig(&kubeconfig).unwrap();
        // Always required (this suite is about kubectl; scripts/test
        // refuses to run without it).
        let kubectl = support::Tool::Kubectl;
        let binary = kubectl.locate().unwrap_or_else(|| {
            panic!(
                "{} is missing: these tests need kubectl; {}",
                kubectl.path().display(),
                kubectl.install()
            )
        });
        Self {
            binary,
            kubeconfig,
            dir,
            _server: server,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .args(args)
            .env_remove("KUBECONFIG");
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("kubectl runs")
    }

    /// Runs and asserts success; returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "kubectl {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// Writes `yaml` to a file and returns its path.
    fn file(&self, name: &str, yaml: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, yaml).unwrap();
        path_str(&path)
    }
}

fn path_str(path: &Path) -> String {
    path.to_str().unwrap().to_owned()
}

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web, team: blue}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        ports: [{containerPort: 80}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_server_side_create_update_conflict_force_and_field_removal() {
    let k = Kubectl::start().await;
    let file = k.file("web.yaml", DEPLOYMENT);
    assert!(
        k.ok(&["apply", "--server-side", "-f", &file])
            .contains("deployment.apps/web serverside-applied")
    );

    let yaml = k.ok(&[
        "get",
        "deployment",
        "web",
        "-o",
        "yaml",
        "--show-managed-fields",
    ]);
    for expected in [
        "manager: kubectl",
        "operation: Apply",
        "k:{\"name\":\"web\"}:",
        "imagePullPolicy: IfNotPresent",
        "revisionHistoryLimit: 10",
        "maxSurge: 25%",
        "protocol: TCP",
    ] {
        assert!(yaml.contains(expected), "`{expected}` in:\n{yaml}");
    }

    // Update.
    let updated = k.file("web2.yaml", &DEPLOYMENT.replace("nginx:1.27", "nginx:1.28"));
    k.ok(&["apply", "--server-side", "-f", &updated]);
    assert_eq!(
        k.ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}"
        ]),
        "nginx:1.28"
    );

    // Another manager takes replicas; a different value conflicts.
    k.ok(&["scale", "deployment", "web", "--replicas=4"]);
    let conflicting = k.file(
        "web3.yaml",
        &DEPLOYMENT.replace("replicas: 2", "replicas: 3"),
    );
    let output = k.run(&["apply", "--server-side", "-f", &conflicting]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("conflict with \"kubectl\"") && stderr.contains(".spec.replicas"),
        "{stderr}"
    );
    k.ok(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        &conflicting,
    ]);
    assert_eq!(
        k.ok(&["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"]),
        "3"
    );

    // A label no longer applied is removed.
    let fewer = k.file(
        "web4.yaml",
        &DEPLOYMENT
            .replace("replicas: 2", "replicas: 3")
            .replace(", team: blue", ""),
    );
    k.ok(&["apply", "--server-side", "-f", &fewer]);
    assert_eq!(
        k.ok(&["get", "deploy", "web", "-o", "jsonpath={.metadata.labels}"]),
        r#"{"app":"web"}"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_side_apply_and_edits_work_too() {
    let k = Kubectl::start().await;
    let file = k.file(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: '1', b: '2'}\n",
    );
    assert!(
        k.ok(&["apply", "-f", &file])
            .contains("configmap/settings created")
    );
    let file = k.file(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: '3'}\n",
    );
    assert!(
        k.ok(&["apply", "-f", &file])
            .contains("configmap/settings configured")
    );
    assert_eq!(
        k.ok(&["get", "cm", "settings", "-o", "jsonpath={.data}"]),
        r#"{"a":"3"}"#
    );
    k.ok(&["label", "cm", "settings", "tier=backend"]);
    k.ok(&["annotate", "cm", "settings", "note=hello"]);
    k.ok(&[
        "patch",
        "cm",
        "settings",
        "--type=json",
        "-p",
        r#"[{"op": "add", "path": "/data/c", "value": "4"}]"#,
    ]);
    assert_eq!(
        k.ok(&["get", "cm", "-l", "tier=backend", "-o", "name"])
            .trim(),
        "configmap/settings"
    );
    assert_eq!(
        k.ok(&["get", "cm", "settings", "-o", "jsonpath={.data.c}"]),
        "4"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_is_a_dry_run_that_stores_nothing() {
    let k = Kubectl::start().await;
    let file = k.file("web.yaml", DEPLOYMENT);
    k.ok(&["apply", "--server-side", "-f", &file]);
    let before = k.ok(&[
        "get",
        "deploy",
        "web",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    let changed = k.file(
        "changed.yaml",
        &DEPLOYMENT.replace("replicas: 2", "replicas: 7"),
    );
    for extra in [&[][..], &["--server-side"][..]] {
        let mut args = vec!["diff", "-f", changed.as_str()];
        args.extend_from_slice(extra);
        let output = k.run(&args);
        assert_eq!(
            output.status.code(),
            Some(1),
            "diff exits 1 when there are differences"
        );
        let diff = String::from_utf8_lossy(&output.stdout);
        assert!(
            diff.contains("-  replicas: 2") && diff.contains("+  replicas: 7"),
            "{diff}"
        );
    }
    assert_eq!(
        k.ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.metadata.resourceVersion}"
        ]),
        before
    );
    assert_eq!(
        k.ok(&["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"]),
        "2"
    );
    let same = k.run(&["diff", "--server-side", "-f", &file]);
    assert_eq!(
        same.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&same.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_streams_changes() {
    let k = Kubectl::start().await;
    let mut watch = k
        .command(&[
            "get",
            "configmaps",
            "--watch",
            "--output-watch-events",
            "--no-headers",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = watch.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // Let the watch start before changing things.
    std::thread::sleep(Duration::from_millis(500));
    k.ok(&[
        "apply",
        "-f",
        &k.file(
            "a.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
        ),
    ]);
    k.ok(&["label", "cm", "a", "x=y"]);
    k.ok(&["delete", "cm", "a"]);
    let mut lines = Vec::new();
    while lines.len() < 3 {
        match rx.recv_timeout(Duration::from_secs(10)) {
            // `ADDED a 0s`: the event and the name.
            Ok(line) => lines.push(
                line.split_whitespace()
                    .take(2)
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            Err(_) => break,
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(lines, vec!["ADDED a", "MODIFIED a", "DELETED a"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_honours_finalizers_and_cascades() {
    let k = Kubectl::start().await;
    let held = k.file(
        "held.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held, finalizers: [example.com/hold]}\n",
    );
    k.ok(&["apply", "-f", &held]);
    k.ok(&["delete", "cm", "held", "--wait=false"]);
    assert!(
        !k.ok(&[
            "get",
            "cm",
            "held",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}"
        ])
        .is_empty()
    );
    k.ok(&[
        "patch",
        "cm",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    let gone = k.run(&["get", "cm", "held"]);
    assert!(String::from_utf8_lossy(&gone.stderr).contains("NotFound"));

    for (cascade, child_survives) in [
        ("background", false),
        ("foreground", false),
        ("orphan", true),
    ] {
        k.ok(&[
            "create",
            "-f",
            &k.file(
                "owner.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owner}\n",
            ),
        ]);
        let uid = k.ok(&["get", "cm", "owner", "-o", "jsonpath={.metadata.uid}"]);
        let child = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: child\n  ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: owner, uid: {uid}}}]\n"
        );
        k.ok(&["create", "-f", &k.file("child.yaml", &child)]);
        k.ok(&["delete", "cm", "owner", &format!("--cascade={cascade}")]);
        let child = k.run(&[
            "get",
            "cm",
            "child",
            "-o",
            "jsonpath={.metadata.ownerReferences}",
        ]);
        assert_eq!(
            child.status.success(),
            child_survives,
            "--cascade={cascade}"
        );
        if child_survives {
            assert!(
                child.stdout.is_empty(),
                "the orphan lost its owner reference"
            );
            k.ok(&["delete", "cm", "child"]);
        }
    }

    k.ok(&["apply", "-f", &k.file("ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: team}\n")]);
    k.ok(&["delete", "namespace", "team"]);
    assert!(k.ok(&["get", "cm", "-A", "-o", "name"]).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_resources_then_a_crd_and_its_custom_resource_with_status() {
    let k = Kubectl::start().await;
    let resources = k.ok(&["api-resources"]);
    for line in [
        "deployments",
        "customresourcedefinitions",
        "networkpolicies",
        "leases",
        "clusterrolebindings",
        "cronjobs",
    ] {
        assert!(resources.contains(line), "{line} in:\n{resources}");
    }
    let crd = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {color: {type: string}, size: {type: integer, default: 1}}}
          status: {type: object, properties: {ready: {type: boolean}}}
"#;
    k.ok(&["apply", "--server-side", "-f", &k.file("crd.yaml", crd)]);
    assert!(
        k.ok(&["api-resources", "--api-group=example.com"])
            .contains("widgets")
    );
    let cr = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {color: red}\n";
    k.ok(&["apply", "--server-side", "-f", &k.file("w.yaml", cr)]);
    let bogus = k.run(&[
        "apply",
        "--server-side",
        "-f",
        &k.file(
            "bad.yaml",
            &cr.replace("color: red", "color: red, bogus: 1"),
        ),
    ]);
    assert!(
        String::from_utf8_lossy(&bogus.stderr).contains("unknown field \"spec.bogus\""),
        "strict field validation"
    );
    k.ok(&[
        "patch",
        "wd",
        "w",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"ready":true}}"#,
    ]);
    assert_eq!(
        k.ok(&[
            "get",
            "widget",
            "w",
            "-o",
            "jsonpath={.spec.size} {.status.ready}"
        ]),
        "1 true"
    );
    assert!(k.ok(&["get", "widgets"]).contains("w "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_generators_that_send_protobuf() {
    let k = Kubectl::start().await;
    k.ok(&["create", "namespace", "team-a"]);
    k.ok(&[
        "-n",
        "team-a",
        "create",
        "configmap",
        "settings",
        "--from-literal=color=blue",
    ]);
    k.ok(&[
        "-n",
        "team-a",
        "create",
        "secret",
        "generic",
        "db",
        "--from-literal=password=hunter2",
    ]);
    k.ok(&["-n", "team-a", "create", "serviceaccount", "robot"]);
    assert_eq!(
        k.ok(&[
            "-n",
            "team-a",
            "get",
            "cm",
            "settings",
            "-o",
            "jsonpath={.data.color}"
        ]),
        "blue"
    );
    assert_eq!(
        k.ok(&[
            "-n",
            "team-a",
            "get",
            "secret",
            "db",
            "-o",
            "jsonpath={.data.password}"
        ]),
        "aHVudGVyMg=="
    );
    let deployment = k.run(&[
        "-n",
        "team-a",
        "create",
        "deployment",
        "web",
        "--image=nginx",
    ]);
    assert!(!deployment.status.success());
    assert!(
        String::from_utf8_lossy(&deployment.stderr).contains("send JSON or YAML"),
        "a clear 415"
    );
}

// ------------------------------------------- the built-in API of 1.32

/// `kubectl api-resources -o wide` lists what a real Kubernetes 1.32 cluster
/// lists: every built-in resource, with its short names, version, scope,
/// kind, verbs and categories. The expectation
/// (`tests/data/k8s-1.32-api-resources.txt`) is written from Kubernetes'
/// published API description and registry sources (see
/// `devcluster/data/k8s-1.32/SOURCE.md`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_api_resources_match_kubernetes_1_32() {
    let k = Kubectl::start().await;
    let expected = include_str!("data/k8s-1.32-api-resources.txt");
    let listed = k.ok(&["api-resources", "-o", "wide"]);
    let normalize = |text: &str| -> Vec<String> {
        text.lines()
            .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|line| !line.is_empty())
            .collect()
    };
    assert_eq!(
        normalize(&listed),
        normalize(expected),
        "kubectl api-resources -o wide printed:\n{listed}"
    );
}

/// `kubectl explain` reads the published schemas from `/openapi/v3`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_reads_the_builtin_schemas() {
    let k = Kubectl::start().await;
    for (path, fields) in [
        ("deployment.spec.strategy", &["rollingUpdate", "type"][..]),
        (
            "deployment.spec.template.spec.containers.ports",
            &["containerPort", "protocol"][..],
        ),
        (
            "pdb.spec",
            &[
                "maxUnavailable",
                "minAvailable",
                "selector",
                "unhealthyPodEvictionPolicy",
            ][..],
        ),
        (
            "hpa.spec.metrics",
            &[
                "containerResource",
                "external",
                "object",
                "pods",
                "resource",
                "type",
            ][..],
        ),
        (
            "validatingadmissionpolicy.spec",
            &["matchConstraints", "validations", "paramKind"][..],
        ),
    ] {
        let text = k.ok(&["explain", path]);
        for field in fields {
            assert!(
                text.contains(field),
                "`{field}` in kubectl explain {path}:\n{text}"
            );
        }
    }
    // autoscaling/v2 is the preferred version, as in 1.32.
    assert!(k.ok(&["explain", "hpa"]).contains("VERSION:    v2"));
}

/// Group versions 1.32 no longer serves answer 404, as 1.32 does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_api_versions_are_not_found() {
    let k = Kubectl::start().await;
    for path in [
        "/apis/extensions/v1beta1",
        "/apis/extensions/v1beta1/namespaces/default/ingresses",
        "/apis/policy/v1beta1/podsecuritypolicies",
        "/apis/apiextensions.k8s.io/v1beta1/customresourcedefinitions",
        "/apis/flowcontrol.apiserver.k8s.io/v1beta3",
        "/apis/autoscaling/v2beta2",
        "/apis/batch/v1beta1/namespaces/default/cronjobs",
    ] {
        let output = k.run(&["get", "--raw", path]);
        assert!(!output.status.success(), "{path} is served");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(
                "Error from server (NotFound): the server could not find the requested resource"
            ),
            "{path}: {stderr}"
        );
    }
    let output = k.run(&["get", "podsecuritypolicies"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the server doesn't have a resource type \"podsecuritypolicies\""),
        "{stderr}"
    );
}

/// The access and token reviews answer (every request is allowed, as the
/// dev cluster has no authorization) and store nothing; their other verbs
/// are not allowed, as on a real cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_answer_and_are_create_only() {
    let k = Kubectl::start().await;
    assert_eq!(
        k.ok(&["auth", "can-i", "create", "deployments"]).trim(),
        "yes"
    );
    assert!(k.ok(&["auth", "can-i", "--list"]).contains("*.*"));
    assert!(k.ok(&["auth", "whoami"]).contains("kiln-dev"));
    for path in [
        "/apis/authentication.k8s.io/v1/tokenreviews",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        "/api/v1/namespaces/default/bindings",
    ] {
        let output = k.run(&["get", "--raw", path]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("(MethodNotAllowed)"),
            "GET {path}: {stderr}"
        );
    }
}
