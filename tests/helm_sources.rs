//! Helm charts fetched by the host (issue 17): from a Helm repository served
//! by the test on loopback (`support::chart_repo`), from an OCI registry
//! (Debian's `docker-registry`), with their dependencies; hostile archives,
//! digest mismatches and credential leaks refused; and the `helm` plugin
//! rendering what was fetched. Every chart is written here.

mod support;

use std::sync::Arc;

use kiln::plugin::{Plugin, World};
use kiln::render::Step;
use kiln::source::git::{Credentials, PrefixCredentials, Secret};
use kiln::source::helm::{ChartError, ChartFetcher, ChartRef, FetchedChart, HelmConfig};
use serde_json::Value;
use support::chart_repo::{ChartRepo, index, package, sha256};

fn plugin() -> Plugin {
    support::host()
        .load_file(&support::component("helm"), World::Renderer, None)
        .unwrap()
}

/// A chart whose one ConfigMap tells its version and values.
fn web(version: &str) -> Vec<u8> {
    package(
        "web",
        &[
            (
                "Chart.yaml",
                &format!("apiVersion: v2\nname: web\nversion: {version}\n"),
            ),
            ("values.yaml", "replicas: 1\n"),
            (
                "templates/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-web\n\
                 data:\n  version: {{ .Chart.Version | quote }}\n  replicas: {{ .Values.replicas | quote }}\n",
            ),
        ],
    )
}

/// A repository with web 1.1.0, 1.2.3, 1.2.10 and 1.3.0-rc.1, each pinned
/// by digest.
fn repository() -> ChartRepo {
    let repo = ChartRepo::start(None);
    let mut entries = Vec::new();
    for v in ["1.1.0", "1.2.3", "1.2.10", "1.3.0-rc.1"] {
        let bytes = web(v);
        entries.push(("web", v, format!("web-{v}.tgz"), Some(sha256(&bytes))));
        repo.put(&format!("web-{v}.tgz"), bytes);
    }
    let entries: Vec<_> = entries
        .iter()
        .map(|(n, v, u, d)| (*n, *v, u.as_str(), d.clone()))
        .collect();
    repo.put("index.yaml", index(&entries));
    repo
}

fn fetcher(cache: &std::path::Path) -> ChartFetcher {
    ChartFetcher::anonymous(HelmConfig::new(cache.to_path_buf())).unwrap()
}

async fn render(chart: &FetchedChart, params: &[(&str, &str)]) -> Result<Vec<Value>, String> {
    let chain = [Step::Plugin {
        plugin: plugin(),
        params: support::params(params),
    }];
    kiln::render::render(chart.view.clone(), &support::context("web", ""), &chain)
        .await
        .map(|r| {
            r.objects
                .iter()
                .map(|o| Value::Object(o.value().clone()))
                .collect()
        })
        .map_err(|e| format!("{e:#}"))
}

fn repo_chart(repo: &ChartRepo, chart: &str, version: &str) -> ChartRef {
    ChartRef::new(Some(&repo.url()), chart, version).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_chart_chosen_by_a_semver_range_renders() {
    let repo = repository();
    let cache = tempfile::tempdir().unwrap();
    let chart = fetcher(cache.path())
        .fetch(&repo_chart(&repo, "web", "1.2.*"))
        .await
        .unwrap();
    assert_eq!(
        chart.version, "1.2.10",
        "the highest 1.2.x, compared as numbers"
    );
    let objects = render(&chart, &[("releaseName", "prod"), ("set", "replicas=3")])
        .await
        .unwrap();
    assert_eq!(objects.len(), 1);
    assert_eq!(objects[0]["metadata"]["name"], "prod-web");
    assert_eq!(objects[0]["data"]["version"], "1.2.10");
    assert_eq!(objects[0]["data"]["replicas"], "3");
    // Helm's constraint forms.
    for (constraint, want) in [
        ("~1.1", "1.1.0"),
        ("^1.2", "1.2.10"),
        (">=1.0 <1.2", "1.1.0"),
        ("", "1.2.10"),
        (">=1.3.0-0", "1.3.0-rc.1"),
        ("1.2.3", "1.2.3"),
    ] {
        let chart = fetcher(cache.path())
            .fetch(&repo_chart(&repo, "web", constraint))
            .await
            .unwrap();
        assert_eq!(chart.version, want, "{constraint:?}");
    }
    let err = fetcher(cache.path())
        .fetch(&repo_chart(&repo, "web", "2.*"))
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!("{}: chart `web` has no version matching `2.*`", repo.url())
    );
}

