//! Plugin distribution against a real OCI registry on loopback: push, pull,
//! tag resolution, the content-addressed store, auth and failures.

mod support;

use std::time::Duration;

use kiln::artifact::{ArtifactError, Fetcher, PluginRef, RegistryCredentials, Store};
use kiln::digest::Digest;
use support::registry::Registry;
use support::require::{Corpus, corpus};

fn fetcher(store: &std::path::Path, credentials: RegistryCredentials) -> Fetcher {
    Fetcher::new(
        Store::open(store).unwrap(),
        credentials,
        Duration::from_secs(5),
    )
}

/// Serves `dir` over HTTPS with `tls` (tests/support/https_files.py);
/// returns the server and its port.
fn serve_https(
    dir: &std::path::Path,
    tls: &support::git::SelfSigned,
) -> (std::process::Child, u16) {
    use std::io::BufRead as _;
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/https_files.py");
    let mut child = std::process::Command::new("python3")
        .arg(script)
        .arg(dir)
        .arg(&tls.cert)
        .arg(&tls.key)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .strip_prefix("listening ")
        .unwrap()
        .parse()
        .unwrap();
    (child, port)
}

fn oci(s: &str) -> PluginRef {
    PluginRef::parse(s).unwrap()
}

/// A registry on loopback, or a return from the test when
/// `docker-registry` is missing and skipping is allowed (see
/// `support::require`).
macro_rules! require_registry {
    ($auth:expr) => {{
        let Some(binary) = support::require(support::Tool::DockerRegistry) else {
            return;
        };
        Registry::start(&binary, $auth)
    }};
}

#[tokio::test]
async fn push_pull_tags_resolve_to_digests_and_the_store_serves_repeats() {
    let registry = require_registry!(None);
    let store = tempfile::tempdir().unwrap();
    let fetcher = fetcher(store.path(), RegistryCredentials::none());
    let component = std::fs::read(support::component("values")).unwrap();
    let tag = oci(&format!("oci://{}/kiln/values:1.0", registry.host()));

    let manifest = fetcher.push(&component, &tag).await.unwrap();
    let pulled = fetcher.fetch(&tag).await.unwrap();
    assert_eq!(pulled.bytes, component);
    assert_eq!(pulled.digest, Digest::of(&component));
    match &pulled.resolved {
        PluginRef::Oci {
            digest: Some(d),
            tag: Some(t),
            ..
        } => assert_eq!((d, t.as_str()), (&manifest, "1.0")),
        other => panic!("{other:?}"),
    }

    // By digest, with the registry gone: served from the store.
    drop(registry);
    let again = fetcher.fetch(&pulled.resolved).await.unwrap();
    assert_eq!(again.digest, pulled.digest);
}

#[tokio::test]
async fn moving_a_tag_to_another_component_is_detected() {
    let registry = require_registry!(None);
    let store = tempfile::tempdir().unwrap();
    let fetcher = fetcher(store.path(), RegistryCredentials::none());
    let tag = oci(&format!("oci://{}/kiln/plugin:stable", registry.host()));
    let first = std::fs::read(support::component("values")).unwrap();
    let second = std::fs::read(support::component("required-labels")).unwrap();
    fetcher.push(&first, &tag).await.unwrap();
    let before = fetcher.fetch(&tag).await.unwrap();
    fetcher.push(&second, &tag).await.unwrap();
    let after = fetcher.fetch(&tag).await.unwrap();
    assert_ne!(
        before.resolved, after.resolved,
        "the tag now resolves to another manifest digest"
    );
    assert_eq!(after.digest, Digest::of(&second));
}

#[tokio::test]
async fn registry_auth_and_failures_name_the_reference() {
    let registry = require_registry!(Some(("kiln", "s3cret")));
    let store = tempfile::tempdir().unwrap();
    let component = std::fs::read(support::component("values")).unwrap();
    let tag = oci(&format!("oci://{}/kiln/private:1", registry.host()));

    let anonymous = fetcher(store.path(), RegistryCredentials::none());
    let err = anonymous.push(&component, &tag).await.unwrap_err();
    assert!(matches!(err, ArtifactError::Unauthorized { .. }), "{err}");
    assert!(
        err.to_string().starts_with(&format!(
            "oci://{}/kiln/private:1: unauthorized",
            registry.host()
        )),
        "{err}"
    );

    let config = |password: &str| {
        RegistryCredentials::from_docker_config(&format!(
            r#"{{"auths":{{"{}":{{"username":"kiln","password":"{password}"}}}}}}"#,
            registry.host()
        ))
        .unwrap()
    };
    let wrong = fetcher(store.path(), config("wrong"));
    let err = wrong.fetch(&tag).await.unwrap_err();
    assert!(matches!(err, ArtifactError::Unauthorized { .. }), "{err}");
    assert!(!format!("{err:?}").contains("wrong"));

    let right = fetcher(store.path(), config("s3cret"));
    right.push(&component, &tag).await.unwrap();
    assert_eq!(right.fetch(&tag).await.unwrap().bytes, component);

    let missing = oci(&format!("oci://{}/kiln/private:nope", registry.host()));
    let err = right.fetch(&missing).await.unwrap_err();
    assert!(matches!(err, ArtifactError::NotFound { .. }), "{err}");
}

