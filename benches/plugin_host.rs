//! Plugin host benchmarks: compile, cache-hit load, instantiate + call, a
//! 100-manifest render, and the same renderer native vs WebAssembly.
//!
//! Run with `cargo bench --bench plugin_host` after `scripts/build-plugins`;
//! results are recorded in `docs/benchmarks.md`. Besides criterion's
//! estimates, the bench prints p50/p99 of single instantiate + call
//! latencies and the native/WASM ratio measured in the same run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion};
use kiln::plugin::{AppContext, HostConfig, PluginHost, World};
use kiln::source::{LocalDir, SourcePath, SourceView};
use kiln_values::engine::{self, Scope, Template};

fn component(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("plugins/dist")
        .join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run scripts/build-plugins",
        path.display()
    );
    path
}

fn context(path: &str) -> AppContext {
    AppContext {
        name: "bench".into(),
        path: path.into(),
        ..AppContext::default()
    }
}

/// A tree of `n` templated Deployments plus a values file.
fn hundred_manifests(n: usize) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let app = tmp.path().join("app");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::write(
        app.join("values.yaml"),
        "image: {tag: '1.27'}\nreplicas: 3\nteam: shop\n",
    )
    .unwrap();
    for i in 0..n {
        let text = format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web-{i}\n  labels: {{team: '{{{{ .Values.team }}}}'}}\n\
             spec:\n  replicas: '{{{{ .Values.replicas }}}}'\n  selector: {{matchLabels: {{app: web-{i}}}}}\n  template:\n    \
             metadata: {{labels: {{app: web-{i}}}}}\n    spec:\n      containers:\n      - name: web\n        \
             image: 'nginx:{{{{ .Values.image.tag }}}}'\n        ports: [{{containerPort: 80}}]\n"
        );
        std::fs::write(app.join(format!("deploy-{i:03}.yaml")), text).unwrap();
    }
    tmp
}

/// The values renderer's work done natively: the same files read through
/// the same source view, the same engine.
fn render_native(view: &dyn SourceView) -> usize {
    let app = SourcePath::parse("app").unwrap();
    let values_text =
        String::from_utf8(view.read_file(&app.join("values.yaml").unwrap()).unwrap()).unwrap();
    let mut values = serde_yaml::Value::Mapping(Default::default());
    for doc in engine::parse_documents("values.yaml", &values_text).unwrap() {
        engine::merge(&mut values, doc);
    }
    let mut templates = Vec::new();
    for entry in view.read_dir(&app).unwrap() {
        if entry.name == "values.yaml" {
            continue;
        }
        let path = app.join(&entry.name).unwrap();
        let text = String::from_utf8(view.read_file(&path).unwrap()).unwrap();
        templates.push(Template {
            source: path.to_string(),
            text,
        });
    }
    let scope = Scope::new(values, &[("Name", "bench")]);
    let docs = engine::render(&scope, &templates).unwrap();
    // Emit YAML as the plugin does, and parse it as the host does.
    let mut objects = 0;
    for (source, doc) in docs {
        let text = serde_yaml::to_string(&doc).unwrap();
        objects += kiln::manifest::parse(&text, Some(&source)).unwrap().len();
    }
    objects
}

fn bench(c: &mut Criterion) {
    let bytes = std::fs::read(component("fixture-misbehave")).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let cached = || HostConfig {
        compile_cache: Some(cache.path().to_path_buf()),
        ..HostConfig::default()
    };
    // Warm the on-disk cache once.
    PluginHost::new(cached())
        .unwrap()
        .load("trivial", &bytes, World::Renderer, None)
        .unwrap();

    let mut group = c.benchmark_group("load");
    group.sample_size(10);
    group.bench_function("first compile (no cache)", |b| {
        b.iter_batched(
            || PluginHost::new(HostConfig::default()).unwrap(),
            |host| host.load("trivial", &bytes, World::Renderer, None).unwrap(),
            BatchSize::PerIteration,
        )
    });
    group.sample_size(50);
    group.bench_function("load from compile cache", |b| {
        b.iter_batched(
            || PluginHost::new(cached()).unwrap(),
            |host| host.load("trivial", &bytes, World::Renderer, None).unwrap(),
            BatchSize::PerIteration,
        )
    });
    group.finish();

    let host = PluginHost::new(HostConfig::default()).unwrap();
    let trivial = host.load("trivial", &bytes, World::Renderer, None).unwrap();
    let empty = tempfile::tempdir().unwrap();
    let empty_view: Arc<dyn SourceView> = Arc::new(LocalDir::open(empty.path()).unwrap());
    let params = vec![("mode".to_owned(), "trivial".to_owned())];
    let ctx = context("");
    let call = || {
        trivial
            .render_blocking(empty_view.clone(), &ctx, &params, &[])
            .unwrap()
    };
    c.bench_function("instantiate + trivial call", |b| b.iter(call));

    let tree = hundred_manifests(100);
    let view: Arc<dyn SourceView> = Arc::new(LocalDir::open(tree.path()).unwrap());
    let values = host
        .load_file(&component("values"), World::Renderer, None)
        .unwrap();
    let app = context("app");
    let wasm = || {
        values
            .render_blocking(view.clone(), &app, &vec![], &[])
            .unwrap()
    };
    assert_eq!(wasm().len(), 100);
    assert_eq!(render_native(&*view), 100);
    let mut group = c.benchmark_group("100-manifest render");
    group.bench_function("values renderer, wasm", |b| b.iter(wasm));
    group.bench_function("values renderer, native", |b| {
        b.iter(|| render_native(&*view))
    });
    group.finish();

    // Percentiles and the ratio, side by side in this one run.
    let mut samples: Vec<Duration> = (0..5_000)
        .map(|_| {
            let t = Instant::now();
            call();
            t.elapsed()
        })
        .collect();
    samples.sort();
    let pct = |p: f64| samples[((samples.len() as f64 - 1.0) * p) as usize];
    println!(
        "\ninstantiate + trivial call over {} calls: p50 {:?}, p99 {:?}",
        samples.len(),
        pct(0.50),
        pct(0.99)
    );

    let time = |f: &dyn Fn()| {
        let t = Instant::now();
        for _ in 0..50 {
            f();
        }
        t.elapsed() / 50
    };
    let (mut w, mut n) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        // Interleaved, so machine noise hits both alike.
        w.push(time(&|| drop(wasm())));
        n.push(time(&|| {
            std::hint::black_box(render_native(&*view));
        }));
    }
    w.sort();
    n.sort();
    println!(
        "100-manifest render: wasm {:?}, native {:?}, wasm/native ratio {:.2} (medians of 5 interleaved rounds of 50)",
        w[2],
        n[2],
        w[2].as_secs_f64() / n[2].as_secs_f64()
    );
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bench(&mut criterion);
    criterion.final_summary();
}
