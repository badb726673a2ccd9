//! A newcomer's first hour, played as one: the mistakes people make on a
//! first try, each answered by one plain line that names the thing and says
//! what to do, with the exit status the command's help promises.
//!
//! Every case also holds the rules every message keeps: one `error:` line,
//! no Rust debug structures (`Some(`, `Os {`, `kind:`), no prefix said twice
//! (`x: x:`), no colour codes when stderr is not a terminal, and nothing on
//! stdout when the command failed.
//!
//! The bugs a first try used to hit are proved where their machinery is
//! tested, each by a test that failed before its fix:
//! - the controller started before the CRDs or the namespace exist, and its
//!   stop on SIGTERM/SIGINT in every state: `controller_startup.rs`;
//! - `kiln sync --dry-run` against drift says Configured and writes
//!   nothing: `sync_cli.rs::diff_and_sync_exit_codes_follow_the_cluster`;
//! - an object another application tracks is never taken silently:
//!   `sync_cli.rs::an_object_another_application_tracks_is_never_taken_silently`;
//! - a blocked render prints nothing on stdout, a policy that cannot run
//!   exits 2: here, and in `render_cli.rs`;
//! - every command the README and docs show runs as shown:
//!   `documented_commands.rs`; every command's help has examples and its exit
//!   status: the CLI's `help_tests`.

mod support;

use std::process::Output;

