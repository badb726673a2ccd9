//! `kiln dev-cluster` benchmarks: how fast it starts, and what server-side
//! apply costs next to a plain create in the same run (a ratio, since these
//! machines are noisy).
//!
//! Run with `cargo bench --bench dev_cluster`; results are recorded in
//! `docs/benchmarks.md`.

use std::time::{Duration, Instant};

use kiln_devcluster::{Config, DevCluster};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn percentile(mut samples: Vec<Duration>, p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

async fn client(server: &DevCluster) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

fn deployment(name: &str, image: &str) -> serde_json::Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default",
        "labels": {"app": name, "team": "bench"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                {"name": "web", "image": image, "ports": [{"containerPort": 80}],
                 "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                 "resources": {"limits": {"cpu": "1", "memory": "256Mi"}}},
                {"name": "sidecar", "image": "envoy:1.30", "args": ["--config", "/etc/envoy.yaml"]}]}}}})
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // Startup: start, first answered request, shutdown.
    let http = reqwest::Client::new();
    let mut starts = Vec::new();
    for _ in 0..30 {
        let begin = Instant::now();
        let server = DevCluster::start(Config::default()).await.unwrap();
        let version = http
            .get(format!("{}/version", server.url()))
            .send()
            .await
            .unwrap();
        assert!(version.status().is_success());
        starts.push(begin.elapsed());
        server.shutdown().await.unwrap();
    }
    println!(
        "startup to first response: median {}, p90 {}",
        ms(median(starts.clone())),
        ms(percentile(starts, 0.9))
    );

    let server = DevCluster::start(Config::default()).await.unwrap();
    let client = client(&server).await;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apps", "v1", "Deployment"),
        "deployments",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
    let rounds = 5;
    let per_round = 100;
    let (mut creates, mut applies, mut updates, mut noops) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        // Interleaved so that both see the same machine state.
        for i in 0..per_round {
            let created: DynamicObject =
                serde_json::from_value(deployment(&format!("c{round}-{i}"), "nginx:1.27")).unwrap();
            let begin = Instant::now();
            api.create(&PostParams::default(), &created).await.unwrap();
            creates.push(begin.elapsed());

            let name = format!("a{round}-{i}");
            let begin = Instant::now();
            api.patch(
                &name,
                &PatchParams::apply("bench"),
                &Patch::Apply(deployment(&name, "nginx:1.27")),
            )
            .await
            .unwrap();
            applies.push(begin.elapsed());

            let begin = Instant::now();
            api.patch(
                &name,
                &PatchParams::apply("bench"),
                &Patch::Apply(deployment(&name, "nginx:1.28")),
            )
            .await
            .unwrap();
            updates.push(begin.elapsed());

            let begin = Instant::now();
            api.patch(
                &name,
                &PatchParams::apply("bench"),
                &Patch::Apply(deployment(&name, "nginx:1.28")),
            )
            .await
            .unwrap();
            noops.push(begin.elapsed());
        }
    }
    let (create, apply) = (median(creates), median(applies.clone()));
    println!(
        "objects in the store at the end: {}",
        2 * rounds * per_round + 4
    );
    println!(
        "create (POST) of a 2-container Deployment: median {}",
        ms(create)
    );
    println!(
        "server-side apply creating it: median {}, p99 {}",
        ms(apply),
        ms(percentile(applies, 0.99))
    );
    println!(
        "server-side apply changing the image: median {}",
        ms(median(updates))
    );
    println!("no-op server-side apply: median {}", ms(median(noops)));
    println!(
        "apply / create ratio: {:.2}x",
        apply.as_secs_f64() / create.as_secs_f64()
    );
    server.shutdown().await.unwrap();
}
