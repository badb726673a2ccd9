//! The first-party `gatekeeper` policy, side by side in one run: each of
//! the 28 sampled Gatekeeper library templates (../shared/testdata/gatekeeper) with
//! the constraint of its first runnable case against 1,000 objects (that
//! template's case objects, renamed, repeated), through the plugin host
//! (the wasm component, loaded once; each review a fresh instance that
//! reads and compiles the template) and the same engine with regorus
//! compiled natively (`kiln_gatekeeper::review`, also loading and compiling
//! the template each time) over the same JSON. Then the cost of building
//! `data.inventory` for 10,000 objects (a constraint that matches nothing:
//! only parsing the set, the inventory and handing it to regorus).
//!
//! Run with `cargo bench --bench gatekeeper` after `scripts/build-plugins`;
//! results are recorded in `docs/benchmarks.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln::manifest::Object;
use kiln::plugin::{AppContext, HostConfig, Plugin, PluginHost, World};
use kiln::source::{LocalDir, SourceView};
use kiln_gatekeeper::files::Dir;
use serde_json::{Value, json};

/// Objects reviewed per template.
const OBJECTS: usize = 1_000;
/// Objects in the inventory measurement.
const INVENTORY: usize = 10_000;
/// Interleaved rounds; medians are reported.
const ROUNDS: usize = 3;

// Other projects' data is read from ../shared/testdata (or
// KILN_CONFORMANCE_DATA), never from the repository.
#[path = "../../../tests/support/require.rs"]
#[allow(dead_code)]
mod require;

