//! Git source benchmarks, side by side with the git CLI on the same
//! repository in the same run: ref lookup latency and bytes on the wire, first
//! fetch and incremental fetch of a generated repository of ~10,000 files.
//!
//! Run with `cargo bench --bench git_source`; results are recorded in
//! `docs/benchmarks.md`. Both clients talk to one `git daemon` through a TCP
//! proxy that counts the bytes in both directions.

#[allow(dead_code, missing_docs)]
#[path = "../tests/support/git.rs"]
mod git_support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use git_support::{Fixture, GitDaemon};
use kiln::source::git::{CommitId, GitConfig, GitSource, NoCredentials, RepoUrl, Revision};

/// Forwards connections to `target`, counting bytes both ways.
struct CountingProxy {
    port: u16,
    bytes: Arc<AtomicU64>,
}

impl CountingProxy {
    fn start(target: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let bytes = Arc::new(AtomicU64::new(0));
        let counter = bytes.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                let server = TcpStream::connect(("127.0.0.1", target)).unwrap();
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let counter = counter.clone();
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 64 * 1024];
                        while let Ok(n) = from.read(&mut buf) {
                            if n == 0 || to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                            counter.fetch_add(n as u64, Ordering::Relaxed);
                        }
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        CountingProxy { port, bytes }
    }

    fn take(&self) -> u64 {
        self.bytes.swap(0, Ordering::Relaxed)
    }
}

fn git_cli(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `git fetch` of what Kiln fetches: HEAD, branches and tags.
fn git_fetch(bare: &Path, url: &str) {
    git_cli(
        bare,
        &[
            "fetch",
            "-q",
            url,
            "+HEAD:refs/kiln/HEAD",
            "+refs/heads/*:refs/kiln/heads/*",
            "+refs/tags/*:refs/kiln/tags/*",
        ],
    );
}

fn generate(root: &Path) -> Fixture {
    let f = Fixture::new(root, "big");
    for d in 0..100 {
        for i in 0..100 {
            let path = f.work.join(format!("apps/app-{d:03}/cm-{i:03}.yaml"));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(
                path,
                format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{d}-{i}\ndata:\n  value: \"{}\"\n", d * 1000 + i),
            )
            .unwrap();
        }
    }
    f.commit("10,000 files", &[]);
    f.publish();
    f
}

/// A configuration that never reuses a ref lookup: every lookup measured
/// goes to the server.
fn fresh(cache: &Path) -> GitConfig {
    let mut config = GitConfig::new(cache);
    config.lookup_ttl = Duration::ZERO;
    config
}

struct Row {
    what: &'static str,
    kiln: (Duration, u64),
    git: (Duration, u64),
}

fn median(mut samples: Vec<(Duration, u64)>) -> (Duration, u64) {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let root = tempfile::tempdir().unwrap();
    let f = generate(root.path());
    let daemon = GitDaemon::start(root.path());
    let daemon_port: u16 = daemon
        .url("big")
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let proxy = CountingProxy::start(daemon_port);
    let url_text = format!("git://127.0.0.1:{}/big.git", proxy.port);
    let url = RepoUrl::parse(&url_text).unwrap();
    let mut rows = Vec::new();

    // Ref lookup: kiln's ls-refs vs `git ls-remote`, interleaved.
    let engine_cache = tempfile::tempdir().unwrap();
    let engine = GitSource::new(fresh(engine_cache.path()), Arc::new(NoCredentials)).unwrap();
    let (mut k, mut g) = (Vec::new(), Vec::new());
    for _ in 0..21 {
        proxy.take();
        let t = Instant::now();
        runtime.block_on(engine.ls_refs(&url)).unwrap();
        k.push((t.elapsed(), proxy.take()));
        let t = Instant::now();
        git_cli(root.path(), &["ls-remote", &url_text]);
        g.push((t.elapsed(), proxy.take()));
    }
    rows.push(Row {
        what: "ref lookup (ls-refs / git ls-remote)",
        kiln: median(k),
        git: median(g),
    });

    // First fetch into an empty cache vs `git fetch` into an empty bare repository.
    let head: CommitId = f.rev_parse("HEAD").parse().unwrap();
    let (mut k, mut g) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let cache = tempfile::tempdir().unwrap();
        let engine = GitSource::new(fresh(cache.path()), Arc::new(NoCredentials)).unwrap();
        proxy.take();
        let t = Instant::now();
        runtime.block_on(engine.checkout(&url, head)).unwrap();
        k.push((t.elapsed(), proxy.take()));
        let bare = tempfile::tempdir().unwrap();
        git_cli(bare.path(), &["init", "-q", "--bare"]);
        let t = Instant::now();
        git_fetch(bare.path(), &url_text);
        g.push((t.elapsed(), proxy.take()));
    }
    rows.push(Row {
        what: "first fetch, 10,000 files",
        kiln: median(k),
        git: median(g),
    });

    // Incremental fetch: one commit touching one file, fetched by both.
    let cache = tempfile::tempdir().unwrap();
    let engine = GitSource::new(fresh(cache.path()), Arc::new(NoCredentials)).unwrap();
    runtime.block_on(engine.checkout(&url, head)).unwrap();
    let bare = tempfile::tempdir().unwrap();
    git_cli(bare.path(), &["init", "-q", "--bare"]);
    git_fetch(bare.path(), &url_text);
    let (mut k, mut g) = (Vec::new(), Vec::new());
    for round in 0..5 {
        let commit: CommitId = f
            .commit(
                &format!("change {round}"),
                &[("apps/app-042/cm-007.yaml", &format!("changed: {round}\n"))],
            )
            .parse()
            .unwrap();
        f.publish();
        proxy.take();
        let t = Instant::now();
        runtime.block_on(engine.checkout(&url, commit)).unwrap();
        k.push((t.elapsed(), proxy.take()));
        let t = Instant::now();
        git_fetch(bare.path(), &url_text);
        g.push((t.elapsed(), proxy.take()));
    }
    rows.push(Row {
        what: "incremental fetch, 1 file changed",
        kiln: median(k),
        git: median(g),
    });

    // A poll with nothing new: resolve + checkout, no fetch.
    let t = Instant::now();
    for _ in 0..21 {
        runtime
            .block_on(engine.poll(&url, &Revision::Head))
            .unwrap();
    }
    let poll = t.elapsed() / 21;

    println!("\n| operation | kiln | git CLI | time ratio kiln/git | kiln bytes | git bytes |");
    println!("|---|---|---|---|---|---|");
    for row in &rows {
        println!(
            "| {} | {:.1} ms | {:.1} ms | {:.2} | {} | {} |",
            row.what,
            row.kiln.0.as_secs_f64() * 1e3,
            row.git.0.as_secs_f64() * 1e3,
            row.kiln.0.as_secs_f64() / row.git.0.as_secs_f64(),
            row.kiln.1,
            row.git.1,
        );
    }
    println!(
        "\npoll with nothing new (ref lookup + local check, no fetch): {:.1} ms",
        poll.as_secs_f64() * 1e3
    );
}
