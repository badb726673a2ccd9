//! How much memory `kiln dev-cluster` needs to hold many real-world
//! objects: the built-in objects of the workloads in `tests/data/workloads`
//! (every kind the dev cluster serves from the start: neither CRDs nor the
//! custom resources that need them), renamed (`NAME-r<N>`, N the object's
//! number) until there are
//! `KILN_BENCH_OBJECTS` of them (default 100,000), created through the
//! HTTP API (decoding, defaulting, validation, managed fields, watch
//! history) by `KILN_BENCH_CONCURRENCY` clients at once (default 4). Prints
//! the process's resident set size before and after, and per object.
//!
//! Run with `cargo bench --bench dev_cluster_memory` (the figure is memory,
//! not time: `--profile dev` gives the same RSS, faster to build); results
//! are recorded in `docs/benchmarks.md`.

use std::time::Instant;

use futures_util::StreamExt as _;
use kiln_devcluster::{Config, DevCluster};
use serde_json::{Value, json};

/// How many objects to hold, unless `KILN_BENCH_OBJECTS` says otherwise.
const DEFAULT_OBJECTS: usize = 100_000;
/// How many requests are in flight, unless `KILN_BENCH_CONCURRENCY` says
/// otherwise.
const DEFAULT_CONCURRENCY: usize = 4;

/// The namespace every namespaced object goes to.
const NAMESPACE: &str = "bench";

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Resident set size of this process, in KiB (Linux `/proc/self/status`).
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The objects of every workload file, CRDs left out.
fn corpus() -> Vec<Value> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/workloads");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut objects = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for object in kiln::manifest::parse(&text, None).unwrap() {
            if object.kind() != "CustomResourceDefinition" {
                objects.push(Value::Object(object.value().clone()));
            }
        }
    }
    objects
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let wanted = setting("KILN_BENCH_OBJECTS", DEFAULT_OBJECTS);
    let concurrency = setting("KILN_BENCH_CONCURRENCY", DEFAULT_CONCURRENCY);
    let server = DevCluster::start(Config::default()).await.unwrap();
    let types = server.store().types();
    // Custom resources are left out with their CRDs: the bench measures the
    // built-in kinds a fresh dev cluster serves.
    let templates: Vec<Value> = corpus()
        .into_iter()
        .filter(|object| {
            let api_version = object["apiVersion"].as_str().unwrap_or_default();
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            let kind = object["kind"].as_str().unwrap_or_default();
            types
                .iter()
                .any(|t| t.group == group && t.version == version && t.kind == kind)
        })
        .collect();
    let http = reqwest::Client::new();
    http.post(format!("{}/api/v1/namespaces", server.url()))
        .json(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}))
        .send()
        .await
        .unwrap();
    let before = rss_kib();
    let begin = Instant::now();
    let requests = (0..wanted).map(|i| {
        let mut object = templates[i % templates.len()].clone();
        let api_version = object["apiVersion"].as_str().unwrap_or_default().to_owned();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
        let kind = object["kind"].as_str().unwrap_or_default();
        let rt = types
            .iter()
            .find(|t| t.group == group && t.version == version && t.kind == kind)
            .unwrap_or_else(|| panic!("{api_version} {kind} is not served"));
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        // Service names are DNS labels (63 characters at most).
        let name: String = name
            .chars()
            .take(50)
            .collect::<String>()
            .trim_end_matches('-')
            .to_owned();
        object["metadata"]["name"] = format!("{name}-r{i}").into();
        let prefix = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let path = if rt.namespaced {
            object["metadata"]["namespace"] = NAMESPACE.into();
            format!("{prefix}/namespaces/{NAMESPACE}/{}", rt.plural)
        } else {
            if let Some(metadata) = object["metadata"].as_object_mut() {
                metadata.remove("namespace");
            }
            format!("{prefix}/{}", rt.plural)
        };
        let request = http
            .post(format!("{}{path}?fieldManager=bench", server.url()))
            .json(&object);
        async move { request.send().await.map(|r| r.status().as_u16()) }
    });
    let statuses: Vec<_> = futures_util::stream::iter(requests)
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let elapsed = begin.elapsed();
    let created = statuses.iter().filter(|s| matches!(s, Ok(201))).count();
    let refused = statuses.len() - created;
    let after = rss_kib();
    let held = after.saturating_sub(before);
    println!(
        "{created} objects created ({refused} refused) from {} templates in {:.1} s",
        templates.len(),
        elapsed.as_secs_f64()
    );
    println!(
        "RSS: {:.1} MiB before, {:.1} MiB after: {:.1} MiB for the objects, {:.1} KiB per object",
        before as f64 / 1024.0,
        after as f64 / 1024.0,
        held as f64 / 1024.0,
        held as f64 / created.max(1) as f64
    );
    server.shutdown().await.unwrap();
}
