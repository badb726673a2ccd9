//! Plugin signatures: the Sigstore conformance suite (offline), key-based
//! signatures interoperating with openssl, trust requirements and every
//! refusal reason.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::require::{Corpus, corpus};

use kiln::trust::{
    Identity, Keyless, PrivateKey, PublicKey, Requirement, Signatures, Signer, TrustError,
    TrustRoot, Verified, verify,
};

const DEFAULT_IDENTITY: &str = "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main";
const DEFAULT_ISSUER: &str = "https://token.actions.githubusercontent.com";

/// The Sigstore conformance cases (`../shared/testdata/sigstore-conformance`).
fn conformance() -> PathBuf {
    Corpus::SigstoreConformance.path()
}

/// One conformance case, verified the way Kiln verifies plugins.
fn verify_case(case: &Path) -> Result<(), TrustError> {
    let artifact = std::fs::read(case.join("artifact"))
        .unwrap_or_else(|_| std::fs::read(conformance().join("a.txt")).unwrap());
    let bundle = std::fs::read_to_string(case.join("bundle.sigstore.json")).unwrap();
    let root = if case.join("trusted_root.json").exists() {
        TrustRoot::from_file(&case.join("trusted_root.json"))?
    } else {
        TrustRoot::public_good()?
    };
    let read = |name: &str, default: &str| {
        std::fs::read_to_string(case.join(name))
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| default.to_owned())
    };
    if case.join("key.pub").exists() {
        let key =
            PublicKey::from_pem(&std::fs::read_to_string(case.join("key.pub")).unwrap()).unwrap();
        root.verify_with_key(&artifact, &bundle, &key)
    } else {
        let signer = Keyless {
            identity: Identity::Exact(read("identity", DEFAULT_IDENTITY)),
            issuer: read("issuer", DEFAULT_ISSUER),
        };
        root.verify_keyless(&artifact, &bundle, &signer).map(|_| ())
    }
}

#[test]
fn the_sigstore_conformance_suite_verifies_offline() {
    let Some(_) = corpus(Corpus::SigstoreConformance) else {
        return;
    };
    let mut cases: Vec<PathBuf> = std::fs::read_dir(conformance())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("bundle.sigstore.json").exists())
        .collect();
    cases.sort();
    assert!(cases.len() >= 30, "{} cases", cases.len());
    let mut wrong = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let result = verify_case(case);
        match (name.ends_with("_fail"), &result) {
            (true, Err(_)) | (false, Ok(())) => {}
            (true, Ok(())) => wrong.push(format!("{name}: accepted, must be refused")),
            (false, Err(e)) => wrong.push(format!("{name}: refused: {e}")),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases wrong:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}

#[test]
fn refusals_say_exactly_why() {
    let Some(_) = corpus(Corpus::SigstoreConformance) else {
        return;
    };
    let case = conformance().join("happy-path-v0.3-new-mediaType");
    let artifact = std::fs::read(conformance().join("a.txt")).unwrap();
    let bundle = std::fs::read_to_string(case.join("bundle.sigstore.json")).unwrap();
    let root = TrustRoot::public_good().unwrap();
    let keyless = |identity: Identity, issuer: &str| Keyless {
        identity,
        issuer: issuer.into(),
    };

    let err = root
        .verify_keyless(
            &artifact,
            &bundle,
            &keyless(
                Identity::Exact("https://example.com/someone-else".into()),
                DEFAULT_ISSUER,
            ),
        )
        .unwrap_err();
    match &err {
        TrustError::IdentityMismatch { expected, found } => {
            assert_eq!(expected, "https://example.com/someone-else");
            assert_eq!(found.as_deref(), Some(DEFAULT_IDENTITY));
        }
        other => panic!("{other}"),
    }
    assert!(err.to_string().starts_with(
        "identity mismatch: expected https://example.com/someone-else, found https://github.com/"
    ));

    let regex = Identity::regex("https://github.com/sigstore-conformance/.*").unwrap();
    assert_eq!(
        root.verify_keyless(&artifact, &bundle, &keyless(regex, DEFAULT_ISSUER))
            .unwrap(),
        DEFAULT_IDENTITY
    );
    let regex = Identity::regex("https://github.com/acme/.*").unwrap();
    assert!(matches!(
        root.verify_keyless(&artifact, &bundle, &keyless(regex, DEFAULT_ISSUER)),
        Err(TrustError::IdentityMismatch { .. })
    ));

    let err = root
        .verify_keyless(
            &artifact,
            &bundle,
            &keyless(
                Identity::Exact(DEFAULT_IDENTITY.into()),
                "https://accounts.google.com",
            ),
        )
        .unwrap_err();
    assert!(matches!(err, TrustError::IssuerMismatch { .. }), "{err}");

    let err = root
        .verify_keyless(
            b"other bytes",
            &bundle,
            &keyless(Identity::Exact(DEFAULT_IDENTITY.into()), DEFAULT_ISSUER),
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            TrustError::DigestMismatch(_) | TrustError::BadSignature(_)
        ),
        "{err}"
    );

    let corrupted = conformance().join("inclusion-proof-corrupted-hash_fail");
    let err = verify_case(&corrupted).unwrap_err();
    assert!(
        matches!(err, TrustError::TransparencyLog(_)),
        "bad inclusion proof: {err}"
    );

    let outside = conformance().join("intoto-set-outside-signing-cert-validity_fail");
    let err = verify_case(&outside).unwrap_err();
    assert!(
        matches!(
            err,
            TrustError::Certificate(_) | TrustError::TransparencyLog(_)
        ),
        "{err}"
    );
}

