//! Charts that generate values (`randAlphaNum`, `uuidv4`, certificates)
//! and read the clock (`now`), synced by the controller (in-process) on the
//! dev cluster from Git: what they generate is stable across refreshes and
//! controller restarts, cannot be computed from the repository (the
//! controller mixes in a per-Application secret derived from the Secret
//! `kiln-random-seed`), and `now` is the commit's time.

mod support;

use std::time::Duration;

use kiln::controller::random_seed::{DATA_KEY, RandomSeeds, SECRET_NAME};
use kiln::controller::{self, ControllerConfig};
use kiln::source::git::GitConfig;
use kiln_devcluster::Config;
use serde_json::{Value, json};
use support::cluster::{Cluster, app_status};
use support::git::Fixture;

const SECRET: &str = r#"apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-login
stringData:
  password: {{ randAlphaNum 24 | quote }}
  id: {{ uuidv4 | quote }}
"#;

const CLOCK: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-clock
data:
  made: {{ now | date "2006-01-02T15:04:05Z07:00" | quote }}
"#;

fn config(dir: &std::path::Path) -> ControllerConfig {
    ControllerConfig {
        resync: Duration::from_millis(300),
        health_timeout: Duration::from_secs(10),
        allow_file_repositories: true,
        catalog: controller::CatalogConfig {
            store: dir.join("plugins"),
            allow_file_plugins: true,
            ..controller::CatalogConfig::default()
        },
        ..ControllerConfig::default()
    }
}

async fn world(dir: &std::path::Path) -> (Cluster, Fixture) {
    let cluster = Cluster::with_kiln(
        Config {
            simulate_readiness: Some(Duration::from_millis(20)),
            ..Config::default()
        },
        &["kiln", "guestbook"],
    )
    .await;
    cluster.register_helm_plugin().await;
    let repo = Fixture::new(dir, "charts");
    repo.commit(
        "a chart that generates a password",
        &[
            (
                "web/Chart.yaml",
                "apiVersion: v2\nname: web\nversion: 1.0.0\n",
            ),
            ("web/templates/secret.yaml", SECRET),
            ("web/templates/clock.yaml", CLOCK),
        ],
    );
    (cluster, repo)
}

async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..300 {
        if let Some(value) = check().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn login(cluster: &Cluster, release: &str) -> Option<(String, String)> {
    let secret = cluster
        .get(
            "v1",
            "Secret",
            "secrets",
            Some("guestbook"),
            &format!("{release}-login"),
        )
        .await
        .ok()?;
    let field = |key: &str| {
        use base64::Engine as _;
        let text = secret["data"][key].as_str()?;
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .ok()?,
        )
        .ok()
    };
    Some((field("password")?, field("id")?))
}

/// What `kiln render` prints for the chart with these parameters.
fn render(dir: &std::path::Path, params: &[&str]) -> Vec<Value> {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_kiln"));
    command
        .arg("render")
        .arg(dir)
        .args([
            "--plugin",
            &support::component("helm").display().to_string(),
        ])
        .args(["--output", "json"]);
    for p in params {
        command.args(["--param", p]);
    }
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "kiln render: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    printed["items"].as_array().cloned().unwrap_or_default()
}

