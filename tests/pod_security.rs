//! The first-party `pod-security` policy through the real wasm component:
//! Pod Security Admission's fixtures (../shared/testdata/pod-security) bare and
//! wrapped in pod-template kinds, findings' check ids, field paths and
//! wording, settings validation, namespace labels and hostile pod specs.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use kiln::manifest::{self, Object};
use kiln::plugin::{Finding, Plugin, PluginError, Severity, World};
use kiln_pod_security::workload::{kinds, wrap_pod};
use serde_json::{Value, json};
use support::require::{Corpus, corpus};
use support::*;

fn policy() -> Plugin {
    host()
        .load_file(&component("pod-security"), World::Policy, None)
        .unwrap()
}

fn data() -> PathBuf {
    Corpus::PodSecurity.path()
}

fn object(value: Value) -> Object {
    match value {
        Value::Object(map) => Object::new(map, None),
        other => panic!("not an object: {other}"),
    }
}

fn fixture(path: &str) -> Value {
    let text = std::fs::read_to_string(data().join(path)).unwrap();
    let objects = manifest::parse(&text, Some(path)).unwrap();
    Value::Object(objects[0].value().clone())
}

async fn review(policy: &Plugin, objects: Vec<Object>, settings: &[(&str, &str)]) -> Vec<Finding> {
    policy
        .review(
            view(&guestbook()),
            None,
            context("pss", ""),
            objects.into(),
            params(settings),
        )
        .await
        .unwrap()
}

/// One reviewed object: the case's index and the kind it is wrapped in.
type Key = (String, String);

fn key_of(finding: &Finding) -> Key {
    let object = finding.object.as_ref().expect("findings name their object");
    (object.name.clone(), object.kind.clone())
}

