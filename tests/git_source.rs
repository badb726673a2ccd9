//! The Git source engine against real Git servers started here: `git daemon`
//! (git://), `git http-backend` behind a CGI shim (smart HTTP, with basic
//! auth) and file://.

mod support;

use std::sync::Arc;
use std::time::Duration;

use kiln::source::git::{
    CommitId, Credentials, GitConfig, GitError, GitSource, NoCredentials, PrefixCredentials,
    RepoUrl, Revision, Secret, StaticKnownHosts,
};
use kiln::source::{Escape, SourceError, SourcePath, SourceView};
use support::git::*;

/// An engine that never reuses a ref lookup: these tests push and poll
/// again at once, as a webhook-triggered refresh would.
fn engine(cache: &std::path::Path) -> GitSource {
    GitSource::new(config(cache), Arc::new(NoCredentials)).unwrap()
}

fn config(cache: &std::path::Path) -> GitConfig {
    let mut config = GitConfig::new(cache);
    config.lookup_ttl = Duration::ZERO;
    config
}

fn url(s: &str) -> RepoUrl {
    RepoUrl::parse(s).unwrap()
}

fn path(s: &str) -> SourcePath {
    SourcePath::parse(s).unwrap()
}

fn read(view: &dyn SourceView, p: &str) -> String {
    String::from_utf8(view.read_file(&path(p)).unwrap()).unwrap()
}

/// A repository with branches, lightweight and annotated tags, a merge and
/// symlinks inside and outside the tree.
fn rich_fixture(root: &std::path::Path) -> Fixture {
    let f = Fixture::new(root, "rich");
    f.commit(
        "initial",
        &[("app/cm.yaml", "v: 1\n"), ("README.md", "hello\n")],
    );
    f.git(&["tag", "v1.0.0"]);
    f.git(&["tag", "-a", "v1.2.3", "-m", "annotated"]);
    f.git(&["checkout", "-q", "-b", "dev"]);
    f.commit("dev work", &[("app/dev.yaml", "dev: true\n")]);
    f.git(&["checkout", "-q", "main"]);
    f.commit("main work", &[("app/cm.yaml", "v: 2\n")]);
    f.git(&["tag", "-a", "v1.2.9", "-m", "annotated"]);
    f.git(&["merge", "-q", "--no-ff", "-m", "merge dev", "dev"]);
    f.git(&["tag", "v2.0.0"]);
    f.commit(
        "links",
        &[
            ("shared/base.yaml", "base: true\n"),
            ("app/link.yaml", "-> ../shared/base.yaml"), // a symlink inside the fixture
            ("app/shared", "-> ../shared"),
            ("app/out", "-> ../../outside"),
            ("app/abs", "-> /etc/passwd"),
        ],
    );
    f.publish();
    f
}

#[tokio::test]
async fn every_revision_form_resolves_to_the_commit_git_gives() {
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let f = rich_fixture(root.path());
    let daemon = GitDaemon::start(root.path());
    let http = HttpBackend::start(root.path(), None);
    let engine = engine(cache.path());
    let file_url = format!("file://{}", f.bare.display());

    let cases = [
        ("HEAD", "main"),
        ("", "main"),
        ("main", "main"),
        ("refs/heads/dev", "dev"),
        ("dev", "dev"),
        ("v1.0.0", "v1.0.0"),
        ("v1.2.3", "v1.2.3"),
        ("refs/tags/v1.2.9", "v1.2.9"),
        ("v1.2.*", "v1.2.9"),
        (">=1.0.0 <2.0.0", "v1.2.9"),
        ("~1.2.3", "v1.2.9"),
        (">=2.0.0", "v2.0.0"),
    ];
    for server in [daemon.url("rich"), http.url("rich"), file_url] {
        let repo = url(&server);
        for (revision, git_says) in cases {
            let got = engine
                .resolve(&repo, &Revision::parse(revision))
                .await
                .unwrap();
            assert_eq!(
                got.to_string(),
                f.rev_parse(git_says),
                "{server} {revision:?}"
            );
        }
        let old = f.rev_parse("v1.0.0");
        let by_id = engine.resolve(&repo, &Revision::parse(&old)).await.unwrap();
        assert_eq!(by_id.to_string(), old);
        let err = engine
            .resolve(&repo, &Revision::parse("nope"))
            .await
            .unwrap_err();
        assert!(matches!(err, GitError::Revision { .. }), "{err}");
    }
    assert_eq!(engine.stats().fetches, 0, "resolving never fetches");
}