#[tokio::test]
async fn a_hanging_registry_times_out() {
    let hole = support::git::Blackhole::start();
    let store = tempfile::tempdir().unwrap();
    let fetcher = Fetcher::new(
        Store::open(store.path()).unwrap(),
        RegistryCredentials::none(),
        Duration::from_millis(500),
    );
    let err = fetcher
        .fetch(&oci(&format!("oci://127.0.0.1:{}/kiln/x:1", hole.port)))
        .await
        .unwrap_err();
    assert!(matches!(err, ArtifactError::Timeout { .. }), "{err}");
}

#[tokio::test]
async fn a_pinned_file_digest_must_match() {
    let file = support::component("values");
    let digest = Digest::of(&std::fs::read(&file).unwrap());
    let store = tempfile::tempdir().unwrap();
    let fetcher = fetcher(store.path(), RegistryCredentials::none());
    let good = oci(&format!("{}@{digest}", file.display()));
    assert_eq!(fetcher.fetch(&good).await.unwrap().digest, digest);
    let wrong = Digest::of(b"something else");
    let err = fetcher
        .fetch(&oci(&format!("file://{}@{wrong}", file.display())))
        .await
        .unwrap_err();
    match err {
        ArtifactError::DigestMismatch {
            expected, found, ..
        } => assert_eq!((expected, found), (wrong, digest)),
        other => panic!("{other}"),
    }
}

#[test]
fn kiln_push_pull_and_render_from_a_registry() {
    let registry = require_registry!(None);
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let kiln = |args: &[&str]| support::kiln_as_user(work.path(), home.path(), args);
    let values = support::component("values");
    let reference = format!("oci://{}/kiln/values:0.1.0", registry.host());
    let out = kiln(&["plugin", "push", values.to_str().unwrap(), &reference]);
    support::assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("manifest digest: sha256:"), "{stdout}");

    let out = kiln(&["plugin", "pull", &reference, "-o", "pulled.wasm"]);
    support::assert_success(&out);
    assert_eq!(
        std::fs::read(work.path().join("pulled.wasm")).unwrap(),
        std::fs::read(&values).unwrap()
    );

    let app = support::guestbook();
    let render = |extra: &[&str]| {
        let mut args = vec![
            "render",
            app.to_str().unwrap(),
            "--no-compile-cache",
            "--plugin",
            &reference,
        ];
        args.extend_from_slice(extra);
        kiln(&args)
    };
    // Unverified and remote: refused unless asked for explicitly.
    let out = render(&[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("plugin {reference} is not verified"))
            && stderr.contains("--insecure-skip-verify"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
    let out = render(&["--insecure-skip-verify"]);
    support::assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("guestbook-frontend"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("WARNING: plugin {reference} (sha256:"))
            && stderr.contains("runs UNVERIFIED (--insecure-skip-verify)"),
        "{stderr}"
    );

    let out = kiln(&[
        "plugin",
        "pull",
        &format!("oci://{}/kiln/values:9.9.9", registry.host()),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "error: oci://{}/kiln/values:9.9.9: not found (404)\n",
            registry.host()
        )
    );
}

#[test]
fn signed_oci_plugins_verify_and_a_moved_tag_is_refused() {
    let registry = require_registry!(None);
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let kiln = |args: &[&str]| support::kiln_as_user(work.path(), home.path(), args);
    let text = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
    let reference = format!("oci://{}/kiln/values:stable", registry.host());
    let app = support::guestbook();
    let app = app.to_str().unwrap();
    kiln(&["plugin", "keygen", "--output-prefix", "release"]);
    kiln(&["plugin", "keygen", "--output-prefix", "stranger"]);
    std::fs::write(
        work.path().join("trust.yaml"),
        "rules:\n- references: ['oci://*']\n  anyOf: [{key: release.pub}]\n",
    )
    .unwrap();
    let render = || {
        kiln(&[
            "render",
            app,
            "--no-compile-cache",
            "--trust-policy",
            "trust.yaml",
            "--plugin",
            &reference,
        ])
    };

    let values = support::component("values");
    support::assert_success(&kiln(&[
        "plugin",
        "push",
        values.to_str().unwrap(),
        &reference,
    ]));
    let out = render();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out)
            .contains("refused: no signature found (looked for the cosign signature tag sha256-"),
        "{}",
        text(&out)
    );

    let out = kiln(&["plugin", "sign", &reference, "--key", "stranger.key"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&render()).contains("refused: signed, but not by a trusted key"));

    support::assert_success(&kiln(&[
        "plugin",
        "sign",
        &reference,
        "--key",
        "release.key",
    ]));
    let out = render();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("guestbook-frontend"));

    // The tag now points at another component: its manifest has no signature.
    let other = support::component("fixture-misbehave");
    support::assert_success(&kiln(&[
        "plugin",
        "push",
        other.to_str().unwrap(),
        &reference,
    ]));
    let out = render();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("refused: no signature found"),
        "{}",
        text(&out)
    );
}

