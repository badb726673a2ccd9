//! The first-party `validating-admission-policy` component (`vap.wasm`)
//! through the real wasm host: a sample of the VAP corpus of
//! `tests/data/vap` (the whole corpus runs natively in
//! `plugins/vap/tests/corpus.rs`), directories of policies, settings
//! validation, hostile expressions, and `kiln render --policy`.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use kiln::manifest::{self, Object};
use kiln::plugin::{Finding, Plugin, PluginError, Severity, World};
use support::*;

fn policy() -> Plugin {
    host()
        .load_file(&component("vap"), World::Policy, None)
        .unwrap()
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/vap")
}

fn objects(case: &str) -> Vec<Object> {
    let text = std::fs::read_to_string(corpus().join(case).join("objects.yaml")).unwrap();
    manifest::parse(&text, Some("objects.yaml")).unwrap()
}

fn settings(case: &str) -> Vec<(String, String)> {
    let mut out = vec![
        ("policy".to_owned(), format!("{case}/policy.yaml")),
        ("binding".to_owned(), format!("{case}/binding.yaml")),
    ];
    if corpus().join(case).join("params.yaml").exists() {
        out.push(("params".to_owned(), format!("{case}/params.yaml")));
    }
    out
}

async fn review(case: &str) -> Result<Vec<Finding>, PluginError> {
    policy()
        .review(
            view(&corpus()),
            None,
            context("vap", ""),
            objects(case).into(),
            settings(case),
        )
        .await
}