fn openssl(dir: &Path, args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .status()
        .expect("openssl runs");
    assert!(status.success(), "openssl {args:?}");
}

#[test]
fn key_signatures_interoperate_with_openssl_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("plugin.wasm"), b"\0asm component bytes").unwrap();

    // openssl signs, Kiln verifies.
    openssl(
        d,
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            "ec.pem",
        ],
    );
    openssl(
        d,
        &[
            "pkcs8", "-topk8", "-nocrypt", "-in", "ec.pem", "-out", "key.pem",
        ],
    );
    openssl(d, &["ec", "-in", "ec.pem", "-pubout", "-out", "pub.pem"]);
    openssl(
        d,
        &[
            "dgst",
            "-sha256",
            "-sign",
            "key.pem",
            "-out",
            "sig.der",
            "plugin.wasm",
        ],
    );
    use base64::Engine as _;
    let sig =
        base64::engine::general_purpose::STANDARD.encode(std::fs::read(d.join("sig.der")).unwrap());
    let public = PublicKey::from_pem(&std::fs::read_to_string(d.join("pub.pem")).unwrap()).unwrap();
    public.verify(b"\0asm component bytes", &sig).unwrap();
    let private =
        PrivateKey::from_pem(&std::fs::read_to_string(d.join("key.pem")).unwrap()).unwrap();
    assert_eq!(private.public_key(), public);

    // Kiln signs, openssl verifies.
    let kiln_key = PrivateKey::generate();
    std::fs::write(d.join("kiln.pub"), kiln_key.public_key().to_pem()).unwrap();
    let der = base64::engine::general_purpose::STANDARD
        .decode(kiln_key.sign(b"\0asm component bytes"))
        .unwrap();
    std::fs::write(d.join("kiln.sig.der"), der).unwrap();
    openssl(
        d,
        &[
            "dgst",
            "-sha256",
            "-verify",
            "kiln.pub",
            "-signature",
            "kiln.sig.der",
            "plugin.wasm",
        ],
    );
}

