//! A Helm chart's hooks through `kiln sync` (the CLI, the `helm` plugin)
//! against `kiln dev-cluster`: they run where Argo CD runs them — phases,
//! weights as waves, delete policies — test hooks never, and every sync
//! (install or upgrade alike) runs them again.

mod support;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use kiln_devcluster::{Config, DevCluster, Event, EventKind};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;
use support::component;

const NS: &str = "shop";

/// A chart of our own: an ordinary ConfigMap and Deployment, a pre-install
/// ConfigMap hook (weight -5, kept until the next run), a pre-install and
/// pre-upgrade Job (weight 5, deleted once it succeeded), a post-upgrade
/// Job (no delete policy: Argo CD's default, BeforeHookCreation) and a test
/// Pod.
fn chart() -> tempfile::TempDir {
    let job = |name: &str, annotations: &str| {
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{{{ .Release.Name }}}}-{name}\n  \
             annotations:\n{annotations}spec:\n  template:\n    spec:\n      restartPolicy: Never\n      \
             containers:\n        - name: run\n          image: busybox:{{{{ .Values.tag }}}}\n"
        )
    };
    support::tree(&[
        (
            "chart/Chart.yaml",
            "apiVersion: v2\nname: shop\nversion: 0.1.0\n",
        ),
        ("chart/values.yaml", "tag: \"1\"\n"),
        (
            "chart/templates/config.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-config\ndata:\n  tag: {{ .Values.tag | quote }}\n",
        ),
        (
            "chart/templates/web.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}-web\nspec:\n  \
             replicas: 1\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      \
             labels:\n        app: web\n    spec:\n      containers:\n        - name: web\n          \
             image: nginx:{{ .Values.tag }}\n",
        ),
        (
            "chart/templates/seed.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-seed\n  annotations:\n    \
             \"helm.sh/hook\": pre-install\n    \"helm.sh/hook-weight\": \"-5\"\n    \
             \"helm.sh/hook-delete-policy\": before-hook-creation\ndata:\n  tag: {{ .Values.tag | quote }}\n",
        ),
        (
            "chart/templates/migrate.yaml",
            &job(
                "migrate",
                "    \"helm.sh/hook\": pre-install,pre-upgrade\n    \"helm.sh/hook-weight\": \"5\"\n    \
                 \"helm.sh/hook-delete-policy\": hook-succeeded\n",
            ),
        ),
        (
            "chart/templates/notify.yaml",
            &job("notify", "    \"helm.sh/hook\": post-upgrade\n"),
        ),
        (
            "chart/templates/tests/smoke.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .Release.Name }}-smoke\n  annotations:\n    \
             \"helm.sh/hook\": test\nspec:\n  restartPolicy: Never\n  containers:\n    - name: smoke\n      \
             image: busybox\n",
        ),
    ])
}

struct Setup {
    server: DevCluster,
    home: tempfile::TempDir,
    chart: tempfile::TempDir,
}

impl Setup {
    async fn start() -> Self {
        let server = DevCluster::start(Config {
            simulate_readiness: Some(Duration::from_millis(30)),
            ..Config::default()
        })
        .await
        .unwrap();
        let home = tempfile::tempdir().unwrap();
        server
            .write_kubeconfig(&home.path().join("kubeconfig"))
            .unwrap();
        Self {
            server,
            home,
            chart: chart(),
        }
    }

    /// `kiln sync` of the chart as release `demo`, with `extra` arguments.
    async fn sync(&self, extra: &[&str]) -> Output {
        let mut args = vec!["--sync-option", "CreateNamespace=true", "--timeout", "30s"];
        args.extend_from_slice(extra);
        self.kiln("sync", &args).await
    }

    /// `kiln COMMAND` of the chart as release `demo`, with `extra` arguments.
    async fn kiln(&self, command: &str, extra: &[&str]) -> Output {
        let mut args: Vec<String> = [
            command,
            &self.chart.path().join("chart").display().to_string(),
            "--plugin",
            &component("helm").display().to_string(),
            "--param",
            "releaseName=demo",
            "--namespace",
            NS,
            "--kubeconfig",
            &self.home.path().join("kubeconfig").display().to_string(),
            "-o",
            "json",
        ]
        .iter()
        .map(|a| (*a).to_owned())
        .collect();
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let home = self.home.path().to_owned();
        // The server runs on this runtime: run the CLI off it.
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            support::kiln_as_user(Path::new(env!("CARGO_MANIFEST_DIR")), &home, &args)
        })
        .await
        .unwrap()
    }
}