fn password_of(objects: &[Value]) -> String {
    objects
        .iter()
        .find(|o| o["kind"] == "Secret")
        .and_then(|o| o["stringData"]["password"].as_str())
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_values_are_stable_secret_per_application_and_the_clock_is_the_commit_time() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, repo) = world(dir.path()).await;
    let running = support::controller::start(
        cluster.client.clone(),
        GitConfig::new(dir.path().join("git")),
        config(dir.path()),
    );
    for name in ["alpha", "beta"] {
        cluster
            .automated_app(
                name,
                "default",
                json!({"repoURL": repo.work.display().to_string(), "path": "web",
                    "targetRevision": "main", "helm": {}}),
            )
            .await;
    }
    let (alpha, beta) = eventually("both Applications synced", async || {
        Some((
            login(&cluster, "alpha").await?,
            login(&cluster, "beta").await?,
        ))
    })
    .await;
    assert_eq!(alpha.0.len(), 24);
    assert_ne!(alpha, beta, "two Applications generate different values");

    // The seed is the HMAC of the Application under the key the
    // controller made; without it, the repository alone gives other
    // values.
    let secret = cluster
        .get("v1", "Secret", "secrets", Some("kiln"), SECRET_NAME)
        .await
        .expect("the controller made its key");
    let key = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(secret["data"][DATA_KEY].as_str().unwrap())
            .unwrap()
    };
    assert_eq!(key.len(), 32);
    let seed = RandomSeeds::from_key(key)
        .unwrap()
        .for_application("kiln", "alpha", "default");
    let chart = repo.work.join("web");
    let seeded = render(
        &chart,
        &[
            "releaseName=alpha",
            "namespace=guestbook",
            &format!("randomSeed={seed}"),
        ],
    );
    assert_eq!(password_of(&seeded), alpha.0);
    let guessed = render(&chart, &["releaseName=alpha", "namespace=guestbook"]);
    assert_ne!(password_of(&guessed), alpha.0);

    // The seed is nowhere in the Application.
    let app = cluster
        .get(
            "kiln.dev/v1alpha1",
            "Application",
            "applications",
            Some("kiln"),
            "alpha",
        )
        .await
        .unwrap();
    assert!(!app.to_string().contains(&seed));

    // `now` is the commit's time.
    let seconds: i64 = repo
        .git(&["show", "-s", "--format=%ct", "HEAD"])
        .trim()
        .parse()
        .unwrap();
    let made = jiff::Timestamp::from_second(seconds).unwrap().to_string();
    let clock = cluster
        .get(
            "v1",
            "ConfigMap",
            "configmaps",
            Some("guestbook"),
            "alpha-clock",
        )
        .await
        .unwrap();
    assert_eq!(clock["data"]["made"], made.as_str());

    // Refreshes and another controller process render the same values: no
    // drift, nothing re-applied.
    let renders = running.ctx.metrics.renders.get();
    running.shutdown().await;
    let restarted = support::controller::start(
        cluster.client.clone(),
        GitConfig::new(dir.path().join("git-again")),
        config(dir.path()),
    );
    eventually("the new controller rendered", async || {
        (restarted.ctx.metrics.renders.get() >= 2).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(renders >= 2);
    assert_eq!(login(&cluster, "alpha").await.unwrap(), alpha);
    assert_eq!(login(&cluster, "beta").await.unwrap(), beta);
    for name in ["alpha", "beta"] {
        let status = app_status(&cluster, name).await;
        assert_eq!(status["sync"]["status"], "Synced", "{name}: {status:#}");
    }
    restarted.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chart_from_a_helm_repository_renders_with_the_time_its_index_says_it_was_created() {
    use support::chart_repo::{ChartRepo, package, sha256};
    let dir = tempfile::tempdir().unwrap();
    let (cluster, _repo) = world(dir.path()).await;
    let charts = ChartRepo::start(None);
    let archive = package(
        "web",
        &[
            ("Chart.yaml", "apiVersion: v2\nname: web\nversion: 1.0.0\n"),
            ("templates/clock.yaml", CLOCK),
        ],
    );
    charts.put(
        "index.yaml",
        format!(
            "apiVersion: v1\nentries:\n  web:\n  - name: web\n    version: 1.0.0\n    \
             urls: [web-1.0.0.tgz]\n    digest: {}\n    created: \"2024-05-06T07:08:09.5+02:00\"\n",
            sha256(&archive)
        ),
    );
    charts.put("web-1.0.0.tgz", archive);
    let running = support::controller::start(
        cluster.client.clone(),
        GitConfig::new(dir.path().join("git")),
        ControllerConfig {
            chart_cache_dir: Some(dir.path().join("charts")),
            ..config(dir.path())
        },
    );
    cluster
        .automated_app(
            "dated",
            "default",
            json!({"repoURL": charts.url(), "chart": "web", "targetRevision": "1.0.0"}),
        )
        .await;
    let clock = eventually("the chart synced", async || {
        cluster
            .get(
                "v1",
                "ConfigMap",
                "configmaps",
                Some("guestbook"),
                "dated-clock",
            )
            .await
            .ok()
    })
    .await;
    assert_eq!(clock["data"]["made"], "2024-05-06T05:08:09Z");
    running.shutdown().await;
}
