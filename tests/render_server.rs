//! `kiln render-server`: the source work in a process without Kubernetes
//! credentials. End to end with the real binaries (render server and
//! controller), a real `git daemon` and the dev cluster; and the protocol's
//! defences (mutual TLS, bounded bodies, deadlines) against hostile peers.

mod support;

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use kiln::plugin::{HostConfig, PluginHost};
use kiln::render::engine::Catalog;
use kiln::render::engine::CatalogConfig;
use kiln::render::engine::Granted;
use kiln::render::engine::RenderCache;
use kiln::render::remote::server::RenderServer;
use kiln::render::remote::tls::Issued;
use kiln::render::remote::{
    AppRef, Client, ClientError, Limits, Pool, PoolConfig, RenderRequest, RenderStep, tls,
};
use kiln::source::git::{GitConfig, GitSource};
use kiln_devcluster::Config;
use serde_json::{Value, json};
use support::cluster::{Cluster, app_status};
use support::git::{Fixture, GitDaemon, free_port};
use support::render_server::{Process, controller, render_server, wait_listening, write_certs};

const CONFIGMAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  labels:\n    rendered-for: \"{{ .App.Name }}\"\ndata:\n  color: blue\n";

async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    for _ in 0..600 {
        if let Some(value) = check().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn live_settings(cluster: &Cluster) -> Option<Value> {
    cluster
        .get(
            "v1",
            "ConfigMap",
            "configmaps",
            Some("guestbook"),
            "settings",
        )
        .await
        .ok()
}

async fn wait_for_color(cluster: &Cluster, color: &str) -> Value {
    eventually(&format!("the color {color}"), async || {
        live_settings(cluster)
            .await
            .filter(|cm| cm["data"]["color"] == color)
    })
    .await
}

fn push_color(repo: &Fixture, color: &str) {
    repo.commit(
        color,
        &[("guestbook/settings.yaml", &CONFIGMAP.replace("blue", color))],
    );
    repo.publish();
}

/// The environment variables of process `pid`.
fn environment(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap()
        .split(|b| *b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_loop_runs_through_a_render_server_without_credentials() {
    // Given the dev cluster with Kiln's CRDs, a Git repository behind a
    // git daemon, and the `values` renderer in the catalog.
    let cluster = Cluster::with_kiln(
        Config {
            simulate_readiness: Some(Duration::from_millis(20)),
            ..Config::default()
        },
        &["kiln", "guestbook"],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (repo, _daemon) = guestbook(&cluster, dir.path()).await;
    // When the render server runs with no credentials reachable, and a
    // controller renders through it.
    let port = free_port();
    let mut server = render_server(dir.path(), port, &[], &[], Stdio::null());
    wait_listening(port).await;
    let env = environment(server.id());
    assert!(
        env.iter()
            .all(|v| !v.starts_with("KUBECONFIG=") && !v.starts_with("HOME=")),
        "{env:?}"
    );
    assert!(!Path::new("/var/run/secrets/kubernetes.io/serviceaccount/token").exists());
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.server.write_kubeconfig(&kubeconfig).unwrap();
    let metrics_port = free_port();
    let server_url = format!("https://127.0.0.1:{port}");
    let mut controller = controller(
        dir.path(),
        &kubeconfig,
        metrics_port,
        std::slice::from_ref(&server_url),
    );

    // Then the plugin's render is applied, a push is synced, drift reverted.
    let live = wait_for_color(&cluster, "blue").await;
    assert_eq!(
        live["metadata"]["labels"]["rendered-for"], "guestbook",
        "{live}"
    );
    let status = eventually("Synced", async || {
        let status = app_status(&cluster, "guestbook").await;
        (status["sync"]["status"] == "Synced").then_some(status)
    })
    .await;
    assert_eq!(status["sync"]["revision"], repo.rev_parse("HEAD").as_str());
    push_color(&repo, "green");
    wait_for_color(&cluster, "green").await;
    let cms = cluster.api("v1", "ConfigMap", "configmaps", Some("guestbook"));
    let edit = kube::api::PatchParams {
        field_manager: Some("kubectl-edit".into()),
        ..Default::default()
    };
    cms.patch(
        "settings",
        &edit,
        &kube::api::Patch::Merge(json!({"data": {"color": "red"}})),
    )
    .await
    .unwrap();
    wait_for_color(&cluster, "green").await;

    // And the controller rendered nothing and called no plugin itself.
    let metrics = metrics(metrics_port).await;
    // Every API request is counted by verb (here: the syncs' applies).
    for verb in ["apply", "watch", "list"] {
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with("kiln_kube_requests_total{")
                    && l.contains(&format!("verb=\"{verb}\""))),
            "{verb}: {metrics}"
        );
    }
    assert!(
        !metrics
            .lines()
            .any(|l| l.starts_with("kiln_plugin_call_duration_seconds_count")),
        "{metrics}"
    );
    assert!(
        !dir.path().join("controller-plugins").exists(),
        "the controller fetched a plugin"
    );

    // When the render server goes away, the Application says so, naming it.
    server.kill().unwrap();
    server.wait().unwrap();
    push_color(&repo, "yellow");
    let status = eventually("the RenderServerUnavailable condition", async || {
        let status = app_status(&cluster, "guestbook").await;
        status["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["reason"] == "RenderServerUnavailable"))
            .then_some(status)
    })
    .await;
    let message = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["reason"] == "RenderServerUnavailable")
        .unwrap()["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains(&server_url), "{message}");
    assert!(message.contains("unreachable"), "{message}");

    // And when it comes back, the Application recovers.
    let mut server = render_server(dir.path(), port, &[], &[], Stdio::null());
    wait_listening(port).await;
    wait_for_color(&cluster, "yellow").await;
    eventually("the condition to clear", async || {
        let status = app_status(&cluster, "guestbook").await;
        (!status["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["reason"] == "RenderServerUnavailable")))
        .then_some(())
    })
    .await;
    controller.kill().unwrap();
    controller.wait().unwrap();
    server.kill().unwrap();
    server.wait().unwrap();
}

/// A Git repository behind a git daemon with the guestbook application,
/// the `values` renderer in the catalog and an Application using both.
async fn guestbook(cluster: &Cluster, dir: &Path) -> (Fixture, GitDaemon) {
    let repo = Fixture::new(dir, "apps");
    repo.commit("first", &[("guestbook/settings.yaml", CONFIGMAP)]);
    repo.publish();
    let daemon = GitDaemon::start(dir);
    let url = daemon.url("apps");
    std::fs::create_dir(dir.join("certs")).unwrap();
    write_certs(&dir.join("certs"));
    cluster
        .apply(
            "plugins",
            json!({"apiVersion": "kiln.dev/v1alpha1", "kind": "Plugin",
                "metadata": {"name": "values", "namespace": "kiln"},
                "spec": {"kind": "renderer",
                    "ref": support::component("values").display().to_string(),
                    "verify": {"insecure": true}}}),
            "operator",
            false,
        )
        .await
        .unwrap();
    cluster
        .automated_app(
            "guestbook",
            "default",
            json!({"repoURL": url, "path": "guestbook", "plugins": [{"name": "values"}]}),
        )
        .await;
    (repo, daemon)
}

/// The controller's metrics text.
async fn metrics(port: u16) -> String {
    reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The value of the counter `name` with `server="{server}"`, 0 if absent.
fn counter(metrics: &str, name: &str, server: &str) -> f64 {
    let prefix = format!("{name}{{server=\"{server}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_render_server_replica_hands_its_repositories_to_another() {
    // Given two render servers and a controller routing to both.
    let cluster = Cluster::with_kiln(
        Config {
            simulate_readiness: Some(Duration::from_millis(20)),
            ..Config::default()
        },
        &["kiln", "guestbook"],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (repo, _daemon) = guestbook(&cluster, dir.path()).await;
    let ports = [free_port(), free_port()];
    let mut servers: Vec<Process> = ports
        .iter()
        .enumerate()
        .map(|(i, port)| {
            let home = dir.path().join(format!("replica-{i}"));
            std::fs::create_dir_all(&home).unwrap();
            std::os::unix::fs::symlink(dir.path().join("certs"), home.join("certs")).unwrap();
            render_server(&home, *port, &[], &[], Stdio::null())
        })
        .collect();
    for port in ports {
        wait_listening(port).await;
    }
    let urls: Vec<String> = ports
        .iter()
        .map(|p| format!("https://127.0.0.1:{p}"))
        .collect();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.server.write_kubeconfig(&kubeconfig).unwrap();
    let metrics_port = free_port();
    let mut controller = controller(dir.path(), &kubeconfig, metrics_port, &urls);

    // Then one replica renders the repository, every time.
    wait_for_color(&cluster, "blue").await;
    let text = metrics(metrics_port).await;
    let answered: Vec<f64> = urls
        .iter()
        .map(|u| counter(&text, "kiln_render_server_requests_total", u))
        .collect();
    let owner = answered.iter().position(|n| *n > 0.0).unwrap();
    let other = 1 - owner;
    assert_eq!(answered[other], 0.0, "both replicas rendered: {text}");

    // When that replica is killed, the next render goes to the other one
    // and the push is synced.
    servers[owner].kill().unwrap();
    servers[owner].wait().unwrap();
    push_color(&repo, "green");
    wait_for_color(&cluster, "green").await;
    let text = metrics(metrics_port).await;
    assert!(
        counter(&text, "kiln_render_server_failovers_total", &urls[owner]) >= 1.0,
        "{text}"
    );
    assert!(
        counter(&text, "kiln_render_server_requests_total", &urls[other]) >= 1.0,
        "{text}"
    );
    let head = repo.rev_parse("HEAD");
    eventually("the new revision Synced", async || {
        let status = app_status(&cluster, "guestbook").await;
        (status["sync"]["revision"] == head.as_str() && status["sync"]["status"] == "Synced")
            .then_some(())
    })
    .await;
    controller.kill().unwrap();
    controller.wait().unwrap();
    servers[other].kill().unwrap();
    servers[other].wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_render_server_refuses_to_start_with_kubernetes_credentials() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("certs")).unwrap();
    write_certs(&dir.path().join("certs"));
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".kube")).unwrap();
    std::fs::write(home.join(".kube/config"), "apiVersion: v1\n").unwrap();
    let home = home.display().to_string();
    for (env, expected) in [
        (
            vec![("KUBECONFIG", "/somewhere/kubeconfig")],
            "KUBECONFIG is set",
        ),
        (vec![("HOME", home.as_str())], "a kubeconfig at"),
    ] {
        let child = render_server(dir.path(), free_port(), &env, &[], Stdio::piped());
        let output = child.into_child().wait_with_output().unwrap();
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("must hold no Kubernetes credentials") && stderr.contains(expected),
            "{stderr}"
        );
    }
}

/// An in-process render server on a free port, with `limits`.
async fn serve(dir: &Path, issued: &Issued, limits: Limits) -> String {
    let server = Arc::new(RenderServer {
        git: GitSource::new(GitConfig::new(dir.join("repos")), Arc::new(Granted)).unwrap(),
        charts: kiln::source::helm::ChartFetcher::new(
            kiln::source::helm::HelmConfig::new(dir.join("charts")),
            Arc::new(kiln::source::git::NoCredentials),
        )
        .unwrap(),
        host: PluginHost::new(HostConfig::default()).unwrap(),
        catalog: Catalog::new(CatalogConfig {
            store: dir.join("plugins"),
            // The policy test names the components built in plugins/dist.
            allow_file_plugins: true,
            ..CatalogConfig::default()
        }),
        cache: RenderCache::new(1 << 20),
        reviews: kiln::policy::ReviewCache::default(),
        allow_file_repositories: false,
        limits,
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(
        tls::server_config(&issued.server_identity()).unwrap(),
    ));
    tokio::spawn(server.serve(
        listener,
        acceptor,
        tokio_util::sync::CancellationToken::new(),
    ));
    format!("https://{address}")
}

fn request(repo_url: &str, padding: usize) -> RenderRequest {
    RenderRequest {
        app: AppRef {
            name: "app".into(),
            namespace: "default".into(),
            project: "default".into(),
            repo_url: repo_url.into(),
            path: String::new(),
        },
        revision: "main".into(),
        chain: vec![RenderStep {
            plugin: kiln::render::remote::PluginDescription {
                name: "big".into(),
                reference: "oci://registry.invalid/x:1".into(),
                world: kiln::plugin::World::Renderer,
                verify: Vec::new(),
                limits: kiln::plugin::Limits::default().into(),
            },
            params: vec![("padding".into(), "x".repeat(padding))],
        }],
        policies: Vec::new(),
        refresh: false,
        repository_credentials: None,
        registry_credentials: Vec::new(),
        ssh_known_hosts: None,
        chart: None,
        helm: None,
        scopes: None,
        cluster: None,
    }
}

fn issued() -> Issued {
    Issued::new(&["127.0.0.1".to_owned()]).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_the_client_certificate_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let issued = issued();
    let url = serve(dir.path(), &issued, Limits::default()).await;
    // The server's CA, but no client certificate.
    let mut roots = tokio_rustls::rustls::RootCertStore::empty();
    for cert in rustls_pem(&issued.ca) {
        roots.add(cert).unwrap();
    }
    let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
    let mut config = tokio_rustls::rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let anonymous = Client::with_tls(&url, config, Limits::default()).unwrap();
    let error = anonymous
        .render(&request("https://git.invalid/x", 0))
        .await
        .unwrap_err();
    assert!(
        matches!(error, ClientError::Unreachable { .. }),
        "{error:?}"
    );

    // A certificate from another CA is refused too.
    let stranger = Issued::new(&["127.0.0.1".to_owned()]).unwrap();
    let mut identity = stranger.client_identity();
    identity.ca = issued.ca.clone().into_bytes();
    let other = Client::new(&url, &identity, Limits::default()).unwrap();
    let error = other
        .render(&request("https://git.invalid/x", 0))
        .await
        .unwrap_err();
    assert!(
        matches!(error, ClientError::Unreachable { .. }),
        "{error:?}"
    );

    // The right certificate gets an answer (here: the server's refusal of
    // a file repository).
    let client = Client::new(&url, &issued.client_identity(), Limits::default()).unwrap();
    refused_as_a_file_repository(client.render(&request("/etc", 0)).await.unwrap_err());
}

fn rustls_pem(pem: &str) -> Vec<tokio_rustls::rustls::pki_types::CertificateDer<'static>> {
    use tokio_rustls::rustls::pki_types::pem::PemObject as _;
    tokio_rustls::rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_request_is_refused_on_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let issued = issued();
    let small = Limits {
        max_request: 4 << 10,
        ..Limits::default()
    };
    let url = serve(dir.path(), &issued, small).await;
    // The server reads no more than its limit.
    let client = Client::new(&url, &issued.client_identity(), Limits::default()).unwrap();
    let error = client
        .render(&request("https://git.invalid/x", 64 << 10))
        .await
        .unwrap_err();
    assert!(
        matches!(error, ClientError::Status { status: 413, .. }),
        "{error:?}"
    );
    // The client sends none past its own.
    let client = Client::new(&url, &issued.client_identity(), small).unwrap();
    let error = client
        .render(&request("https://git.invalid/x", 64 << 10))
        .await
        .unwrap_err();
    assert!(
        matches!(error, ClientError::RequestTooLarge { limit: 4096, .. }),
        "{error:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_answer_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let issued = issued();
    let url = serve(dir.path(), &issued, Limits::default()).await;
    let client = Client::new(
        &url,
        &issued.client_identity(),
        Limits {
            max_response: 16,
            ..Limits::default()
        },
    )
    .unwrap();
    // Any answer (here a refusal) is longer than 16 bytes.
    let error = client.render(&request("/etc", 0)).await.unwrap_err();
    assert!(
        matches!(error, ClientError::ResponseTooLarge { limit: 16, .. }),
        "{error:?}"
    );
}

/// A TCP server that accepts connections and answers nothing for 5 s,
/// then closes them.
fn silent_server() -> (std::net::SocketAddr, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        let until = std::time::Instant::now() + Duration::from_secs(5);
        let mut held = Vec::new();
        while std::time::Instant::now() < until {
            if let Ok(stream) = listener.accept() {
                held.push(stream);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    (address, handle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_hold_on_both_sides() {
    // The client stops waiting for a server that does not answer.
    let issued = issued();
    let (address, _server) = silent_server();
    let client = Client::new(
        &format!("https://{address}"),
        &issued.client_identity(),
        Limits {
            deadline: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            ..Limits::default()
        },
    )
    .unwrap();
    let error = client
        .render(&request("https://git.invalid/x", 0))
        .await
        .unwrap_err();
    assert!(
        matches!(error, ClientError::DeadlineExceeded { .. }),
        "{error:?}"
    );

    // The server stops working on a render past its deadline (here a Git
    // server that never answers) and says so.
    let dir = tempfile::tempdir().unwrap();
    let (git, _git) = silent_server();
    let url = serve(
        dir.path(),
        &issued,
        Limits {
            deadline: Duration::from_secs(1),
            ..Limits::default()
        },
    )
    .await;
    let client = Client::new(&url, &issued.client_identity(), Limits::default()).unwrap();
    let mut slow = request(&format!("git://{git}/repo"), 0);
    slow.chain.clear();
    let error = client.render(&slow).await.unwrap_err();
    match error {
        ClientError::Refused(failure) => {
            assert_eq!(failure.reason, "RenderDeadlineExceeded", "{failure:?}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_routes_each_repository_to_one_replica_and_fails_over() {
    // Given a repository, two live replicas and one that is gone.
    let dir = tempfile::tempdir().unwrap();
    let repo = Fixture::new(dir.path(), "apps");
    repo.commit("first", &[("settings.yaml", CONFIGMAP)]);
    repo.publish();
    let daemon = GitDaemon::start(dir.path());
    let issued = issued();
    for replica in ["a", "b"] {
        std::fs::create_dir_all(dir.path().join(replica)).unwrap();
    }
    let live = [
        serve(&dir.path().join("a"), &issued, Limits::default()).await,
        serve(&dir.path().join("b"), &issued, Limits::default()).await,
    ];
    let gone = format!("https://127.0.0.1:{}", free_port());
    let clients = live
        .iter()
        .chain([&gone])
        .map(|url| Client::new(url, &issued.client_identity(), Limits::default()).unwrap())
        .collect();
    let pool = Pool::new("test pool", clients, PoolConfig::default());
    let mut render = request(&daemon.url("apps"), 0);
    render.chain.clear();
    let keys: Vec<String> = (0..64)
        .map(|i| format!("https://git.example/{i}"))
        .collect();
    let owners: Vec<String> = keys.iter().map(|k| pool.owner(k).unwrap()).collect();
    assert!(owners.contains(&gone), "{owners:?}");

    // Then every repository is rendered by a live replica, the same one
    // each time, and the gone one is passed over once and then skipped.
    let mut failovers = 0;
    for (key, owner) in keys.iter().zip(&owners) {
        let first = pool.render(key, &render).await.unwrap();
        assert_ne!(first.server, gone);
        if *owner == gone {
            failovers += first.failed_over.len();
        } else {
            assert_eq!(first.server, *owner, "{key}");
            assert!(first.failed_over.is_empty());
        }
        let again = pool.render(key, &render).await.unwrap();
        assert_eq!(again.server, first.server, "{key}");
        assert!(
            again.failed_over.is_empty(),
            "{key}: {:?}",
            again.failed_over
        );
        assert_eq!(again.response.commit, repo.rev_parse("HEAD"));
    }
    assert_eq!(
        failovers, 1,
        "the gone replica is tried once, then passed over"
    );
}

/// A policy reading the security team's repository through the render
/// server: the request carries the policy source and its credentials (the
/// server holds none), the application's own policy files change nothing,
/// and without the credentials the enforced policy fails closed naming the
/// repository.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_source_and_its_credentials_travel_with_the_request() {
    use kiln::policy::Mode;
    use kiln::render::remote::{
        PluginDescription, PolicySourceRef, PolicyStepRef, WireCredentials, WireSecret,
    };
    let dir = tempfile::tempdir().unwrap();
    let web =
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 10}\n";
    let policy = |max: u32| {
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n\
             metadata: {{name: replicas}}\nspec:\n  matchConstraints:\n    resourceRules:\n\
             \x20   - {{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}}\n\
             \x20 validations:\n  - expression: object.spec.replicas <= {max}\n"
        )
    };
    let binding = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
                   metadata: {name: replicas}\nspec: {policyName: replicas, validationActions: [Deny]}\n";
    let apps = Fixture::new(dir.path(), "apps");
    apps.commit(
        "app with its own permissive policy",
        &[
            ("web/web.yaml", web),
            ("policy.yaml", &policy(100)),
            ("binding.yaml", binding),
        ],
    );
    apps.publish();
    let policies = Fixture::new(dir.path(), "policies");
    policies.commit(
        "policies",
        &[
            ("vap/policy.yaml", &policy(5)),
            ("vap/binding.yaml", binding),
        ],
    );
    policies.publish();
    let daemon = GitDaemon::start(dir.path());
    let http = support::git::HttpBackend::start(dir.path(), Some("security:t0ken"));
    let issued = issued();
    let url = serve(&dir.path().join("server"), &issued, Limits::default()).await;
    let client = Client::new(&url, &issued.client_identity(), Limits::default()).unwrap();
    let policy_url = http.url("policies");
    let request = |credentials: Option<WireCredentials>| RenderRequest {
        app: AppRef {
            name: "web".into(),
            namespace: "shop".into(),
            project: "secure".into(),
            repo_url: daemon.url("apps"),
            path: "web".into(),
        },
        revision: "main".into(),
        chain: Vec::new(),
        policies: vec![PolicyStepRef {
            plugin: PluginDescription {
                name: "vap".into(),
                reference: support::component("vap").display().to_string(),
                world: kiln::plugin::World::Policy,
                verify: vec![serde_json::from_value(json!({"insecure": true})).unwrap()],
                limits: kiln::plugin::Limits::default().into(),
            },
            settings: vec![
                ("policy".into(), "policy.yaml".into()),
                ("binding".into(), "binding.yaml".into()),
            ],
            mode: Mode::Enforce,
            source: Some(PolicySourceRef {
                repo_url: policy_url.clone(),
                revision: "main".into(),
                path: "vap".into(),
                refresh: false,
                credentials,
            }),
        }],
        refresh: false,
        repository_credentials: None,
        registry_credentials: Vec::new(),
        ssh_known_hosts: None,
        chart: None,
        helm: None,
        scopes: None,
        cluster: None,
    };

    let answer = client
        .render(&request(Some(WireCredentials::Basic {
            username: "security".into(),
            password: WireSecret("t0ken".into()),
        })))
        .await
        .unwrap();
    assert!(answer.blocked, "{answer:?}");
    let findings = serde_json::to_string(&answer.policy).unwrap();
    assert!(findings.contains("object.spec.replicas <= 5"), "{findings}");

    // A new server (no credentials remembered): the request brings none.
    let url = serve(&dir.path().join("server2"), &issued, Limits::default()).await;
    let client = Client::new(&url, &issued.client_identity(), Limits::default()).unwrap();
    let answer = client.render(&request(None)).await.unwrap();
    assert!(
        answer.blocked,
        "an enforced policy without its source fails closed"
    );
    let findings = serde_json::to_string(&answer.policy).unwrap();
    assert!(
        findings.contains(&format!("cannot read its policy source {policy_url}")),
        "{findings}"
    );
}

/// Issue 36: connections that never start their TLS handshake cannot
/// starve a client. From one address (127.0.0.2), 40 idle TCP connections
/// get at most 2 handshakes in flight (the rest are closed at once); from
/// many, at most 4 handshakes run, each for 300 ms. A client with the
/// certificate, from another address, is still answered (its render is
/// refused as this request must be: a file repository).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_idle_connections_do_not_starve_a_client() {
    let dir = tempfile::tempdir().unwrap();
    let issued = issued();
    let limits = Limits {
        max_connections: 16,
        max_handshakes: 4,
        max_handshakes_per_peer: 2,
        connect_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let url = serve(dir.path(), &issued, limits).await;
    let address: std::net::SocketAddr = url.trim_start_matches("https://").parse().unwrap();
    let mut idle = Vec::new();
    for _ in 0..40 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        idle.push(socket.connect(address).await.unwrap());
    }
    let client = Client::new(&url, &issued.client_identity(), Limits::default()).unwrap();
    refused_as_a_file_repository(client.render(&request("/etc", 0)).await.unwrap_err());
    // The server closed the idle connections: reading one gives its end
    // (or a reset), not a wait.
    let mut closed = 0;
    for stream in &mut idle {
        let mut byte = [0u8; 1];
        use tokio::io::AsyncReadExt as _;
        if let Ok(Ok(0) | Err(_)) =
            tokio::time::timeout(Duration::from_secs(2), stream.read(&mut byte)).await
        {
            closed += 1;
        }
    }
    assert_eq!(closed, 40, "idle connections dropped");
}

/// The render server's answer to a request for a repository on its own
/// filesystem: refused with FileRepositoryNotAllowed.
fn refused_as_a_file_repository(error: ClientError) {
    match error {
        ClientError::Refused(failure) => {
            assert_eq!(failure.reason, "FileRepositoryNotAllowed", "{failure:?}")
        }
        other => panic!("{other:?}"),
    }
}

/// CPU time this process has used (user and system), from `/proc/self/stat`.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command's closing parenthesis; utime and stime are
    // the 14th and 15th of the line, in clock ticks (100 a second).
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<u64> = rest
        .split(' ')
        .skip(11)
        .take(2)
        .map(|n| n.parse().unwrap())
        .collect();
    Duration::from_millis((fields[0] + fields[1]) * 10)
}

/// A repository of `files` ConfigMaps, each holding a list of `items`
/// numbers, behind a git daemon; and a directory render of it.
fn flooded_repository(dir: &Path, files: usize, items: usize) -> (GitDaemon, RenderRequest, usize) {
    let text = |n: usize| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: f{n}}}\nx: {}\n",
            support::flood(items)
        )
    };
    let texts: Vec<(String, String)> = (0..files)
        .map(|n| (format!("f{n:03}.yaml"), text(n)))
        .collect();
    let size = texts.iter().map(|(_, t)| t.len()).sum();
    let refs: Vec<(&str, &str)> = texts
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let repo = Fixture::new(dir, "flood");
    repo.commit("flood", &refs);
    repo.publish();
    let daemon = GitDaemon::start(dir);
    let mut render = request(&daemon.url("flood"), 0);
    render.chain.clear();
    (daemon, render, size)
}

/// Issue 36, through the render server: two files of 2,000,000 alias-free
/// items each (the YAML flood that took the server to gigabytes) are
/// refused at the first, naming it, and the server's memory stays a small
/// multiple of the input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_alias_free_yaml_floods_are_refused_within_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let issued = issued();
    let (_daemon, render, size) = flooded_repository(dir.path(), 2, 2_000_000);
    let baseline = support::status_kib("VmRSS");
    let url = serve(dir.path(), &issued, Limits::default()).await;
    let client = Client::new(&url, &issued.client_identity(), Limits::default()).unwrap();
    match client.render(&render).await.unwrap_err() {
        ClientError::Refused(failure) => assert!(
            failure.message.contains("f000.yaml")
                && failure.message.contains("more than 1000000 nodes"),
            "{failure:?}"
        ),
        other => panic!("{other:?}"),
    }
    let input_kib = size as u64 / 1024;
    let grown = support::status_kib("VmHWM").saturating_sub(baseline);
    assert!(
        grown < 16 * input_kib,
        "peak grew by {grown} KiB for {input_kib} KiB of input"
    );
}

/// Issue 36: past a render's deadline the server answers, and the work it
/// handed to the blocking pool stops too (it used to parse on for tens of
/// seconds). Sixty files, each within every bound, take seconds of CPU to
/// parse; the deadline is 1 s. In the three seconds after the answer the
/// process uses little CPU: the directory renderer stopped at its next
/// file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_stops_when_the_render_s_deadline_passes() {
    let dir = tempfile::tempdir().unwrap();
    let issued = issued();
    let (_daemon, render, _) = flooded_repository(dir.path(), 60, 60_000);
    let deadline = Duration::from_secs(1);
    let url = serve(
        dir.path(),
        &issued,
        Limits {
            deadline,
            ..Limits::default()
        },
    )
    .await;
    let client = Client::new(&url, &issued.client_identity(), Limits::default()).unwrap();
    let started = std::time::Instant::now();
    match client.render(&render).await.unwrap_err() {
        ClientError::Refused(failure) => {
            assert_eq!(failure.reason, "RenderDeadlineExceeded", "{failure:?}")
        }
        other => panic!("{other:?}"),
    }
    eprintln!("answered after {:?}", started.elapsed());
    let before = cpu_time();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let spent = cpu_time() - before;
    eprintln!("{spent:?} of CPU in the 3 s after the answer");
    assert!(
        spent < Duration::from_millis(1500),
        "{spent:?} of CPU in the 3 s after the deadline's answer"
    );
}

#[test]
fn kiln_certs_keeps_keys_private_and_never_replaces_a_ca_unasked() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("certs");
    let certs = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_kiln"))
            .args(["certs", "--out", out.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap()
    };
    let first = certs(&[]);
    assert!(first.status.success(), "{first:?}");
    for key in ["server.key", "client.key"] {
        let mode = std::fs::metadata(out.join(key))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{key} is readable by others: {mode:o}");
    }
    let ca = std::fs::read(out.join("ca.crt")).unwrap();

    let again = certs(&[]);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("ca.crt") && stderr.contains("--force"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(out.join("ca.crt")).unwrap(),
        ca,
        "the CA is kept"
    );

    let forced = certs(&["--force"]);
    assert!(forced.status.success(), "{forced:?}");
    assert_ne!(std::fs::read(out.join("ca.crt")).unwrap(), ca, "a new CA");
}
