//! The first-party `kustomize` plugin against `kubectl kustomize`, side by
//! side in one run: the same overlays, a small one (5 objects) and a large
//! one (300 objects across 3 layers), rendered by the plugin (loaded once,
//! through the plugin host) and by the kustomize built into kubectl (one
//! process per render, as Argo CD runs it).
//!
//! Then a whole set of builds: every build once by the plugin (loaded once)
//! and once by a `kubectl kustomize` process each, total time side by side.
//! The set is every kustomization both build in the checkouts under
//! `KILN_KUSTOMIZE_REAL_WORLD` (a folder of repositories, e.g. the ones
//! `scripts/kustomize-survey` ran on; they are other projects' code and are
//! not kept in this repository), or the project's own corpus
//! (`tests/kustomize/`) without it.
//!
//! Run with `cargo bench --bench kustomize` after `scripts/build-plugins`;
//! results are recorded in `docs/benchmarks.md`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln::plugin::{AppContext, HostConfig, Plugin, PluginHost, World};
use kiln::source::{LocalDir, SourceView};

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn deployment(name: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  labels: {{app: {name}, tier: web}}\n\
         spec:\n  replicas: 1\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata:\n      \
         labels: {{app: {name}}}\n    spec:\n      serviceAccountName: runner\n      containers:\n      - name: app\n        \
         image: nginx:1.25\n        ports: [{{containerPort: 8080, name: http}}]\n        envFrom:\n        - configMapRef: {{name: settings}}\n"
    )
}

fn service(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\nspec:\n  selector: {{app: {name}}}\n  \
         ports: [{{name: http, port: 80, targetPort: http}}]\n"
    )
}

/// 5 objects: a base (Deployment, Service, ServiceAccount, generated
/// ConfigMap) and an overlay (prefix, labels, image, a patch, an Ingress).
fn small(root: &Path) -> &'static str {
    write(root, "base/deploy.yaml", &deployment("web"));
    write(root, "base/svc.yaml", &service("web"));
    write(
        root,
        "base/sa.yaml",
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: runner}\n",
    );
    write(
        root,
        "base/kustomization.yaml",
        "resources: [deploy.yaml, svc.yaml, sa.yaml]\nconfigMapGenerator:\n- name: settings\n  literals: [color=blue, size=m]\n",
    );
    write(
        root,
        "small/ingress.yaml",
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web}\nspec:\n  rules:\n  - host: shop.example.com\n    http:\n      paths:\n      - path: /\n        pathType: Prefix\n        backend: {service: {name: web, port: {number: 80}}}\n",
    );
    write(
        root,
        "small/kustomization.yaml",
        "resources: [../base, ingress.yaml]\nnamePrefix: prod-\nnamespace: shop\nlabels:\n- pairs: {env: prod}\n  includeSelectors: true\n\
         images:\n- {name: nginx, newTag: '1.27'}\npatches:\n- patch: |\n    apiVersion: apps/v1\n    kind: Deployment\n    metadata: {name: web}\n    spec:\n      replicas: 3\n",
    );
    "small"
}

