//! `kiln diff` and `kiln sync` as people run them: the guestbook example,
//! rendered by the `values` plugin, against an in-process dev cluster.

mod support;

use std::path::Path;
use std::process::Output;

use kiln_devcluster::{Config, DevCluster};
use support::{component, guestbook};

struct Setup {
    server: DevCluster,
    dir: tempfile::TempDir,
}

impl Setup {
    async fn start() -> Self {
        let server = DevCluster::start(Config::default()).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        server
            .write_kubeconfig(&dir.path().join("kubeconfig"))
            .unwrap();
        Self { server, dir }
    }

    /// Runs `kiln SUBCOMMAND` on the guestbook with the values plugin.
    async fn kiln(&self, subcommand: &str, extra: &[&str]) -> Output {
        let kubeconfig = self.dir.path().join("kubeconfig");
        let values = component("values");
        let mut args: Vec<String> = vec![
            subcommand.into(),
            guestbook().display().to_string(),
            "--plugin".into(),
            values.display().to_string(),
            "--namespace".into(),
            "guestbook".into(),
            "--kubeconfig".into(),
            kubeconfig.display().to_string(),
        ];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let home = self.dir.path().to_owned();
        // The server runs on this runtime: run the CLI off it.
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            support::kiln_as_user(Path::new(env!("CARGO_MANIFEST_DIR")), &home, &args)
        })
        .await
        .unwrap()
    }
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_and_sync_exit_codes_follow_the_cluster() {
    let setup = Setup::start().await;
    let missing = setup.kiln("sync", &[]).await;
    assert_eq!(
        missing.status.code(),
        Some(2),
        "no namespace yet: {}",
        text(&missing)
    );
    assert!(
        text(&missing).contains("namespaces \"guestbook\" not found"),
        "{}",
        text(&missing)
    );

    let diff = setup.kiln("diff", &[]).await;
    assert_eq!(
        diff.status.code(),
        Some(1),
        "everything is missing: {}",
        text(&diff)
    );
    assert!(
        String::from_utf8_lossy(&diff.stdout)
            .contains("Missing     apps/Deployment guestbook/guestbook-frontend")
    );

    let dry = setup
        .kiln(
            "sync",
            &["--sync-option", "CreateNamespace=true", "--dry-run"],
        )
        .await;
    assert_eq!(dry.status.code(), Some(0), "{}", text(&dry));
    assert!(String::from_utf8_lossy(&dry.stdout).contains("(dry run)"));
    let before = setup.server.store().resource_version();

    let synced = setup
        .kiln("sync", &["--sync-option", "CreateNamespace=true"])
        .await;
    assert_eq!(synced.status.code(), Some(0), "{}", text(&synced));
    assert!(setup.server.store().resource_version() > before);
    let stdout = String::from_utf8_lossy(&synced.stdout);
    assert!(
        stdout.contains("Created        Sync/0      apps/Deployment guestbook/guestbook-frontend"),
        "{stdout}"
    );
    assert!(stdout.contains("sync succeeded: 3 created"), "{stdout}");

    let diff = setup.kiln("diff", &["-o", "json"]).await;
    assert_eq!(diff.status.code(), Some(0), "{}", text(&diff));
    let report: serde_json::Value = serde_json::from_slice(&diff.stdout).unwrap();
    assert!(
        report["objects"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["status"] == "Synced")
    );

    let json = setup.kiln("sync", &["-o", "json"]).await;
    let result: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(result["outcome"], "Succeeded");
    assert!(
        result["objects"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["action"] == "Unchanged")
    );

    let bad = setup.kiln("sync", &["--sync-option", "Bogus=true"]).await;
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad).contains("Bogus"), "{}", text(&bad));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enforced_policy_stops_the_sync_before_anything_is_applied() {
    let setup = Setup::start().await;
    let policy = component("required-labels");
    let before = setup.server.store().resource_version();
    let blocked = setup
        .kiln(
            "sync",
            &[
                "--sync-option",
                "CreateNamespace=true",
                "--policy",
                &policy.display().to_string(),
                "--setting",
                "labels=cost-center",
            ],
        )
        .await;
    assert_eq!(blocked.status.code(), Some(1), "{}", text(&blocked));
    assert!(
        text(&blocked).contains("nothing was applied"),
        "{}",
        text(&blocked)
    );
    assert_eq!(
        setup.server.store().resource_version(),
        before,
        "not a single write"
    );
}
