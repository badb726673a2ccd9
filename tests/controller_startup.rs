//! `kiln controller` started as a newcomer starts it: before the namespace
//! or the CRDs exist (one line saying what to run, at once), and stopped
//! by SIGTERM or SIGINT in every state — waiting for the lease, running,
//! and with the API server gone.

mod support;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use kiln_devcluster::Config;
use serde_json::json;
use support::cluster::Cluster;

/// Starts `kiln controller` on the cluster of `kubeconfig`, `extra`
/// arguments added, with its standard error captured.
fn controller(dir: &Path, kubeconfig: &Path, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
        .env_remove("KUBECONFIG")
        .env_remove("KILN_LOG")
        .env("HOME", dir)
        .arg("controller")
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--listen=127.0.0.1:{}", support::git::free_port()))
        .args(["--shutdown-grace=3s"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A running controller whose standard error is read as it comes.
struct Running {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn start(mut child: Child) -> Self {
        let stderr = child.stderr.take().unwrap();
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let _ = send.send(line);
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits (at most 30 s) for a line containing `text`.
    fn wait_for(&mut self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.seen.iter().any(|l| l.contains(text)) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => panic!("no line with {text:?} in: {:#?}", self.seen),
            }
        }
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits at most `limit` for the exit: its status and every line.
    fn exit_within(mut self, limit: Duration) -> (Option<i32>, String) {
        let start = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > limit {
                let _ = self.child.kill();
                panic!("still running after {limit:?}: {:#?}", self.seen);
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // The reader ends with the pipe.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.seen.push(line);
        }
        (status.code(), self.seen.join("\n"))
    }
}

/// Waits at most `limit` for `child` to exit.
fn exit_within(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn last_line(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    stderr.lines().last().unwrap_or_default().to_owned()
}

async fn write_kubeconfig(cluster: &Cluster, dir: &Path) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    cluster.server.write_kubeconfig(&path).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_its_namespace_or_crds_it_says_what_to_run_and_stops() {
    let dir = tempfile::tempdir().unwrap();
    // No `kiln` namespace (the CRDs are served).
    let cluster = Cluster::with_kiln(Config::default(), &[]).await;
    let kubeconfig = write_kubeconfig(&cluster, dir.path()).await;
    let kiln = dir.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        exit_within(controller(&kiln, &kubeconfig, &[]), Duration::from_secs(20))
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        last_line(&out),
        "error: namespace kiln does not exist: create it (kubectl create namespace kiln) or pass --namespace"
    );

    // The namespace, but no CRDs.
    let bare = Cluster::start().await;
    let kubeconfig = write_kubeconfig(&bare, dir.path()).await;
    let out = tokio::task::spawn_blocking(move || {
        exit_within(
            controller(dir.path(), &kubeconfig, &["-n", "default"]),
            Duration::from_secs(20),
        )
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        last_line(&out),
        "error: the cluster does not serve kiln.dev Applications: install Kiln's CRDs first (kiln crds | kubectl apply --server-side -f -)"
    );
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("Status {"),
        "no Debug output: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_and_sigint_stop_it_in_every_state() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::with_kiln(Config::default(), &["kiln"]).await;
    let kubeconfig = write_kubeconfig(&cluster, dir.path()).await;

    // Waiting for the lease another replica holds.
    let now = micro_time_now();
    cluster
        .apply(
            "leases",
            json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "kiln-controller", "namespace": "kiln"},
                "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 3600,
                         "acquireTime": now, "renewTime": now}
            }),
            "test",
            false,
        )
        .await
        .unwrap();
    let (home, config) = (dir.path().to_owned(), kubeconfig.clone());
    let (code, stderr) = tokio::task::spawn_blocking(move || {
        let mut running = Running::start(controller(&home, &config, &[]));
        running.wait_for("waiting for the kiln-controller lease");
        running.signal("TERM");
        running.exit_within(Duration::from_secs(10))
    })
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{stderr}");

    // Running (no leader election), stopped by SIGINT.
    let (home, config) = (dir.path().to_owned(), kubeconfig.clone());
    let (code, stderr) = tokio::task::spawn_blocking(move || {
        let mut running = Running::start(controller(&home, &config, &["--no-leader-election"]));
        running.wait_for("watching Applications");
        running.signal("INT");
        running.exit_within(Duration::from_secs(10))
    })
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{stderr}");

    // Running, then the API server goes away: SIGTERM still stops it,
    // within --shutdown-grace (3 s here) at the latest.
    let (home, config) = (dir.path().to_owned(), kubeconfig.clone());
    let running = tokio::task::spawn_blocking(move || {
        let mut running = Running::start(controller(&home, &config, &["--no-leader-election"]));
        running.wait_for("watching Applications");
        running
    })
    .await
    .unwrap();
    cluster.server.shutdown().await.unwrap();
    let (code, stderr) = tokio::task::spawn_blocking(move || {
        std::thread::sleep(Duration::from_millis(500));
        running.signal("TERM");
        running.exit_within(Duration::from_secs(10))
    })
    .await
    .unwrap();
    assert!(matches!(code, Some(0 | 2)), "{stderr}");
}

/// Now as a Kubernetes MicroTime (`2026-12-07T10:00:00.000000Z`).
fn micro_time_now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S.000000Z")
        .to_string()
}

#[test]
fn a_cluster_that_is_not_there_is_one_plain_line() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let port = support::git::free_port();
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"http://127.0.0.1:{port}\"}}\n\
             contexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n\
             users:\n- name: u\n  user: {{token: t}}\n"
        ),
    )
    .unwrap();
    for args in [
        vec!["app", "list"],
        vec!["app", "get", "guestbook"],
        vec!["controller", "--no-leader-election"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
            .env_remove("KILN_LOG")
            .env("HOME", dir.path())
            .args(&args)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if args[0] == "controller" {
            // The controller asks again for 30 s (a cluster coming up),
            // saying so, then stops with the same words.
            assert_eq!(out.status.code(), Some(2), "{stderr}");
            assert!(
                stderr
                    .lines()
                    .last()
                    .unwrap()
                    .contains("Connection refused"),
                "{stderr}"
            );
            continue;
        }
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr}");
        assert!(
            stderr.contains("tcp connect error: Connection refused"),
            "{args:?}: {stderr}"
        );
        for jargon in ["ERROR", "ServiceError", "client error (Connect)", "{ "] {
            assert!(
                !stderr.contains(jargon),
                "{args:?}: no `{jargon}`: {stderr}"
            );
        }
    }
}