#[tokio::test]
async fn trees_are_served_from_the_object_database_and_symlinks_stay_inside() {
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let f = rich_fixture(root.path());
    let daemon = GitDaemon::start(root.path());
    let engine = engine(cache.path());
    let view = engine
        .poll(&url(&daemon.url("rich")), &Revision::Head)
        .await
        .unwrap();
    assert_eq!(view.commit().to_string(), f.rev_parse("main"));

    assert_eq!(read(&view, "app/cm.yaml"), "v: 2\n");
    assert_eq!(
        read(&view, "app/dev.yaml"),
        "dev: true\n",
        "merged from dev"
    );
    assert_eq!(
        read(&view, "app/link.yaml"),
        "base: true\n",
        "symlink inside the repository"
    );
    assert_eq!(
        read(&view, "app/shared/base.yaml"),
        "base: true\n",
        "through a directory symlink"
    );
    let names: Vec<_> = view
        .read_dir(&path("app"))
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.kind))
        .collect();
    assert!(
        names.contains(&("shared".into(), kiln::source::EntryKind::Directory)),
        "{names:?}"
    );
    for escaping in ["app/out", "app/abs"] {
        match view.read_file(&path(escaping)) {
            Err(SourceError::Denied {
                path,
                escape: Escape::Symlink,
            }) => assert_eq!(path, escaping),
            other => panic!("{escaping}: {other:?}"),
        }
    }
    assert!(matches!(
        view.read_file(&path("app/missing")),
        Err(SourceError::NotFound(_))
    ));
    assert!(matches!(
        view.read_file(&path("app")),
        Err(SourceError::IsADirectory(_))
    ));
    assert_eq!(view.stat(&path("README.md")).unwrap().unwrap().size, 6);
    assert!(cache.path().read_dir().unwrap().count() >= 1);
    assert!(!cache.path().join("rich").exists(), "no work tree anywhere");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_of_1000_apps_over_10_repositories_makes_10_lookups_and_no_fetch() {
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let daemon = GitDaemon::start(root.path());
    let mut urls = Vec::new();
    for i in 0..10 {
        let f = Fixture::new(root.path(), &format!("repo{i}"));
        f.commit("one", &[("app/cm.yaml", &format!("repo: {i}\n"))]);
        f.publish();
        urls.push(url(&daemon.url(&format!("repo{i}"))));
    }
    // The default lookup TTL is the poll window in which all Applications of
    // a repository share one lookup.
    let engine = GitSource::new(GitConfig::new(cache.path()), Arc::new(NoCredentials)).unwrap();
    // First poll: every repository is fetched once.
    poll_all(&engine, &urls, 1000).await;
    let first = engine.stats();
    assert_eq!((first.ref_lookups, first.fetches), (10, 10), "{first:?}");
    // The next poll period starts (as after the TTL, or a webhook).
    for url in &urls {
        engine.forget_refs(url).await;
    }
    // Nothing changed: one lookup per repository, nothing fetched.
    poll_all(&engine, &urls, 1000).await;
    let second = engine.stats();
    assert_eq!(second.ref_lookups - first.ref_lookups, 10, "{second:?}");
    assert_eq!(second.fetches - first.fetches, 0, "{second:?}");
}

#[tokio::test]
async fn a_repository_cache_is_opened_once_not_at_every_checkout() {
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let daemon = GitDaemon::start(root.path());
    let mut urls = Vec::new();
    for i in 0..10 {
        let f = Fixture::new(root.path(), &format!("repo{i}"));
        f.commit("one", &[("app/cm.yaml", &format!("repo: {i}\n"))]);
        f.publish();
        urls.push(url(&daemon.url(&format!("repo{i}"))));
    }
    let engine = engine(cache.path());
    // A hundred Applications of ten repositories resync twice.
    poll_all(&engine, &urls, 100).await;
    for url in &urls {
        engine.forget_refs(url).await;
    }
    poll_all(&engine, &urls, 100).await;
    // Each cache was created (or opened) once and kept open: opening a
    // repository reads its configuration, refs and pack indexes.
    let stats = engine.stats();
    assert!(stats.opens <= 10, "{stats:?}");
    assert_eq!(stats.fetches, 10, "{stats:?}");
}

