//! `kiln render --policy-report FILE`: the findings as wgpolicyk8s.io
//! PolicyReports (one per namespace) and a ClusterPolicyReport, run as a
//! user runs it.

mod support;

use std::process::{Command, Output};

use kiln::policy::report::{OMITTED_ANNOTATION, Outcome, PolicyReport, ReportKind};
use support::*;

fn kiln(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .env_remove("KILN_LOG")
        .output()
        .expect("kiln runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn path(p: &std::path::Path) -> String {
    p.display().to_string()
}

/// Objects in two namespaces (one by default), and two cluster-scoped ones
/// (a built-in kind, and a kind the set's own CRD declares cluster-scoped).
fn mixed_app() -> tempfile::TempDir {
    tree(&[(
        "app/all.yaml",
        "\
apiVersion: v1
kind: ConfigMap
metadata: {name: in-default-namespace}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: in-other, namespace: other}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: reader}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com, labels: {team: a}}
spec:
  group: example.com
  scope: Cluster
  names: {kind: Widget, plural: widgets}
  versions: [{name: v1, served: true, storage: true}]
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
",
    )])
}

fn read_reports(file: &std::path::Path) -> Vec<PolicyReport> {
    let text = std::fs::read_to_string(file).unwrap();
    kiln::manifest::parse(&text, None)
        .unwrap()
        .into_iter()
        .map(|o| serde_json::from_value(serde_json::Value::Object(o.value().clone())).unwrap())
        .collect()
}

#[test]
fn findings_split_into_namespaced_reports_and_a_cluster_report() {
    let src = mixed_app();
    let out_file = src.path().join("reports.yaml");
    let out = kiln(&[
        "render",
        &path(&src.path().join("app")),
        "--no-compile-cache",
        "--namespace",
        "shop",
        "--policy",
        &path(&component("required-labels")),
        "--setting",
        "labels=team",
        "--policy-report",
        &path(&out_file),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let reports = read_reports(&out_file);
    let placed: Vec<_> = reports
        .iter()
        .map(|r| {
            (
                r.kind,
                r.metadata.namespace.clone(),
                r.results
                    .iter()
                    .map(|x| x.resources[0].name.clone().unwrap())
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    assert_eq!(
        placed,
        [
            (
                ReportKind::PolicyReport,
                Some("other".into()),
                vec!["in-other".to_owned()]
            ),
            (
                ReportKind::PolicyReport,
                Some("shop".into()),
                vec!["in-default-namespace".to_owned()]
            ),
            (
                ReportKind::ClusterPolicyReport,
                None,
                vec!["reader".to_owned(), "w".to_owned()]
            ),
        ]
    );
    for report in &reports {
        assert_eq!(report.api_version, "wgpolicyk8s.io/v1alpha2");
        assert_eq!(report.metadata.name.as_deref(), Some("kiln-app"));
        assert_eq!(
            report.metadata.labels.as_ref().unwrap()["app.kubernetes.io/managed-by"],
            "kiln"
        );
        for result in &report.results {
            assert_eq!(result.result, Outcome::Fail);
            assert_eq!(result.policy, "required-labels");
            assert_eq!(result.source, "kiln");
            assert!(result.message.contains("team"), "{}", result.message);
        }
    }
    assert_eq!(reports[2].summary.fail, 2);
}

#[test]
fn a_report_is_capped_and_counts_what_it_left_out() {
    let many: String = (0..40)
        .map(|i| format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}}}\n"))
        .collect();
    let src = tree(&[("app/many.yaml", &many)]);
    let out_file = src.path().join("reports.yaml");
    let out = kiln(&[
        "render",
        &path(&src.path().join("app")),
        "--no-compile-cache",
        "--policy",
        &path(&component("required-labels")),
        "--setting",
        "labels=team",
        "--mode",
        "warn",
        "--policy-report",
        &path(&out_file),
        "--policy-report-max-results",
        "7",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let reports = read_reports(&out_file);
    assert_eq!(reports.len(), 1);
    let report = &reports[0];
    // No --namespace: namespaced objects without one land in `default`.
    assert_eq!(report.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(report.results.len(), 7);
    assert_eq!(report.summary.warn, 40, "the summary counts every finding");
    assert_eq!(
        report.metadata.annotations.as_ref().unwrap()[OMITTED_ANNOTATION],
        "33"
    );
    assert_eq!(report.results[0].properties["mode"], "warn");
}

#[test]
fn no_findings_write_an_empty_report_that_clears_an_old_one() {
    let src = tree(&[(
        "app/x.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, labels: {team: a}}\n",
    )]);
    let out_file = src.path().join("reports.yaml");
    std::fs::write(&out_file, "stale").unwrap();
    let out = kiln(&[
        "render",
        &path(&src.path().join("app")),
        "--no-compile-cache",
        "--namespace",
        "shop",
        "--policy",
        &path(&component("required-labels")),
        "--setting",
        "labels=team",
        "--policy-report",
        &path(&out_file),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let reports = read_reports(&out_file);
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].metadata.namespace.as_deref(), Some("shop"));
    assert!(reports[0].results.is_empty());
}

#[test]
fn an_unwritable_report_file_exits_2_naming_it() {
    let src = tree(&[(
        "app/x.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    )]);
    let out_file = src.path().join("no/such/dir/reports.yaml");
    let out = kiln(&[
        "render",
        &path(&src.path().join("app")),
        "--policy-report",
        &path(&out_file),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains(&path(&out_file)), "{stderr}");
}

#[test]
fn json_output_carries_the_findings() {
    let src = mixed_app();
    let out = kiln(&[
        "render",
        &path(&src.path().join("app")),
        "--no-compile-cache",
        "--policy",
        &path(&component("required-labels")),
        "--setting",
        "labels=team",
        "--mode",
        "audit",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"].as_array().unwrap().len(), 5);
    let policy = &list["policy"];
    assert_eq!(policy["blocked"], false);
    let result = &policy["results"][0];
    assert_eq!(result["policy"], "required-labels");
    assert_eq!(result["mode"], "audit");
    let findings = result["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 4, "{findings:?}");
    assert_eq!(findings[0]["severity"], "error");
    assert_eq!(findings[0]["object"]["name"], "in-default-namespace");
}
