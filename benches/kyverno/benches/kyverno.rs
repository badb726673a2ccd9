//! The first-party `kyverno` policy, side by side in one run: every policy
//! of kyverno/policies' 181 test folders (../shared/testdata/kyverno:
//! ClusterPolicies, Policies, ValidatingPolicies and their exceptions, one
//! policy source) over 10,000 objects (the folders' own test resources,
//! renamed and repeated), through the plugin host (the wasm component,
//! loaded once; each review a fresh instance that reads and prepares every
//! policy, then reports every rule's result) and the same engine compiled
//! natively (`kiln_kyverno::review`, also loading the policies and parsing
//! the objects' JSON each round).
//!
//! Run with `cargo bench -p kiln-kyverno-bench --bench kyverno` after
//! `scripts/build-plugins`; results are recorded in `docs/benchmarks.md`.
//! `KILN_BENCH_OBJECTS` (default 10,000) and `KILN_BENCH_ROUNDS` (default 3)
//! size a quicker run; `KILN_BENCH_ONLY=native` runs the native engine
//! alone (for a profiler).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln::manifest::Object;
use kiln::plugin::{AppContext, HostConfig, Plugin, PluginHost, RuleOutcome, World};
use kiln::source::{LocalDir, SourceView};
use kiln_kyverno::engine::Status;
use kiln_kyverno::model::{self, PolicySet};
use serde::Deserialize;
use serde_json::Value;

/// Objects reviewed, by default.
const OBJECTS: usize = 10_000;
/// Interleaved rounds, by default; medians are reported.
const ROUNDS: usize = 3;

/// A count from the environment, or its default.
fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

// Other projects' data is read from ../shared/testdata (or
// KILN_CONFORMANCE_DATA), never from the repository.
#[path = "../../../tests/support/require.rs"]
#[allow(dead_code)]
mod require;

fn data() -> PathBuf {
    require::Corpus::Kyverno
        .locate()
        .expect("the kyverno corpus: ../shared/testdata/kyverno (or KILN_CONFORMANCE_DATA)")
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[derive(Deserialize)]
struct TestFile {
    #[serde(default)]
    policies: Vec<String>,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    exceptions: Vec<String>,
}

/// Lexically resolves `a/./b/../c` (the host's view does the same).
fn normalize(path: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    for part in path.components() {
        match part.as_os_str().to_str().unwrap() {
            "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other.to_owned()),
        }
    }
    parts.join("/")
}

/// The policy files (relative to the corpus) and the objects of every
/// folder's test.
fn corpus(root: &Path) -> (Vec<String>, Vec<Value>) {
    let cases = std::fs::read_to_string(root.join("cases.tsv")).unwrap();
    let (mut files, mut objects) = (Vec::new(), Vec::new());
    for line in cases.lines().skip(1) {
        let folder = line.split('\t').next().unwrap();
        let dir = Path::new(folder).join(".kyverno-test");
        let test: TestFile = serde_yaml::from_str(
            &std::fs::read_to_string(root.join(&dir).join("kyverno-test.yaml")).unwrap(),
        )
        .unwrap();
        for file in test.policies.iter().chain(&test.exceptions) {
            let file = normalize(&dir.join(file));
            if !files.contains(&file) {
                files.push(file);
            }
        }
        for file in &test.resources {
            let text = std::fs::read_to_string(root.join(&dir).join(file)).unwrap();
            for document in serde_yaml::Deserializer::from_str(&text) {
                let Ok(value) = Value::deserialize(document) else {
                    continue;
                };
                if value.pointer("/metadata/name").is_some() && value.get("kind").is_some() {
                    objects.push(value);
                }
            }
        }
    }
    (files, objects)
}

/// `count` objects: the corpus's, renamed `NAME-N` in turn.
fn workload(objects: &[Value], count: usize) -> Vec<Value> {
    (0..count)
        .map(|i| {
            let mut object = objects[i % objects.len()].clone();
            let name = object["metadata"]["name"].as_str().unwrap().to_owned();
            object["metadata"]["name"] = Value::String(format!("{name}-{i}"));
            object
        })
        .collect()
}

/// The engine natively, doing what the component does: read the policy
/// files, parse the objects' JSON, review.
fn native(root: &Path, files: &[String], texts: &[String]) -> (usize, usize) {
    let mut documents = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        documents.extend(model::documents(file, &text).unwrap());
    }
    let set = PolicySet::of(documents);
    let objects: Vec<Value> = texts
        .iter()
        .map(|t| serde_json::from_str(t).unwrap())
        .collect();
    let outcomes =
        kiln_kyverno::review::review(&set, &objects, &kiln_kyverno::review::NoCluster).unwrap();
    let failures = outcomes.iter().filter(|o| o.status == Status::Fail).count();
    (outcomes.len(), failures)
}