/// What a command printed, and how it ended.
struct Answer {
    status: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Answer {
    fn of(output: Output) -> Answer {
        Answer {
            status: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// The one `error:` line; fails on none or several.
    fn error_line(&self) -> &str {
        let errors: Vec<&str> = self
            .stderr
            .lines()
            .filter(|line| line.starts_with("error:"))
            .collect();
        assert_eq!(errors.len(), 1, "one error line expected:\n{}", self.stderr);
        errors[0]
    }

    /// Checks what every answer must hold, then that it ended with
    /// `status` and (when it is an error) that its error line says each of
    /// `words`.
    fn expect(&self, status: i32, words: &[&str]) -> &Answer {
        assert_eq!(self.status, Some(status), "status:\n{}", self.stderr);
        assert!(
            !self.stderr.contains('\x1b'),
            "colour codes on a pipe:\n{}",
            self.stderr
        );
        for pattern in [
            "Some(",
            "Os {",
            "Error {",
            "kind:",
            "Status {",
            "os error 2) at path",
        ] {
            assert!(
                !self.stderr.contains(pattern),
                "`{pattern}` in:\n{}",
                self.stderr
            );
        }
        if status != 0 {
            assert!(
                self.stdout.is_empty(),
                "stdout of a failed command:\n{}",
                self.stdout
            );
        }
        if status == 2 {
            let line = self.error_line();
            let parts: Vec<&str> = line.split(": ").collect();
            assert!(
                parts.windows(2).all(|pair| pair[0] != pair[1]),
                "a prefix said twice: {line}"
            );
            for word in words {
                assert!(line.contains(word), "`{word}` not in: {line}");
            }
        } else {
            for word in words {
                assert!(
                    self.stderr.contains(word),
                    "`{word}` not in:\n{}",
                    self.stderr
                );
            }
        }
        self
    }
}

/// A newcomer's working directory and empty home.
struct Newcomer {
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
}

impl Newcomer {
    fn new(files: &[(&str, &str)]) -> Newcomer {
        Newcomer {
            dir: support::tree(files),
            home: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn kiln(&self, args: &[&str]) -> Answer {
        Answer::of(support::kiln_as_user(
            self.dir.path(),
            self.home.path(),
            args,
        ))
    }
}

fn plugin(name: &str) -> String {
    support::component(name).display().to_string()
}

#[test]
fn a_kustomization_or_a_chart_without_its_plugin_names_the_plugin() {
    let me = Newcomer::new(&[
        ("kz/kustomization.yaml", "resources: [deployment.yaml]\n"),
        (
            "chart/Chart.yaml",
            "apiVersion: v2\nname: web\nversion: 0.1.0\n",
        ),
    ]);
    me.kiln(&["render", "kz"]).expect(
        2,
        &[
            "kustomization.yaml",
            "kustomize plugin",
            "--plugin kustomize",
        ],
    );
    me.kiln(&["render", "chart"])
        .expect(2, &["Chart.yaml", "helm plugin", "--plugin helm"]);
}

#[test]
fn an_empty_render_is_said_aloud() {
    let me = Newcomer::new(&[(
        "app/sub/x.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    )]);
    let answer = me.kiln(&["render", "app"]);
    answer.expect(0, &["rendered no objects", "--recurse"]);
    assert!(answer.stdout.is_empty());
}

#[test]
fn sources_that_are_not_there_are_one_plain_line() {
    let me = Newcomer::new(&[]);
    let missing = format!("file://{}", me.path("nope"));
    me.kiln(&["render", "--repo", &missing])
        .expect(2, &[&missing, "No such file or directory"]);
    me.kiln(&["render", "--repo", "http://127.0.0.1:1/apps.git"])
        .expect(2, &["http://127.0.0.1:1/apps.git", "Connection refused"]);
    me.kiln(&["render", "nope"])
        .expect(2, &["nope", "No such file or directory"]);
}

#[test]
fn flags_as_helm_and_kubectl_users_type_them() {
    let me = Newcomer::new(&[]);
    // --version is the chart's (helm template --version), not a revision.
    me.kiln(&["render", "app", "--version", "1.2.3"])
        .expect(2, &["--version", "--chart", "--revision", "kiln --version"]);
    // -n as in kubectl: the destination namespace the plugins are given.
    let me = Newcomer::new(&[(
        "app/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {at: \"{{ .App.Namespace }}\"}\n",
    )]);
    let answer = me.kiln(&["render", "app", "-n", "shop", "--plugin", &plugin("values")]);
    answer.expect(0, &[]);
    assert!(answer.stdout.contains("at: shop"), "{}", answer.stdout);
}

#[test]
fn a_plugin_named_but_not_found_says_where_it_looked_and_how_to_get_it() {
    let me = Newcomer::new(&[(
        "app/x.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    )]);
    me.kiln(&["render", "app", "--plugin", "kustomise"]).expect(
        2,
        &[
            "plugin kustomise",
            "plugins/dist/kustomise.wasm",
            "KILN_PLUGIN_PATH",
            "scripts/build-plugins kustomise",
        ],
    );
}

#[test]
fn a_blocked_or_failed_policy_prints_no_manifests_and_says_so_once() {
    let me = Newcomer::new(&[]);
    let guestbook = support::guestbook().display().to_string();
    let values = plugin("values");
    let labels = plugin("required-labels");
    // Blocked: exit 1, nothing to pipe into kubectl apply.
    let blocked = me.kiln(&[
        "render",
        &guestbook,
        "--plugin",
        &values,
        "--policy",
        &labels,
        "--setting",
        "labels=owner",
    ]);
    blocked.expect(1, &["BLOCKED", "--output-on-block"]);
    // A policy that cannot run (a setting missing) is an error, exit 2,
    // said once (not in a log line and again in the summary).
    let broken = me.kiln(&[
        "render", &guestbook, "--plugin", &values, "--policy", &labels,
    ]);
    assert_eq!(broken.status, Some(2), "{}", broken.stderr);
    assert!(broken.stdout.is_empty());
    assert_eq!(
        broken
            .stderr
            .matches("setting `labels` is required")
            .count(),
        1,
        "{}",
        broken.stderr
    );
}

#[test]
fn a_signed_plugin_whose_bytes_changed_is_refused_saying_so() {
    let me = Newcomer::new(&[]);
    std::fs::copy(
        support::component("values"),
        me.dir.path().join("values.wasm"),
    )
    .unwrap();
    me.kiln(&["plugin", "keygen", "--output-prefix", "dev"])
        .expect(0, &[]);
    me.kiln(&["plugin", "sign", "values.wasm", "--key", "dev.key"])
        .expect(0, &[]);
    std::fs::write(
        me.dir.path().join("trust.yaml"),
        "rules:\n  - references: [\"file://*\"]\n    anyOf: [{key: dev.pub}]\n",
    )
    .unwrap();
    let guestbook = support::guestbook().display().to_string();
    let render = |me: &Newcomer| {
        me.kiln(&[
            "render",
            &guestbook,
            "--trust-policy",
            "trust.yaml",
            "--plugin",
            "values.wasm",
        ])
    };
    render(&me).expect(0, &[]);
    // One byte more: the signature no longer covers the file.
    let mut bytes = std::fs::read(me.dir.path().join("values.wasm")).unwrap();
    bytes.push(0);
    std::fs::write(me.dir.path().join("values.wasm"), bytes).unwrap();
    render(&me).expect(2, &["values.wasm", "changed after it was signed"]);
}

#[test]
fn a_dev_cluster_or_certificates_that_would_lose_data_are_refused() {
    let me = Newcomer::new(&[]);
    let answer = me.kiln(&[
        "dev-cluster",
        "--port",
        "0",
        "--data",
        "/nonexistent/x.json",
    ]);
    answer.expect(2, &["/nonexistent/x.json", "cannot write in /nonexistent"]);
    me.kiln(&["certs", "--out", "certs"]).expect(0, &[]);
    let ca = std::fs::read(me.dir.path().join("certs/ca.crt")).unwrap();
    me.kiln(&["certs", "--out", "certs"])
        .expect(2, &["certs already holds", "--force"]);
    assert_eq!(
        std::fs::read(me.dir.path().join("certs/ca.crt")).unwrap(),
        ca,
        "the CA was replaced"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applications_asked_of_a_cluster_are_one_plain_line() {
    let me = Newcomer::new(&[]);
    // No cluster there at all.
    std::fs::write(me.dir.path().join("dead.yaml"), dead_kubeconfig()).unwrap();
    let kiln = |args: Vec<&'static str>, me: &Newcomer| {
        let (dir, home) = (me.dir.path().to_owned(), me.home.path().to_owned());
        tokio::task::spawn_blocking(move || Answer::of(support::kiln_as_user(&dir, &home, &args)))
    };
    kiln(vec!["app", "list", "--kubeconfig", "dead.yaml"], &me)
        .await
        .unwrap()
        .expect(2, &["cannot list Applications", "Connection refused"]);

    // A cluster without Kiln's CRDs.
    let bare = support::cluster::Cluster::start().await;
    bare.server
        .write_kubeconfig(&me.dir.path().join("bare.yaml"))
        .unwrap();
    kiln(vec!["app", "list", "--kubeconfig", "bare.yaml"], &me)
        .await
        .unwrap()
        .expect(2, &["kiln crds | kubectl apply"]);

    // With the CRDs, an Application that does not exist.
    let cluster = support::cluster::Cluster::with_kiln(Default::default(), &["kiln"]).await;
    cluster
        .server
        .write_kubeconfig(&me.dir.path().join("kiln.yaml"))
        .unwrap();
    kiln(vec!["app", "get", "nope", "--kubeconfig", "kiln.yaml"], &me)
        .await
        .unwrap()
        .expect(2, &["Application nope", "not found"]);
}

/// A kubeconfig for an API server that is not there.
fn dead_kubeconfig() -> String {
    "apiVersion: v1\nkind: Config\nclusters: [{name: dead, cluster: {server: 'http://127.0.0.1:1'}}]\n\
     users: [{name: dead, user: {token: x}}]\n\
     contexts: [{name: dead, context: {cluster: dead, user: dead}}]\ncurrent-context: dead\n"
        .to_owned()
}