/// 300 objects across 3 layers: a base of 100 Deployments and 100
/// Services; a middle layer adding 50 generated ConfigMaps, a sidecar
/// patch on every Deployment, a prefix and labels; a top layer adding 50
/// ServiceAccounts, a namespace, images, replicas and a JSON patch.
fn large(root: &Path) -> &'static str {
    let mut resources = Vec::new();
    for i in 0..100 {
        write(
            root,
            &format!("lbase/d{i:03}.yaml"),
            &deployment(&format!("web-{i:03}")),
        );
        write(
            root,
            &format!("lbase/s{i:03}.yaml"),
            &service(&format!("web-{i:03}")),
        );
        resources.push(format!("d{i:03}.yaml"));
        resources.push(format!("s{i:03}.yaml"));
    }
    write(
        root,
        "lbase/kustomization.yaml",
        &format!("resources: [{}]\n", resources.join(", ")),
    );
    let mut middle = String::from(
        "resources: [../lbase]\nnamePrefix: shop-\nlabels:\n- pairs: {team: storefront}\n  includeSelectors: true\nconfigMapGenerator:\n",
    );
    for i in 0..49 {
        middle.push_str(&format!(
            "- name: cfg-{i:03}\n  literals: [index={i}, color=blue]\n"
        ));
    }
    middle.push_str("- name: settings\n  literals: [color=blue]\n");
    middle.push_str(
        "patches:\n- target: {kind: Deployment}\n  patch: |\n    apiVersion: apps/v1\n    kind: Deployment\n    metadata: {name: any}\n    spec:\n      template:\n        spec:\n          containers:\n          - name: proxy\n            image: envoyproxy/envoy:v1.30.1\n          - name: app\n            env: [{name: MODE, value: prod}]\n",
    );
    write(root, "lmiddle/kustomization.yaml", &middle);
    let mut top = String::from("resources: [../lmiddle");
    for i in 0..50 {
        write(
            root,
            &format!("large/sa{i:03}.yaml"),
            &format!("apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: runner-{i:03}}}\n"),
        );
        top.push_str(&format!(", sa{i:03}.yaml"));
    }
    top.push_str(
        "]\nnamespace: shop-prod\nimages:\n- {name: nginx, newName: mirror.example.com/nginx, newTag: '1.27'}\nreplicas:\n- {name: web-000, count: 5}\n\
         patches:\n- target: {kind: Deployment, labelSelector: tier=web}\n  patch: |\n    - {op: add, path: /metadata/annotations, value: {owner: team-a}}\n",
    );
    write(root, "large/kustomization.yaml", &top);
    "large"
}

fn kubectl() -> PathBuf {
    std::env::var_os("KILN_KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/kubectl"))
}

fn oracle(dir: &Path) -> usize {
    let out = Command::new(kubectl())
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Objects: documents of the stream (none when it is empty).
    let text = String::from_utf8(out.stdout).unwrap();
    if text.trim().is_empty() {
        return 0;
    }
    text.matches("\n---\n").count() + 1
}

/// Whether `kubectl kustomize` builds `dir`.
fn kubectl_builds(dir: &Path) -> bool {
    Command::new(kubectl())
        .arg("kustomize")
        .arg(dir)
        .output()
        .is_ok_and(|out| out.status.success())
}

/// Every (repository root, build path) of the set: the kustomizations of
/// the checkouts under `KILN_KUSTOMIZE_REAL_WORLD` that both the plugin and
/// kubectl build, else the corpus trees. Returns the set's name too.
fn build_set(plugin: &Plugin) -> (String, Vec<(PathBuf, String)>) {
    let Some(root) = std::env::var_os("KILN_KUSTOMIZE_REAL_WORLD") else {
        let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kustomize");
        let mut trees: Vec<PathBuf> = std::fs::read_dir(&corpus)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
        trees.sort();
        let builds = trees
            .into_iter()
            .map(|tree| {
                let path = std::fs::read_to_string(tree.join("BUILD"))
                    .map(|b| b.trim().to_owned())
                    .unwrap_or_else(|_| ".".to_owned());
                (tree, path)
            })
            .collect();
        return ("the corpus".to_owned(), builds);
    };
    let root = PathBuf::from(root);
    let mut repos: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    repos.sort();
    let mut builds = Vec::new();
    for repo in repos {
        let mut dirs = Vec::new();
        kustomization_dirs(&repo, &mut dirs);
        dirs.sort();
        for dir in dirs {
            let path = dir.strip_prefix(&repo).unwrap().to_string_lossy();
            let path = if path.is_empty() {
                ".".to_owned()
            } else {
                path.into_owned()
            };
            let view: Arc<dyn SourceView> = Arc::new(LocalDir::open(&repo).unwrap());
            let context = AppContext {
                name: "bench".into(),
                path: path.clone(),
                ..AppContext::default()
            };
            if plugin
                .render_blocking(view, &context, &Vec::new(), &[])
                .is_ok()
                && kubectl_builds(&dir)
            {
                builds.push((repo.clone(), path));
            }
        }
    }
    (format!("the checkouts under {}", root.display()), builds)
}