#[tokio::test]
async fn an_archive_that_does_not_match_its_index_digest_is_refused() {
    let repo = ChartRepo::start(None);
    let bytes = web("1.0.0");
    repo.put("web-1.0.0.tgz", bytes.clone());
    let wrong = sha256(b"something else");
    repo.put(
        "index.yaml",
        index(&[("web", "1.0.0", "web-1.0.0.tgz", Some(wrong.clone()))]),
    );
    let cache = tempfile::tempdir().unwrap();
    let err = fetcher(cache.path())
        .fetch(&repo_chart(&repo, "web", "1.0.0"))
        .await
        .unwrap_err();
    assert!(matches!(err, ChartError::DigestMismatch { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!(
            "{}/web-1.0.0.tgz: digest mismatch: index.yaml pins sha256:{wrong}, the archive is sha256:{}",
            repo.url(),
            sha256(&bytes)
        )
    );
    assert_eq!(
        std::fs::read_dir(cache.path())
            .unwrap()
            .filter(|e| e
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("sha256-"))
            .count(),
        0,
        "nothing unpacked"
    );
}

/// Serves one archive as `evil` 1.0.0, pinned by its true digest, and
/// returns the fetch's error.
async fn refused(archive: Vec<u8>, config: impl FnOnce(&mut HelmConfig)) -> String {
    let repo = ChartRepo::start(None);
    repo.put(
        "index.yaml",
        index(&[("evil", "1.0.0", "evil-1.0.0.tgz", Some(sha256(&archive)))]),
    );
    repo.put("evil-1.0.0.tgz", archive);
    let cache = tempfile::tempdir().unwrap();
    let mut settings = HelmConfig::new(cache.path().to_path_buf());
    config(&mut settings);
    let err = ChartFetcher::anonymous(settings)
        .unwrap()
        .fetch(&repo_chart(&repo, "evil", "1.0.0"))
        .await
        .expect_err("refused");
    format!("{err}")
}

#[tokio::test]
async fn hostile_archives_are_refused_with_a_clear_error() {
    let file = tar::EntryType::Regular;
    let chart_yaml: &[u8] = b"apiVersion: v2\nname: evil\nversion: 1.0.0\n";

    let err = refused(
        support::tgz::raw(&[
            ("evil/Chart.yaml", file, chart_yaml),
            ("evil/../../../../tmp/kiln-helm-escape", file, b"pwned"),
        ]),
        |_| {},
    )
    .await;
    assert!(
        err.ends_with(
            "evil-1.0.0.tgz: evil/../../../../tmp/kiln-helm-escape: path escapes the archive"
        ),
        "{err}"
    );

    let err = refused(
        support::tgz::raw(&[("/etc/cron.d/evil", file, b"* * * * * root true")]),
        |_| {},
    )
    .await;
    assert!(
        err.ends_with("/etc/cron.d/evil: path escapes the archive"),
        "{err}"
    );

    let err = refused(
        support::tgz::raw(&[
            ("evil/Chart.yaml", file, chart_yaml),
            ("evil/values.yaml", tar::EntryType::Symlink, b"/etc/shadow"),
        ]),
        |_| {},
    )
    .await;
    assert!(
        err.ends_with("evil/values.yaml: symlink entries are refused in a chart archive"),
        "{err}"
    );

    let err = refused(
        support::tgz::raw(&[("evil/templates/x", tar::EntryType::Link, b"/etc/shadow")]),
        |_| {},
    )
    .await;
    assert!(err.contains("hard link entries are refused"), "{err}");

    // A gzip bomb: 64 MiB of zeros in a few dozen KiB.
    let zeros = vec![0u8; 64 << 20];
    let bomb = support::tgz::raw(&[
        ("evil/Chart.yaml", file, chart_yaml),
        ("evil/zeros", file, &zeros),
    ]);
    assert!(bomb.len() < 1 << 20);
    let err = refused(bomb, |c| c.archive.uncompressed = 8 << 20).await;
    assert!(
        err.ends_with(
            "evil-1.0.0.tgz: expands to more than the 8388608-byte limit for an unpacked chart"
        ),
        "{err}"
    );

    // More files than allowed.
    let names: Vec<String> = (0..50).map(|i| format!("evil/templates/f{i}")).collect();
    let many: Vec<(&str, tar::EntryType, &[u8])> = names
        .iter()
        .map(|n| (n.as_str(), file, &b"x"[..]))
        .collect();
    let err = refused(support::tgz::raw(&many), |c| c.archive.entries = 20).await;
    assert!(
        err.ends_with("evil-1.0.0.tgz: more than 20 entries"),
        "{err}"
    );
}

#[tokio::test]
async fn an_archive_larger_than_the_limit_is_refused_before_it_is_read() {
    // Hex of a digest chain: incompressible enough.
    let noise: String = (0..4000u32).map(|i| sha256(&i.to_le_bytes())).collect();
    let big = package(
        "evil",
        &[
            ("Chart.yaml", "apiVersion: v2\nname: evil\nversion: 1.0.0\n"),
            ("files/noise", &noise),
        ],
    );
    assert!(big.len() > 64 << 10, "{}", big.len());
    let err = refused(big, |c| c.archive.compressed = 64 << 10).await;
    assert!(
        err.ends_with("evil-1.0.0.tgz: larger than the 65536-byte limit"),
        "{err}"
    );
}

#[tokio::test]
async fn credentials_go_to_the_repository_origin_only() {
    // The repository wants credentials; its index points the archive at
    // another origin (a CDN), which must not see them.
    let repo = ChartRepo::start(Some("alice:s3cret"));
    let cdn = ChartRepo::start(None);
    let bytes = web("1.0.0");
    cdn.put("web-1.0.0.tgz", bytes.clone());
    let local = web("2.0.0");
    repo.put("web-2.0.0.tgz", local.clone());
    repo.put(
        "index.yaml",
        index(&[
            (
                "web",
                "1.0.0",
                &format!("{}/web-1.0.0.tgz", cdn.url()),
                Some(sha256(&bytes)),
            ),
            ("web", "2.0.0", "web-2.0.0.tgz", Some(sha256(&local))),
        ]),
    );
    let cache = tempfile::tempdir().unwrap();
    let anonymous = fetcher(cache.path())
        .fetch(&repo_chart(&repo, "web", "1.0.0"))
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        anonymous,
        format!(
            "{}/index.yaml: unauthorized (401): check the repository's credentials",
            repo.url()
        )
    );
    let credentials = PrefixCredentials::new().with(
        repo.url(),
        Credentials::Basic {
            username: "alice".into(),
            password: Secret::new("s3cret"),
        },
    );
    let fetcher = ChartFetcher::new(
        HelmConfig::new(cache.path().to_path_buf()),
        Arc::new(credentials),
    )
    .unwrap();
    let chart = fetcher
        .fetch(&repo_chart(&repo, "web", "1.0.0"))
        .await
        .unwrap();
    assert_eq!(chart.version, "1.0.0");
    let chart = fetcher
        .fetch(&repo_chart(&repo, "web", "2.0.0"))
        .await
        .unwrap();
    assert_eq!(chart.version, "2.0.0");
    assert!(
        cdn.requests().iter().all(|r| !r.authorized),
        "the CDN saw credentials: {:?}",
        cdn.requests()
    );
    assert_eq!(cdn.count("/web-1.0.0.tgz", 200), 1);
    assert!(
        repo.requests()
            .iter()
            .filter(|r| r.status == 200)
            .all(|r| r.authorized),
        "{:?}",
        repo.requests()
    );
    assert_eq!(repo.count("/web-2.0.0.tgz", 200), 1);
}

#[tokio::test]
async fn another_repositorys_index_cannot_take_a_private_chart_from_the_cache() {
    // A private chart fetched with credentials is in the cache; another
    // repository's index names the same archive (its URL on the private
    // origin, its digest): it must not be served from the cache.
    let private = ChartRepo::start(Some("alice:s3cret"));
    let bytes = web("1.0.0");
    private.put("web-1.0.0.tgz", bytes.clone());
    private.put(
        "index.yaml",
        index(&[("web", "1.0.0", "web-1.0.0.tgz", Some(sha256(&bytes)))]),
    );
    let hostile = ChartRepo::start(None);
    hostile.put(
        "index.yaml",
        index(&[(
            "web",
            "1.0.0",
            &format!("{}/web-1.0.0.tgz", private.url()),
            Some(sha256(&bytes)),
        )]),
    );
    let cache = tempfile::tempdir().unwrap();
    let credentials = PrefixCredentials::new().with(
        private.url(),
        Credentials::Basic {
            username: "alice".into(),
            password: Secret::new("s3cret"),
        },
    );
    let fetcher = ChartFetcher::new(
        HelmConfig::new(cache.path().to_path_buf()),
        Arc::new(credentials),
    )
    .unwrap();
    fetcher
        .fetch(&repo_chart(&private, "web", "1.0.0"))
        .await
        .unwrap();
    let taken = fetcher.fetch(&repo_chart(&hostile, "web", "1.0.0")).await;
    assert!(
        taken.is_err(),
        "the hostile repository got the private chart from the cache"
    );
    assert_eq!(
        private
            .requests()
            .iter()
            .filter(|r| r.authorized && r.path == "/web-1.0.0.tgz")
            .count(),
        1,
        "{:?}",
        private.requests()
    );
}

#[tokio::test]
async fn polling_an_unchanged_index_fetches_no_archive() {
    let repo = repository();
    let cache = tempfile::tempdir().unwrap();
    let fetcher = fetcher(cache.path());
    let reference = repo_chart(&repo, "web", "1.2.*");
    let first = fetcher.fetch(&reference).await.unwrap();
    for _ in 0..3 {
        let again = fetcher.fetch(&reference).await.unwrap();
        assert_eq!(again.digest, first.digest);
    }
    assert_eq!(repo.count("/index.yaml", 200), 1, "{:?}", repo.requests());
    assert_eq!(
        repo.count("/index.yaml", 304),
        3,
        "If-None-Match on every poll"
    );
    assert_eq!(repo.count("/web-1.2.10.tgz", 200), 1, "the archive once");

    // Another process with the same cache: the index again, no archive.
    let other = self::fetcher(cache.path());
    other.fetch(&reference).await.unwrap();
    assert_eq!(repo.count("/index.yaml", 200), 2);
    assert_eq!(
        repo.count("/web-1.2.10.tgz", 200),
        1,
        "found by digest in the cache"
    );

    // A new version: fetched once.
    let bytes = web("1.2.11");
    repo.put("web-1.2.11.tgz", bytes.clone());
    repo.put(
        "index.yaml",
        index(&[
            (
                "web",
                "1.2.10",
                "web-1.2.10.tgz",
                Some(sha256(&web("1.2.10"))),
            ),
            ("web", "1.2.11", "web-1.2.11.tgz", Some(sha256(&bytes))),
        ]),
    );
    let newer = fetcher.fetch(&reference).await.unwrap();
    assert_eq!(newer.version, "1.2.11");
    assert_eq!(repo.count("/web-1.2.11.tgz", 200), 1);
}

/// Issue 36: a chart naming its dependencies' repository several ways
/// (`HTTP://`, a trailing `/`) made the render server fetch and keep one
/// index per spelling, forever. The index cache is keyed by the normalized
/// URL (and the chart): one download, the others answered `304`; and it is
/// bounded in bytes (an entry over the budget is not kept).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_one_repository_spelled_six_ways_is_one_cache_entry() {
    let repo = repository();
    let cache = tempfile::tempdir().unwrap();
    let fetcher = fetcher(cache.path());
    let url = repo.url();
    let rest = url.strip_prefix("http://").unwrap();
    for spelling in [
        format!("http://{rest}"),
        format!("HTTP://{rest}"),
        format!("http://{rest}/"),
        format!("hTTp://{rest}//"),
        format!("Http://{rest}/"),
        format!("http://{rest}"),
    ] {
        let index = fetcher.index(&spelling, "web").await.unwrap();
        assert_eq!(
            index.entries.keys().collect::<Vec<_>>(),
            ["web"],
            "{spelling}"
        );
    }
    assert_eq!(repo.count("/index.yaml", 200), 1, "{:?}", repo.requests());
    assert_eq!(repo.count("/index.yaml", 304), 5, "{:?}", repo.requests());

    // A budget smaller than one chart's entries keeps nothing.
    let mut config = HelmConfig::new(cache.path().join("other"));
    config.index_cache_bytes = 16;
    let small = ChartFetcher::anonymous(config).unwrap();
    small.index(&url, "web").await.unwrap();
    small.index(&url, "web").await.unwrap();
    assert_eq!(repo.count("/index.yaml", 200), 3, "{:?}", repo.requests());
}