#[tokio::test]
async fn https_plugins_need_a_matching_pin() {
    let tls = support::git::SelfSigned::new();
    let served = tempfile::tempdir().unwrap();
    let component = std::fs::read(support::component("values")).unwrap();
    std::fs::write(served.path().join("values.wasm"), &component).unwrap();
    let (mut child, port) = serve_https(served.path(), &tls);
    let store = tempfile::tempdir().unwrap();
    let fetcher = fetcher(store.path(), RegistryCredentials::none())
        .with_tls_roots(&std::fs::read(&tls.ca).unwrap())
        .unwrap();
    let digest = Digest::of(&component);
    let url = format!("https://127.0.0.1:{port}/values.wasm");

    let fetched = fetcher
        .fetch(&oci(&format!("{url}@{digest}")))
        .await
        .unwrap();
    assert_eq!(fetched.bytes, component);
    let wrong = Digest::of(b"other");
    let err = fetcher
        .fetch(&oci(&format!("{url}@{wrong}")))
        .await
        .unwrap_err();
    assert!(matches!(err, ArtifactError::DigestMismatch { .. }), "{err}");
    let err = fetcher
        .fetch(&oci(&format!(
            "https://127.0.0.1:{port}/missing.wasm@{wrong}"
        )))
        .await
        .unwrap_err();
    assert!(matches!(err, ArtifactError::NotFound { .. }), "{err}");
    // Fetched once: the next fetch of the pin is served from the store.
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        fetcher
            .fetch(&oci(&format!("{url}@{digest}")))
            .await
            .unwrap()
            .bytes,
        component
    );
}

/// The Sigstore conformance cases (`../shared/testdata/sigstore-conformance`).
fn conformance() -> std::path::PathBuf {
    Corpus::SigstoreConformance.path()
}