async fn poll_all(engine: &GitSource, urls: &[RepoUrl], apps: usize) {
    let mut tasks = tokio::task::JoinSet::new();
    for app in 0..apps {
        let (engine, repo) = (engine.clone(), urls[app % urls.len()].clone());
        tasks.spawn(async move {
            let view = engine.poll(&repo, &Revision::parse("main")).await.unwrap();
            let expected = format!("repo: {}\n", app % 10);
            assert_eq!(read(&view, "app/cm.yaml"), expected);
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}

#[tokio::test]
async fn a_new_commit_is_fetched_once_and_a_readme_commit_changes_no_other_tree() {
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let f = Fixture::new(root.path(), "app");
    f.commit(
        "one",
        &[
            ("apps/web/cm.yaml", "v: 1\n"),
            ("apps/api/cm.yaml", "a: 1\n"),
            ("README.md", "x\n"),
        ],
    );
    f.publish();
    let http = HttpBackend::start(root.path(), None);
    let engine = engine(cache.path());
    let repo = url(&http.url("app"));
    let before = engine.poll(&repo, &Revision::Head).await.unwrap();

    f.commit("two", &[("apps/web/cm.yaml", "v: 2\n")]);
    f.publish();
    let fetches = engine.stats().fetches;
    let after = engine.poll(&repo, &Revision::Head).await.unwrap();
    assert_eq!(engine.stats().fetches, fetches + 1);
    assert_eq!(read(&after, "apps/web/cm.yaml"), "v: 2\n");

    f.commit("docs", &[("README.md", "y\n")]);
    f.publish();
    let docs = engine.poll(&repo, &Revision::Head).await.unwrap();
    for unchanged in ["apps", "apps/web", "apps/web/cm.yaml", "apps/api"] {
        assert_eq!(
            after.entry_id(&path(unchanged)).unwrap(),
            docs.entry_id(&path(unchanged)).unwrap(),
            "{unchanged}"
        );
    }
    assert_ne!(
        after.entry_id(&path("README.md")).unwrap(),
        docs.entry_id(&path("README.md")).unwrap()
    );
    assert_ne!(
        before.entry_id(&path("apps/web")).unwrap(),
        after.entry_id(&path("apps/web")).unwrap()
    );
    assert_eq!(
        before.entry_id(&path("apps/api")).unwrap(),
        after.entry_id(&path("apps/api")).unwrap()
    );
    assert!(
        http.requests().iter().all(|r| r.contains("/app.git/")),
        "{:?}",
        http.requests()
    );
}

/// One repository (`cm.yaml` is `v: 1` at `first`) served by git daemon and
/// polled once into a fresh cache.
struct Polled {
    _root: tempfile::TempDir,
    cache: tempfile::TempDir,
    f: Fixture,
    _daemon: GitDaemon,
    repo: RepoUrl,
    engine: GitSource,
    first: String,
}

async fn served_and_polled() -> Polled {
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let f = Fixture::new(root.path(), "app");
    let first = f.commit("one", &[("cm.yaml", "v: 1\n")]);
    f.publish();
    let daemon = GitDaemon::start(root.path());
    let repo = url(&daemon.url("app"));
    let engine = engine(cache.path());
    engine.poll(&repo, &Revision::Head).await.unwrap();
    Polled {
        _root: root,
        cache,
        f,
        _daemon: daemon,
        repo,
        engine,
        first,
    }
}

#[tokio::test]
async fn a_deleted_or_corrupted_cache_is_rebuilt_transparently() {
    let Polled {
        _root,
        cache,
        f,
        _daemon,
        repo,
        engine,
        first,
    } = served_and_polled().await;
    let repo_dir = cache.path().join(repo.cache_dir_name());

    // Deleted mid-run.
    std::fs::remove_dir_all(&repo_dir).unwrap();
    assert_eq!(
        read(
            &engine.poll(&repo, &Revision::Head).await.unwrap(),
            "cm.yaml"
        ),
        "v: 1\n"
    );

    // Truncated pack.
    for entry in walk(&repo_dir.join("objects/pack")) {
        if entry.extension().is_some_and(|e| e == "pack") {
            let len = std::fs::metadata(&entry).unwrap().len();
            std::fs::OpenOptions::new()
                .write(true)
                .open(&entry)
                .unwrap()
                .set_len(len / 3)
                .unwrap();
        }
    }
    let view = engine
        .checkout(&repo, first.parse::<CommitId>().unwrap())
        .await
        .unwrap();
    assert_eq!(read(&view, "cm.yaml"), "v: 1\n");

    // Broken refs and a half-written repository (no HEAD).
    std::fs::write(repo_dir.join("packed-refs"), "garbage\n").unwrap();
    std::fs::remove_file(repo_dir.join("HEAD")).unwrap();
    f.commit("two", &[("cm.yaml", "v: 2\n")]);
    f.publish();
    assert_eq!(
        read(
            &engine.poll(&repo, &Revision::Head).await.unwrap(),
            "cm.yaml"
        ),
        "v: 2\n"
    );
    assert!(engine.stats().rebuilds >= 2, "{:?}", engine.stats());
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_server_fails_within_its_timeout_and_delays_nobody_else() {
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let f = Fixture::new(root.path(), "good");
    f.commit("one", &[("cm.yaml", "ok\n")]);
    f.publish();
    let daemon = GitDaemon::start(root.path());
    let mut config = config(cache.path());
    // Long enough that the healthy poll finishes first even on a loaded machine.
    config.timeout = Duration::from_secs(6);
    config.connect_timeout = Duration::from_secs(1);
    let engine = GitSource::new(config, Arc::new(NoCredentials)).unwrap();

    // Connection refused: a clear error at once.
    let refused = url(&format!("git://127.0.0.1:{}/nothing.git", free_port()));
    let err = engine.resolve(&refused, &Revision::Head).await.unwrap_err();
    assert!(matches!(err, GitError::Remote { .. }), "{err}");
    assert!(err.to_string().contains("refused"), "{err}");

    // A server that accepts and hangs, over git:// and HTTP, while a good
    // repository is polled: the good one finishes first, the hung ones time out.
    let hole = Blackhole::start();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for hung in [
        format!("git://127.0.0.1:{}/x.git", hole.port),
        format!("http://127.0.0.1:{}/x.git", hole.port),
    ] {
        let (engine, tx) = (engine.clone(), tx.clone());
        tokio::spawn(async move {
            let result = engine.resolve(&url(&hung), &Revision::Head).await;
            tx.send(("hung", result.map(|_| ()))).unwrap();
        });
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    {
        let (engine, tx) = (engine.clone(), tx.clone());
        let good = url(&daemon.url("good"));
        tokio::spawn(async move {
            let result = engine.poll(&good, &Revision::Head).await;
            tx.send(("good", result.map(|_| ()))).unwrap();
        });
    }
    let (first, result) = rx.recv().await.unwrap();
    assert_eq!(first, "good", "the healthy repository is not held up");
    result.unwrap();
    for _ in 0..2 {
        let (which, result) = rx.recv().await.unwrap();
        assert_eq!(which, "hung");
        let err = result.unwrap_err();
        assert!(matches!(err, GitError::Timeout { .. }), "{err}");
    }
}

#[tokio::test]
async fn https_basic_auth_with_credentials_that_never_leak() {
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let f = Fixture::new(root.path(), "private");
    f.commit("one", &[("cm.yaml", "secret app\n")]);
    f.publish();
    let tls = SelfSigned::new();
    let https = HttpBackend::start_tls(root.path(), Some("kiln:s3cr3t-t0ken"), &tls);
    let repo = url(&https.url("private"));
    let config = || {
        let mut config = config(cache.path());
        config.tls_roots_pem = std::fs::read(&tls.ca).unwrap();
        config
    };
    let with = |password: &str| {
        let credentials = PrefixCredentials::new().with(
            repo.as_str(),
            Credentials::Basic {
                username: "kiln".into(),
                password: Secret::new(password),
            },
        );
        GitSource::new(config(), Arc::new(credentials)).unwrap()
    };

    // The server's certificate is not trusted without the configured root.
    let untrusted = engine(cache.path());
    let err = untrusted.resolve(&repo, &Revision::Head).await.unwrap_err();
    assert!(matches!(err, GitError::Remote { .. }), "{err}");

    let anonymous = GitSource::new(config(), Arc::new(NoCredentials)).unwrap();
    let err = anonymous.resolve(&repo, &Revision::Head).await.unwrap_err();
    assert!(matches!(err, GitError::Auth { .. }), "{err}");

    let err = with("wrong-password")
        .resolve(&repo, &Revision::Head)
        .await
        .unwrap_err();
    assert!(matches!(err, GitError::Auth { .. }), "{err}");
    assert!(!format!("{err} {err:?}").contains("wrong-password"));

    let view = with("s3cr3t-t0ken")
        .poll(&repo, &Revision::Head)
        .await
        .unwrap();
    assert_eq!(read(&view, "cm.yaml"), "secret app\n");
    for dir in walk(cache.path()) {
        let config = std::fs::read_to_string(dir.join("config")).unwrap_or_default();
        assert!(
            !config.contains("s3cr3t"),
            "credentials are never written to the cache"
        );
    }
}

#[tokio::test]
async fn basic_credentials_go_to_plain_http_only_on_loopback() {
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let f = Fixture::new(root.path(), "private");
    f.commit("one", &[("cm.yaml", "local\n")]);
    f.publish();
    let http = HttpBackend::start(root.path(), Some("kiln:pw"));
    let repo = url(&http.url("private"));
    let credentials = PrefixCredentials::new().with(
        repo.as_str(),
        Credentials::Basic {
            username: "kiln".into(),
            password: Secret::new("pw"),
        },
    );
    let engine = GitSource::new(config(cache.path()), Arc::new(credentials)).unwrap();
    let view = engine.poll(&repo, &Revision::Head).await.unwrap();
    assert_eq!(read(&view, "cm.yaml"), "local\n");
}

#[tokio::test]
async fn a_large_file_is_refused_by_its_size_before_it_is_read() {
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let f = Fixture::new(root.path(), "large");
    let big = "0".repeat(20 << 20);
    f.commit("large", &[("data/big.bin", &big), ("cm.yaml", "small\n")]);
    f.publish();
    let daemon = GitDaemon::start(root.path());
    let view = engine(cache.path())
        .poll(&url(&daemon.url("large")), &Revision::Head)
        .await
        .unwrap();
    assert_eq!(
        view.stat(&path("data/big.bin")).unwrap().unwrap().size,
        20 << 20
    );
    match view.read_file(&path("data/big.bin")) {
        Err(SourceError::TooLarge { size, limit, .. }) => {
            assert_eq!((size, limit), (20 << 20, 16 << 20))
        }
        other => panic!("{:?}", other.map(|b| b.len())),
    }
    assert_eq!(read(&view, "cm.yaml"), "small\n");
}

#[tokio::test]
async fn shallow_fetches_bring_only_what_is_needed() {
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let f = Fixture::new(root.path(), "big");
    for i in 0..5 {
        f.commit(&format!("c{i}"), &[("cm.yaml", &format!("v: {i}\n"))]);
    }
    f.publish();
    let daemon = GitDaemon::start(root.path());
    let mut config = config(cache.path());
    config.shallow = true;
    let engine = GitSource::new(config, Arc::new(NoCredentials)).unwrap();
    let repo = url(&daemon.url("big"));
    let view = engine.poll(&repo, &Revision::Head).await.unwrap();
    assert_eq!(read(&view, "cm.yaml"), "v: 4\n");
    let shallow =
        std::fs::read_to_string(cache.path().join(repo.cache_dir_name()).join("shallow")).unwrap();
    assert_eq!(
        shallow.trim(),
        f.rev_parse("HEAD"),
        "only the tip commit was fetched"
    );
}

#[tokio::test]
async fn ssh_with_a_private_key_from_the_provider() {
    let Some(sshd) = support::require(support::Tool::Sshd) else {
        return;
    };
    let sshd = SshServer::start(&sshd);
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let f = Fixture::new(root.path(), "overssh");
    f.commit("one", &[("cm.yaml", "over ssh\n")]);
    f.publish();
    let repo = url(&sshd.url(&f.bare));

    let anonymous = engine(cache.path());
    let err = anonymous.resolve(&repo, &Revision::Head).await.unwrap_err();
    assert!(matches!(err, GitError::Auth { .. }), "{err}");

    let keyed = PrefixCredentials::new().with(
        repo.as_str(),
        Credentials::SshKey {
            private_key: Secret::new(sshd.client_key.clone()),
        },
    );
    let engine = GitSource::new(config(cache.path()), Arc::new(keyed)).unwrap();
    let view = engine.poll(&repo, &Revision::Head).await.unwrap();
    assert_eq!(read(&view, "cm.yaml"), "over ssh\n");
    let known_hosts = std::fs::read_to_string(cache.path().join("known_hosts")).unwrap();
    assert!(
        known_hosts.contains(&format!("[127.0.0.1]:{}", sshd.port)),
        "{known_hosts}"
    );
}

/// An sshd serving one repository, and credentials that log in to it;
/// `None` (a recorded skip, or a failure under CI) without sshd.
fn ssh_repository(root: &std::path::Path) -> Option<(SshServer, RepoUrl, PrefixCredentials)> {
    let sshd = SshServer::start(&support::require(support::Tool::Sshd)?);
    let f = Fixture::new(root, "pinned");
    f.commit("one", &[("cm.yaml", "over ssh\n")]);
    f.publish();
    let repo = url(&sshd.url(&f.bare));
    let keyed = PrefixCredentials::new().with(
        repo.as_str(),
        Credentials::SshKey {
            private_key: Secret::new(sshd.client_key.clone()),
        },
    );
    Some((sshd, repo, keyed))
}

/// A public key no server here has.
fn stranger_key(dir: &std::path::Path) -> String {
    let status = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(dir.join("stranger"))
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::read_to_string(dir.join("stranger.pub"))
        .unwrap()
        .trim()
        .to_owned()
}

#[tokio::test]
async fn configured_ssh_known_hosts_are_checked_strictly() {
    let root = tempfile::tempdir().unwrap();
    let Some((sshd, repo, keyed)) = ssh_repository(root.path()) else {
        return;
    };
    let host = format!("[127.0.0.1]:{}", sshd.port);
    let with_known_hosts = |cache: &std::path::Path, text: String| {
        let mut config = config(cache);
        config.ssh_known_hosts = Some(Arc::new(StaticKnownHosts(text)));
        GitSource::new(config, Arc::new(keyed.clone())).unwrap()
    };

    // Given the server's key in the list: the repository is read, and
    // nothing is recorded on first use.
    let cache = tempfile::tempdir().unwrap();
    let engine = with_known_hosts(cache.path(), format!("{host} {}\n", sshd.host_key));
    let view = engine.poll(&repo, &Revision::Head).await.unwrap();
    assert_eq!(read(&view, "cm.yaml"), "over ssh\n");
    assert!(!cache.path().join("known_hosts").exists());

    // Given another key for the host: refused, naming host and fingerprint.
    let stranger = stranger_key(root.path());
    let cache = tempfile::tempdir().unwrap();
    let engine = with_known_hosts(cache.path(), format!("{host} {stranger}\n"));
    let err = engine.resolve(&repo, &Revision::Head).await.unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, GitError::HostKey { .. }), "{message}");
    assert!(message.contains(&host), "{message}");
    assert!(message.contains("which is not its known key"), "{message}");
    assert!(message.contains("SHA256:"), "{message}");

    // Given a list without the host: refused, not trusted on first use.
    let cache = tempfile::tempdir().unwrap();
    let engine = with_known_hosts(cache.path(), format!("git.example.com {}\n", sshd.host_key));
    let err = engine.resolve(&repo, &Revision::Head).await.unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, GitError::HostKey { .. }), "{message}");
    assert!(message.contains(&host), "{message}");
    assert!(message.contains("is not in the known hosts"), "{message}");
    assert!(message.contains("SHA256:"), "{message}");
    assert!(!cache.path().join("known_hosts").exists());
}

#[tokio::test]
async fn trust_on_first_use_is_recorded_in_the_configured_store() {
    let root = tempfile::tempdir().unwrap();
    let Some((sshd, repo, keyed)) = ssh_repository(root.path()) else {
        return;
    };
    let host = format!("[127.0.0.1]:{}", sshd.port);
    let state = tempfile::tempdir().unwrap();
    let store = state.path().join("ssh/known_hosts");
    let with_store = |cache: &std::path::Path| {
        let mut config = config(cache);
        config.ssh_known_hosts_store = Some(store.clone());
        GitSource::new(config, Arc::new(keyed.clone())).unwrap()
    };

    // The first use records the host in the store, not in the cache.
    let cache = tempfile::tempdir().unwrap();
    with_store(cache.path())
        .resolve(&repo, &Revision::Head)
        .await
        .unwrap();
    let recorded = std::fs::read_to_string(&store).unwrap();
    assert!(recorded.contains(&host), "{recorded}");
    assert!(!cache.path().join("known_hosts").exists());

    // A fresh cache (a restart with an emptyDir) still knows the host: a
    // different key recorded for it is refused, naming the host.
    std::fs::write(&store, format!("{host} {}\n", stranger_key(root.path()))).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let err = with_store(cache.path())
        .resolve(&repo, &Revision::Head)
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, GitError::HostKey { .. }), "{message}");
    assert!(message.contains(&host), "{message}");
    assert!(message.contains("which is not its known key"), "{message}");
}

