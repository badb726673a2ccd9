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
            "deployment.apps/kiln-controller",
            "clusterrole.rbac.authorization.k8s.io/kiln-controller-apply",
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
                    "deploy",
                    "kiln-controller",
                    "-o",
                    "jsonpath={.spec.template.spec.serviceAccountName}",
                ],
            )
        })
        .await
        .unwrap();
        assert_eq!(image, "kiln-controller");
        assert!(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("deploy/kustomization.yaml")
                .exists()
        );
    }
}