#[test]
fn requirements_count_distinct_trusted_signers() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plugin.wasm");
    let bytes = b"\0asm plugin".to_vec();
    std::fs::write(&file, &bytes).unwrap();
    let (alice, bob, mallory) = (
        PrivateKey::generate(),
        PrivateKey::generate(),
        PrivateKey::generate(),
    );
    let root = TrustRoot::public_good().unwrap();
    let requirement = |signers: Vec<&PrivateKey>, min| Requirement {
        signers: signers
            .into_iter()
            .map(|k| Signer::Key(k.public_key()))
            .collect(),
        min_signers: min,
        insecure: false,
    };
    let check =
        |req: &Requirement| verify(&bytes, &Signatures::next_to(&file).unwrap(), req, &root);

    match check(&requirement(vec![&alice], 1)) {
        Err(TrustError::NoSignature { looked }) => {
            assert!(looked[0].ends_with("plugin.wasm.sig"), "{looked:?}")
        }
        other => panic!("{other:?}"),
    }
    std::fs::write(dir.path().join("plugin.wasm.sig"), mallory.sign(&bytes)).unwrap();
    assert!(matches!(
        check(&requirement(vec![&alice], 1)),
        Err(TrustError::UntrustedKey { .. })
    ));

    std::fs::write(dir.path().join("plugin.wasm.alice.sig"), alice.sign(&bytes)).unwrap();
    match check(&requirement(vec![&alice, &bob], 1)).unwrap() {
        Verified::Signed { signers, digest } => {
            assert_eq!(
                signers,
                [format!("key {}", alice.public_key().fingerprint())]
            );
            assert_eq!(digest, kiln::digest::Digest::of(&bytes));
        }
        other => panic!("{other:?}"),
    }
    let err = check(&requirement(vec![&alice, &bob], 2)).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("1 of 2 required signers verified"),
        "{err}"
    );

    std::fs::write(dir.path().join("plugin.wasm.bob.sig"), bob.sign(&bytes)).unwrap();
    assert!(check(&requirement(vec![&alice, &bob], 2)).is_ok());

    // The bytes change: every signature stops verifying.
    std::fs::write(&file, b"\0asm tampered").unwrap();
    let tampered = verify(
        b"\0asm tampered",
        &Signatures::next_to(&file).unwrap(),
        &requirement(vec![&alice], 1),
        &root,
    );
    assert!(
        matches!(tampered, Err(TrustError::UntrustedKey { .. })),
        "{tampered:?}"
    );

    let insecure = Requirement {
        signers: vec![],
        min_signers: 1,
        insecure: true,
    };
    assert!(matches!(
        verify(b"x", &Signatures::default(), &insecure, &root).unwrap(),
        Verified::Insecure { .. }
    ));
}

#[test]
fn a_key_listed_twice_is_one_signer() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plugin.wasm");
    let bytes = b"\0asm plugin".to_vec();
    std::fs::write(&file, &bytes).unwrap();
    let (alice, bob) = (PrivateKey::generate(), PrivateKey::generate());
    std::fs::write(dir.path().join("plugin.wasm.sig"), alice.sign(&bytes)).unwrap();
    // The same signature twice, under another name: still one signer.
    std::fs::write(dir.path().join("plugin.wasm.copy.sig"), alice.sign(&bytes)).unwrap();
    let root = TrustRoot::public_good().unwrap();
    let requirement = |signers: Vec<&PrivateKey>, min| Requirement {
        signers: signers
            .into_iter()
            .map(|k| Signer::Key(k.public_key()))
            .collect(),
        min_signers: min,
        insecure: false,
    };
    let check =
        |req: &Requirement| verify(&bytes, &Signatures::next_to(&file).unwrap(), req, &root);

    let err = check(&requirement(vec![&alice, &alice], 2)).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("1 of 2 required signers verified"),
        "{err}"
    );
    assert!(
        err.to_string().contains("already counted"),
        "says why the second entry does not count: {err}"
    );
    assert!(check(&requirement(vec![&alice, &alice, &bob], 2)).is_err());
    std::fs::write(dir.path().join("plugin.wasm.bob.sig"), bob.sign(&bytes)).unwrap();
    match check(&requirement(vec![&alice, &alice, &bob], 2)).unwrap() {
        Verified::Signed { signers, .. } => assert_eq!(signers.len(), 2, "{signers:?}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn overlapping_keyless_entries_need_distinct_signers() {
    let Some(_) = corpus(Corpus::SigstoreConformance) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.txt");
    let bytes = std::fs::read(conformance().join("a.txt")).unwrap();
    std::fs::write(&file, &bytes).unwrap();
    std::fs::copy(
        conformance().join("happy-path-v0.3-new-mediaType/bundle.sigstore.json"),
        dir.path().join("a.txt.sigstore.json"),
    )
    .unwrap();
    let root = TrustRoot::public_good().unwrap();
    let exact = Signer::Keyless(Keyless {
        identity: Identity::Exact(DEFAULT_IDENTITY.into()),
        issuer: DEFAULT_ISSUER.into(),
    });
    let regex = Signer::Keyless(Keyless {
        identity: Identity::regex("https://github.com/sigstore-conformance/.*").unwrap(),
        issuer: DEFAULT_ISSUER.into(),
    });
    let check = |signers: Vec<Signer>, min| {
        verify(
            &bytes,
            &Signatures::next_to(&file).unwrap(),
            &Requirement {
                signers,
                min_signers: min,
                insecure: false,
            },
            &root,
        )
    };

    // One bundle matches both entries: one signer, not two.
    let err = check(vec![exact.clone(), regex.clone()], 2).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("1 of 2 required signers verified"),
        "{err}"
    );
    assert!(check(vec![exact.clone(), regex.clone()], 1).is_ok());

    // A second, distinct signer (a key) makes two.
    let alice = PrivateKey::generate();
    std::fs::write(dir.path().join("a.txt.sig"), alice.sign(&bytes)).unwrap();
    match check(vec![exact, regex, Signer::Key(alice.public_key())], 2).unwrap() {
        Verified::Signed { signers, .. } => assert_eq!(signers.len(), 2, "{signers:?}"),
        other => panic!("{other:?}"),
    }
}