#[test]
fn the_cli_resolves_and_renders_from_a_repository() {
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let f = Fixture::new(root.path(), "apps");
    let guestbook = support::guestbook();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&guestbook).unwrap() {
        let entry = entry.unwrap();
        let name = format!("apps/guestbook/{}", entry.file_name().to_string_lossy());
        files.push((name, std::fs::read_to_string(entry.path()).unwrap()));
    }
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    f.commit("guestbook", &files);
    f.git(&["tag", "v1.4.0"]);
    f.publish();
    let daemon = GitDaemon::start(root.path());
    let repo = daemon.url("apps");
    let home = tempfile::tempdir().unwrap();
    let kiln = |args: &[&str]| {
        let args = [args, &["--repo-cache", cache.path().to_str().unwrap()]].concat();
        support::kiln_as_user(root.path(), home.path(), &args)
    };

    let out = kiln(&["source", "resolve", &repo, "v1.*"]);
    support::assert_success(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        f.rev_parse("v1.4.0")
    );

    let values = support::component("values");
    let out = kiln(&[
        "render",
        "--repo",
        &repo,
        "--revision",
        "v1.4.0",
        "--path",
        "apps/guestbook",
        "--no-compile-cache",
        "--plugin",
        values.to_str().unwrap(),
        "--param",
        "replicas=4",
    ]);
    support::assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("name: guestbook-frontend"), "{stdout}");
    assert!(
        stdout.contains(&format!("at revision {}", f.rev_parse("v1.4.0"))),
        "the plugin sees the commit: {stdout}"
    );

    let out = kiln(&["source", "resolve", &repo, "no-such-branch"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("error: {repo}: revision `no-such-branch` not found as a branch or tag\n")
    );
}