/// The chart `cache` at `version`: a ConfigMap naming its version and its
/// `size` value.
fn cache_chart(version: &str) -> Vec<u8> {
    package(
        "cache",
        &[
            (
                "Chart.yaml",
                &format!("apiVersion: v2\nname: cache\nversion: {version}\n"),
            ),
            ("values.yaml", "size: 1\n"),
            (
                "templates/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cache\n\
                 data:\n  version: {{ .Chart.Version | quote }}\n  size: {{ .Values.size | quote }}\n",
            ),
        ],
    )
}

/// Publishes `cache` 0.9.0 and 0.9.5 and `app` 1.0.0 of `app_files` in
/// `repo`, then fetches `app` 1.0.0 and the dependencies it lacks (into a
/// cache directory that lives as long as the chart is used).
async fn fetch_app_beside_cache(
    repo: &ChartRepo,
    app_files: &[(&str, &str)],
) -> (FetchedChart, tempfile::TempDir) {
    let (old, new) = (cache_chart("0.9.0"), cache_chart("0.9.5"));
    repo.put("cache-0.9.0.tgz", old.clone());
    repo.put("cache-0.9.5.tgz", new.clone());
    let app = package("app", app_files);
    repo.put("app-1.0.0.tgz", app.clone());
    repo.put(
        "index.yaml",
        index(&[
            ("app", "1.0.0", "app-1.0.0.tgz", Some(sha256(&app))),
            ("cache", "0.9.0", "cache-0.9.0.tgz", Some(sha256(&old))),
            ("cache", "0.9.5", "cache-0.9.5.tgz", Some(sha256(&new))),
        ]),
    );
    let cache = tempfile::tempdir().unwrap();
    let chart = fetcher(cache.path())
        .fetch(&repo_chart(repo, "app", "1.0.0"))
        .await
        .unwrap();
    (chart, cache)
}

