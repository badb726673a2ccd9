//! ApplicationSets end to end: the dev cluster, a real `git daemon`, the
//! controller in-process with the `appset` plugin built for wasm; and
//! `kiln appset generate` offline.

mod support;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use kiln::api::Application;
use kiln::controller::{self, Context, ControllerConfig};
use kiln::source::git::GitConfig;
use kiln_devcluster::Config;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use support::cluster::Cluster;
use support::git::{Fixture, GitDaemon};

struct World {
    cluster: Cluster,
    daemon: GitDaemon,
    repo: Fixture,
    url: String,
    _dir: tempfile::TempDir,
    _stop: tokio::sync::oneshot::Sender<()>,
    ctx: Arc<Context>,
}

fn configmap(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  from: git\n")
}

/// A cluster with Kiln's CRDs, a repository `apps` with `apps/a` and
/// `apps/b`, the `appset` Plugin, and a controller generating sets every
/// 300 ms.
async fn world() -> World {
    world_with(Duration::from_millis(300)).await
}

/// [`world`], generating sets every `appset_resync`.
async fn world_with(appset_resync: Duration) -> World {
    let cluster = Cluster::with_kiln_crds(Config::default(), &["kiln", "guestbook"], false).await;
    let dir = tempfile::tempdir().unwrap();
    let repo = Fixture::new(dir.path(), "apps");
    repo.commit(
        "two apps",
        &[
            ("apps/a/cm.yaml", &configmap("a")),
            ("apps/b/cm.yaml", &configmap("b")),
            ("README.md", "apps\n"),
        ],
    );
    repo.publish();
    let daemon = GitDaemon::start(dir.path());
    let url = daemon.url("apps");
    let mut git = GitConfig::new(dir.path().join("cache"));
    git.lookup_ttl = Duration::ZERO;
    let config = ControllerConfig {
        resync: Duration::from_millis(300),
        appset_resync,
        catalog: controller::CatalogConfig {
            store: dir.path().join("plugins"),
            allow_file_plugins: true,
            ..controller::CatalogConfig::default()
        },
        ..ControllerConfig::default()
    };
    cluster
        .apply(
            "plugins",
            json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Plugin",
                "metadata": {"name": "appset", "namespace": "kiln"},
                "spec": {"kind": "renderer", "ref": support::component("appset").display().to_string(),
                    "verify": {"insecure": true}}}),
            "operator",
            false,
        )
        .await
        .unwrap();
    let support::controller::Running { ctx, stop, .. } =
        support::controller::start(cluster.client.clone(), git, config);
    World {
        cluster,
        daemon,
        repo,
        url,
        _dir: dir,
        _stop: stop,
        ctx,
    }
}

impl World {
    async fn apply_set(&self, set: Value) {
        self.cluster
            .apply("applicationsets", set, "operator", false)
            .await
            .unwrap();
    }

    fn apps(&self) -> Api<Application> {
        Api::namespaced(self.cluster.client.clone(), "kiln")
    }

    /// The names of the Applications of set `name`.
    async fn generated(&self, name: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .apps()
            .list(&ListParams::default().labels(&format!("kiln.dev/application-set={name}")))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|a| a.metadata.name)
            .collect();
        names.sort();
        names
    }

    async fn set_status(&self, name: &str) -> Value {
        let sets = self.cluster.api(
            "kiln.dev/v1alpha1",
            "ApplicationSet",
            "applicationsets",
            Some("kiln"),
        );
        sets.get_opt(name)
            .await
            .unwrap()
            .map(|s| serde_json::to_value(s).unwrap()["status"].clone())
            .unwrap_or(Value::Null)
    }
}

/// Polls `check` until it returns Some, for up to 60 s (the plugin
/// compiles first).
async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..600 {
        if let Some(value) = check().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

fn directories_set(url: &str, label: &str) -> Value {
    let mut set = json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "ApplicationSet",
        "metadata": {"name": "dirs", "namespace": "kiln"},
        "spec": {
            "generators": [{"git": {"repoURL": url, "revision": "main",
                "directories": [{"path": "apps/*"}, {"path": "apps/skipped", "exclude": true}]}}],
            "template": {
                "metadata": {"name": "{{path.basename}}", "labels": {"tier": label}},
                "spec": {"project": "default",
                    "source": {"repoURL": url, "targetRevision": "main", "path": "{{path}}"},
                    "destination": {"namespace": "guestbook"},
                    "syncPolicy": {"automated": {"prune": true}}}}}});
    // The second version of the template drops the automated sync.
    if label != "one" {
        set["spec"]["template"]["spec"]
            .as_object_mut()
            .unwrap()
            .remove("syncPolicy");
    }
    set
}

