//! The controller at scale: Applications over local Git repositories (ten
//! ConfigMaps each) reconciled from cold into the dev cluster; an idle
//! phase of several resyncs counting API requests and CPU; then one commit
//! touching one application. The dev cluster, every `kiln controller`
//! (one, or one per shard) and every `kiln render-server` run as separate
//! processes of the kiln binary, so that each one's memory and CPU are its
//! own.
//!
//! Run with `cargo bench --bench controller`; results are recorded in
//! `docs/benchmarks.md`. Settings (environment):
//!
//! - `KILN_BENCH_APPS`: Applications (default 1,000; a multiple of the
//!   repositories);
//! - `KILN_BENCH_REPOS`: Git repositories (default 10);
//! - `KILN_BENCH_RESYNC`: the controllers' `--resync` in seconds (default 60);
//! - `KILN_BENCH_IDLE_RESYNCS`: how many resyncs the idle phase lasts
//!   (default 3);
//! - `KILN_BENCH_RENDER_SERVERS`: render servers (default 0: the
//!   controller renders in-process);
//! - `KILN_BENCH_SHARDS`: controller shards, one process each (default 1);
//! - `KILN_BENCH_LOG_DIR`: where the processes' logs are kept (default: a
//!   temporary directory, deleted); `KILN_LOG` is passed on to them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{StreamExt as _, TryStreamExt as _};
use kiln::api::Application;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::json;

/// Objects (ConfigMaps) per application.
const OBJECTS_PER_APP: usize = 10;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(["-c", "user.name=bench", "-c", "user.email=bench@kiln.dev"])
        .args(args)
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

