//! The controller at scale: 1,000 Applications over 10 Git repositories
//! (~10 objects each) reconciled from cold into the dev cluster, then one
//! commit touching one application. The dev cluster and `kiln controller`
//! run as separate processes of the kiln binary, so the controller's peak
//! memory is its own.
//!
//! Run with `cargo bench --bench controller`; results are recorded in
//! `docs/benchmarks.md`. Set KILN_BENCH_APPS to change the number of
//! applications (a multiple of 10).

use std::process::Command;
use std::time::{Duration, Instant};

use kiln::api::Application;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn git(dir: &std::path::Path, args: &[&str]) {
    let status = Command::new("git")
        .args(["-c", "user.name=bench", "-c", "user.email=bench@kiln.dev"])
        .args(args)
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

/// Peak resident memory of a process, in MiB (VmHWM).
fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

async fn synced(
    apps: &Api<Application>,
    revision_of: impl Fn(&Application) -> Option<String>,
) -> usize {
    let list = apps.list(&ListParams::default()).await.unwrap();
    list.items
        .iter()
        .filter(|app| {
            let status = app.status.clone().unwrap_or_default();
            let sync = status.sync.unwrap_or_default();
            sync.status == "Synced" && sync.revision == revision_of(app)
        })
        .count()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let total: usize = std::env::var("KILN_BENCH_APPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let per_repo = total / 10;
    let dir = tempfile::tempdir().unwrap();
    let mut heads = Vec::new();
    for r in 0..10 {
        let repo = dir.path().join(format!("repo-{r}"));
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        for a in 0..per_repo {
            let app = repo.join(format!("app-{a}"));
            std::fs::create_dir_all(&app).unwrap();
            for o in 0..10 {
                std::fs::write(
                    app.join(format!("cm-{o}.yaml")),
                    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: r{r}-a{a}-cm{o}\ndata:\n  index: \"{o}\"\n"),
                )
                .unwrap();
            }
        }
        std::fs::write(repo.join("README.md"), "bench\n").unwrap();
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "apps"]);
        heads.push(repo);
    }

    // The dev cluster and the controller run as their own processes (the
    // kiln binary), so that the controller's memory is measured alone.
    let kubeconfig = dir.path().join("kubeconfig");
    let mut cluster_process = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["dev-cluster", "--port", "0", "--kubeconfig"])
        .arg(&kubeconfig)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..100 {
        if std::fs::metadata(&kubeconfig).is_ok_and(|m| m.len() > 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let kubeconfig_text = std::fs::read_to_string(&kubeconfig).unwrap();
    let kubeconfig_file = kube::config::Kubeconfig::from_yaml(&kubeconfig_text).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig_file, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    for (_, yaml) in kiln::api::crds() {
        let crd = serde_yaml::from_str(&yaml).unwrap();
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "kiln"}})).unwrap(),
        )
        .await
        .unwrap();
    let apps: Api<Application> = Api::namespaced(client.clone(), "kiln");
    for (r, repo) in heads.iter().enumerate() {
        for a in 0..per_repo {
            let app: Application = serde_json::from_value(json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Application",
                "metadata": {"name": format!("r{r}-a{a}"), "namespace": "kiln", "labels": {"repo": r.to_string()}},
                "spec": {"source": {"repoURL": format!("file://{}", repo.display()), "path": format!("app-{a}")},
                    "destination": {"namespace": "default"}, "syncPolicy": {"automated": {"prune": true}}}}))
            .unwrap();
            apps.create(&PostParams::default(), &app).await.unwrap();
        }
    }
    // The resync of every application; the idle phase lasts three of them.
    let resync = Duration::from_secs(
        std::env::var("KILN_BENCH_RESYNC")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(60),
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = std::fs::File::create(dir.path().join("controller.log")).unwrap();
    let begin = Instant::now();
    let mut controller_process = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["controller", "--namespace", "kiln", "--resync"])
        .arg(format!("{}s", resync.as_secs()))
        .args([
            "--no-leader-election",
            "--no-compile-cache",
            "--allow-file-repositories",
        ])
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--git-cache")
        .arg(dir.path().join("git-cache"))
        .arg("--render-cache")
        .arg(dir.path().join("render-cache"))
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let metrics = async || -> String {
        reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    let sample = |text: &str, name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok())
            .unwrap_or(0.0) as u64
    };
    let head = |repo: &std::path::Path| {
        let out = Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(repo)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let revisions: Vec<String> = heads.iter().map(|r| head(r)).collect();
    let revision_of = |app: &Application| {
        let r: usize = app.metadata.labels.as_ref()?.get("repo")?.parse().ok()?;
        Some(revisions[r].clone())
    };
    loop {
        let done = synced(&apps, revision_of).await;
        if done == total {
            break;
        }
        assert!(
            begin.elapsed() < Duration::from_secs(1200),
            "only {done} of {total} synced after 20 minutes"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let cold = begin.elapsed();
    let text = metrics().await;
    let renders_cold = sample(&text, "kiln_renders_total");
    println!(
        "{total} applications ({} objects) from cold to all Synced: {cold:?}",
        total * 10
    );
    println!("renders performed: {renders_cold}");
    println!(
        "git: {} ref lookups, {} fetches",
        sample(&text, "kiln_git_ref_lookups"),
        sample(&text, "kiln_git_fetches")
    );
    println!(
        "peak RSS of the controller process: {:.0} MiB (the dev cluster holding the objects, in its own process: {:.0} MiB)",
        peak_rss_mib(controller_process.id()),
        peak_rss_mib(cluster_process.id())
    );

    // At rest: every application resyncs a few times with nothing to do;
    // count the API requests and the controller's CPU time meanwhile.
    let sum = |text: &str, prefix: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let at_rest = |text: &str| {
        (
            sum(text, "kiln_kube_requests_total{"),
            sum(text, "kiln_reconciles_total{"),
        )
    };
    let before = at_rest(&metrics().await);
    let cpu_before = cpu_seconds(controller_process.id());
    let idle_from = Instant::now();
    tokio::time::sleep(resync * 3).await;
    let after = at_rest(&metrics().await);
    let cpu = cpu_seconds(controller_process.id()) - cpu_before;
    let idle = idle_from.elapsed();
    let resyncs = after.1 - before.1;
    println!(
        "at rest for {idle:?} (resync {resync:?}): {resyncs} reconciles, {} API requests = {:.3} per application per resync; controller CPU {:.2}% of one core",
        after.0 - before.0,
        (after.0 - before.0) / resyncs.max(1.0),
        100.0 * cpu / idle.as_secs_f64()
    );

    // One commit touching one application of repo 0; the push refreshes
    // every application of that repository, as a webhook without a file
    // list would.
    std::fs::write(heads[0].join("app-0/cm-0.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: r0-a0-cm0\ndata:\n  index: \"changed\"\n").unwrap();
    git(&heads[0], &["commit", "-qam", "one app"]);
    let new_head = head(&heads[0]);
    let begin = Instant::now();
    let refresh = json!({"metadata": {"annotations": {"kiln.dev/refresh": "now"}}});
    for a in 0..per_repo {
        apps.patch(
            &format!("r0-a{a}"),
            &PatchParams::default(),
            &Patch::Merge(&refresh),
        )
        .await
        .unwrap();
    }
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "default");
    loop {
        let cm = cms.get("r0-a0-cm0").await.unwrap();
        let changed =
            cm.data.unwrap_or_default().get("index").map(String::as_str) == Some("changed");
        let all = synced(&apps, |app| {
            let r: usize = app.metadata.labels.as_ref()?.get("repo")?.parse().ok()?;
            Some(if r == 0 {
                new_head.clone()
            } else {
                revisions[r].clone()
            })
        })
        .await;
        if changed && all == total {
            break;
        }
        assert!(
            begin.elapsed() < Duration::from_secs(300),
            "the change did not sync in 5 minutes"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "one commit touching one app, {per_repo} apps of its repository refreshed: Synced in {:?}, renders performed: {}",
        begin.elapsed(),
        sample(&metrics().await, "kiln_renders_total") - renders_cold
    );
    println!(
        "peak RSS of the controller process at the end: {:.0} MiB",
        peak_rss_mib(controller_process.id())
    );
    // SIGTERM: the controller's own graceful shutdown.
    let _ = Command::new("kill")
        .arg(controller_process.id().to_string())
        .status();
    let _ = controller_process.wait();
    let _ = cluster_process.kill();
    let _ = cluster_process.wait();
}

/// CPU time (user + system) of process `pid`, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces): state is the
    // first, utime the 12th, stime the 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}