fn summary(findings: &[Finding]) -> Vec<(String, Severity, String)> {
    findings
        .iter()
        .map(|f| {
            let o = f.object.as_ref().expect("findings name their object");
            (
                format!("{}/{}", o.kind, o.name),
                f.severity,
                f.message.clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_failing_validation_is_an_error_finding_in_the_api_server_s_words() {
    let findings = summary(&review("04-message-expression").await.unwrap());
    assert_eq!(
        findings,
        [(
            "Deployment/web".to_owned(),
            Severity::Error,
            "ValidatingAdmissionPolicy 'replicas.example.com' with binding 'replicas-binding' \
             denied request: replicas: 10 > 5"
                .to_owned()
        )]
    );
}

#[tokio::test]
async fn validation_actions_give_severities() {
    let warn = summary(&review("08-action-warn").await.unwrap());
    assert_eq!(warn.len(), 1);
    assert_eq!(warn[0].1, Severity::Warning);
    let both = summary(&review("10-action-deny-audit").await.unwrap());
    let severities: Vec<_> = both.iter().map(|f| f.1).collect();
    assert_eq!(severities, [Severity::Error, Severity::Info]);
}

#[tokio::test]
async fn parameterized_bindings_through_the_component() {
    let by_namespace = summary(&review("38-params-namespaced").await.unwrap());
    let messages: Vec<_> = by_namespace.iter().map(|f| f.2.as_str()).collect();
    assert!(messages[0].ends_with("at most 2 replicas"), "{messages:?}");
    assert!(messages[1].ends_with("at most 3 replicas"), "{messages:?}");
    let not_found = summary(&review("41-params-not-found-deny").await.unwrap());
    assert!(not_found[0].2.contains("no params found"), "{not_found:?}");
}

#[tokio::test]
async fn missing_libraries_and_authorizer_are_refused_by_name() {
    for (case, name) in [
        (
            "49-authorizer-refused",
            "`check` (Kubernetes authorizer library)",
        ),
        ("51-semver-refused", "`semver` (Kubernetes semver library)"),
        (
            "52-base64-refused",
            "`base64.encode` (CEL encoders extension)",
        ),
    ] {
        let err = review(case).await.unwrap_err().to_string();
        assert!(err.contains(name), "{case}: {err}");
        assert!(
            err.contains("policy.yaml"),
            "the error names the file: {err}"
        );
    }
}

#[tokio::test]
async fn kubernetes_quantity_url_and_ip_libraries_through_the_component() {
    for (case, words) in [
        (
            "68-lib-quantity",
            vec!["memory of 536870912 bytes is not over 1Gi"],
        ),
        (
            "69-lib-url",
            vec![
                "homepage www.example.com is not a URL",
                "parse \"www.example.com\": invalid URI for request",
            ],
        ),
        (
            "70-lib-ip-cidr",
            vec![
                "the source must be in 192.168.0.0/16",
                "IPv4-mapped IPv6 address \"::ffff:10.1.2.3\" is not allowed",
            ],
        ),
        (
            "71-attack-long-quantity",
            vec!["the string is 5000 bytes long, more than the limit of 4096"],
        ),
    ] {
        let findings = summary(&review(case).await.unwrap());
        assert_eq!(findings.len(), words.len(), "{case}: {findings:?}");
        for (finding, words) in findings.iter().zip(words) {
            assert_eq!(finding.1, Severity::Error, "{case}");
            assert!(finding.2.contains(words), "{case}: {findings:?}");
        }
    }
}

#[tokio::test]
async fn attack_a_runaway_expression_fails_closed_in_the_sandbox() {
    let findings = summary(&review("58-attack-cost").await.unwrap());
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].1, Severity::Error);
    assert!(
        findings[0].2.contains("exceeded its cost budget"),
        "{findings:?}"
    );
    let err = review("59-attack-nesting").await.unwrap_err().to_string();
    assert!(err.contains("nests 2000 levels deep"), "{err}");
}

#[tokio::test]
async fn directories_of_policies_bindings_and_params() {
    let src = tree(&[
        (
            "policy/a.yaml",
            &std::fs::read_to_string(corpus().join("38-params-namespaced/policy.yaml")).unwrap(),
        ),
        (
            "policy/b/c.yml",
            &std::fs::read_to_string(corpus().join("02-validation-fails/policy.yaml"))
                .unwrap()
                .replace("replicas.example.com", "other.example.com"),
        ),
        ("policy/readme.txt", "not a policy"),
        (
            "bindings/a.yaml",
            &std::fs::read_to_string(corpus().join("38-params-namespaced/binding.yaml")).unwrap(),
        ),
        (
            "params/p.yaml",
            &std::fs::read_to_string(corpus().join("38-params-namespaced/params.yaml")).unwrap(),
        ),
    ]);
    let findings = policy()
        .review(
            view(src.path()),
            None,
            context("vap", ""),
            objects("38-params-namespaced").into(),
            params(&[
                ("policy", "policy"),
                ("binding", "bindings"),
                ("params", "params"),
            ]),
        )
        .await
        .unwrap();
    assert_eq!(findings.len(), 2, "{:?}", summary(&findings));
}

#[tokio::test]
async fn settings_are_validated_and_missing_files_are_errors() {
    let policy = policy();
    for (pairs, words) in [
        (vec![("policy", "p.yaml")], "setting `binding` is required"),
        (
            vec![("polcy", "p.yaml"), ("binding", "b")],
            "unknown setting `polcy`",
        ),
        (
            vec![("policy", ""), ("binding", "b")],
            "setting `policy`: the path is empty",
        ),
    ] {
        let err = policy
            .validate_settings(params(&pairs))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(words), "{err}");
    }
    let err = policy
        .review(
            view(&corpus()),
            None,
            context("vap", ""),
            objects("01-validation-passes").into(),
            params(&[
                ("policy", "nope.yaml"),
                ("binding", "01-validation-passes/binding.yaml"),
            ]),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("nope.yaml"), "{err}");
}

#[test]
fn kiln_render_with_the_vap_policy_blocks_and_reports() {
    let case = corpus().join("02-validation-fails");
    let src = tree(&[
        (
            "app/deploy.yaml",
            &std::fs::read_to_string(case.join("objects.yaml")).unwrap(),
        ),
        (
            "policies/policy.yaml",
            &std::fs::read_to_string(case.join("policy.yaml")).unwrap(),
        ),
        (
            "policies/binding.yaml",
            &std::fs::read_to_string(case.join("binding.yaml")).unwrap(),
        ),
    ]);
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args([
            "render",
            src.path().join("app").to_str().unwrap(),
            "--root",
            src.path().to_str().unwrap(),
            "--no-compile-cache",
            "--policy",
            component("vap").to_str().unwrap(),
            "--setting",
            "policy=policies/policy.yaml",
            "--setting",
            "binding=policies/binding.yaml",
        ])
        .env_remove("KILN_LOG")
        .output()
        .expect("kiln runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("— BLOCKED"), "{stderr}");
    assert!(
        stderr.contains("denied request: failed expression: object.spec.replicas <= 5"),
        "{stderr}"
    );
}