/// Issue 41: a Git directory generator's Applications follow the
/// repository: created for each directory, updated when the template
/// changes, deleted when a directory goes; and they sync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applications_follow_git_directories_as_they_appear_change_and_go() {
    let w = world().await;
    w.apply_set(directories_set(&w.url, "one")).await;
    let names = eventually("two Applications", async || {
        let names = w.generated("dirs").await;
        (names.len() == 2).then_some(names)
    })
    .await;
    assert_eq!(names, ["a", "b"]);
    let a = w.apps().get("a").await.unwrap();
    assert_eq!(a.spec.source.path, "apps/a");
    assert_eq!(
        a.metadata.owner_references.as_ref().unwrap()[0].kind,
        "ApplicationSet"
    );
    // They sync: the ConfigMap of apps/a is applied.
    let configmaps = w
        .cluster
        .api("v1", "ConfigMap", "configmaps", Some("guestbook"));
    eventually("apps/a synced", async || {
        configmaps.get_opt("a").await.unwrap()
    })
    .await;

    // A directory added, one excluded, one removed.
    w.repo.commit(
        "c, skipped",
        &[
            ("apps/c/cm.yaml", &configmap("c")),
            ("apps/skipped/cm.yaml", &configmap("s")),
        ],
    );
    w.repo.git(&["rm", "-r", "-q", "apps/b"]);
    w.repo.commit("b gone", &[]);
    w.repo.publish();
    eventually("a and c", async || {
        (w.generated("dirs").await == ["a", "c"]).then_some(())
    })
    .await;

    // The template changed: every Application is updated.
    w.apply_set(directories_set(&w.url, "two")).await;
    eventually("labels updated", async || {
        let a = w.apps().get("a").await.unwrap();
        (a.metadata
            .labels
            .unwrap_or_default()
            .get("tier")
            .map(String::as_str)
            == Some("two"))
        .then_some(())
    })
    .await;
    let status = w.set_status("dirs").await;
    assert_eq!(status["applicationCount"], 2, "{status}");
    // What `kiln appset list` and `get` show of it.
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = home.path().join("kubeconfig");
    w.cluster.server.write_kubeconfig(&kubeconfig).unwrap();
    let cli = |args: Vec<String>| {
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            kiln(&args, None)
        })
    };
    let config = kubeconfig.display().to_string();
    let listed = cli(vec![
        "appset".into(),
        "list".into(),
        "--kubeconfig".into(),
        config.clone(),
    ])
    .await
    .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(
        listed.lines().any(|l| l.starts_with("dirs ")
            && l.split_whitespace().nth(1) == Some("2")
            && l.split_whitespace().nth(2) == Some("True")),
        "{listed}"
    );
    let got = cli(vec![
        "appset".into(),
        "get".into(),
        "dirs".into(),
        "--kubeconfig".into(),
        config,
    ])
    .await
    .unwrap();
    let got = String::from_utf8_lossy(&got.stdout).into_owned();
    assert!(
        got.contains("Generators:   git") && got.contains("Applications (2):\n  a\n  c\n"),
        "{got}"
    );
    let up_to_date = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "ResourcesUpToDate")
        .unwrap();
    assert_eq!(up_to_date["status"], "True", "{status}");

    // The set deleted: its Applications go with it.
    let sets = w.cluster.api(
        "kiln.dev/v1alpha1",
        "ApplicationSet",
        "applicationsets",
        Some("kiln"),
    );
    sets.delete("dirs", &Default::default()).await.unwrap();
    eventually("the Applications gone", async || {
        w.generated("dirs").await.is_empty().then_some(())
    })
    .await;
    eventually("the set gone", async || {
        sets.get_opt("dirs").await.unwrap().is_none().then_some(())
    })
    .await;
    let _ = &w.daemon;
}

