//! Chart Applications (`spec.source.chart`) rendered through a real
//! `kiln render-server` process: the controller sends the chart source and
//! the credentials of that chart's repository only; the render server
//! fetches (index, digest pin, cache), renders with the `helm` plugin and
//! answers the objects, the chart's version and its digest. Helm
//! repositories are served by the test on loopback
//! (`support::chart_repo`, which logs every request and whether it carried
//! credentials); OCI charts come from Debian's `docker-registry`.

mod support;

use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kiln::controller::secrets::{SecretType, labeled};
use kiln_devcluster::Config;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use support::chart_repo::{ChartRepo, index, package, sha256};
use support::cluster::{Cluster, app_status};
use support::git::free_port;
use support::render_server::{Process, controller, render_server, wait_listening, write_certs};

const TEMPLATE: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  color: {{ .Values.color | quote }}
  chart: {{ .Chart.Version | quote }}
"#;

/// The chart `name` at `version`.
fn chart(name: &str, version: &str) -> Vec<u8> {
    package(
        name,
        &[
            (
                "Chart.yaml",
                &format!("apiVersion: v2\nname: {name}\nversion: {version}\n"),
            ),
            ("values.yaml", "color: blue\n"),
            ("templates/settings.yaml", TEMPLATE),
        ],
    )
}

/// The dev cluster with Kiln's CRDs, the catalog Plugin `helm`, and the
/// certificates of a render server in `dir/certs`.
async fn cluster(dir: &std::path::Path) -> Cluster {
    let cluster = Cluster::with_kiln(
        Config {
            simulate_readiness: Some(Duration::from_millis(20)),
            ..Config::default()
        },
        &["kiln", "guestbook"],
    )
    .await;
    std::fs::create_dir(dir.join("certs")).unwrap();
    write_certs(&dir.join("certs"));
    cluster.register_helm_plugin().await;
    cluster
}

/// A render server (with `args`) and a controller rendering through it.
async fn processes(
    cluster: &Cluster,
    dir: &std::path::Path,
    args: &[String],
) -> (Process, Process) {
    let port = free_port();
    let server = render_server(dir, port, &[], args, Stdio::null());
    wait_listening(port).await;
    let kubeconfig = dir.join("kubeconfig");
    cluster.server.write_kubeconfig(&kubeconfig).unwrap();
    let controller = controller(
        dir,
        &kubeconfig,
        free_port(),
        &[format!("https://127.0.0.1:{port}")],
    );
    (server, controller)
}

/// A chart Application of `project`.
async fn application(cluster: &Cluster, name: &str, project: &str, repo: &str, chart: &str) {
    cluster
        .automated_app(
            name,
            project,
            json!({"repoURL": repo, "chart": chart, "targetRevision": "1.2.*",
                "helm": {"releaseName": name}}),
        )
        .await;
}

async fn secret(cluster: &Cluster, name: &str, kind: SecretType, data: &[(&str, &str)]) {
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), "kiln");
    secrets
        .create(&PostParams::default(), &labeled(name, kind, data))
        .await
        .unwrap();
}

async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..600 {
        if let Some(value) = check().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn settings(cluster: &Cluster, name: &str) -> Option<Value> {
    cluster
        .get(
            "v1",
            "ConfigMap",
            "configmaps",
            Some("guestbook"),
            &format!("{name}-settings"),
        )
        .await
        .ok()
}

/// The first condition of Application `name` once it has one.
async fn condition(cluster: &Cluster, name: &str) -> Value {
    eventually(&format!("a condition on {name}"), async || {
        let status = app_status(cluster, name).await;
        status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] != "InsecurePlugin"))
            .cloned()
    })
    .await
}

