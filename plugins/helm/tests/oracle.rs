//! The engine, natively, against Helm v4.2.3's own engine: every case of
//! the host's `tests/helm/` corpus is rendered here and by
//! `tests/support/helm_template.py` (PyPI's helm-python-sdk, Helm's Go SDK
//! behind a C ABI), and the objects must be equal, in order. A case Helm
//! refuses must be refused here too, with Helm's message when the case
//! names it (`case.json` `"error"`).

use std::path::{Path, PathBuf};
use std::process::Command;

// The host's rule for missing tools (fail under CI, else a recorded skip).
#[path = "../../../tests/support/require.rs"]
#[allow(dead_code)]
mod require;

use kiln_helm::chart::DirSource;
use kiln_helm::{Options, render};
use require::{Tool, require};

/// The YAML documents of a stream, as JSON values (empty ones dropped).
fn objects(stream: &str) -> Result<Vec<serde_json::Value>, String> {
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(stream) {
        // Straight into JSON: a key repeated in a mapping keeps its last
        // value, as Helm's reader keeps it.
        let v = <serde_json::Value as serde::Deserialize>::deserialize(doc)
            .map_err(|e| e.to_string())?;
        if !v.is_null() {
            out.push(v);
        }
    }
    Ok(out)
}

fn options(case: &serde_json::Value) -> Options {
    let strings = |key: &str| -> Vec<String> {
        case.get(key)
            .and_then(|v| v.as_array())
            .map(|l| {
                l.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let defaults = Options::default();
    Options {
        release_name: case["release"]
            .as_str()
            .map_or(defaults.release_name, str::to_owned),
        namespace: case["namespace"]
            .as_str()
            .map_or(defaults.namespace, str::to_owned),
        value_files: strings("values"),
        set: strings("set"),
        set_string: strings("set_string"),
        kube_version: case["kube_version"].as_str().map(str::to_owned),
        api_versions: strings("api_versions"),
        skip_crds: case["skip_crds"].as_bool().unwrap_or(false),
        ..defaults
    }
}

#[test]
fn every_chart_renders_what_helm_renders() {
    let Some(python) = require(Tool::HelmPython) else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let harness = root.join("tests/support/helm_template.py");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(root.join("tests/helm"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("chart").is_dir())
        .collect();
    cases.sort();
    let mut wrong = Vec::new();
    for case_dir in &cases {
        let name = case_dir.file_name().unwrap().to_string_lossy().into_owned();
        let case: serde_json::Value = std::fs::read_to_string(case_dir.join("case.json"))
            .map(|t| serde_json::from_str(&t).unwrap())
            .unwrap_or(serde_json::json!({}));
        let oracle = Command::new(&python)
            .arg(&harness)
            .arg(case_dir)
            .output()
            .unwrap();
        let ours = render(&DirSource(case_dir.clone()), "chart", &options(&case));
        match (oracle.status.code(), ours) {
            (Some(0), Ok(docs)) => {
                let want = objects(&String::from_utf8(oracle.stdout).unwrap()).unwrap();
                let stream = kiln_helm::stream(&docs);
                match objects(&stream) {
                    Err(e) => wrong.push(format!("{name}: our output is not YAML: {e}\n{stream}")),
                    Ok(got) if got != want => {
                        let i = got
                            .iter()
                            .zip(&want)
                            .position(|(g, w)| g != w)
                            .unwrap_or(got.len().min(want.len()));
                        wrong.push(format!(
                            "{name}: object {i} differs ({} objects, Helm {}):\n  helm {}\n  ours {}",
                            got.len(),
                            want.len(),
                            want.get(i).map_or("<none>".into(), |v| v.to_string()),
                            got.get(i).map_or("<none>".into(), |v| v.to_string()),
                        ));
                    }
                    Ok(_) => {}
                }
            }
            (Some(2), Err(e)) => {
                let Some(expected) = case["error"].as_str() else {
                    wrong.push(format!(
                        "{name}: Helm fails ({}) but case.json expects no error",
                        String::from_utf8_lossy(&oracle.stderr).trim()
                    ));
                    continue;
                };
                {
                    let helm = String::from_utf8_lossy(&oracle.stderr);
                    assert!(
                        helm.contains(expected),
                        "{name}: Helm says {helm:?}, not {expected:?}"
                    );
                    if !e.to_string().contains(expected) {
                        wrong.push(format!("{name}: error {e:?} lacks Helm's {expected:?}"));
                    }
                }
            }
            (Some(0), Err(e)) => wrong.push(format!("{name}: Helm renders, we fail: {e}")),
            (Some(2), Ok(_)) => wrong.push(format!(
                "{name}: Helm fails ({}), we render",
                String::from_utf8_lossy(&oracle.stderr).trim()
            )),
            (code, _) => panic!(
                "{name}: the oracle failed ({code:?}): {}",
                String::from_utf8_lossy(&oracle.stderr)
            ),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases differ:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
    assert!(cases.len() >= 64, "{} cases", cases.len());
    let failures = cases
        .iter()
        .filter(|c| {
            std::fs::read_to_string(c.join("case.json")).is_ok_and(|t| t.contains("\"error\""))
        })
        .count();
    assert!(failures >= 15, "{failures} failure cases");
}
