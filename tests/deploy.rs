//! `deploy/` applies cleanly with the real kubectl, as `-k` and as `-f`.

mod support;

use std::path::Path;
use std::process::Command;

use kiln_devcluster::{Config, DevCluster};

fn kubectl(kubeconfig: &Path, cache: &Path, args: &[&str]) -> String {
    let binary = std::env::var_os("KILN_KUBECTL").unwrap_or_else(|| "/usr/bin/kubectl".into());
    let output = Command::new(binary)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_applies_with_kustomize_and_with_plain_files() {
    for form in [
        vec!["apply", "--server-side", "-k", "deploy/"],
        vec![
            "apply",
            "--server-side",
            "-f",
            "deploy/crds/",
            "-f",
            "deploy/controller/",
            "-f",
            "deploy/render-server/",
        ],
    ] {
        let server = DevCluster::start(Config::default()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        server.write_kubeconfig(&kubeconfig).unwrap();
        let cache = dir.path().join("cache");
        let (k, c) = (kubeconfig.clone(), cache.clone());
        let applied = tokio::task::spawn_blocking(move || kubectl(&k, &c, &form))
            .await
            .unwrap();
        for expected in [
            "customresourcedefinition.apiextensions.k8s.io/applications.kiln.dev",
            "namespace/kiln",
            "statefulset.apps/kiln-controller",
            "clusterrole.rbac.authorization.k8s.io/kiln-controller-apply",
            "deployment.apps/kiln-render-server",
            "service/kiln-render-server",
            "networkpolicy.networking.k8s.io/kiln-render-server",
        ] {
            assert!(applied.contains(expected), "{expected} in:\n{applied}");
        }
        let (k, c) = (kubeconfig.clone(), cache.clone());
        let image = tokio::task::spawn_blocking(move || {
            kubectl(
                &k,
                &c,
                &[
                    "-n",
                    "kiln",
                    "get",
                    "statefulset",
                    "kiln-controller",
                    "-o",
                    "jsonpath={.spec.template.spec.serviceAccountName}",
                ],
            )
        })
        .await
        .unwrap();
        assert_eq!(image, "kiln-controller");
        render_server_is_isolated(&kubeconfig, &cache).await;
        assert!(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("deploy/kustomization.yaml")
                .exists()
        );
    }
}

/// What `kubectl get` says at `jsonpath` of `resource` in namespace kiln.
async fn get(kubeconfig: &Path, cache: &Path, resource: &[&str], jsonpath: &str) -> String {
    let mut args: Vec<String> = vec!["-n".into(), "kiln".into(), "get".into()];
    args.extend(resource.iter().map(|s| s.to_string()));
    args.push("-o".into());
    args.push(format!("jsonpath={jsonpath}"));
    let (k, c) = (kubeconfig.to_owned(), cache.to_owned());
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kubectl(&k, &c, &args)
    })
    .await
    .unwrap()
}

/// The render server as applied: no token, no RBAC, locked down, reachable
/// only from the controller; the controller uses it with a client
/// certificate.
async fn render_server_is_isolated(kubeconfig: &Path, cache: &Path) {
    let deploy = ["deploy", "kiln-render-server"];
    let pod = "{.spec.template.spec";
    let container = "{.spec.template.spec.containers[0]";
    for (path, expected) in [
        (format!("{pod}.automountServiceAccountToken}}"), "false"),
        (format!("{pod}.securityContext.runAsNonRoot}}"), "true"),
        (
            format!("{pod}.securityContext.seccompProfile.type}}"),
            "RuntimeDefault",
        ),
        (
            format!("{container}.securityContext.readOnlyRootFilesystem}}"),
            "true",
        ),
        (
            format!("{container}.securityContext.allowPrivilegeEscalation}}"),
            "false",
        ),
        (
            format!("{container}.securityContext.capabilities.drop[0]}}"),
            "ALL",
        ),
        (format!("{pod}.volumes[0].emptyDir.sizeLimit}}"), "8Gi"),
    ] {
        assert_eq!(
            get(kubeconfig, cache, &deploy, &path).await,
            expected,
            "{path}"
        );
    }
    let args = get(kubeconfig, cache, &deploy, &format!("{container}.args}}")).await;
    assert!(
        args.contains("render-server") && args.contains("--client-ca"),
        "{args}"
    );
    let policy = ["networkpolicy", "kiln-render-server"];
    assert_eq!(
        get(kubeconfig, cache, &policy, "{.spec.policyTypes}").await,
        r#"["Ingress","Egress"]"#
    );
    assert_eq!(
        get(
            kubeconfig,
            cache,
            &policy,
            "{.spec.ingress[0].from[0].podSelector.matchLabels.app\\.kubernetes\\.io/name}"
        )
        .await,
        "kiln-controller"
    );
    let egress = get(
        kubeconfig,
        cache,
        &policy,
        "{.spec.egress[*].ports[*].port}",
    )
    .await;
    let mut ports: Vec<&str> = egress.split_whitespace().collect();
    ports.sort();
    assert_eq!(ports, ["22", "443", "53", "53", "9418"]);
    // No binding names the render server's service account.
    for kind in ["rolebindings", "clusterrolebindings"] {
        let (k, c) = (kubeconfig.to_owned(), cache.to_owned());
        let subjects = tokio::task::spawn_blocking(move || {
            kubectl(
                &k,
                &c,
                &[
                    "get",
                    kind,
                    "-A",
                    "-o",
                    "jsonpath={.items[*].subjects[*].name}",
                ],
            )
        })
        .await
        .unwrap();
        assert!(
            !subjects.split_whitespace().any(|s| s == "default"),
            "{kind}: {subjects}"
        );
    }
    let controller = get(
        kubeconfig,
        cache,
        &["statefulset", "kiln-controller"],
        "{.spec.template.spec.containers[0].args}",
    )
    .await;
    assert!(
        controller.contains("--render-server=https://kiln-render-server.kiln.svc:8443")
            && controller.contains("--render-server-dns")
            && controller.contains("--shards=2")
            && controller.contains("--render-client-cert="),
        "{controller}"
    );
    // Two render servers behind a headless Service, two controller shards.
    for (resource, replicas) in [
        (["deploy", "kiln-render-server"], "2"),
        (["statefulset", "kiln-controller"], "2"),
    ] {
        assert_eq!(
            get(kubeconfig, cache, &resource, "{.spec.replicas}").await,
            replicas,
            "{resource:?}"
        );
    }
    assert_eq!(
        get(
            kubeconfig,
            cache,
            &["service", "kiln-render-server"],
            "{.spec.clusterIP}"
        )
        .await,
        "None"
    );
}