fn main() {
    let root = data();
    let component = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins/dist/kyverno.wasm");
    assert!(component.exists(), "run scripts/build-plugins first");
    let (files, sample) = corpus(&root);
    let (count, rounds) = (
        setting("KILN_BENCH_OBJECTS", OBJECTS),
        setting("KILN_BENCH_ROUNDS", ROUNDS).max(1),
    );
    let values = workload(&sample, count);
    let texts: Vec<String> = values.iter().map(Value::to_string).collect();
    let objects: Vec<Object> = values
        .into_iter()
        .map(|v| match v {
            Value::Object(map) => Object::new(map, None),
            _ => unreachable!(),
        })
        .collect();
    let bytes: usize = texts.iter().map(String::len).sum();
    println!(
        "{} policy files, {count} objects ({} distinct before renaming), {:.1} MB of JSON",
        files.len(),
        sample.len(),
        bytes as f64 / 1e6
    );
    if std::env::var("KILN_BENCH_ONLY").as_deref() == Ok("native") {
        for _ in 0..rounds {
            let started = Instant::now();
            let counts = native(&root, &files, &texts);
            println!("native: {counts:?} in {:?}", started.elapsed());
        }
        return;
    }
    let host = PluginHost::new(HostConfig::default()).unwrap();
    // 975,363 rule results are held in the guest, then handed to the host:
    // more than the default 256 MiB; the host's largest limit.
    let limits = kiln::plugin::Limits {
        timeout: Duration::from_secs(600),
        memory: HostConfig::default().max_memory,
        ..kiln::plugin::Limits::default()
    };
    let started = Instant::now();
    let plugin: Plugin = host
        .load_file(&component, World::Policy, Some(limits))
        .unwrap();
    println!("plugin load (compile, no cache): {:?}", started.elapsed());
    let view: Arc<dyn SourceView> = Arc::new(LocalDir::open(&root).unwrap());
    let context = AppContext {
        name: "bench".into(),
        ..AppContext::default()
    };
    let settings: Vec<(String, String)> = files
        .iter()
        .map(|f| ("policy".to_owned(), f.clone()))
        .collect();
    let sandboxed = || {
        let results = plugin
            .review_rules_blocking(view.clone(), None, &context, &objects, &settings)
            .unwrap();
        let failures = results
            .iter()
            .filter(|r| matches!(r.outcome, RuleOutcome::Fail | RuleOutcome::Warn))
            .count();
        (results.len(), failures)
    };
    let counts = native(&root, &files, &texts);
    println!(
        "rule results (native): {} ({} failures)",
        counts.0, counts.1
    );
    let (mut component_times, mut native_times) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let started = Instant::now();
        let component_counts = sandboxed();
        component_times.push(started.elapsed());
        let started = Instant::now();
        let native_counts = native(&root, &files, &texts);
        native_times.push(started.elapsed());
        assert_eq!(
            component_counts, native_counts,
            "both give the same results"
        );
        if round == 0 {
            println!(
                "rule results: {} ({} failures)",
                component_counts.0, component_counts.1
            );
        }
    }
    let (component, native) = (median(component_times), median(native_times));
    println!("component: one review of {count} objects: {component:?}");
    println!("native engine, same set: {native:?}");
    println!(
        "component / native: {:.2}x",
        component.as_secs_f64() / native.as_secs_f64()
    );
}