/// Issue 41: `goTemplate` with `missingkey=error`: a typo in the template
/// is an error naming it, and nothing is generated; fixed, the
/// Applications appear. A template naming a project the set may not use
/// is refused the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_template_typos_and_forbidden_projects_generate_nothing() {
    let w = world().await;
    let set = |name_expr: &str, project: &str| {
        json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "ApplicationSet",
            "metadata": {"name": "envs", "namespace": "kiln"},
            "spec": {
                "goTemplate": true,
                "goTemplateOptions": ["missingkey=error"],
                "projects": ["team-*", "default"],
                "generators": [{"list": {"elements": [
                    {"env": "dev", "project": "default"},
                    {"env": "prod", "project": project}]}}],
                "template": {
                    "metadata": {"name": format!("web-{{{{ {name_expr} }}}}")},
                    "spec": {"project": "{{ .project }}",
                        "source": {"repoURL": w.url, "path": "apps/a"},
                        "destination": {"namespace": "guestbook"}}}}})
    };
    w.apply_set(set(".evn", "default")).await;
    let status = eventually("the typo refused", async || {
        let status = w.set_status("envs").await;
        (status["conditions"][0]["status"] == "True").then_some(status)
    })
    .await;
    let message = status["conditions"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("map has no entry for key \"evn\""),
        "{message}"
    );
    assert_eq!(status["conditions"][0]["reason"], "TemplateError");
    assert!(w.generated("envs").await.is_empty());

    // A project outside spec.projects: refused, nothing generated.
    w.apply_set(set(".env", "admin")).await;
    let status = eventually("the project refused", async || {
        let status = w.set_status("envs").await;
        status["conditions"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("project \"admin\""))
            .then_some(status)
    })
    .await;
    assert_eq!(
        status["conditions"][0]["reason"], "ApplicationNotAllowed",
        "{status}"
    );
    assert!(w.generated("envs").await.is_empty());

    // Both fixed.
    w.apply_set(set(".env", "team-web")).await;
    eventually("two Applications", async || {
        (w.generated("envs").await == ["web-dev", "web-prod"]).then_some(())
    })
    .await;
    let prod = w.apps().get("web-prod").await.unwrap();
    assert_eq!(prod.spec.project, "team-web");

    // create-only: a template change leaves them as they are.
    let mut changed = set(".env", "team-web");
    changed["spec"]["syncPolicy"] = json!({"applicationsSync": "create-only"});
    changed["spec"]["template"]["spec"]["destination"]["namespace"] = json!("kiln");
    w.apply_set(changed).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let prod = w.apps().get("web-prod").await.unwrap();
    assert_eq!(
        prod.spec.destination.namespace.as_deref(),
        Some("guestbook")
    );
    // And a set with a generator Kiln does not run says so.
    w.apply_set(json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "ApplicationSet",
        "metadata": {"name": "scm", "namespace": "kiln"},
        "spec": {"generators": [{"scmProvider": {}}], "template": {"metadata": {"name": "x"}, "spec": {}}}}))
        .await;
    let status = eventually("scm refused", async || {
        let status = w.set_status("scm").await;
        (!status.is_null()).then_some(status)
    })
    .await;
    assert!(
        status["conditions"][0]["message"]
            .as_str()
            .unwrap()
            .contains("\"scmProvider\" is not run by Kiln"),
        "{status}"
    );
}