/// `kiln` in `dir`, which also serves as the user's home.
fn kiln(dir: &Path, args: &[&str]) -> std::process::Output {
    support::kiln_as_user(dir, dir, args)
}

#[test]
fn keygen_sign_and_verify_from_the_command_line() {
    let Some(_) = corpus(Corpus::SigstoreConformance) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"),
        d.join("plugin.wasm"),
    )
    .unwrap();

    let out = kiln(d, &["plugin", "keygen", "--output-prefix", "release"]);
    support::assert_success(&out);
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(d.join("release.key"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    assert_eq!(
        kiln(d, &["plugin", "keygen", "--output-prefix", "release"])
            .status
            .code(),
        Some(2),
        "never overwrites a key"
    );

    let out = kiln(
        d,
        &["plugin", "verify", "plugin.wasm", "--key", "release.pub"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .starts_with("refused plugin.wasm: no signature found (looked for plugin.wasm.sig")
    );

    assert_eq!(
        kiln(
            d,
            &["plugin", "sign", "plugin.wasm", "--key", "release.key"]
        )
        .status
        .code(),
        Some(0)
    );
    let out = kiln(
        d,
        &["plugin", "verify", "plugin.wasm", "--key", "release.pub"],
    );
    support::assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("verified plugin.wasm (sha256:"));

    // A policy with two required signers; then a tampered component.
    kiln(d, &["plugin", "keygen", "--output-prefix", "second"]);
    std::fs::write(
        d.join("trust.yaml"),
        "rules:\n- references: ['file://*/plugin.wasm']\n  allOf: [{key: release.pub}, {key: second.pub}]\n",
    )
    .unwrap();
    let out = kiln(
        d,
        &["plugin", "verify", "plugin.wasm", "--policy", "trust.yaml"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("1 of 2 required signers verified"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    kiln(
        d,
        &[
            "plugin",
            "sign",
            "plugin.wasm",
            "--key",
            "second.key",
            "--output",
            "plugin.wasm.second.sig",
        ],
    );
    assert_eq!(
        kiln(
            d,
            &["plugin", "verify", "plugin.wasm", "--policy", "trust.yaml"]
        )
        .status
        .code(),
        Some(0)
    );
    std::fs::write(d.join("plugin.wasm"), b"tampered").unwrap();
    let out = kiln(
        d,
        &["plugin", "verify", "plugin.wasm", "--policy", "trust.yaml"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("signed, but not by a trusted key, or the file changed after it was signed"),
        "tampered bytes are named as a possible cause: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Keyless against the conformance bundle, by identity regex.
    let case = conformance().join("happy-path-v0.3-new-mediaType");
    std::fs::copy(conformance().join("a.txt"), d.join("a.txt")).unwrap();
    std::fs::copy(
        case.join("bundle.sigstore.json"),
        d.join("a.txt.sigstore.json"),
    )
    .unwrap();
    let out = kiln(
        d,
        &[
            "plugin",
            "verify",
            "a.txt",
            "--certificate-identity-regexp",
            "https://github.com/sigstore-conformance/.*",
            "--certificate-oidc-issuer",
            DEFAULT_ISSUER,
        ],
    );
    support::assert_success(&out);
    let out = kiln(
        d,
        &[
            "plugin",
            "verify",
            "a.txt",
            "--certificate-identity",
            "someone@example.com",
            "--certificate-oidc-issuer",
            DEFAULT_ISSUER,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with("refused a.txt: identity mismatch: expected someone@example.com, found https://github.com/sigstore-conformance/"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn render_refuses_plugins_the_trust_policy_does_not_accept() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(root.join("plugins/dist/values.wasm"), d.join("values.wasm"))
        .expect("scripts/build-plugins ran");
    let app = root.join("examples/guestbook");
    let app = app.to_str().unwrap();
    assert_eq!(
        kiln(d, &["plugin", "keygen", "--output-prefix", "dev"])
            .status
            .code(),
        Some(0)
    );
    std::fs::write(
        d.join("trust.yaml"),
        "rules:\n- references: ['file://*/values.wasm']\n  anyOf: [{key: dev.pub}]\n",
    )
    .unwrap();
    let render = |d: &Path| {
        kiln(
            d,
            &[
                "render",
                app,
                "--no-compile-cache",
                "--plugin",
                "values.wasm",
                "--trust-policy",
                "trust.yaml",
            ],
        )
    };

    let out = render(d);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let location = format!(
        "file://{}",
        d.canonicalize().unwrap().join("values.wasm").display()
    );
    assert!(
        stderr.starts_with(&format!(
            "error: plugin {location} refused: no signature found"
        )),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "nothing rendered");

    assert_eq!(
        kiln(d, &["plugin", "sign", "values.wasm", "--key", "dev.key"])
            .status
            .code(),
        Some(0)
    );
    let out = render(d);
    support::assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("guestbook-frontend"));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("not verified"));

    // A plugin no rule matches is refused (a `names` rule matches catalog
    // names only, never the file's name); an insecure rule is loud.
    std::fs::write(
        d.join("trust.yaml"),
        "rules:\n- references: ['file://*/other.wasm']\n  insecure: true\n- names: [values]\n  insecure: true\n",
    )
    .unwrap();
    let out = render(d);
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("refused: no rule of the trust policy matches it")
    );
    std::fs::write(
        d.join("trust.yaml"),
        "rules:\n- references: ['*']\n  insecure: true\n",
    )
    .unwrap();
    let out = render(d);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("WARNING: plugin values (sha256:"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn kiln_and_the_python_sigstore_client_agree_on_every_public_good_case() {
    let Some(_) = corpus(Corpus::SigstoreConformance) else {
        return;
    };
    let Some(python) = support::require(support::Tool::SigstorePython) else {
        return;
    };
    // Keyless cases on the public-good instance: what `sigstore verify
    // identity --offline` checks with its own embedded trust root.
    let mut cases: Vec<PathBuf> = std::fs::read_dir(conformance())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.join("bundle.sigstore.json").exists()
                && !p.join("trusted_root.json").exists()
                && !p.join("key.pub").exists()
        })
        .collect();
    cases.sort();
    assert!(cases.len() >= 10, "{} cases", cases.len());
    let verdicts: Vec<(String, bool, bool)> = std::thread::scope(|scope| {
        let handles: Vec<_> = cases
            .iter()
            .map(|case| {
                let python = python.clone();
                scope.spawn(move || {
                    let read = |name: &str, default: &str| {
                        std::fs::read_to_string(case.join(name))
                            .map(|s| s.trim().to_owned())
                            .unwrap_or_else(|_| default.to_owned())
                    };
                    let artifact = if case.join("artifact").exists() {
                        case.join("artifact")
                    } else {
                        conformance().join("a.txt")
                    };
                    let python_ok = Command::new(&python)
                        .args([
                            "-m",
                            "sigstore",
                            "verify",
                            "identity",
                            "--offline",
                            "--bundle",
                        ])
                        .arg(case.join("bundle.sigstore.json"))
                        .args(["--cert-identity", &read("identity", DEFAULT_IDENTITY)])
                        .args(["--cert-oidc-issuer", &read("issuer", DEFAULT_ISSUER)])
                        .arg(&artifact)
                        .output()
                        .unwrap()
                        .status
                        .success();
                    let name = case.file_name().unwrap().to_string_lossy().into_owned();
                    (name, verify_case(case).is_ok(), python_ok)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let disagreements: Vec<String> = verdicts
        .iter()
        .filter(|(_, kiln, python)| kiln != python)
        .map(|(name, kiln, python)| format!("{name}: kiln {kiln}, sigstore-python {python}"))
        .collect();
    assert!(disagreements.is_empty(), "{disagreements:#?}");
    // Both accept the happy paths and refuse the rest: not a vacuous match.
    assert!(verdicts.iter().any(|(_, kiln, _)| *kiln));
    assert!(verdicts.iter().any(|(_, kiln, _)| !*kiln));
}
