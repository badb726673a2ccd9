//! kyverno/policies' own `kyverno test` suites (../shared/testdata/kyverno,
//! never copied into the repository), natively: every ClusterPolicy and
//! Policy folder of its cases.tsv, each expected result (policy, rule,
//! resource: pass, fail or skip) compared with the engine's.
//!
//! The engine does not run every suite yet (`podSecurity` and a few
//! classes listed in docs/policies.md are still to come): the test holds the count of
//! expected results it gets right to a floor that only rises, and prints
//! every miss by folder so that the next class is in plain sight.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[path = "../../../tests/support/require.rs"]
#[allow(dead_code)]
mod require;

use kiln_kyverno::engine::{self, Status};
use kiln_kyverno::matching::Request;
use kiln_kyverno::model;
use kiln_vap::matching::SetKinds;
use serde::Deserialize;
use serde_json::Value;

/// Expected results the engine gets right: every one of the data set's.
const FLOOR: usize = 2285;

#[derive(Debug, Deserialize)]
struct Test {
    #[serde(default)]
    policies: Vec<String>,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    exceptions: Vec<String>,
    #[serde(default)]
    results: Vec<Expected>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Expected {
    #[serde(default)]
    policy: String,
    #[serde(default)]
    rule: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    result: String,
    #[serde(default)]
    is_validating_policy: bool,
}

fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::Deserializer::from_str(&text)
        .filter_map(|d| Value::deserialize(d).ok())
        .filter(Value::is_object)
        .collect()
}

fn status_name(status: Status) -> &'static str {
    match status {
        Status::Pass => "pass",
        Status::Fail => "fail",
        Status::Skip => "skip",
        Status::Error => "error",
    }
}

/// The resource a result names: `NAME` or `NAMESPACE/NAME`, of `kind`
/// when given.
fn find<'a>(resources: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    let (namespace, name) = match name.split_once('/') {
        Some((ns, n)) => (Some(ns), n),
        None => (None, name),
    };
    resources.iter().find(|r| {
        r["metadata"]["name"] == name
            && (kind.is_empty() || r["kind"] == kind)
            && namespace
                .is_none_or(|ns| r["metadata"]["namespace"].as_str().unwrap_or("default") == ns)
    })
}

/// Runs one folder's suite: (right, wrong with the reasons).
fn run(folder: &Path) -> (usize, Vec<String>) {
    let dir = folder.join(".kyverno-test");
    let test: Test =
        serde_yaml::from_str(&std::fs::read_to_string(dir.join("kyverno-test.yaml")).unwrap())
            .unwrap();
    let mut found_documents = Vec::new();
    for file in test.policies.iter().chain(&test.exceptions) {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        match model::documents(&path.display().to_string(), &text) {
            Ok(found) => found_documents.extend(found),
            Err(e) => return (0, vec![format!("policy: {e}")]),
        }
    }
    let set = model::PolicySet::of(found_documents);
    let policies = set.prepared();
    let (validating, cel_exceptions) = (&set.validating, &set.cel_exceptions);
    let resources: Vec<Value> = test
        .resources
        .iter()
        .flat_map(|f| documents(&dir.join(f)))
        .collect();
    // The kyverno CLI gives a namespace it has no values for no labels.
    let no_labels = |_: &str| Ok(serde_json::Map::new());
    let request = Request {
        operation: "CREATE",
        namespace_labels: &no_labels,
        config_maps: &|_, _| Err("there is no cluster".to_owned()),
    };
    let kinds = SetKinds::of(&resources);
    let (mut right, mut wrong) = (0, Vec::new());
    for expected in &test.results {
        if expected.is_validating_policy {
            let Some(policy) = validating.iter().find(|p| p.name == expected.policy) else {
                wrong.push(format!("no ValidatingPolicy {}", expected.policy));
                continue;
            };
            for name in &expected.resources {
                let Some(resource) = find(&resources, &expected.kind, name) else {
                    wrong.push(format!("no resource {} {name}", expected.kind));
                    continue;
                };
                let (got, why) = match policy.evaluate(
                    resource,
                    &BTreeMap::new(),
                    &kinds,
                    "CREATE",
                    cel_exceptions,
                ) {
                    Some(r) => (status_name(r.status), r.message),
                    None => ("skip", "not matched".to_owned()),
                };
                if got == expected.result {
                    right += 1;
                } else {
                    wrong.push(format!(
                        "{} {} {name}: expected {}, got {got} ({why})",
                        expected.policy, expected.kind, expected.result
                    ));
                }
            }
            continue;
        }
        let Some(policy) = policies
            .iter()
            .find(|p| p.policy.metadata.name == expected.policy)
        else {
            wrong.push(format!("no policy {}", expected.policy));
            continue;
        };
        for name in &expected.resources {
            let Some(resource) = find(&resources, &expected.kind, name) else {
                wrong.push(format!("no resource {} {name}", expected.kind));
                continue;
            };
            let results = engine::evaluate(policy, resource, &request);
            let found = results.iter().find(|r| {
                r.rule == expected.rule
                    || r.rule == format!("autogen-{}", expected.rule)
                    || r.rule == format!("autogen-cronjob-{}", expected.rule)
            });
            let (got, why) = match found {
                Some(r) => (status_name(r.status), r.message.clone()),
                // A rule the policy does not have gives no result, which
                // `kyverno test` passes as excluded whatever was expected
                // (kept strict otherwise: a rule that exists must match).
                None if !policy
                    .policy
                    .spec
                    .rules
                    .iter()
                    .any(|r| r.name == expected.rule) =>
                {
                    (expected.result.as_str(), "excluded".to_owned())
                }
                None => ("skip", "not matched".to_owned()),
            };
            if got == expected.result {
                right += 1;
            } else {
                wrong.push(format!(
                    "{}/{} {} {name}: expected {}, got {got} ({why})",
                    expected.policy, expected.rule, expected.kind, expected.result
                ));
            }
        }
    }
    (right, wrong)
}

#[test]
fn kyverno_policies_own_suites() {
    let Some(root): Option<PathBuf> = require::corpus(require::Corpus::Kyverno) else {
        return;
    };
    let cases = std::fs::read_to_string(root.join("cases.tsv")).unwrap();
    let (mut right, mut total) = (0, 0);
    let mut misses: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in cases.lines().skip(1) {
        let fields: Vec<&str> = line.split('\t').collect();
        let (folder, expected, policy_kinds) = (fields[0], fields[2], fields[6]);
        if !policy_kinds.contains("Policy") {
            continue;
        }
        let expected: usize = expected.parse().unwrap();
        let (ok, wrong) = run(&root.join(folder));
        total += expected;
        right += ok;
        if !wrong.is_empty() {
            misses.insert(folder.to_owned(), wrong);
        }
    }
    for (folder, wrong) in &misses {
        eprintln!("{folder}:");
        for line in wrong.iter().take(6) {
            eprintln!("    {line}");
        }
    }
    eprintln!(
        "kyverno corpus: {right} of {total} expected results right, {} folders with misses",
        misses.len()
    );
    assert!(
        right >= FLOOR,
        "{right} right, fewer than the floor of {FLOOR}"
    );
}