fn kiln(args: &[&str], stdin: Option<&str>) -> std::process::Output {
    use std::io::Write as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

/// `kiln appset generate` prints what a set generates, offline: a matrix
/// of clusters × Git files (each file's parameters), merged with a list.
#[test]
fn generate_prints_a_matrix_of_clusters_and_git_files_offline() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("checkout");
    for (env, replicas) in [("dev", 1), ("prod", 3)] {
        std::fs::create_dir_all(source.join(format!("envs/{env}"))).unwrap();
        std::fs::write(
            source.join(format!("envs/{env}/config.yaml")),
            format!("env: {env}\nreplicas: {replicas}\n"),
        )
        .unwrap();
    }
    let clusters = dir.path().join("clusters.yaml");
    std::fs::write(
        &clusters,
        "- {name: east, server: 'https://east', labels: {region: us}}\n- {name: west, server: 'https://west', labels: {region: eu}}\n",
    )
    .unwrap();
    let set = "apiVersion: kiln.dev/v1alpha1
kind: ApplicationSet
metadata: {name: fleet}
spec:
  generators:
  - matrix:
      generators:
      - clusters: {selector: {matchLabels: {region: us}}}
      - git:
          repoURL: https://example.com/config.git
          files: [{path: 'envs/*/config.yaml'}]
  template:
    metadata: {name: '{{name}}-{{env}}'}
    spec:
      project: default
      source: {repoURL: 'https://example.com/apps.git', path: 'apps/{{path.basename}}'}
      destination: {server: '{{server}}', namespace: 'web-{{env}}'}
";
    let plugin = support::component("appset").display().to_string();
    let out = kiln(
        &[
            "appset",
            "generate",
            "-",
            "--source",
            source.to_str().unwrap(),
            "--clusters",
            clusters.to_str().unwrap(),
            "--appset-plugin",
            &plugin,
            "-o",
            "json",
        ],
        Some(set),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let apps: Vec<(String, String, String)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["metadata"]["name"].as_str().unwrap().to_owned(),
                a["spec"]["destination"]["server"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                a["spec"]["source"]["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        apps,
        [
            (
                "east-dev".to_owned(),
                "https://east".to_owned(),
                "apps/dev".to_owned()
            ),
            (
                "east-prod".to_owned(),
                "https://east".to_owned(),
                "apps/prod".to_owned()
            ),
        ]
    );

    // Attack: a matrix past the bound is refused, naming it.
    let out = kiln(
        &[
            "appset",
            "generate",
            "-",
            "--source",
            source.to_str().unwrap(),
            "--clusters",
            clusters.to_str().unwrap(),
            "--appset-plugin",
            &plugin,
            "--max-applications",
            "1",
        ],
        Some(set),
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("more than 1 parameter sets"), "{stderr}");
}

/// A git generator reads only a repository the set's projects allow: a
/// set of project `locked` (whose sourceRepos do not hold the world's
/// repository) cannot make the controller read it with its credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_a_git_generator_reads_only_repositories_its_projects_allow() {
    let w = world().await;
    w.cluster
        .apply(
            "appprojects",
            json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "AppProject",
                "metadata": {"name": "locked", "namespace": "kiln"},
                "spec": {"sourceRepos": ["https://example.com/*"], "destinations": [{"namespace": "*"}]}}),
            "security",
            false,
        )
        .await
        .unwrap();
    let mut set = directories_set(&w.url, "one");
    set["spec"]["template"]["spec"]["project"] = json!("locked");
    w.apply_set(set).await;
    let status = eventually("the repository refused", async || {
        let status = w.set_status("dirs").await;
        (status["conditions"][0]["status"] == "True").then_some(status)
    })
    .await;
    let message = status["conditions"][0]["message"].as_str().unwrap();
    assert!(
        message.contains(
            "is in the sourceRepos of none of the projects this ApplicationSet may use (locked)"
        ),
        "{message}"
    );
    assert_eq!(status["conditions"][0]["reason"], "GeneratorError");
    assert!(w.generated("dirs").await.is_empty());
}

/// Issue 41: a signed push webhook refreshes the ApplicationSets whose git
/// generators read what it changed, at once; a push elsewhere in the
/// repository refreshes none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_webhook_regenerates_the_sets_whose_generators_read_it() {
    use hmac::Mac as _;
    // Generation is slow here: only the webhook can make this fast.
    let w = world_with(Duration::from_secs(3600)).await;
    let state = Arc::new(controller::http::HttpState {
        ctx: w.ctx.clone(),
        webhook: controller::http::WebhookAuth::new(Some("s3cret".into()), false),
        ready: std::sync::atomic::AtomicBool::new(true),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, controller::http::router(state)).await });
    w.apply_set(directories_set(&w.url, "one")).await;
    eventually("two Applications", async || {
        (w.generated("dirs").await.len() == 2).then_some(())
    })
    .await;
    let http = reqwest::Client::new();
    let deliver = |files: Vec<&str>| {
        let body = json!({"ref": "refs/heads/main", "repository": {"clone_url": w.url},
            "commits": [{"added": files, "modified": [], "removed": []}]})
        .to_string();
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"s3cret").unwrap();
        mac.update(body.as_bytes());
        let signature = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
        http.post(format!("{endpoint}/api/webhook"))
            .header("x-hub-signature-256", signature)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    w.repo.commit("docs", &[("README.md", "more\n")]);
    w.repo.publish();
    let sets_refreshed = |answer: &Value| -> Vec<String> {
        answer["refreshed"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| {
                n.as_str()?
                    .strip_prefix("applicationset/")
                    .map(str::to_owned)
            })
            .collect()
    };
    let readme: Value = deliver(vec!["README.md"])
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(sets_refreshed(&readme).is_empty(), "{readme}");
    w.repo.commit("c", &[("apps/c/cm.yaml", &configmap("c"))]);
    w.repo.publish();
    let pushed: Value = deliver(vec!["apps/c/cm.yaml"])
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(sets_refreshed(&pushed), ["dirs"], "{pushed}");
    eventually("c generated", async || {
        (w.generated("dirs").await == ["a", "b", "c"]).then_some(())
    })
    .await;
}
