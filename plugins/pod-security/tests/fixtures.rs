//! Pod Security Admission's own fixtures (../shared/testdata/pod-security, from
//! kubernetes/pod-security-admission test/testdata): every pod must get
//! upstream's answer at its level and version, bare and wrapped in every
//! pod-template kind, with upstream's reason in the message and the field
//! paths of the kind.

use std::path::{Path, PathBuf};

// Other projects' data is read from ../shared/testdata (the host's rule:
// a missing corpus fails under CI, else the skip is recorded).
#[path = "../../../tests/support/require.rs"]
#[allow(dead_code)]
mod require;

use kiln_pod_security::workload::{kinds, wrap_pod};
use kiln_pod_security::{Finding, Manifest, Settings, Severity, review};
use serde_json::Value;

fn data() -> PathBuf {
    require::Corpus::PodSecurity.path()
}

fn load(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn check(object: &Value, level: &str, version: &str) -> Vec<Finding> {
    let settings = Settings::parse([("level", level), ("version", version)]).unwrap();
    let json = object.to_string();
    review(
        &settings,
        "ns",
        &[Manifest {
            content: &json,
            source: None,
        }],
    )
    .unwrap()
}

/// The field path prefix of the pod spec in each kind.
fn spec_prefix(kind: &str) -> &'static str {
    match kind {
        "Pod" => "spec",
        "PodTemplate" => "template.spec",
        "CronJob" => "spec.jobTemplate.spec.template.spec",
        _ => "spec.template.spec",
    }
}

/// Checks one review against the expectation; returns a failure description.
fn judge(findings: &[Finding], deny: bool, reason: Option<&str>, kind: &str) -> Result<(), String> {
    let errors: Vec<_> = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .collect();
    if !deny {
        return if findings.is_empty() {
            Ok(())
        } else {
            Err(format!("allowed pod got {findings:#?}"))
        };
    }
    if errors.is_empty() {
        return Err("denied pod got no error finding".into());
    }
    if let Some(reason) = reason
        && !errors.iter().any(|f| f.message.contains(reason))
    {
        return Err(format!("no message contains {reason:?}: {errors:#?}"));
    }
    let spec = spec_prefix(kind);
    let meta = format!("{}metadata", spec.strip_suffix("spec").unwrap());
    for f in &errors {
        let path = f.field_path.as_deref().unwrap_or_default();
        if !(path.starts_with(&format!("{spec}.")) || path.starts_with(&format!("{meta}."))) {
            return Err(format!(
                "field path {path:?} is not in the {kind}'s pod template"
            ));
        }
        if !f
            .message
            .starts_with(&format!("[{}] violates PodSecurity", f.check))
        {
            return Err(format!("message does not name the check: {}", f.message));
        }
    }
    Ok(())
}

#[test]
fn every_case_of_cases_tsv_bare_and_wrapped() {
    let Some(_) = require::corpus(require::Corpus::PodSecurity) else {
        return;
    };
    let tsv = std::fs::read_to_string(data().join("cases.tsv")).unwrap();
    let (mut cases, mut wrapped, mut failures) = (0, 0, Vec::new());
    for line in tsv.lines().filter(|l| !l.starts_with('#')) {
        let cols: Vec<&str> = line.split('\t').collect();
        let [path, level, version, expect, _check, reason, wrap] = cols[..] else {
            panic!("bad line {line:?}")
        };
        let pod = load(&data().join(path));
        let deny = expect == "deny";
        let reason = (reason != "-").then_some(reason);
        cases += 1;
        let mut kinds_here = vec!["Pod"];
        if wrap != "-" {
            kinds_here.push(wrap);
            wrapped += 1;
        }
        for kind in kinds_here {
            let object = wrap_pod(&pod, kind).unwrap();
            if let Err(e) = judge(&check(&object, level, version), deny, reason, kind) {
                failures.push(format!("{path} as {kind} at {level}:{version}: {e}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!((cases, wrapped), (2750, 678), "cases.tsv changed");
}

fn fixtures() -> Vec<(PathBuf, String, String, bool)> {
    let mut out = Vec::new();
    for level in ["baseline", "restricted"] {
        for version in std::fs::read_dir(data().join(level)).unwrap() {
            let version = version.unwrap();
            let v = version.file_name().into_string().unwrap();
            for (outcome, deny) in [("pass", false), ("fail", true)] {
                let Ok(dir) = std::fs::read_dir(version.path().join(outcome)) else {
                    continue;
                };
                for file in dir {
                    out.push((file.unwrap().path(), level.to_owned(), v.clone(), deny));
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_upstream_fixture_in_every_kind() {
    let Some(_) = require::corpus(require::Corpus::PodSecurity) else {
        return;
    };
    let fixtures = fixtures();
    let kinds: Vec<_> = kinds().collect();
    let mut failures = Vec::new();
    let mut reviews = 0;
    for (path, level, version, deny) in &fixtures {
        let pod = load(path);
        for kind in &kinds {
            let object = wrap_pod(&pod, kind).unwrap();
            reviews += 1;
            if let Err(e) = judge(&check(&object, level, version), *deny, None, kind) {
                failures.push(format!("{} as {kind}: {e}", path.display()));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The 2750 upstream fixtures of the corpus (v1.0 to v1.37), each
    // reviewed in 9 kinds.
    assert_eq!(fixtures.len(), 2750);
    assert_eq!(reviews, 2750 * 9);
}

#[test]
fn fixtures_at_later_versions_act_as_latest() {
    let Some(_) = require::corpus(require::Corpus::PodSecurity) else {
        return;
    };
    // A version newer than the newest known is the newest (as PSA does).
    let latest = kiln_pod_security::LATEST_MINOR;
    let dir = data().join(format!("restricted/v1.{latest}"));
    for (outcome, deny) in [("pass", false), ("fail", true)] {
        for file in std::fs::read_dir(dir.join(outcome)).unwrap() {
            let pod = load(&file.unwrap().path());
            for version in ["latest", "v1.99"] {
                judge(&check(&pod, "restricted", version), deny, None, "Pod").unwrap();
            }
        }
    }
}