/// Waits for Application `name` to be synced at chart version `version`.
async fn synced(cluster: &Cluster, name: &str, version: &str) -> Value {
    eventually(&format!("{name} synced at {version}"), async || {
        let status = app_status(cluster, name).await;
        let failed = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] != "InsecurePlugin");
        assert!(failed.is_none(), "{status}");
        let live = settings(cluster, name).await?;
        (live["data"]["chart"] == version
            && status["sync"]["revision"] == version
            && status["sync"]["status"] == "Synced")
            .then_some(live)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chart_applications_sync_through_the_render_server_with_their_own_credentials_only() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path()).await;
    // A private repository (basic auth) with a good chart, a chart whose
    // bytes are not what the index pins, and an archive only a stranger's
    // index names.
    let private = ChartRepo::start(Some("reader:s3cret"));
    let web = chart("web", "1.2.0");
    private.put("web-1.2.0.tgz", web.clone());
    private.put("broken-1.2.0.tgz", chart("broken", "1.2.0"));
    private.put("stray-1.2.0.tgz", chart("stray", "1.2.0"));
    private.put(
        "index.yaml",
        index(&[
            ("web", "1.2.0", "web-1.2.0.tgz", Some(sha256(&web))),
            (
                "broken",
                "1.2.0",
                "broken-1.2.0.tgz",
                Some(sha256(b"something else")),
            ),
        ]),
    );
    // A public repository whose index points its archive at the private
    // repository's origin.
    let public = ChartRepo::start(None);
    let stray = chart("stray", "1.2.0");
    public.put(
        "index.yaml",
        index(&[(
            "stray",
            "1.2.0",
            &format!("{}/stray-1.2.0.tgz", private.url()),
            Some(sha256(&stray)),
        )]),
    );
    // A repository whose index is larger than the render server accepts.
    let big = ChartRepo::start(None);
    big.put("index.yaml", format!("# {}\n", "x".repeat(200 << 10)));
    // A repository outside the project's sourceRepos.
    let outside = ChartRepo::start(None);
    outside.put("web-1.2.0.tgz", web.clone());
    outside.put(
        "index.yaml",
        index(&[("web", "1.2.0", "web-1.2.0.tgz", Some(sha256(&web)))]),
    );
    secret(
        &cluster,
        "private-charts",
        SecretType::Repository,
        &[
            ("url", &private.url()),
            ("type", "helm"),
            ("username", "reader"),
            ("password", "s3cret"),
        ],
    )
    .await;
    cluster
        .apply(
            "appprojects",
            json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "AppProject",
                "metadata": {"name": "fenced", "namespace": "kiln"},
                "spec": {"sourceRepos": [private.url(), public.url(), big.url()],
                    "destinations": [{"namespace": "*"}]}}),
            "operator",
            false,
        )
        .await
        .unwrap();
    for (name, repo, chart) in [
        ("web", private.url(), "web"),
        ("bad", private.url(), "broken"),
        ("stray", public.url(), "stray"),
        ("huge", big.url(), "web"),
        ("outside", outside.url(), "web"),
    ] {
        application(&cluster, name, "fenced", &repo, chart).await;
    }
    let (_server, _controller) = processes(
        &cluster,
        dir.path(),
        &[
            format!(
                "--chart-cache={}",
                dir.path().join("server-charts").display()
            ),
            "--chart-max-index=64Ki".to_owned(),
        ],
    )
    .await;

    // Then the private chart syncs through the render server, at the
    // version it resolved, with the credentials of its repository.
    let live = synced(&cluster, "web", "1.2.0").await;
    assert_eq!(live["data"]["color"], "blue", "{live}");
    assert!(
        private
            .requests()
            .iter()
            .filter(|r| r.path == "/index.yaml" || r.path == "/web-1.2.0.tgz")
            .all(|r| r.authorized),
        "{:?}",
        private.requests()
    );
    assert!(
        !dir.path().join("controller-charts").exists(),
        "the controller fetched a chart itself"
    );
    assert!(
        dir.path().join("server-charts").exists(),
        "the render server's chart cache"
    );

    // A digest mismatch is a condition naming the chart and the URL, and
    // nothing is applied.
    let bad = condition(&cluster, "bad").await;
    let message = bad["message"].as_str().unwrap();
    assert_eq!(bad["type"], "ComparisonError", "{bad}");
    assert!(message.contains("digest mismatch"), "{message}");
    assert!(message.contains("broken"), "{message}");
    assert!(
        message.contains(&format!("{}/broken-1.2.0.tgz", private.url())),
        "{message}"
    );
    assert!(settings(&cluster, "bad").await.is_none());

    // The private repository's credentials never go to the archive a
    // stranger's index points at it: the request arrives without them.
    let stray_condition = condition(&cluster, "stray").await;
    let message = stray_condition["message"].as_str().unwrap();
    assert!(message.contains("401"), "{message}");
    assert!(message.contains("stray"), "{message}");
    let strays: Vec<_> = private
        .requests()
        .into_iter()
        .filter(|r| r.path == "/stray-1.2.0.tgz")
        .collect();
    assert!(!strays.is_empty(), "{:?}", private.requests());
    assert!(strays.iter().all(|r| !r.authorized), "{strays:?}");
    assert!(settings(&cluster, "stray").await.is_none());

    // An index larger than the render server's limit is refused, naming
    // the chart and the URL.
    let huge = condition(&cluster, "huge").await;
    let message = huge["message"].as_str().unwrap();
    assert_eq!(huge["type"], "ComparisonError", "{huge}");
    assert!(
        message.contains(&format!("{}/index.yaml", big.url())),
        "{message}"
    );
    assert!(message.contains("larger than"), "{message}");
    assert!(message.contains("chart web"), "{message}");
    assert!(settings(&cluster, "huge").await.is_none());

    // A repository outside sourceRepos is refused before anything is sent:
    // the render server never fetched from it.
    let fenced = condition(&cluster, "outside").await;
    assert_eq!(fenced["type"], "ProjectViolation", "{fenced}");
    assert!(outside.requests().is_empty(), "{:?}", outside.requests());
    assert!(settings(&cluster, "outside").await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_argo_cd_style_oci_chart_syncs_through_the_render_server() {
    let Some(binary) = support::require(support::Tool::DockerRegistry) else {
        return;
    };
    let registry = support::registry::Registry::start(&binary, Some(("puller", "pa55")));
    let host = registry.host();
    for version in ["1.2.0", "1.2.3", "1.3.0"] {
        support::registry::push_chart(
            &host,
            "charts/web",
            version,
            chart("web", version),
            Some(("puller", "pa55")),
        )
        .await;
    }
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path()).await;
    // Argo CD's form: the registry path without oci://, the repository
    // Secret saying `type: helm` and `enableOCI: "true"`, with the
    // registry's credentials.
    let repo = format!("{host}/charts");
    secret(
        &cluster,
        "oci-charts",
        SecretType::Repository,
        &[
            ("url", &repo),
            ("type", "helm"),
            ("enableOCI", "true"),
            ("username", "puller"),
            ("password", "pa55"),
        ],
    )
    .await;
    application(&cluster, "web", "default", &repo, "web").await;
    let (_server, _controller) = processes(
        &cluster,
        dir.path(),
        &[format!(
            "--chart-cache={}",
            dir.path().join("server-charts").display()
        )],
    )
    .await;
    let live = synced(&cluster, "web", "1.2.3").await;
    assert_eq!(live["data"]["color"], "blue", "{live}");
}

