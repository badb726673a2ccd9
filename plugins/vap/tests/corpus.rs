//! The VAP corpus of `tests/data/vap/` (in the repository root): every case
//! is a directory with `policy.yaml`, `binding.yaml`, optional
//! `params.yaml`, `objects.yaml` and `expected.yaml`, run natively here (the
//! host's `tests/vap.rs` runs a sample through the wasm component).
//!
//! `expected.yaml`: either `error: REGEX` (compiling the files must fail
//! with a matching message) or `findings:` — a list of `{object: Kind/name,
//! severity: error|warning|info, message: REGEX}` that must match the
//! findings one to one, in order; `namespace: NAME` sets the Application's
//! destination namespace.

use std::path::{Path, PathBuf};

use kiln_vap::documents;
use kiln_vap::engine::{Document, PolicySet, Severity};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Expected {
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    findings: Vec<ExpectedFinding>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectedFinding {
    object: String,
    severity: String,
    message: String,
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/vap")
}

fn docs(dir: &Path, name: &str) -> Vec<Document> {
    let path = dir.join(name);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            documents::parse(name, &text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        }
        Err(_) => Vec::new(),
    }
}

fn run(dir: &Path) -> Result<(), String> {
    let expected: Expected = serde_yaml::from_str(
        &std::fs::read_to_string(dir.join("expected.yaml")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| format!("expected.yaml: {e}"))?;
    let compiled = PolicySet::compile(
        kiln_cel_k8s::Environment::default(),
        docs(dir, "policy.yaml"),
        docs(dir, "binding.yaml"),
        docs(dir, "params.yaml"),
    );
    let set = match (compiled, &expected.error) {
        (Err(e), Some(pattern)) => {
            let re = regex_lite(pattern);
            return if re(&e.to_string()) {
                Ok(())
            } else {
                Err(format!("error `{e}` does not match `{pattern}`"))
            };
        }
        (Err(e), None) => return Err(format!("unexpected error: {e}")),
        (Ok(_), Some(pattern)) => return Err(format!("expected an error matching `{pattern}`")),
        (Ok(set), None) => set,
    };
    let objects: Vec<serde_json::Value> = docs(dir, "objects.yaml")
        .into_iter()
        .map(|d| d.value)
        .collect();
    let findings = set.review(&placed(objects, &expected.namespace));
    let got: Vec<String> = findings
        .iter()
        .map(|f| format!("{}/{} {:?}: {}", f.kind, f.name, f.severity, f.message))
        .collect();
    if findings.len() != expected.findings.len() {
        return Err(format!(
            "expected {} findings, got {}:\n  {}",
            expected.findings.len(),
            findings.len(),
            got.join("\n  ")
        ));
    }
    for (f, e) in findings.iter().zip(&expected.findings) {
        let severity = match f.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        };
        if format!("{}/{}", f.kind, f.name) != e.object
            || severity != e.severity
            || !regex_lite(&e.message)(&f.message)
        {
            return Err(format!(
                "finding does not match {{object: {}, severity: {}, message: {}}}:\n  {}",
                e.object,
                e.severity,
                e.message,
                got.join("\n  ")
            ));
        }
    }
    Ok(())
}

/// Substring match, the pattern's `.*` standing for anything (enough for
/// the corpus; keeps the test free of a regex dependency).
fn regex_lite(pattern: &str) -> impl Fn(&str) -> bool + '_ {
    move |text: &str| {
        let mut rest = text;
        for part in pattern.split(".*") {
            match rest.find(part) {
                Some(i) => rest = &rest[i + part.len()..],
                None => return false,
            }
        }
        true
    }
}

#[test]
fn vap_corpus() {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(corpus())
        .expect("tests/data/vap exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 40,
        "the corpus has {} cases, fewer than 40",
        cases.len()
    );
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|dir| {
            run(dir)
                .err()
                .map(|e| format!("{}: {e}", dir.file_name().unwrap().to_string_lossy()))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases fail:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// The objects as the host hands them over without a cluster
/// (`kiln::policy::placement`): a kind a CRD of the set or Kubernetes
/// itself makes cluster-scoped is in no namespace; any other lands in
/// `namespace` when it names none.
fn placed(mut objects: Vec<serde_json::Value>, namespace: &str) -> Vec<serde_json::Value> {
    let crds: Vec<(String, String, bool)> = objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .filter_map(|crd| {
            Some((
                crd.pointer("/spec/group")?.as_str()?.to_owned(),
                crd.pointer("/spec/names/kind")?.as_str()?.to_owned(),
                crd.pointer("/spec/scope")?.as_str()? == "Namespaced",
            ))
        })
        .collect();
    for object in &mut objects {
        let group = object["apiVersion"]
            .as_str()
            .and_then(|v| v.rsplit_once('/'))
            .map_or("", |(g, _)| g)
            .to_owned();
        let kind = object["kind"].as_str().unwrap_or_default().to_owned();
        let namespaced = crds
            .iter()
            .find(|(g, k, _)| *g == group && *k == kind)
            .map(|(_, _, namespaced)| *namespaced)
            .unwrap_or_else(|| {
                !kiln_vap::matching::CLUSTER_SCOPED.contains(&(group.as_str(), kind.as_str()))
            });
        let unplaced = object
            .pointer("/metadata/namespace")
            .and_then(|n| n.as_str())
            .is_none_or(str::is_empty);
        if !namespaced {
            if let Some(metadata) = object["metadata"].as_object_mut() {
                metadata.remove("namespace");
            }
        } else if unplaced && !namespace.is_empty() {
            object["metadata"]["namespace"] = namespace.into();
        }
    }
    objects
}
