//! The first-party `pod-security` policy over 10,000 pod templates at
//! `restricted`, side by side in one run: through the plugin host (the wasm
//! component, loaded once; each review a fresh instance, the host turning
//! the objects into JSON and lifting the findings) and the same engine
//! (`kiln_pod_security::review`) compiled natively over the same JSON.
//!
//! Run with `cargo bench --bench pod_security` after `scripts/build-plugins`;
//! results are recorded in `docs/benchmarks.md`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln::manifest::Object;
use kiln::plugin::{AppContext, HostConfig, Plugin, PluginHost, World};
use kiln::source::{LocalDir, SourceView};
use serde_json::{Value, json};

/// Pod templates in the set.
const TEMPLATES: usize = 10_000;

/// Every tenth template breaks a rule (a privileged sidecar), the others
/// pass `restricted`; kinds rotate over the pod-bearing ones.
fn workload(i: usize) -> Value {
    let hardened = json!({
        "allowPrivilegeEscalation": false,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": true,
        "seccompProfile": {"type": "RuntimeDefault"},
    });
    let mut sidecar = json!({"name": "proxy", "image": "envoyproxy/envoy:v1.30.1",
        "ports": [{"containerPort": 9901}], "securityContext": hardened.clone()});
    if i.is_multiple_of(10) {
        sidecar["securityContext"]["privileged"] = json!(true);
    }
    let template = json!({
        "metadata": {"labels": {"app": format!("app-{i}")}, "annotations": {"team": "shop"}},
        "spec": {
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 8080, "name": "http"}],
                 "env": [{"name": "MODE", "value": "prod"}],
                 "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
                 "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}},
                 "securityContext": hardened.clone()},
                sidecar,
            ],
            "initContainers": [{"name": "init", "image": "busybox", "securityContext": hardened}],
            "volumes": [{"name": "cfg", "configMap": {"name": "settings"}}, {"name": "tmp", "emptyDir": {}}],
        },
    });
    let (api_version, kind, body) = match i % 4 {
        0 => (
            "apps/v1",
            "Deployment",
            json!({"spec": {"replicas": 2, "template": template}}),
        ),
        1 => (
            "apps/v1",
            "StatefulSet",
            json!({"spec": {"serviceName": "s", "template": template}}),
        ),
        2 => (
            "batch/v1",
            "CronJob",
            json!({"spec": {"schedule": "@daily", "jobTemplate": {"spec": {"template": template}}}}),
        ),
        _ => ("v1", "Pod", template),
    };
    let mut object = json!({"apiVersion": api_version, "kind": kind,
        "metadata": {"name": format!("w-{i}"), "namespace": "shop"}});
    let body = if kind == "Pod" {
        json!({"spec": body["spec"], "metadata": {"name": format!("w-{i}"), "namespace": "shop", "labels": body["metadata"]["labels"]}})
    } else {
        body
    };
    object
        .as_object_mut()
        .unwrap()
        .extend(body.as_object().unwrap().clone());
    object
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let objects: Vec<Object> = (0..TEMPLATES)
        .map(|i| match workload(i) {
            Value::Object(map) => Object::new(map, None),
            _ => unreachable!(),
        })
        .collect();
    let json: Vec<String> = objects.iter().map(Object::to_json).collect();
    let bytes: usize = json.iter().map(String::len).sum();
    let objects: Arc<[Object]> = objects.into();

    let component = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins/dist/pod-security.wasm");
    assert!(component.exists(), "run scripts/build-plugins first");
    let host = PluginHost::new(HostConfig::default()).unwrap();
    let started = Instant::now();
    let plugin: Plugin = host.load_file(&component, World::Policy, None).unwrap();
    println!("plugin load (compile, no cache): {:?}", started.elapsed());
    let view: Arc<dyn SourceView> =
        Arc::new(LocalDir::open(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap());
    let context = AppContext {
        name: "bench".into(),
        namespace: "shop".into(),
        ..AppContext::default()
    };
    let settings = vec![("level".to_owned(), "restricted".to_owned())];
    let sandboxed = || {
        plugin
            .review_blocking(view.clone(), None, &context, &objects, &settings)
            .unwrap()
    };
    let native_settings = kiln_pod_security::Settings::parse([("level", "restricted")]).unwrap();
    let manifests: Vec<kiln_pod_security::Manifest<'_>> = json
        .iter()
        .map(|content| kiln_pod_security::Manifest {
            content,
            source: None,
        })
        .collect();
    let native = || kiln_pod_security::review(&native_settings, "shop", &manifests).unwrap();

    let (w, n) = (sandboxed().len(), native().len());
    assert_eq!(w, TEMPLATES / 10, "one finding per privileged sidecar");
    assert_eq!(w, n, "the component and the native engine disagree");

    // What the host does before the call either way: the set as JSON.
    let serialize = || objects.iter().map(Object::to_json).collect::<Vec<_>>();

    let (mut wasm, mut nat, mut ser) = (Vec::new(), Vec::new(), Vec::new());
    // Interleaved rounds, so machine noise hits both alike.
    for _ in 0..7 {
        let t = Instant::now();
        std::hint::black_box(sandboxed());
        wasm.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(native());
        nat.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(serialize());
        ser.push(t.elapsed());
    }
    let (w, n, s) = (median(wasm), median(nat), median(ser));
    println!("of which the host's serialization of the set to JSON: {s:?}");
    println!(
        "restricted over {TEMPLATES} pod templates ({:.1} MB of JSON, {} findings): component {w:?}, native {n:?}, component/native ratio {:.2}x (medians of 7 interleaved rounds)",
        bytes as f64 / 1e6,
        TEMPLATES / 10,
        w.as_secs_f64() / n.as_secs_f64()
    );
}