/// Every case of cases.tsv through the component, bare and wrapped in the
/// kind its `wrap` column names: one review per level and version, holding
/// every object of that level and version (renamed `c<line>`).
#[tokio::test]
async fn every_case_of_cases_tsv_bare_and_wrapped_through_the_component() {
    let Some(_) = corpus(Corpus::PodSecurity) else {
        return;
    };
    let policy = policy();
    let tsv = std::fs::read_to_string(data().join("cases.tsv")).unwrap();
    // (level, version) -> objects, and the expectation of each object.
    let mut groups: BTreeMap<(String, String), Vec<Object>> = BTreeMap::new();
    let mut expected: HashMap<Key, (bool, String, String)> = HashMap::new();
    let mut wrapped = 0;
    for (line, text) in tsv.lines().enumerate().filter(|(_, l)| !l.starts_with('#')) {
        let cols: Vec<&str> = text.split('\t').collect();
        let [path, level, version, expect, _check, reason, wrap] = cols[..] else {
            panic!("bad line {text:?}")
        };
        let mut pod = fixture(path);
        let name = format!("c{line}");
        pod["metadata"]["name"] = json!(name);
        let mut kinds_here = vec!["Pod"];
        if wrap != "-" {
            kinds_here.push(wrap);
            wrapped += 1;
        }
        for kind in kinds_here {
            groups
                .entry((level.to_owned(), version.to_owned()))
                .or_default()
                .push(object(wrap_pod(&pod, kind).unwrap()));
            expected.insert(
                (name.clone(), kind.to_owned()),
                (expect == "deny", reason.to_owned(), path.to_owned()),
            );
        }
    }
    assert_eq!((expected.len(), wrapped), (2750 + 678, 678));
    let mut failures = Vec::new();
    for ((level, version), objects) in groups {
        let findings = review(
            &policy,
            objects,
            &[("level", &level), ("version", &version)],
        )
        .await;
        let mut by_object: HashMap<Key, Vec<&Finding>> = HashMap::new();
        for f in &findings {
            by_object.entry(key_of(f)).or_default().push(f);
        }
        for (key, (deny, reason, path)) in &expected {
            if !path.starts_with(&format!("{level}/{version}/")) {
                continue;
            }
            let got = by_object.remove(key).unwrap_or_default();
            let errors: Vec<_> = got
                .iter()
                .filter(|f| f.severity == Severity::Error)
                .collect();
            let ok = if *deny {
                errors.iter().any(|f| f.message.contains(reason.as_str()))
            } else {
                got.is_empty()
            };
            if !ok {
                failures.push(format!("{path} as {}: {got:?}", key.1));
            }
        }
        assert!(
            by_object.is_empty(),
            "findings for unknown objects: {by_object:?}"
        );
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A sample of the upstream fixtures (the newest version of each level)
/// wrapped in every pod-bearing kind: same answer in every kind.
#[tokio::test]
async fn newest_fixtures_in_every_kind_through_the_component() {
    let Some(_) = corpus(Corpus::PodSecurity) else {
        return;
    };
    let policy = policy();
    let latest = format!("v1.{}", kiln_pod_security::LATEST_MINOR);
    let mut reviewed = 0;
    for level in ["baseline", "restricted"] {
        let mut objects = Vec::new();
        let mut deny = HashMap::new();
        for (outcome, denied) in [("pass", false), ("fail", true)] {
            let dir = data().join(level).join(&latest).join(outcome);
            for file in std::fs::read_dir(dir).unwrap() {
                let file = file.unwrap().file_name().into_string().unwrap();
                let mut pod = fixture(&format!("{level}/{latest}/{outcome}/{file}"));
                let name = format!("{outcome}-{}", file.trim_end_matches(".yaml"));
                pod["metadata"]["name"] = json!(name);
                for kind in kinds() {
                    objects.push(object(wrap_pod(&pod, kind).unwrap()));
                    deny.insert((name.clone(), kind.to_owned()), denied);
                }
            }
        }
        reviewed += objects.len();
        let findings = review(&policy, objects, &[("level", level)]).await;
        for (key, denied) in &deny {
            let errors = findings
                .iter()
                .filter(|f| &key_of(f) == key && f.severity == Severity::Error)
                .count();
            assert_eq!(errors > 0, *denied, "{key:?}: {findings:?}");
        }
    }
    assert!(reviewed > 9 * 80, "{reviewed}");
}

const PRIVILEGED_DEPLOYMENT: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: app
        image: nginx
        securityContext:
          privileged: true
          allowPrivilegeEscalation: false
          capabilities: {drop: [ALL]}
";

#[tokio::test]
async fn findings_name_the_check_the_field_and_psa_s_wording() {
    let policy = policy();
    let objects = manifest::parse(PRIVILEGED_DEPLOYMENT, Some("web.yaml")).unwrap();
    let findings = review(&policy, objects, &[("level", "baseline")]).await;
    assert_eq!(findings.len(), 1, "{findings:?}");
    let f = &findings[0];
    assert_eq!(
        f.object.as_ref().unwrap().to_string(),
        "Deployment/shop/web"
    );
    assert_eq!(
        f.field_path.as_deref(),
        Some("spec.template.spec.containers[0].securityContext.privileged")
    );
    assert_eq!(
        f.message,
        "[privileged] violates PodSecurity \"baseline:latest\": privileged \
         (container \"app\" must not set securityContext.privileged=true)"
    );
    assert_eq!(f.severity, Severity::Error);
    // Privileged allows everything.
    let objects = manifest::parse(PRIVILEGED_DEPLOYMENT, None).unwrap();
    assert!(
        review(&policy, objects, &[("level", "privileged")])
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn exempt_runtime_classes_are_not_checked() {
    let policy = policy();
    let yaml = PRIVILEGED_DEPLOYMENT.replace(
        "      containers:",
        "      runtimeClassName: kata\n      containers:",
    );
    let objects = manifest::parse(&yaml, None).unwrap();
    let settings = [
        ("level", "baseline"),
        ("exemptRuntimeClasses", "gvisor,kata"),
    ];
    assert!(review(&policy, objects, &settings).await.is_empty());
}

#[tokio::test]
async fn invalid_settings_are_refused_naming_the_setting() {
    let policy = policy();
    for (key, value) in [
        ("level", "strict"),
        ("version", "1.30"),
        ("version", "v1.030"),
        ("namespaceLabels", "yes"),
        ("levle", "baseline"),
    ] {
        match policy.validate_settings(params(&[(key, value)])).await {
            Err(PluginError::InvalidSettings { plugin, message }) => {
                assert_eq!(plugin, "pod-security");
                assert!(message.contains(&format!("`{key}`")), "{message}");
            }
            other => panic!("{key}={value}: {other:?}"),
        }
    }
    for (key, value) in [
        ("version", "v1.99"),
        ("version", "latest"),
        ("level", "baseline"),
    ] {
        policy
            .validate_settings(params(&[(key, value)]))
            .await
            .unwrap();
    }
}

const NAMESPACED: &str = "\
apiVersion: v1
kind: Namespace
metadata:
  name: team-a
  labels:
    pod-security.kubernetes.io/enforce: baseline
    pod-security.kubernetes.io/warn: restricted
    pod-security.kubernetes.io/warn-version: v1.30
---
apiVersion: v1
kind: Namespace
metadata:
  name: team-b
  labels:
    pod-security.kubernetes.io/enforce: privileged
    pod-security.kubernetes.io/audit: baseline
---
apiVersion: v1
kind: Namespace
metadata:
  name: team-c
  labels: {pod-security.kubernetes.io/enforce: strict}
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: team-a}
spec:
  containers: [{name: app, image: nginx}]
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: team-b}
spec:
  hostNetwork: true
  containers: [{name: app, image: nginx}]
";

#[tokio::test]
async fn namespace_labels_choose_level_version_and_severity() {
    let policy = policy();
    let objects = manifest::parse(NAMESPACED, None).unwrap();
    let findings = review(&policy, objects, &[("namespaceLabels", "true")]).await;
    let summary: Vec<_> = findings
        .iter()
        .map(|f| {
            let o = f.object.as_ref().unwrap();
            let check = f.message.split(']').next().unwrap().trim_start_matches('[');
            (o.kind.as_str(), o.name.as_str(), check, f.severity)
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("Namespace", "team-c", "namespaceLabels", Severity::Error),
            ("Pod", "a", "allowPrivilegeEscalation", Severity::Warning),
            ("Pod", "a", "capabilities_restricted", Severity::Warning),
            ("Pod", "a", "runAsNonRoot", Severity::Warning),
            ("Pod", "a", "seccompProfile_restricted", Severity::Warning),
            ("Pod", "b", "hostNamespaces", Severity::Info),
        ],
        "{findings:#?}"
    );
    assert!(
        findings[1]
            .message
            .contains("would violate PodSecurity \"restricted:v1.30\"")
    );
    assert_eq!(
        findings[0].field_path.as_deref(),
        Some("metadata.labels.pod-security.kubernetes.io/enforce")
    );
    // Without namespaceLabels, the settings' level (restricted) is enforced.
    let objects = manifest::parse(NAMESPACED, None).unwrap();
    let findings = review(&policy, objects, &[]).await;
    assert!(findings.iter().all(|f| f.severity == Severity::Error));
    assert_eq!(findings.len(), 4 + 5, "{findings:#?}");
}

fn pod(spec: Value) -> Object {
    object(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hostile"}, "spec": spec}),
    )
}

#[tokio::test]
async fn thousands_of_containers_give_bounded_findings() {
    let policy = policy();
    let containers: Vec<Value> = (0..20_000)
        .map(|i| json!({"name": format!("container-{i:05}"), "image": "x", "securityContext": {"privileged": true}}))
        .collect();
    let findings = review(
        &policy,
        vec![pod(json!({"containers": containers}))],
        &[("level", "baseline")],
    )
    .await;
    assert_eq!(findings.len(), 1);
    let message = &findings[0].message;
    assert!(message.len() <= 9 * 1024, "{} bytes", message.len());
    assert!(
        message.contains("more bytes); also at spec.containers[1].securityContext.privileged"),
        "{message}"
    );
    assert_eq!(
        findings[0].field_path.as_deref(),
        Some("spec.containers[0].securityContext.privileged")
    );
}

#[tokio::test]
async fn deep_nesting_fails_closed_without_trapping() {
    let policy = policy();
    let mut deep = json!("bottom");
    // Deeper than serde_json's limit of 128 (the host's own YAML reader refuses
    // much deeper documents before a policy sees them).
    for _ in 0..300 {
        deep = json!({ "a": deep });
    }
    // Deep inside a field the checks do not read: the policy cannot parse
    // the manifest and says so (fail closed), it does not trap.
    let err = policy
        .review(
            view(&guestbook()),
            None,
            context("pss", ""),
            vec![pod(json!({"containers": [], "extra": deep}))].into(),
            params(&[]),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("recursion limit"), "{err}");
}

#[tokio::test]
async fn wrong_types_are_error_findings_at_their_path() {
    let policy = policy();
    let bad = object(json!({
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"},
        "spec": {"jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "a", "securityContext": {"privileged": "true"}}]
        }}}}}
    }));
    let findings = review(&policy, vec![bad], &[("level", "baseline")]).await;
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(
        findings[0].field_path.as_deref(),
        Some("spec.jobTemplate.spec.template.spec.containers[0].securityContext.privileged")
    );
    assert!(
        findings[0].message.starts_with("[podTemplate]"),
        "{}",
        findings[0].message
    );
    assert_eq!(findings[0].severity, Severity::Error);
}

#[tokio::test]
async fn a_huge_pod_spec_is_reviewed() {
    let policy = policy();
    // 50,000 volumes and 5,000 containers with many ports: several MB.
    let volumes: Vec<Value> = (0..50_000)
        .map(|i| json!({"name": format!("v{i}"), "hostPath": {"path": "/"}}))
        .collect();
    let ports: Vec<Value> = (0..20)
        .map(|p| json!({"containerPort": p + 1, "hostPort": p + 1}))
        .collect();
    let containers: Vec<Value> = (0..5_000)
        .map(|i| json!({"name": format!("c{i}"), "ports": ports}))
        .collect();
    let findings = review(
        &policy,
        vec![pod(json!({"volumes": volumes, "containers": containers}))],
        &[("level", "baseline")],
    )
    .await;
    let checks: Vec<_> = findings
        .iter()
        .map(|f| f.message.split(']').next().unwrap())
        .collect();
    assert_eq!(checks, ["[hostPathVolumes", "[hostPorts"], "{findings:?}");
    assert!(findings.iter().all(|f| f.message.len() <= 9 * 1024));
}