/// Directories below `dir` holding a kustomization (not `.git`).
fn kustomization_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut has = false;
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            if name != ".git" {
                kustomization_dirs(&path, out);
            }
        } else if matches!(
            name.to_str(),
            Some("kustomization.yaml" | "kustomization.yml" | "Kustomization")
        ) {
            has = true;
        }
    }
    if has {
        out.push(dir.to_owned());
    }
}

/// A whole set of builds, rendered by the plugin (one instance per
/// build, through the host) and by one `kubectl kustomize` process per
/// build: total times, medians of interleaved rounds.
fn whole_set(plugin: &Plugin) {
    let (name, builds) = build_set(plugin);
    let views: Vec<(Arc<dyn SourceView>, AppContext)> = builds
        .iter()
        .map(|(repo, path)| {
            let view: Arc<dyn SourceView> = Arc::new(LocalDir::open(repo).unwrap());
            let context = AppContext {
                name: "bench".into(),
                path: path.clone(),
                ..AppContext::default()
            };
            (view, context)
        })
        .collect();
    let render_all = || {
        views
            .iter()
            .map(|(view, context)| {
                plugin
                    .render_blocking(view.clone(), context, &Vec::new(), &[])
                    .unwrap()
                    .len()
            })
            .sum::<usize>()
    };
    let kubectl_all = || {
        builds
            .iter()
            .map(|(repo, path)| oracle(&repo.join(path)))
            .sum::<usize>()
    };
    let objects = render_all();
    assert_eq!(objects, kubectl_all(), "the plugin and kustomize disagree");
    let (mut wasm, mut process) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let t = Instant::now();
        std::hint::black_box(render_all());
        wasm.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(kubectl_all());
        process.push(t.elapsed());
    }
    let (w, p) = (median(wasm), median(process));
    println!(
        "{name} ({} builds, {objects} objects): plugin {w:?} in all, kubectl kustomize {p:?} in all, \
         kubectl/plugin ratio {:.1}x (medians of 5 interleaved rounds)",
        builds.len(),
        p.as_secs_f64() / w.as_secs_f64()
    );
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path();
    let overlays = [small(root), large(root)];
    let component = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins/dist/kustomize.wasm");
    assert!(component.exists(), "run scripts/build-plugins first");
    let host = PluginHost::new(HostConfig::default()).unwrap();
    let started = Instant::now();
    let plugin: Plugin = host.load_file(&component, World::Renderer, None).unwrap();
    println!("plugin load (compile, no cache): {:?}", started.elapsed());
    let view: Arc<dyn SourceView> = Arc::new(LocalDir::open(root).unwrap());
    for overlay in overlays {
        let context = AppContext {
            name: "bench".into(),
            path: overlay.into(),
            ..AppContext::default()
        };
        let render = || {
            plugin
                .render_blocking(view.clone(), &context, &Vec::new(), &[])
                .unwrap()
        };
        let objects = render().len();
        let kinds = oracle(&root.join(overlay));
        assert_eq!(
            objects, kinds,
            "the plugin and kustomize disagree on {overlay}"
        );
        let (mut wasm, mut process) = (Vec::new(), Vec::new());
        // Interleaved rounds, so machine noise hits both alike.
        for _ in 0..7 {
            let t = Instant::now();
            for _ in 0..10 {
                std::hint::black_box(render());
            }
            wasm.push(t.elapsed() / 10);
            let t = Instant::now();
            for _ in 0..3 {
                std::hint::black_box(oracle(&root.join(overlay)));
            }
            process.push(t.elapsed() / 3);
        }
        let (w, p) = (median(wasm), median(process));
        println!(
            "{overlay} ({objects} objects): plugin {w:?}, kubectl kustomize {p:?}, kubectl/plugin ratio {:.1}x (medians of 7 interleaved rounds)",
            p.as_secs_f64() / w.as_secs_f64()
        );
    }
    whole_set(&plugin);
}