fn head(repo: &Path) -> String {
    let out = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(repo)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A field of `/proc/PID/status`, in MiB (VmHWM: peak, VmRSS: now).
fn rss_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
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

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn wait_listening(port: u16) {
    for _ in 0..600 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("nothing listened on {port}");
}

/// A process of the kiln binary, killed when dropped.
struct Process {
    name: String,
    child: Child,
}

impl Process {
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // SIGTERM first: the controller's own graceful shutdown.
        let _ = Command::new("kill").arg(self.pid().to_string()).status();
        std::thread::sleep(Duration::from_millis(200));
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn log_file(dir: &Path, name: &str) -> Stdio {
    Stdio::from(std::fs::File::create(dir.join(format!("{name}.log"))).unwrap())
}

/// Sum of the samples of `name` (every label set) in a metrics text.
fn sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The requests by verb in a metrics text.
fn by_verb(text: &str) -> std::collections::BTreeMap<String, f64> {
    let mut verbs = std::collections::BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("kiln_kube_requests_total{"))
    {
        let verb = line
            .split("verb=\"")
            .nth(1)
            .and_then(|v| v.split('"').next())
            .unwrap_or("?");
        let value: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        *verbs.entry(verb.to_owned()).or_insert(0.0) += value;
    }
    verbs
}

/// Every controller's metrics, concatenated.
async fn metrics(ports: &[u16]) -> String {
    let mut all = String::new();
    for port in ports {
        if let Ok(response) = reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await
            && let Ok(text) = response.text().await
        {
            all.push_str(&text);
            all.push('\n');
        }
    }
    all
}

/// How many Applications say Synced at the revision `revision_of` expects.
fn synced(
    store: &Store<Application>,
    revision_of: &dyn Fn(&Application) -> Option<String>,
) -> usize {
    store
        .state()
        .iter()
        .filter(|app| {
            let sync = app
                .status
                .as_ref()
                .and_then(|s| s.sync.clone())
                .unwrap_or_default();
            sync.status == "Synced" && sync.revision == revision_of(app)
        })
        .count()
}

/// Waits until every Application is Synced as `revision_of` says, printing
/// progress every 10 s; panics after `limit`.
async fn all_synced(
    store: &Store<Application>,
    total: usize,
    limit: Duration,
    extra: impl AsyncFn() -> bool,
    revision_of: &dyn Fn(&Application) -> Option<String>,
) -> Duration {
    let begin = Instant::now();
    let mut last_print = Instant::now();
    loop {
        let done = synced(store, revision_of);
        if done == total && extra().await {
            return begin.elapsed();
        }
        if last_print.elapsed() >= Duration::from_secs(10) {
            println!(
                "  {:>6.1} s: {done} of {total} synced",
                begin.elapsed().as_secs_f64()
            );
            last_print = Instant::now();
        }
        assert!(
            begin.elapsed() < limit,
            "only {done} of {total} synced after {limit:?}"
        );
        assert!(
            done > 0 || begin.elapsed() < Duration::from_secs(120),
            "nothing synced in two minutes: see the processes' logs"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let total = env_or("KILN_BENCH_APPS", 1000) as usize;
    let repos = env_or("KILN_BENCH_REPOS", 10) as usize;
    let resync = Duration::from_secs(env_or("KILN_BENCH_RESYNC", 60));
    let idle_resyncs = env_or("KILN_BENCH_IDLE_RESYNCS", 3) as u32;
    let render_servers = env_or("KILN_BENCH_RENDER_SERVERS", 0) as usize;
    let shards = env_or("KILN_BENCH_SHARDS", 1).max(1) as usize;
    assert!(
        total.is_multiple_of(repos),
        "KILN_BENCH_APPS must be a multiple of KILN_BENCH_REPOS"
    );
    let per_repo = total / repos;
    println!(
        "{total} applications ({} objects) over {repos} repositories; resync {resync:?}; {} render server(s); {shards} controller shard(s)",
        total * OBJECTS_PER_APP,
        render_servers
    );
    let dir = tempfile::tempdir().unwrap();
    let logs: PathBuf = std::env::var_os("KILN_BENCH_LOG_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.path().to_owned());
    std::fs::create_dir_all(&logs).unwrap();

    let mut heads = Vec::new();
    for r in 0..repos {
        let repo = dir.path().join(format!("repo-{r}"));
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        for a in 0..per_repo {
            let app = repo.join(format!("app-{a}"));
            std::fs::create_dir_all(&app).unwrap();
            for o in 0..OBJECTS_PER_APP {
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

    let kiln = env!("CARGO_BIN_EXE_kiln");
    let kubeconfig = dir.path().join("kubeconfig");
    let cluster = Process {
        name: "dev cluster".into(),
        child: Command::new(kiln)
            .args(["dev-cluster", "--port", "0", "--kubeconfig"])
            .arg(&kubeconfig)
            .stdout(Stdio::null())
            .stderr(log_file(&logs, "dev-cluster"))
            .spawn()
            .unwrap(),
    };
    for _ in 0..200 {
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
    let created = Instant::now();
    futures_util::stream::iter((0..repos).flat_map(|r| (0..per_repo).map(move |a| (r, a))))
        .map(|(r, a)| {
            let apps = apps.clone();
            let repo = &heads[r];
            async move {
                let app: Application = serde_json::from_value(json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Application",
                    "metadata": {"name": format!("r{r}-a{a}"), "namespace": "kiln", "labels": {"repo": r.to_string()}},
                    "spec": {"source": {"repoURL": format!("file://{}", repo.display()), "path": format!("app-{a}")},
                        "destination": {"namespace": "default"}, "syncPolicy": {"automated": {"prune": true}}}}))
                .unwrap();
                apps.create(&PostParams::default(), &app).await.map(|_| ())
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();
    println!("created the Applications in {:?}", created.elapsed());

    // The Applications as the bench sees them, from one watch.
    let (store, writer) = reflector::store();
    let follow = tokio::spawn(
        watcher(apps.clone(), watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .for_each(|_| async {}),
    );
    store.wait_until_ready().await.unwrap();

    // Render servers, each with its own caches.
    let certs = dir.path().join("certs");
    let mut servers = Vec::new();
    let mut server_urls = Vec::new();
    if render_servers > 0 {
        let status = Command::new(kiln)
            .args(["certs", "--server-name", "127.0.0.1", "--out"])
            .arg(&certs)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "kiln certs");
    }
    for i in 0..render_servers {
        let port = free_port();
        let cache = dir.path().join(format!("render-server-{i}"));
        let child = Command::new(kiln)
            .env_remove("KUBECONFIG")
            .env("HOME", &cache)
            .arg("render-server")
            .arg(format!("--listen=127.0.0.1:{port}"))
            .arg(format!("--tls-cert={}", certs.join("server.crt").display()))
            .arg(format!("--tls-key={}", certs.join("server.key").display()))
            .arg(format!("--client-ca={}", certs.join("ca.crt").display()))
            .arg(format!("--cache-dir={}", cache.display()))
            .args(["--no-compile-cache", "--allow-file-repositories"])
            .stdout(Stdio::null())
            .stderr(log_file(&logs, &format!("render-server-{i}")))
            .spawn()
            .unwrap();
        servers.push(Process {
            name: format!("render server {i}"),
            child,
        });
        wait_listening(port).await;
        server_urls.push(format!("https://127.0.0.1:{port}"));
    }

    // The controllers: one, or one per shard.
    let begin = Instant::now();
    let mut controllers = Vec::new();
    let mut ports = Vec::new();
    for i in 0..shards {
        let port = free_port();
        let mut command = Command::new(kiln);
        command
            .args(["controller", "--namespace", "kiln", "--resync"])
            .arg(format!("{}s", resync.as_secs()))
            .args(["--no-compile-cache", "--allow-file-repositories"])
            .arg(format!("--listen=127.0.0.1:{port}"))
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--git-cache")
            .arg(dir.path().join(format!("git-cache-{i}")))
            .arg("--render-cache")
            .arg(dir.path().join(format!("render-cache-{i}")))
            .stdout(Stdio::null())
            .stderr(log_file(&logs, &format!("controller-{i}")));
        if shards == 1 {
            command.arg("--no-leader-election");
        } else {
            command.args([
                "--shards",
                &shards.to_string(),
                "--shard-index",
                &i.to_string(),
            ]);
        }
        if !server_urls.is_empty() {
            command
                .args(
                    server_urls
                        .iter()
                        .map(|url| format!("--render-server={url}")),
                )
                .arg(format!("--render-ca={}", certs.join("ca.crt").display()))
                .arg(format!(
                    "--render-client-cert={}",
                    certs.join("client.crt").display()
                ))
                .arg(format!(
                    "--render-client-key={}",
                    certs.join("client.key").display()
                ));
        }
        controllers.push(Process {
            name: format!("controller {i}"),
            child: command.spawn().unwrap(),
        });
        ports.push(port);
    }
    let revisions: Vec<String> = heads.iter().map(|r| head(r)).collect();
    let repo_of = |app: &Application| -> Option<usize> {
        app.metadata.labels.as_ref()?.get("repo")?.parse().ok()
    };
    let cold = all_synced(
        &store,
        total,
        Duration::from_secs(900),
        async || true,
        &|app| Some(revisions[repo_of(app)?].clone()),
    )
    .await;
    let _ = begin;
    let text = metrics(&ports).await;
    let renders_cold = sum(&text, "kiln_renders_total");
    println!(
        "{total} applications ({} objects) from cold to all Synced: {:.1} s",
        total * OBJECTS_PER_APP,
        cold.as_secs_f64()
    );
    println!("renders performed (controllers' count): {renders_cold}");
    println!("API requests from cold: {:?}", by_verb(&text));
    println!(
        "git (in-process renders only): {} ref lookups, {} fetches",
        sum(&text, "kiln_git_ref_lookups"),
        sum(&text, "kiln_git_fetches")
    );
    let rss = |processes: &[&Process], field: &str| {
        processes
            .iter()
            .map(|p| format!("{} {:.0} MiB", p.name, rss_mib(p.pid(), field)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let everyone: Vec<&Process> = controllers
        .iter()
        .chain(&servers)
        .chain(std::iter::once(&cluster))
        .collect();
    println!("peak RSS after cold: {}", rss(&everyone, "VmHWM:"));
    println!(
        "CPU from cold to all Synced: {}",
        everyone
            .iter()
            .map(|p| format!("{} {:.1} s", p.name, cpu_seconds(p.pid())))
            .collect::<Vec<_>>()
            .join(", ")
    );

    // At rest: every application resyncs a few times with nothing to do;
    // count the API requests and the CPU time meanwhile.
    let working: Vec<&Process> = controllers.iter().chain(&servers).collect();
    let before = metrics(&ports).await;
    let cpu_before: Vec<f64> = working.iter().map(|p| cpu_seconds(p.pid())).collect();
    let idle_from = Instant::now();
    tokio::time::sleep(resync * idle_resyncs).await;
    let after = metrics(&ports).await;
    let idle = idle_from.elapsed();
    let requests =
        sum(&after, "kiln_kube_requests_total") - sum(&before, "kiln_kube_requests_total");
    let reconciles = sum(&after, "kiln_reconciles_total") - sum(&before, "kiln_reconciles_total");
    let renders = sum(&after, "kiln_renders_total") - sum(&before, "kiln_renders_total");
    println!(
        "at rest for {:.0} s (resync {resync:?}): {reconciles} reconciles ({:.2} per application), {renders} renders, {requests} API requests = {:.4} per application per resync",
        idle.as_secs_f64(),
        reconciles / total as f64,
        requests / reconciles.max(1.0),
    );
    let (b, a) = (by_verb(&before), by_verb(&after));
    let delta: Vec<String> = a
        .iter()
        .filter_map(|(verb, n)| {
            let d = n - b.get(verb).copied().unwrap_or(0.0);
            (d > 0.0).then(|| format!("{verb} {d}"))
        })
        .collect();
    println!("  requests at rest by verb: {}", delta.join(", "));
    for (process, before) in working.iter().zip(&cpu_before) {
        let cpu = cpu_seconds(process.pid()) - before;
        println!(
            "  CPU at rest, {}: {:.2} % of one core",
            process.name,
            100.0 * cpu / idle.as_secs_f64()
        );
    }

    // One commit touching one application of repository 0; the push
    // refreshes every application of that repository, as a webhook
    // without a file list would.
    std::fs::write(heads[0].join("app-0/cm-0.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: r0-a0-cm0\ndata:\n  index: \"changed\"\n").unwrap();
    git(&heads[0], &["commit", "-qam", "one app"]);
    let new_head = head(&heads[0]);
    let renders_before = sum(&metrics(&ports).await, "kiln_renders_total");
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
    let changed = async || {
        cms.get("r0-a0-cm0")
            .await
            .ok()
            .and_then(|cm| cm.data)
            .unwrap_or_default()
            .get("index")
            .map(String::as_str)
            == Some("changed")
    };
    all_synced(&store, total, Duration::from_secs(300), changed, &|app| {
        let r = repo_of(app)?;
        Some(if r == 0 {
            new_head.clone()
        } else {
            revisions[r].clone()
        })
    })
    .await;
    println!(
        "one commit touching one app, {per_repo} apps of its repository refreshed: Synced in {:.2} s, renders performed: {}",
        begin.elapsed().as_secs_f64(),
        sum(&metrics(&ports).await, "kiln_renders_total") - renders_before
    );
    println!("peak RSS at the end: {}", rss(&everyone, "VmHWM:"));
    follow.abort();
    drop(controllers);
    drop(servers);
    drop(cluster);
}
