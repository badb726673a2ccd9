//! Policies: settings validation, findings and modes, with the real
//! `required-labels` policy.

mod support;

use kiln::manifest;
use kiln::plugin::{PluginError, Severity, World};
use kiln::policy::{Mode, PolicySource, PolicyStep, evaluate};
use support::*;

const OBJECTS: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {team: a}}
spec:
  template:
    metadata: {labels: {}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, labels: {team: b}}
";

#[tokio::test]
async fn findings_name_object_and_field() {
    let host = host();
    let policy = host
        .load_file(&component("required-labels"), World::Policy, None)
        .unwrap();
    let objects = manifest::parse(OBJECTS, Some("t.yaml")).unwrap();
    let findings = policy
        .review(
            view(&guestbook()),
            None,
            context("t", ""),
            objects.into(),
            params(&[("labels", "team")]),
        )
        .await
        .unwrap();
    assert_eq!(findings.len(), 1, "{findings:?}");
    let finding = &findings[0];
    assert_eq!(
        finding.object.as_ref().unwrap().to_string(),
        "Deployment/shop/web"
    );
    assert_eq!(
        finding.field_path.as_deref(),
        Some("spec.template.metadata.labels.team")
    );
    assert_eq!(finding.severity, Severity::Error);
}

#[tokio::test]
async fn invalid_settings_are_refused_with_the_policy_s_message() {
    let host = host();
    let policy = host
        .load_file(&component("required-labels"), World::Policy, None)
        .unwrap();
    match policy
        .validate_settings(params(&[("lables", "team")]))
        .await
    {
        Err(PluginError::InvalidSettings { plugin, message }) => {
            assert_eq!(plugin, "required-labels");
            assert!(message.contains("unknown setting `lables`"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn modes_decide_what_blocks() {
    let host = host();
    let policy = host
        .load_file(&component("required-labels"), World::Policy, None)
        .unwrap();
    let objects = manifest::parse(OBJECTS, None).unwrap();
    let step = |mode, labels: &str| PolicyStep {
        plugin: policy.clone(),
        settings: params(&[("labels", labels)]),
        mode,
        source: PolicySource::Application(view(&guestbook())),
    };
    let run = |steps: Vec<PolicyStep>| {
        let objects = objects.clone();
        async move { evaluate(&context("t", ""), objects, &steps, None).await }
    };

    let report = run(vec![step(Mode::Warn, "owner"), step(Mode::Audit, "owner")]).await;
    assert!(!report.blocked(), "warn and audit never block");
    assert_eq!(report.results[0].findings.len(), 3);

    let report = run(vec![step(Mode::Warn, "owner"), step(Mode::Enforce, "team")]).await;
    assert!(report.blocked());
    assert!(!report.results[0].blocks() && report.results[1].blocks());

    let report = run(vec![step(Mode::Enforce, "")]).await;
    assert!(
        report.blocked(),
        "an enforced policy that cannot run fails closed"
    );
    assert!(
        report.results[0]
            .error
            .as_deref()
            .unwrap()
            .contains("`labels` is required")
    );

    let report = run(vec![step(Mode::Enforce, "team=a")]).await;
    let messages: Vec<_> = report.results[0]
        .findings
        .iter()
        .map(|f| f.message.as_str())
        .collect();
    assert!(
        messages.contains(&"label `team` is `b`, the policy requires `a`"),
        "{messages:?}"
    );
}