/// A chart `name` at `version` depending on `dependencies` (name, version,
/// repository URL), none vendored.
fn parent(name: &str, version: &str, dependencies: &[(String, &str, String)]) -> Vec<u8> {
    let mut chart_yaml =
        format!("apiVersion: v2\nname: {name}\nversion: {version}\ndependencies:\n");
    for (dependency, version, repository) in dependencies {
        chart_yaml.push_str(&format!(
            "- name: {dependency}\n  version: \"{version}\"\n  repository: \"{repository}\"\n"
        ));
    }
    package(
        name,
        &[
            ("Chart.yaml", &chart_yaml),
            ("values.yaml", "color: blue\n"),
            ("templates/settings.yaml", TEMPLATE),
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependency_in_another_private_repository_gets_its_own_credentials_and_only_if_permitted()
{
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path()).await;
    // Repository B (private, user bob) holds the library chart; so does a
    // public repository outside the project's sourceRepos.
    let b = ChartRepo::start(Some("bob:b-s3cret"));
    let outside = ChartRepo::start(None);
    let lib = package(
        "lib",
        &[
            ("Chart.yaml", "apiVersion: v2\nname: lib\nversion: 1.0.0\n"),
            (
                "templates/lib.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-lib\ndata:\n  from: library\n",
            ),
        ],
    );
    // A second library in B (an umbrella chart's postgresql and redis
    // come from one repository).
    let cache = package(
        "cache",
        &[
            (
                "Chart.yaml",
                "apiVersion: v2\nname: cache\nversion: 1.0.0\n",
            ),
            (
                "templates/cache.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cache\ndata:\n  from: cache\n",
            ),
        ],
    );
    b.put("cache-1.0.0.tgz", cache.clone());
    b.put(
        "index.yaml",
        index(&[
            ("lib", "1.0.0", "lib-1.0.0.tgz", Some(sha256(&lib))),
            ("cache", "1.0.0", "cache-1.0.0.tgz", Some(sha256(&cache))),
        ]),
    );
    for repo in [&b, &outside] {
        repo.put("lib-1.0.0.tgz", lib.clone());
    }
    outside.put(
        "index.yaml",
        index(&[("lib", "1.0.0", "lib-1.0.0.tgz", Some(sha256(&lib)))]),
    );
    // Repository A (private, user alice): a chart depending on B's
    // library, one depending on the outside repository's, and a hostile
    // one listing 1,000 dependency repositories.
    let a = ChartRepo::start(Some("alice:a-s3cret"));
    let app = parent("app", "1.2.0", &[("lib".into(), "1.0.0", b.url())]);
    let umbrella = parent(
        "umbrella",
        "1.2.0",
        &[
            ("lib".into(), "1.0.0", b.url()),
            ("cache".into(), "1.0.0", format!("{}/", b.url())),
        ],
    );
    let leaky = parent("leaky", "1.2.0", &[("lib".into(), "1.0.0", outside.url())]);
    let many_dependencies: Vec<(String, &str, String)> = (0..1000)
        .map(|i| (format!("d{i}"), "1.0.0", format!("{}/r{i}", outside.url())))
        .collect();
    let many = parent("many", "1.2.0", &many_dependencies);
    a.put("app-1.2.0.tgz", app.clone());
    a.put("umbrella-1.2.0.tgz", umbrella.clone());
    a.put("leaky-1.2.0.tgz", leaky.clone());
    a.put("many-1.2.0.tgz", many.clone());
    a.put(
        "index.yaml",
        index(&[
            ("app", "1.2.0", "app-1.2.0.tgz", Some(sha256(&app))),
            (
                "umbrella",
                "1.2.0",
                "umbrella-1.2.0.tgz",
                Some(sha256(&umbrella)),
            ),
            ("leaky", "1.2.0", "leaky-1.2.0.tgz", Some(sha256(&leaky))),
            ("many", "1.2.0", "many-1.2.0.tgz", Some(sha256(&many))),
        ]),
    );
    for (name, repo, user, password) in [
        ("charts-a", &a, "alice", "a-s3cret"),
        ("charts-b", &b, "bob", "b-s3cret"),
    ] {
        secret(
            &cluster,
            name,
            SecretType::Repository,
            &[
                ("url", &repo.url()),
                ("type", "helm"),
                ("username", user),
                ("password", password),
            ],
        )
        .await;
    }
    for (project, repos) in [
        ("fenced", json!([a.url(), b.url()])),
        ("open", json!(["*"])),
    ] {
        cluster
            .apply(
                "appprojects",
                json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "AppProject",
                    "metadata": {"name": project, "namespace": "kiln"},
                    "spec": {"sourceRepos": repos, "destinations": [{"namespace": "*"}]}}),
                "operator",
                false,
            )
            .await
            .unwrap();
    }
    application(&cluster, "app", "fenced", &a.url(), "app").await;
    application(&cluster, "umbrella", "fenced", &a.url(), "umbrella").await;
    application(&cluster, "leaky", "fenced", &a.url(), "leaky").await;
    application(&cluster, "many", "open", &a.url(), "many").await;
    let (_server, _controller) = processes(
        &cluster,
        dir.path(),
        &[format!(
            "--chart-cache={}",
            dir.path().join("server-charts").display()
        )],
    )
    .await;

    // The chart of A renders with B's library, each repository fetched
    // with its own credentials.
    synced(&cluster, "app", "1.2.0").await;
    let lib_object = cluster
        .get(
            "v1",
            "ConfigMap",
            "configmaps",
            Some("guestbook"),
            "app-lib",
        )
        .await
        .unwrap();
    assert_eq!(lib_object["data"]["from"], "library", "{lib_object}");
    let b_requests = b.requests();
    assert!(
        b_requests
            .iter()
            .any(|r| r.path == "/lib-1.0.0.tgz" && r.status == 200),
        "{b_requests:?}"
    );
    assert!(
        b_requests
            .iter()
            .all(|r| r.user.is_none() || r.user.as_deref() == Some("bob")),
        "{b_requests:?}"
    );

    // Two dependencies from one repository: it is granted once and both
    // render.
    synced(&cluster, "umbrella", "1.2.0").await;
    for (name, from) in [("umbrella-lib", "library"), ("umbrella-cache", "cache")] {
        let object = cluster
            .get("v1", "ConfigMap", "configmaps", Some("guestbook"), name)
            .await
            .unwrap();
        assert_eq!(object["data"]["from"], from, "{object}");
    }

    // A dependency repository outside sourceRepos is refused before
    // anything is fetched from it, naming the chart, the dependency and
    // the URL.
    let refused = condition(&cluster, "leaky").await;
    let message = refused["message"].as_str().unwrap();
    assert_eq!(refused["type"], "ProjectViolation", "{refused}");
    assert!(message.contains("leaky"), "{message}");
    assert!(message.contains("`lib`"), "{message}");
    assert!(message.contains(&outside.url()), "{message}");
    assert!(message.contains("sourceRepos"), "{message}");
    assert!(settings(&cluster, "leaky").await.is_none());

    // A chart listing 1,000 dependency repositories is refused with a
    // clear error, before any of them is asked anything.
    let bounded = condition(&cluster, "many").await;
    let message = bounded["message"].as_str().unwrap();
    assert!(message.contains("many"), "{message}");
    assert!(message.contains("1000 dependencies"), "{message}");
    assert!(settings(&cluster, "many").await.is_none());
    assert!(outside.requests().is_empty(), "{:?}", outside.requests());

    // B's credentials went to B only; A saw only its own.
    assert!(
        a.requests()
            .iter()
            .all(|r| r.user.is_none() || r.user.as_deref() == Some("alice")),
        "{:?}",
        a.requests()
    );
    assert!(
        outside.requests().iter().all(|r| r.user.is_none()),
        "{:?}",
        outside.requests()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependency_in_a_private_oci_registry_is_pulled_with_its_own_secret() {
    let Some(binary) = support::require(support::Tool::DockerRegistry) else {
        return;
    };
    let registry = support::registry::Registry::start(&binary, Some(("puller", "pa55")));
    let host = registry.host();
    let lib = package(
        "lib",
        &[
            ("Chart.yaml", "apiVersion: v2\nname: lib\nversion: 1.0.0\n"),
            (
                "templates/lib.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-lib\ndata:\n  from: oci\n",
            ),
        ],
    );
    support::registry::push_chart(&host, "libs/lib", "1.0.0", lib, Some(("puller", "pa55"))).await;
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path()).await;
    let a = ChartRepo::start(Some("alice:a-s3cret"));
    let libs = format!("oci://{host}/libs");
    let app = parent("app", "1.2.0", &[("lib".into(), "1.0.0", libs.clone())]);
    a.put("app-1.2.0.tgz", app.clone());
    a.put(
        "index.yaml",
        index(&[("app", "1.2.0", "app-1.2.0.tgz", Some(sha256(&app)))]),
    );
    secret(
        &cluster,
        "charts-a",
        SecretType::Repository,
        &[
            ("url", &a.url()),
            ("type", "helm"),
            ("username", "alice"),
            ("password", "a-s3cret"),
        ],
    )
    .await;
    secret(
        &cluster,
        "oci-libs",
        SecretType::Repository,
        &[
            ("url", &format!("{host}/libs")),
            ("type", "helm"),
            ("enableOCI", "true"),
            ("username", "puller"),
            ("password", "pa55"),
        ],
    )
    .await;
    cluster
        .apply(
            "appprojects",
            json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "AppProject",
                "metadata": {"name": "fenced", "namespace": "kiln"},
                "spec": {"sourceRepos": [a.url(), libs],
                    "destinations": [{"namespace": "*"}]}}),
            "operator",
            false,
        )
        .await
        .unwrap();
    application(&cluster, "app", "fenced", &a.url(), "app").await;
    let (_server, _controller) = processes(
        &cluster,
        dir.path(),
        &[format!(
            "--chart-cache={}",
            dir.path().join("server-charts").display()
        )],
    )
    .await;
    synced(&cluster, "app", "1.2.0").await;
    let lib_object = cluster
        .get(
            "v1",
            "ConfigMap",
            "configmaps",
            Some("guestbook"),
            "app-lib",
        )
        .await
        .unwrap();
    assert_eq!(lib_object["data"]["from"], "oci", "{lib_object}");
}