#[test]
fn a_sigstore_bundle_travels_with_the_plugin_as_an_oci_referrer() {
    let Some(_) = corpus(Corpus::SigstoreConformance) else {
        return;
    };
    let registry = require_registry!(None);
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let kiln = |args: &[&str]| support::kiln_as_user(work.path(), home.path(), args);
    let stderr = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
    // A real public bundle (keyless, Sigstore public-good) and the artifact
    // it signs, published as a component with the bundle beside it.
    let case = conformance().join("happy-path-v0.3-new-mediaType");
    std::fs::copy(conformance().join("a.txt"), work.path().join("signed.wasm")).unwrap();
    std::fs::copy(
        case.join("bundle.sigstore.json"),
        work.path().join("signed.wasm.sigstore.json"),
    )
    .unwrap();
    let reference = format!("oci://{}/kiln/signed:1.0", registry.host());
    let out = kiln(&["plugin", "push", "signed.wasm", &reference]);
    let stdout = support::assert_success(&out);
    assert!(
        stdout.contains("attached a Sigstore bundle as referrer sha256:"),
        "{stdout}"
    );

    // Found beside the pulled artifact (the referrers tag schema: Debian's
    // registry has no referrers API) and verified offline.
    let identity = "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main";
    let issuer = "https://token.actions.githubusercontent.com";
    let verify = |identity: &str| {
        kiln(&[
            "plugin",
            "verify",
            &reference,
            "--certificate-identity",
            identity,
            "--certificate-oidc-issuer",
            issuer,
        ])
    };
    let out = verify(identity);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = verify("https://github.com/someone/else");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("https://github.com/someone/else"),
        "the expected identity is named: {}",
        stderr(&out)
    );

    // Another artifact without a bundle: nothing found, and where Kiln looked.
    std::fs::write(work.path().join("plain.wasm"), b"not signed").unwrap();
    let plain = format!("oci://{}/kiln/plain:1.0", registry.host());
    support::assert_success(&kiln(&["plugin", "push", "plain.wasm", &plain]));
    let out = kiln(&[
        "plugin",
        "verify",
        &plain,
        "--certificate-identity",
        identity,
        "--certificate-oidc-issuer",
        issuer,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no signature found")
            && stderr(&out).contains("Sigstore bundle referrers of sha256:"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn signatures_beside_an_https_plugin_are_found_and_verified() {
    use kiln::trust::{PrivateKey, Requirement, Signatures, Signer, TrustError, TrustRoot};
    let tls = support::git::SelfSigned::new();
    let served = tempfile::tempdir().unwrap();
    let component = std::fs::read(support::component("values")).unwrap();
    let key = PrivateKey::generate();
    std::fs::write(served.path().join("values.wasm"), &component).unwrap();
    std::fs::write(served.path().join("values.wasm.sig"), key.sign(&component)).unwrap();
    std::fs::write(served.path().join("unsigned.wasm"), &component).unwrap();
    let (mut child, port) = serve_https(served.path(), &tls);
    let store = tempfile::tempdir().unwrap();
    let fetcher = fetcher(store.path(), RegistryCredentials::none())
        .with_tls_roots(&std::fs::read(&tls.ca).unwrap())
        .unwrap();
    let digest = Digest::of(&component);
    let requirement = Requirement {
        signers: vec![Signer::Key(key.public_key())],
        min_signers: 1,
        insecure: false,
    };
    let root = TrustRoot::public_good().unwrap();

    let signed = oci(&format!("https://127.0.0.1:{port}/values.wasm@{digest}"));
    let fetched = fetcher.fetch(&signed).await.unwrap();
    let signatures = Signatures::beside(&fetcher, &signed, &fetched)
        .await
        .unwrap();
    assert_eq!(signatures.key_signatures.len(), 1);
    assert!(
        signatures.bundles.is_empty(),
        "no .sigstore.json: a 404 is no error"
    );
    kiln::trust::verify(&fetched.bytes, &signatures, &requirement, &root).unwrap();

    let unsigned = oci(&format!("https://127.0.0.1:{port}/unsigned.wasm@{digest}"));
    let fetched = fetcher.fetch(&unsigned).await.unwrap();
    let signatures = Signatures::beside(&fetcher, &unsigned, &fetched)
        .await
        .unwrap();
    let error = kiln::trust::verify(&fetched.bytes, &signatures, &requirement, &root).unwrap_err();
    assert!(matches!(error, TrustError::NoSignature { .. }), "{error}");
    assert!(
        error
            .to_string()
            .contains(&format!("https://127.0.0.1:{port}/unsigned.wasm.sig")),
        "{error}"
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// A registry or web server that sends more than Kiln accepts is cut off:
/// the component (declared too large, or larger than declared), and the
/// signatures beside it.
#[tokio::test]
async fn downloads_larger_than_their_limit_are_refused() {
    use kiln::artifact::FetchLimits;
    let component = std::fs::read(support::component("values")).unwrap();
    let small = FetchLimits {
        component: 1 << 10,
        ..FetchLimits::default()
    };
    // HTTPS: a body larger than the limit.
    let tls = support::git::SelfSigned::new();
    let served = tempfile::tempdir().unwrap();
    std::fs::write(served.path().join("values.wasm"), &component).unwrap();
    std::fs::write(served.path().join("values.wasm.sig"), vec![b'x'; 4 << 10]).unwrap();
    let (mut child, port) = serve_https(served.path(), &tls);
    let store = tempfile::tempdir().unwrap();
    let https = fetcher(store.path(), RegistryCredentials::none())
        .with_tls_roots(&std::fs::read(&tls.ca).unwrap())
        .unwrap();
    let url = format!("https://127.0.0.1:{port}/values.wasm");
    let err = https
        .with_limits(small)
        .fetch(&oci(&format!("{url}@{}", Digest::of(&component))))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ArtifactError::TooLarge { limit: 1024, .. }),
        "{err}"
    );
    let tiny_signatures = fetcher(store.path(), RegistryCredentials::none())
        .with_tls_roots(&std::fs::read(&tls.ca).unwrap())
        .unwrap()
        .with_limits(FetchLimits {
            signature: 1 << 10,
            ..FetchLimits::default()
        });
    let err = tiny_signatures
        .beside(&format!("{url}.sig"))
        .await
        .unwrap_err();
    assert!(matches!(err, ArtifactError::TooLarge { .. }), "{err}");
    let _ = child.kill();
    let _ = child.wait();

    // OCI: a layer larger than the limit.
    let registry = require_registry!(None);
    let store = tempfile::tempdir().unwrap();
    let oci_fetcher = fetcher(store.path(), RegistryCredentials::none());
    let tag = oci(&format!("oci://{}/kiln/values:big", registry.host()));
    oci_fetcher.push(&component, &tag).await.unwrap();
    let store = tempfile::tempdir().unwrap();
    let err = fetcher(store.path(), RegistryCredentials::none())
        .with_limits(small)
        .fetch(&tag)
        .await
        .unwrap_err();
    assert!(matches!(err, ArtifactError::TooLarge { .. }), "{err}");
}