/// A `Chart.lock` (or `requirements.lock`) pinning `cache` at `version`.
fn cache_lock(repo: &ChartRepo, version: &str) -> String {
    format!(
        "dependencies:\n- name: cache\n  version: {version}\n  repository: {}\n\
         digest: sha256:0000000000000000000000000000000000000000000000000000000000000000\n",
        repo.url()
    )
}

/// Publishes `app` at `version` (its files) as the only chart of `repo`,
/// and the error fetching it gives.
async fn fetch_error(repo: &ChartRepo, version: &str, files: &[(&str, &str)]) -> String {
    let app = package("app", files);
    let archive = format!("app-{version}.tgz");
    repo.put(&archive, app.clone());
    repo.put(
        "index.yaml",
        index(&[("app", version, &archive, Some(sha256(&app)))]),
    );
    fetcher(tempfile::tempdir().unwrap().path())
        .fetch(&repo_chart(repo, "app", version))
        .await
        .unwrap_err()
        .to_string()
}

const APP_TEMPLATE: (&str, &str) = (
    "templates/app.yaml",
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-app\n",
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependency_declared_but_not_vendored_is_fetched_at_its_locked_version() {
    let repo = ChartRepo::start(None);
    let chart_yaml = format!(
        "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n\
         - name: cache\n  version: \"~0.9\"\n  repository: {}\n",
        repo.url()
    );
    let (chart, _cache) = fetch_app_beside_cache(
        &repo,
        &[
            ("Chart.yaml", &chart_yaml),
            ("Chart.lock", &cache_lock(&repo, "0.9.0")),
            ("values.yaml", "cache:\n  size: 7\n"),
            APP_TEMPLATE,
        ],
    )
    .await;
    assert_eq!(
        chart.dependencies,
        [("charts/cache".to_owned(), "0.9.0".to_owned())],
        "Chart.lock's version, not the newest match of Chart.yaml's range"
    );
    let objects = render(&chart, &[("releaseName", "r")]).await.unwrap();
    let names: Vec<&str> = objects
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["r-cache", "r-app"],
        "Helm's order: by template path"
    );
    assert_eq!(objects[0]["data"]["version"], "0.9.0");
    assert_eq!(
        objects[0]["data"]["size"], "7",
        "the parent's values reach it"
    );

    // A dependency whose archive does not match the index is refused, and
    // the error names the chart and the dependency.
    repo.put("cache-0.9.0.tgz", cache_chart("0.9.0-tampered"));
    let err = fetcher(tempfile::tempdir().unwrap().path())
        .fetch(&repo_chart(&repo, "app", "1.0.0"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("app: dependency `cache`: ") && err.contains("digest mismatch"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apiversion_v1_charts_requirements_are_fetched_at_their_locked_version() {
    let repo = ChartRepo::start(None);
    // Helm 2's layout: Chart.yaml without dependencies, requirements.yaml
    // and requirements.lock beside it; a stale Chart.lock is read first
    // by Helm's loader, so requirements.lock's pin holds.
    let requirements = format!(
        "dependencies:\n- name: cache\n  version: \"~0.9\"\n  repository: {}/\n",
        repo.url()
    );
    let (chart, _cache) = fetch_app_beside_cache(
        &repo,
        &[
            ("Chart.yaml", "apiVersion: v1\nname: app\nversion: 1.0.0\n"),
            ("requirements.yaml", &requirements),
            ("Chart.lock", &cache_lock(&repo, "0.9.5")),
            ("requirements.lock", &cache_lock(&repo, "0.9.0")),
            APP_TEMPLATE,
        ],
    )
    .await;
    assert_eq!(
        chart.dependencies,
        [("charts/cache".to_owned(), "0.9.0".to_owned())]
    );
    let objects = render(&chart, &[("releaseName", "r")]).await.unwrap();
    let versions: Vec<(&str, &Value)> = objects
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap(),
                &o["data"]["version"],
            )
        })
        .collect();
    assert_eq!(
        versions,
        [("r-cache", &Value::from("0.9.0")), ("r-app", &Value::Null)]
    );

    // requirements.yaml names a `helm repo add` alias: refused, naming it.
    let err = fetch_error(
        &repo,
        "1.0.1",
        &[
            ("Chart.yaml", "apiVersion: v1\nname: app\nversion: 1.0.1\n"),
            (
                "requirements.yaml",
                "dependencies:\n- name: cache\n  version: 0.9.0\n  repository: \"@stable\"\n",
            ),
        ],
    )
    .await;
    assert!(
        err.starts_with("requirements.yaml: dependency `cache`: repository `@stable`"),
        "{err}"
    );
}

#[tokio::test]
async fn a_dependency_named_by_a_helm_repo_alias_is_refused_with_a_hint() {
    let repo = ChartRepo::start(None);
    let err = fetch_error(
        &repo,
        "1.0.0",
        &[(
            "Chart.yaml",
            "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n- name: db\n  version: 1.0.0\n  repository: \"@bitnami\"\n",
        )],
    )
    .await;
    assert_eq!(
        err,
        "Chart.yaml: dependency `db`: repository `@bitnami` is a name from `helm repo add`; write its URL, or vendor the chart in charts/"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oci_chart_renders_by_tag_and_by_constraint() {
    let Some(binary) = support::require(support::Tool::DockerRegistry) else {
        return;
    };
    let registry = support::registry::Registry::start(&binary, None);
    let host = registry.host();
    support::registry::push_chart(&host, "charts/web", "1.0.0", web("1.0.0"), None).await;
    support::registry::push_chart(&host, "charts/web", "1.1.0", web("1.1.0"), None).await;
    support::registry::push_chart(
        &host,
        "charts/web",
        "2.0.0-beta.1",
        web("2.0.0-beta.1"),
        None,
    )
    .await;
    let cache = tempfile::tempdir().unwrap();
    let fetcher = fetcher(cache.path());

    let exact = ChartRef::new(None, &format!("oci://{host}/charts/web"), "1.0.0").unwrap();
    let chart = fetcher.fetch(&exact).await.unwrap();
    assert_eq!(chart.version, "1.0.0");
    assert!(
        chart
            .source
            .starts_with(&format!("oci://{host}/charts/web@sha256:"))
    );
    let objects = render(&chart, &[("releaseName", "oci")]).await.unwrap();
    assert_eq!(objects[0]["data"]["version"], "1.0.0");

    let ranged = ChartRef::new(Some(&format!("oci://{host}/charts")), "web", "^1").unwrap();
    let chart = fetcher.fetch(&ranged).await.unwrap();
    assert_eq!(chart.version, "1.1.0", "the highest release tag matching");

    // Pinned by manifest digest: what was resolved is what is fetched.
    let pinned = ChartRef::new(
        None,
        &format!("oci://{host}/charts/web@{}", chart.digest),
        "",
    )
    .unwrap();
    assert_eq!(fetcher.fetch(&pinned).await.unwrap().digest, chart.digest);

    // Not a chart: a plugin-shaped artifact.
    let err = fetcher
        .fetch(&ChartRef::new(None, &format!("oci://{host}/charts/none:1.0.0"), "").unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("not found"), "{err}");
}

#[test]
fn kiln_render_fetches_a_chart_from_a_repository() {
    let repo = repository();
    let home = tempfile::tempdir().unwrap();
    let helm = support::component("helm");
    let out = support::kiln_as_user(
        home.path(),
        home.path(),
        &[
            "render",
            "--chart",
            "web",
            "--repo",
            &repo.url(),
            "--version",
            "1.2.*",
            "--plugin",
            helm.to_str().unwrap(),
            "--param",
            "releaseName=cli",
        ],
    );
    let text = support::assert_success(&out);
    assert!(text.contains("name: cli-web"), "{text}");
    assert!(text.contains("version: 1.2.10"), "{text}");
    assert!(
        home.path().join(".cache/kiln/charts").is_dir(),
        "the chart cache lives with Kiln's other caches"
    );

    let out = support::kiln_as_user(
        home.path(),
        home.path(),
        &[
            "render",
            "--chart",
            "web",
            "--repo",
            &repo.url(),
            "--version",
            "9.*",
            "--plugin",
            helm.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("chart `web` has no version matching `9.*`"),
        "{stderr}"
    );
}

#[test]
fn chart_references_are_checked_when_parsed() {
    let bad =
        |repo: Option<&str>, chart: &str| ChartRef::new(repo, chart, "").unwrap_err().to_string();
    assert!(bad(None, "web").contains("a chart name needs a repository URL"));
    assert!(bad(Some("https://r"), "../web").contains("one path segment"));
    assert!(bad(Some("ftp://r"), "web").contains("starts with https://, http:// or oci://"));
    assert_eq!(
        ChartRef::new(None, "oci://reg:5000/charts/web:1.2.3", "").unwrap(),
        ChartRef::Oci {
            repository: "reg:5000/charts/web".into(),
            version: "1.2.3".into()
        }
    );
    assert_eq!(
        ChartRef::new(Some("oci://reg/charts/"), "web", "1.*").unwrap(),
        ChartRef::Oci {
            repository: "reg/charts/web".into(),
            version: "1.*".into()
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kiln_render_reads_an_oci_registry_written_as_argo_cd_does_with_enable_oci() {
    let Some(binary) = support::require(support::Tool::DockerRegistry) else {
        return;
    };
    let registry = support::registry::Registry::start(&binary, None);
    let host = registry.host();
    support::registry::push_chart(&host, "charts/web", "1.0.0", web("1.0.0"), None).await;
    let home = tempfile::tempdir().unwrap();
    let helm = support::component("helm");
    let repo = format!("{host}/charts");
    let run = |extra: &'static [&'static str]| {
        let mut args = vec![
            "render",
            "--chart",
            "web",
            "--repo",
            &repo,
            "--version",
            "1.0.0",
            "--plugin",
            helm.to_str().unwrap(),
            "--param",
            "releaseName=argo",
        ];
        args.extend_from_slice(extra);
        support::kiln_as_user(home.path(), home.path(), &args)
    };

    // `registry/path` and --enable-oci, as `argocd repo add --enable-oci`.
    let out = tokio::task::block_in_place(|| run(&["--enable-oci"]));
    let text = support::assert_success(&out);
    assert!(text.contains("name: argo-web"), "{text}");
    assert!(text.contains("version: 1.0.0"), "{text}");

    // Without it the URL is refused, and the error says what to write.
    let out = tokio::task::block_in_place(|| run(&[]));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--enable-oci"), "{stderr}");
    assert!(stderr.contains(&format!("oci://{repo}")), "{stderr}");
}