#[tokio::test]
async fn a_failed_fetch_keeps_a_sound_cache() {
    let Polled {
        _root,
        cache: _cache,
        f: _f,
        _daemon,
        repo,
        engine,
        first,
    } = served_and_polled().await;

    // A commit the server does not have: the fetch fails, the cache stays.
    let unknown: CommitId = "0123456789abcdef0123456789abcdef01234567".parse().unwrap();
    let err = engine.checkout(&repo, unknown).await.unwrap_err();
    assert!(
        matches!(err, GitError::Remote { .. } | GitError::Commit { .. }),
        "{err}"
    );
    assert_eq!(
        engine.stats().rebuilds,
        0,
        "a sound cache is not thrown away"
    );
    let fetches = engine.stats().fetches;
    let view = engine
        .checkout(&repo, first.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(read(&view, "cm.yaml"), "v: 1\n");
    assert_eq!(
        engine.stats().fetches,
        fetches,
        "the cached commit needs no fetch"
    );
}

#[tokio::test]
async fn repositories_no_one_reads_any_more_leave_the_cache() {
    let Polled {
        _root,
        cache,
        f: _f,
        _daemon,
        repo,
        engine,
        first: _,
    } = served_and_polled().await;
    let repo_dir = cache.path().join(repo.cache_dir_name());
    // In use within the window: kept.
    assert_eq!(engine.evict_idle(Duration::from_secs(3600)).await, 0);
    assert!(repo_dir.exists());
    // A directory an earlier process left, not used since: deleted too.
    let orphan = cache.path().join("orphan-repository");
    std::fs::create_dir(&orphan).unwrap();
    assert_eq!(engine.evict_idle(Duration::ZERO).await, 2);
    assert!(!repo_dir.exists() && !orphan.exists());
    // Needed again: fetched again, transparently.
    let fetches = engine.stats().fetches;
    assert_eq!(
        read(
            &engine.poll(&repo, &Revision::Head).await.unwrap(),
            "cm.yaml"
        ),
        "v: 1\n"
    );
    assert_eq!(engine.stats().fetches, fetches + 1);
}
