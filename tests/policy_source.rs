//! Policies reading a source of their own (issue 18): the security team's
//! repository instead of the application's tree. Settings paths are
//! resolved inside the policy's source and cannot leave it; its files are
//! bounded as an application's are; `kiln render --policy-root`.
//! The controller end to end is in `tests/controller.rs`
//! (`project_policies_read_the_security_team_s_repository`), the render
//! server's in `tests/render_server.rs`.

mod support;

use std::process::Command;
use std::sync::Arc;

use kiln::manifest;
use kiln::plugin::World;
use kiln::policy::{Mode, PolicySource, PolicyStep, Report, evaluate};
use kiln::source::git::{GitConfig, GitSource, NoCredentials, RepoUrl, Revision};
use kiln::source::{SourcePath, SourceView, Subtree};
use support::git::Fixture;
use support::*;

const WEB: &str =
    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 10}\n";

fn replicas_policy(max: u32) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n\
         metadata: {{name: replicas}}\nspec:\n  matchConstraints:\n    resourceRules:\n\
         \x20   - {{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}}\n\
         \x20 validations:\n  - expression: object.spec.replicas <= {max}\n"
    )
}

const BINDING: &str = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
                       metadata: {name: replicas}\nspec: {policyName: replicas, validationActions: [Deny]}\n";

/// Reviews [`WEB`] with the `vap` policy reading `source`.
async fn review(source: PolicySource, policy: &str) -> Report {
    let plugin = host()
        .load_file(&component("vap"), World::Policy, None)
        .unwrap();
    let step = PolicyStep {
        plugin,
        settings: params(&[("policy", policy), ("binding", "binding.yaml")]),
        mode: Mode::Enforce,
        source,
    };
    let objects = manifest::parse(WEB, Some("apps/web/web.yaml")).unwrap();
    evaluate(&context("web", "apps/web"), objects, &[step], None).await
}

fn own(view: Arc<dyn SourceView>) -> PolicySource {
    PolicySource::Own {
        view,
        repo_url: "https://git.example.com/security/policies.git".into(),
        revision: "0123".into(),
    }
}

/// One tree: the application under `apps/web` with a permissive policy of
/// its own, and the security team's under `security`.
fn repository() -> tempfile::TempDir {
    tree(&[
        ("apps/web/web.yaml", WEB),
        ("apps/web/policy.yaml", &replicas_policy(100)),
        ("apps/web/binding.yaml", BINDING),
        ("security/policy.yaml", &replicas_policy(5)),
        ("security/binding.yaml", BINDING),
    ])
}

#[tokio::test]
async fn a_policy_reads_its_own_source_and_not_the_application_s() {
    let repo = repository();
    let security = Subtree::of(view(repo.path()), SourcePath::parse("security").unwrap());
    let report = review(own(security), "policy.yaml").await;
    assert!(report.blocked(), "{report:?}");
    let result = &report.results[0];
    assert!(
        result.findings[0]
            .message
            .contains("object.spec.replicas <= 5"),
        "{result:?}"
    );
    // What it read is recorded, relative to its source.
    let read: Vec<&str> = result.read_set.iter().map(|(p, _)| p.as_str()).collect();
    assert!(read.contains(&"policy.yaml"), "{read:?}");
}

#[tokio::test]
async fn attack_a_settings_path_climbing_out_of_the_policy_source_is_refused() {
    let repo = repository();
    let security = Subtree::of(view(repo.path()), SourcePath::parse("security").unwrap());
    for path in ["../apps/web/policy.yaml", "/../apps/web/policy.yaml"] {
        let report = review(own(security.clone()), path).await;
        let result = &report.results[0];
        assert!(result.blocks(), "{path}: {result:?}");
        let error = result.error.as_deref().unwrap_or_default();
        assert!(error.contains("denied"), "{path}: {error}");
        assert!(result.findings.is_empty(), "{path}: {result:?}");
    }
}

#[tokio::test]
async fn an_unavailable_policy_source_fails_closed_naming_the_repository() {
    let source = PolicySource::Unavailable {
        repo_url: "https://git.example.com/security/policies.git".into(),
        error: "connection refused".into(),
    };
    let report = review(source, "policy.yaml").await;
    assert!(report.blocked());
    let error = report.results[0].error.as_deref().unwrap();
    assert!(
        error.contains("https://git.example.com/security/policies.git")
            && error.contains("connection refused"),
        "{error}"
    );
}

#[tokio::test]
async fn attack_a_huge_file_in_the_policy_repository_is_bounded_as_an_application_s() {
    // Given a policy repository holding a policy file past the per-file
    // limit of Git sources (16 MiB).
    let dir = tempfile::tempdir().unwrap();
    let policies = Fixture::new(dir.path(), "policies");
    let huge = format!("{}# {}\n", replicas_policy(5), "x".repeat((16 << 20) + 1));
    policies.commit(
        "huge",
        &[("vap/policy.yaml", &huge), ("vap/binding.yaml", BINDING)],
    );
    policies.publish();
    let git = GitSource::new(
        GitConfig::new(dir.path().join("cache")),
        Arc::new(NoCredentials),
    )
    .unwrap();
    let url = RepoUrl::parse(&format!("file://{}", policies.bare.display())).unwrap();
    let tree = git.poll(&url, &Revision::parse("main")).await.unwrap();
    let source = Subtree::of(Arc::new(tree), SourcePath::parse("vap").unwrap());
    // Then the policy cannot read it: it fails closed, naming the file.
    let report = review(own(source), "policy.yaml").await;
    assert!(report.blocked());
    let error = report.results[0].error.as_deref().unwrap();
    assert!(
        error.contains("vap/policy.yaml") && error.contains("too large"),
        "{error}"
    );
}

fn kiln_render(repo: &std::path::Path, extra: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .arg("render")
        .arg(repo.join("apps/web"))
        .arg("--root")
        .arg(repo)
        .args(["--no-compile-cache", "--policy"])
        .arg(component("vap"))
        .args(extra)
        .env_remove("KILN_LOG")
        .output()
        .expect("kiln runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn kiln_render_policy_root_sets_the_policies_source() {
    let repo = repository();
    // Without --policy-root, the policy reads the application's source
    // (paths from its root): the application's permissive files pass.
    let (code, stderr) = kiln_render(
        repo.path(),
        &[
            "--setting",
            "policy=apps/web/policy.yaml",
            "--setting",
            "binding=apps/web/binding.yaml",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    // With it, the same settings name the security team's files.
    let security = repo.path().join("security");
    let (code, stderr) = kiln_render(
        repo.path(),
        &[
            "--policy-root",
            security.to_str().unwrap(),
            "--setting",
            "policy=policy.yaml",
            "--setting",
            "binding=binding.yaml",
        ],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("— BLOCKED"), "{stderr}");
    assert!(stderr.contains("object.spec.replicas <= 5"), "{stderr}");
    // And it cannot be left.
    let (code, stderr) = kiln_render(
        repo.path(),
        &[
            "--policy-root",
            security.to_str().unwrap(),
            "--setting",
            "policy=../apps/web/policy.yaml",
            "--setting",
            "binding=binding.yaml",
        ],
    );
    // A policy that cannot read its files could not run: an error (2),
    // not a verdict.
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("denied"), "{stderr}");
}