/// `ACTION PHASE/WAVE KEY` per object of a `kiln sync -o json` result.
fn actions(output: &Output) -> Vec<String> {
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["outcome"], "Succeeded", "{result:#}");
    result["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let key = &o["key"];
            let place = match (o["phase"].as_str(), o["wave"].as_i64()) {
                (Some(phase), Some(wave)) => format!("{phase}/{wave}"),
                _ => "-".to_owned(),
            };
            format!(
                "{} {place} {} {}",
                o["action"].as_str().unwrap(),
                key["kind"].as_str().unwrap(),
                key["name"].as_str().unwrap()
            )
        })
        .collect()
}

/// Creations (`+`) and deletions (`-`) in the application's namespace, in
/// the order the API server made them.
fn seen(feed: &mut tokio::sync::broadcast::Receiver<std::sync::Arc<Event>>) -> Vec<String> {
    let mut seen = Vec::new();
    while let Ok(event) = feed.try_recv() {
        if event.object["metadata"]["namespace"] != NS {
            continue;
        }
        let name = event.object["metadata"]["name"].as_str().unwrap();
        match event.kind {
            EventKind::Added => seen.push(format!("+{name}")),
            EventKind::Deleted => seen.push(format!("-{name}")),
            EventKind::Modified => {}
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_hooks_run_in_argo_cd_phases_waves_and_delete_policies() {
    let setup = Setup::start().await;
    let mut feed = setup.server.store().subscribe();

    // Install.
    let first = setup.sync(&[]).await;
    assert_eq!(
        actions(&first),
        vec![
            "NeverRun - Pod demo-smoke",
            "HookSucceeded PreSync/-5 ConfigMap demo-seed",
            "HookSucceeded PreSync/5 Job demo-migrate",
            "Created Sync/0 ConfigMap demo-config",
            "Created Sync/0 Deployment demo-web",
            // post-upgrade is PostSync: Argo CD (and Kiln) run it on every
            // sync, the first one too.
            "HookSucceeded PostSync/0 Job demo-notify",
        ]
    );
    assert_eq!(
        seen(&mut feed),
        vec![
            "+demo-seed",
            "+demo-migrate",
            "-demo-migrate",
            "+demo-config",
            "+demo-web",
            "+demo-notify",
        ],
        "hook-succeeded deletes the Job once it succeeded; the test Pod is never created"
    );

    // Upgrade: every hook runs again; before-hook-creation (explicit, and
    // the default of a hook without a policy) replaces the previous run.
    let second = setup.sync(&["--param", "set=tag=2"]).await;
    assert_eq!(
        actions(&second),
        vec![
            "NeverRun - Pod demo-smoke",
            "HookSucceeded PreSync/-5 ConfigMap demo-seed",
            "HookSucceeded PreSync/5 Job demo-migrate",
            "Configured Sync/0 ConfigMap demo-config",
            "Configured Sync/0 Deployment demo-web",
            "HookSucceeded PostSync/0 Job demo-notify",
        ]
    );
    assert_eq!(
        seen(&mut feed),
        vec![
            "-demo-seed",
            "+demo-seed",
            "+demo-migrate",
            "-demo-migrate",
            "-demo-notify",
            "+demo-notify",
        ]
    );
    let client = support::cluster::client_for(&setup.server).await;
    let api = |kind: &str, plural: &str| {
        let (group, version) = if kind == "Job" {
            ("batch", "v1")
        } else {
            ("", "v1")
        };
        Api::<DynamicObject>::namespaced_with(
            client.clone(),
            NS,
            &ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(group, version, kind),
                plural,
            ),
        )
    };
    let seed = api("ConfigMap", "configmaps")
        .get_opt("demo-seed")
        .await
        .unwrap()
        .expect("before-hook-creation: kept until the next run");
    assert_eq!(seed.data["data"]["tag"], "2", "the upgrade's hook ran");
    let jobs = api("Job", "jobs");
    assert!(jobs.get_opt("demo-migrate").await.unwrap().is_none());
    assert!(jobs.get_opt("demo-notify").await.unwrap().is_some());

    // And hooks are never compared (as in Argo CD): the Job hook-succeeded
    // deleted and the test Pod never created leave the release in sync.
    let diff = setup.kiln("diff", &["--param", "set=tag=2"]).await;
    let text = String::from_utf8_lossy(&diff.stdout);
    assert_eq!(
        diff.status.code(),
        Some(0),
        "in sync with its hooks gone: {text}{}",
        String::from_utf8_lossy(&diff.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&diff.stdout).unwrap();
    let hooks: Vec<&str> = report["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|k| k["name"].as_str())
        .collect();
    for hook in ["demo-seed", "demo-migrate", "demo-notify", "demo-smoke"] {
        assert!(hooks.contains(&hook), "{hook} listed as a hook: {text}");
    }
}
