//! Shared helpers of the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kiln::plugin::{AppContext, HostConfig, Limits, PluginHost};
use kiln::source::{LocalDir, SourceView};

pub mod yaml11;

/// A component built by `scripts/build-plugins` (the README's test command
/// runs it first).
pub fn component(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("plugins/dist")
        .join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run scripts/build-plugins first (the README's test command does)",
        path.display()
    );
    path
}

/// Limits small enough that misbehaving fixtures fail fast.
pub fn tight_limits() -> Limits {
    Limits {
        memory: 64 << 20,
        timeout: Duration::from_millis(1500),
        output: 4 << 20,
        log: 16 << 10,
    }
}

/// A host without an on-disk compile cache.
pub fn host() -> PluginHost {
    PluginHost::new(HostConfig::default()).expect("host starts")
}

/// A source tree in a temporary directory.
pub fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = tmp.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    tmp
}

/// A view over a directory.
pub fn view(root: &Path) -> Arc<dyn SourceView> {
    Arc::new(LocalDir::open(root).unwrap())
}

/// The context of an Application at `path`.
pub fn context(name: &str, path: &str) -> AppContext {
    AppContext {
        name: name.into(),
        namespace: "default".into(),
        project: "default".into(),
        repo_url: String::new(),
        revision: "local".into(),
        path: path.into(),
    }
}

/// `key=value` pairs as parameters.
pub fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Runs the `kiln` binary in `dir`, as a user with an empty home `home`
/// (caches, stores and keys land there) and no credentials or cache
/// settings from the test's environment.
pub fn kiln_as_user(dir: &Path, home: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env_remove("XDG_CACHE_HOME")
        .env_remove("DOCKER_CONFIG")
        .env_remove("KILN_GIT_PASSWORD")
        .env_remove("KILN_GIT_SSH_KEY_FILE")
        .env_remove("KILN_HELM_PASSWORD")
        .env_remove("KILN_LOG")
        .output()
        .expect("kiln runs")
}

/// Asserts that a command succeeded, showing its stderr if not; returns
/// its stdout.
pub fn assert_success(out: &std::process::Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The guestbook example's directory.
pub fn guestbook() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/guestbook")
}

pub mod chart_repo;
pub mod cluster;
pub mod controller;
pub mod git;
pub mod registry;
pub mod render_server;
pub mod require;
pub mod tgz;

// Not every test binary needs a tool.
#[allow(unused_imports)]
pub use require::{Tool, require};

/// A ConfigMap-shaped YAML alias bomb: one anchor of `n` scalars referenced
/// `n` times, n² values from about 5n bytes (serde_yaml's own limit on alias
/// jumps lets it through). `n` = 3000 is 15 KB that parse into 9 million
/// values (hundreds of MB) without a bound.
pub fn alias_bomb(n: usize) -> String {
    let items = vec!["1"; n].join(",");
    let refs = vec!["*a"; n].join(",");
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: bomb}}\na: &a [{items}]\nb: [{refs}]\n"
    )
}

/// `[1,1,1,…]` of `n` items: about two bytes a node, no alias (a text
/// `kiln-yaml-limits` did not count before issue 36).
pub fn flood(n: usize) -> String {
    format!("[{}]", vec!["1"; n].join(","))
}

/// A field of `/proc/self/status` in KiB (`VmRSS`, `VmHWM`). Each test runs
/// in a process of its own under nextest, so the peak is the test's.
pub fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches(" kB").parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/self/status"))
}

/// Runs `command` and returns its output with its peak resident memory in
/// KiB (`ru_maxrss` of the child, read by a python3 parent: Rust's standard
/// library does not expose the child's rusage).
pub fn output_with_peak_rss(command: &std::process::Command) -> (std::process::Output, u64) {
    const WRAPPER: &str = "import resource, subprocess, sys\n\
        r = subprocess.run(sys.argv[1:])\n\
        print('maxrss_kib=%d' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n\
        sys.exit(r.returncode)\n";
    let mut wrapped = std::process::Command::new("python3");
    wrapped.arg("-c").arg(WRAPPER).arg(command.get_program());
    wrapped.args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => wrapped.env(key, value),
            None => wrapped.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        wrapped.current_dir(dir);
    }
    let mut out = wrapped.output().expect("python3 runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let (rest, line) = stderr
        .trim_end()
        .rsplit_once('\n')
        .unwrap_or(("", stderr.trim_end()));
    let kib = line
        .strip_prefix("maxrss_kib=")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no maxrss_kib line: {stderr}"));
    out.stderr = if rest.is_empty() {
        Vec::new()
    } else {
        format!("{rest}\n").into_bytes()
    };
    (out, kib)
}