fn data() -> PathBuf {
    require::Corpus::Gatekeeper
        .locate()
        .expect("the gatekeeper corpus: ../shared/testdata/gatekeeper (or KILN_CONFORMANCE_DATA)")
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn to_object(value: Value) -> Object {
    match value {
        Value::Object(map) => Object::new(map, None),
        _ => unreachable!(),
    }
}

/// A policy's settings, as the host passes them.
type Settings = Vec<(String, String)>;

/// One template's workload: its settings and 1,000 objects.
struct Workload {
    template: String,
    settings: Vec<(String, String)>,
    objects: Arc<[Object]>,
    json: Vec<String>,
}

fn workloads() -> Vec<Workload> {
    let tsv = std::fs::read_to_string(data().join("cases.tsv")).unwrap();
    // dir -> (template, constraint, inventory, case objects)
    let mut by_dir: BTreeMap<String, (Settings, Vec<Value>)> = BTreeMap::new();
    for line in tsv.lines().filter(|l| !l.starts_with('#')) {
        let cols: Vec<&str> = line.split('\t').collect();
        let (dir, template, constraint, object, inventory, status) =
            (cols[1], cols[2], cols[3], cols[4], cols[5], cols[8]);
        if status != "run" {
            continue;
        }
        let rel = |p: &str| format!("{dir}/{p}");
        let entry = by_dir.entry(dir.to_owned()).or_insert_with(|| {
            let mut settings = vec![
                ("template".to_owned(), rel(template)),
                ("constraint".to_owned(), rel(constraint)),
            ];
            if inventory != "-" {
                settings.extend(
                    inventory
                        .split(',')
                        .map(|i| ("inventory".to_owned(), rel(i))),
                );
            }
            (settings, Vec::new())
        });
        let text = std::fs::read_to_string(data().join(rel(object))).unwrap();
        let value: Value = serde_yaml::from_str(&text).unwrap();
        entry.1.push(value);
    }
    by_dir
        .into_iter()
        .map(|(dir, (settings, cases))| {
            let objects: Vec<Object> = (0..OBJECTS)
                .map(|i| {
                    let mut v = cases[i % cases.len()].clone();
                    let name = v["metadata"]["name"].as_str().unwrap_or("o").to_owned();
                    v["metadata"]["name"] = json!(format!("{name}-{i}"));
                    to_object(v)
                })
                .collect();
            let json = objects.iter().map(Object::to_json).collect();
            Workload {
                template: dir,
                settings,
                objects: objects.into(),
                json,
            }
        })
        .collect()
}

fn native(settings: &[(String, String)], json: &[String]) -> usize {
    let settings =
        kiln_gatekeeper::Settings::parse(settings.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .unwrap();
    let policy = kiln_gatekeeper::Policy::load(&settings, &Dir(data()), "").unwrap();
    let manifests: Vec<kiln_gatekeeper::Manifest<'_>> = json
        .iter()
        .map(|content| kiln_gatekeeper::Manifest {
            content,
            source: None,
        })
        .collect();
    kiln_gatekeeper::review(&policy, &manifests).unwrap().len()
}

fn main() {
    let component =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins/dist/gatekeeper.wasm");
    assert!(component.exists(), "run scripts/build-plugins first");
    let host = PluginHost::new(HostConfig::default()).unwrap();
    let started = Instant::now();
    // Cross-object templates compare every object with every other (1,000
    // Ingresses sharing hosts: a million pairs): more than the default 10 s.
    let limits = kiln::plugin::Limits {
        timeout: Duration::from_secs(300),
        ..kiln::plugin::Limits::default()
    };
    let plugin: Plugin = host
        .load_file(&component, World::Policy, Some(limits))
        .unwrap();
    println!("plugin load (compile, no cache): {:?}", started.elapsed());
    let view: Arc<dyn SourceView> = Arc::new(LocalDir::open(data()).unwrap());
    let context = AppContext {
        name: "bench".into(),
        namespace: "default".into(),
        ..AppContext::default()
    };
    let sandboxed = |w: &Workload| {
        plugin
            .review_blocking(view.clone(), None, &context, &w.objects, &w.settings)
            .unwrap()
            .len()
    };

    println!(
        "| template | findings | component per object | native per object | ratio |\n|---|---:|---:|---:|---:|"
    );
    let (mut total_w, mut total_n) = (Duration::ZERO, Duration::ZERO);
    for w in workloads() {
        let (a, b) = (sandboxed(&w), native(&w.settings, &w.json));
        assert_eq!(
            a, b,
            "{}: the component and the native engine disagree",
            w.template
        );
        let (mut ws, mut ns) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let t = Instant::now();
            std::hint::black_box(sandboxed(&w));
            ws.push(t.elapsed());
            let t = Instant::now();
            std::hint::black_box(native(&w.settings, &w.json));
            ns.push(t.elapsed());
        }
        let (wm, nm) = (median(ws), median(ns));
        total_w += wm;
        total_n += nm;
        println!(
            "| {} | {a} | {:.1} µs | {:.1} µs | {:.2}× |",
            w.template,
            wm.as_secs_f64() * 1e6 / OBJECTS as f64,
            nm.as_secs_f64() * 1e6 / OBJECTS as f64,
            wm.as_secs_f64() / nm.as_secs_f64()
        );
    }
    println!(
        "all 28 templates x {OBJECTS} objects: component {total_w:?}, native {total_n:?}, ratio {:.2}x (sums of per-template medians of {ROUNDS} interleaved rounds)",
        total_w.as_secs_f64() / total_n.as_secs_f64()
    );

    // data.inventory for 10,000 objects: a constraint that matches no kind.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(
        data().join("general/uniqueingresshost/template.yaml"),
        tmp.path().join("t.yaml"),
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("c.yaml"),
        "apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: K8sUniqueIngressHost\nmetadata: {name: none}\nspec:\n  match:\n    kinds: [{apiGroups: [none.example.com], kinds: [None]}]\n",
    )
    .unwrap();
    let objects: Vec<Object> = (0..INVENTORY)
        .map(|i| {
            to_object(json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                "metadata": {"name": format!("i{i}"), "namespace": format!("ns{}", i % 50), "labels": {"app": "web"}},
                "spec": {"rules": [{"host": format!("h{i}.example.com"), "http": {"paths": [{"path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}))
        })
        .collect();
    let json: Vec<String> = objects.iter().map(Object::to_json).collect();
    let objects: Arc<[Object]> = objects.into();
    let settings = vec![
        ("template".to_owned(), "t.yaml".to_owned()),
        ("constraint".to_owned(), "c.yaml".to_owned()),
    ];
    let view: Arc<dyn SourceView> = Arc::new(LocalDir::open(tmp.path()).unwrap());
    let native_settings =
        kiln_gatekeeper::Settings::parse([("template", "t.yaml"), ("constraint", "c.yaml")])
            .unwrap();
    let policy =
        kiln_gatekeeper::Policy::load(&native_settings, &Dir(tmp.path().to_owned()), "").unwrap();
    let manifests: Vec<kiln_gatekeeper::Manifest<'_>> = json
        .iter()
        .map(|content| kiln_gatekeeper::Manifest {
            content,
            source: None,
        })
        .collect();
    let (mut ws, mut ns) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let findings = plugin
            .review_blocking(view.clone(), None, &context, &objects, &settings)
            .unwrap();
        ws.push(t.elapsed());
        assert!(findings.is_empty());
        let t = Instant::now();
        std::hint::black_box(kiln_gatekeeper::review(&policy, &manifests).unwrap());
        ns.push(t.elapsed());
    }
    let (wm, nm) = (median(ws), median(ns));
    println!(
        "data.inventory for {INVENTORY} objects ({:.1} MB of JSON; parse, index, hand to regorus): component {wm:?} (whole review call), native {nm:?}, ratio {:.2}x",
        json.iter().map(String::len).sum::<usize>() as f64 / 1e6,
        wm.as_secs_f64() / nm.as_secs_f64()
    );
}
