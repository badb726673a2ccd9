//! The first-party `helm` plugin against Helm's own engine, through the
//! plugin host: every chart of `tests/helm/` is rendered by
//! `plugins/dist/helm.wasm` with the case's parameters and by Helm v4.2.3
//! (`tests/support/helm_template.py`), and the objects must be the same,
//! in the same order; a chart Helm refuses must fail here too.
//! (`plugins/helm/tests/oracle.rs` compares the same corpus natively.)

mod support;

use std::path::{Path, PathBuf};

use kiln::plugin::{Plugin, World};
use serde_json::Value;

fn plugin() -> Plugin {
    support::host()
        .load_file(&support::component("helm"), World::Renderer, None)
        .unwrap()
}

/// The plugin parameters a case's `case.json` asks for.
fn params(case: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut one = |key: &str, value: String| out.push((key.to_owned(), value));
    if let Some(r) = case["release"].as_str() {
        one("releaseName", r.to_owned());
    }
    if let Some(n) = case["namespace"].as_str() {
        one("namespace", n.to_owned());
    }
    if let Some(k) = case["kube_version"].as_str() {
        one("kubeVersion", k.to_owned());
    }
    if case["skip_crds"].as_bool() == Some(true) {
        one("skipCrds", "true".to_owned());
    }
    for (field, key) in [
        ("values", "valueFiles"),
        ("set", "set"),
        ("set_string", "setString"),
        ("api_versions", "apiVersions"),
    ] {
        for v in case[field].as_array().into_iter().flatten() {
            one(key, v.as_str().unwrap().to_owned());
        }
    }
    out
}

/// What Helm gives for the case, as objects (Err: Helm's message).
fn oracle(python: &Path, case: &Path) -> Result<Vec<Value>, String> {
    let harness = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/helm_template.py");
    let out = std::process::Command::new(python)
        .arg(harness)
        .arg(case)
        .output()
        .unwrap();
    match out.status.code() {
        Some(0) => {}
        Some(2) => return Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        other => panic!(
            "{}: the oracle failed ({other:?}): {}",
            case.display(),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
    let text = String::from_utf8(out.stdout).unwrap();
    Ok(serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .filter(|v: &Value| !v.is_null())
        .collect())
}

async fn rendered(
    plugin: &Plugin,
    root: &Path,
    params: Vec<(String, String)>,
) -> Result<Vec<Value>, String> {
    let chain = [kiln::render::Step::Plugin {
        plugin: plugin.clone(),
        params,
    }];
    let context = support::context("app", "chart");
    kiln::render::render(support::view(root), &context, &chain)
        .await
        .map(|r| {
            r.objects
                .iter()
                .map(|o| Value::Object(o.value().clone()))
                .collect()
        })
        .map_err(|e| format!("{e:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_chart_renders_through_the_plugin_as_helm_renders_it() {
    let Some(python) = support::require(support::Tool::HelmPython) else {
        return;
    };
    let plugin = plugin();
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/helm");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(corpus)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("chart").is_dir())
        .collect();
    cases.sort();
    assert!(cases.len() >= 64, "{} cases", cases.len());
    let mut wrong = Vec::new();
    for case_dir in &cases {
        let name = case_dir.file_name().unwrap().to_string_lossy().into_owned();
        let case: Value = std::fs::read_to_string(case_dir.join("case.json"))
            .map(|t| serde_json::from_str(&t).unwrap())
            .unwrap_or(Value::Null);
        let want = oracle(&python, case_dir);
        let got = rendered(&plugin, case_dir, params(&case)).await;
        match (want, got) {
            (Ok(want), Ok(got)) if want != got => wrong.push(format!(
                "{name}: {} objects, Helm {}; first difference:\n  helm {}\n  ours {}",
                got.len(),
                want.len(),
                want.iter()
                    .zip(&got)
                    .find(|(w, g)| w != g)
                    .map_or(String::new(), |p| p.0.to_string()),
                want.iter()
                    .zip(&got)
                    .find(|(w, g)| w != g)
                    .map_or(String::new(), |p| p.1.to_string()),
            )),
            (Ok(_), Ok(_)) => {}
            (Err(helm), Err(ours)) => match case["error"].as_str() {
                None => wrong.push(format!(
                    "{name}: Helm fails ({helm}) but case.json expects no error"
                )),
                Some(expected) if !ours.contains(expected) => wrong.push(format!(
                    "{name}: {ours:?} lacks Helm's {expected:?} ({helm:?})"
                )),
                Some(_) => {}
            },
            (Ok(_), Err(e)) => wrong.push(format!("{name}: Helm renders, the plugin fails: {e}")),
            (Err(e), Ok(_)) => wrong.push(format!("{name}: Helm fails ({e}), the plugin renders")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
