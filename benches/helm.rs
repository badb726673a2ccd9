//! The first-party `helm` plugin against Helm v4.2.3's own engine, side by
//! side in one run, on two charts the bench writes (`helm/charts.rs`): a
//! 500-object chart and a real-world-sized monitoring chart, both with a
//! library-chart dependency.
//!
//! Three ways to render the same chart with the same release, namespace
//! and values (each one render is what `helm template` does, client-only):
//!
//! - (a) *plugin*: `plugins/dist/helm.wasm` loaded once through the plugin
//!   host (compiled once), a fresh instance per render, reading the chart
//!   through a `LocalDir` source view, the host parsing the result into
//!   objects — `Plugin::render_blocking`, the call the controller makes;
//! - (b) *Helm in-process*: one Python process (PyPI's helm-python-sdk,
//!   Helm's Go SDK as a C library) loaded once, timing each render inside
//!   the process: load the chart directory, a client-only dry-run install,
//!   the manifest (`helm/helm_engine.py serve`);
//! - (c) *a process per render*, what Argo CD's repo-server does with
//!   `helm template`: a new process doing the same render start to finish
//!   (`helm/helm_engine.py once`), wall time seen from here.
//!
//! It first checks that (a) and Helm give the same objects in the same
//! order, then runs interleaved rounds (machine noise hits all three
//! alike) and prints the median per-render time of each, the ratios (of
//! the medians, and the median of each round's ratio: a round is shorter
//! than the machine's slow and fast phases), and
//! memory per render: the plugin's peak linear memory per instance (the
//! smallest memory limit the render succeeds under), the growth of the
//! in-process Helm's peak RSS over its renders, and the peak RSS of a
//! process per render.
//!
//! Run with `cargo bench --bench helm` after `scripts/build-plugins`, with
//! the helm-python-sdk venv `scripts/test` installs; results are recorded
//! in `docs/benchmarks.md`. `KILN_BENCH_ROUNDS` (default 10) sets the rounds;
//! `KILN_BENCH_WRITE_CHARTS=DIR` only writes the two charts under `DIR`;
//! `KILN_BENCH_CHART=NAME` benches only that chart (`fleet` or
//! `monitoring`); `KILN_BENCH_PLUGIN_ONLY=N` only renders each chart N times with the
//! plugin and prints the time per render (to profile the plugin alone,
//! e.g. under `perf record`); `KILN_BENCH_COMPILE_CACHE=DIR` keeps the
//! compiled plugin in a compile cache under `DIR` (to count a render's
//! instructions under valgrind without compiling the plugin there);
//! `KILN_BENCH_PERF_MAP=1` writes wasmtime's perf map (`/tmp/perf-PID.map`)
//! to name the plugin's functions in `perf` or valgrind profiles;
//! `KILN_BENCH_SURVEY=FILE` times the real charts of the survey instead
//! (`scripts/helm-survey prepare DIR` writes `DIR/renders.json`: every
//! render the survey found identical, its chart built with its
//! dependencies): each render once by (a), (b) and (c) in turn, and the
//! ratios of the total times over all of them (see [`survey`]);
//! `KILN_BENCH_SAMPLES=1` also prints every sample (milliseconds, in the
//! order taken) and each round's ratios, to see the machine's noise
//! behind a median; `KILN_BENCH_KEEP_RESIDENT=MIB` sets the host's
//! `keep_resident` (page faults against zeroing, `docs/benchmarks.md`).

#[path = "helm/charts.rs"]
mod charts;
#[path = "helm/monitoring.rs"]
mod monitoring;
// The project's one place that knows where the Helm oracle lives.
#[path = "../tests/support/require.rs"]
#[allow(dead_code)]
mod require;

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use kiln::manifest::Object;
use kiln::plugin::{AppContext, HostConfig, Limits, Plugin, PluginHost, World};
use kiln::source::{LocalDir, SourceView};
use serde_json::Value;

/// The allocator the `kiln` binary runs on (src/main.rs): the host's side
/// of a render (reading the returned objects) is timed as the controller
/// runs it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const RELEASE: &str = "bench";
const NAMESPACE: &str = "observability";

/// Per round: plugin renders, in-process Helm renders, Helm processes.
/// Renders per round: plugin, Helm in-process, process per render. A
/// round takes about 2 s for the 500-object chart, shorter than the
/// machine's slow and fast phases (which last seconds: the plugin's
/// samples fall in two modes by whole rounds), so each round's ratio
/// compares the three in one phase.
const PER_ROUND: (u32, u32, u32) = (3, 3, 1);

/// The bench's prerequisites, or a message naming every missing one and
/// how to get it.
fn prerequisites() -> Result<(PathBuf, PathBuf), String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let component = root.join("plugins/dist/helm.wasm");
    let mut missing = Vec::new();
    if !component.is_file() {
        missing.push(format!(
            "the helm plugin {} (build it: scripts/build-plugins)",
            component.display()
        ));
    }
    let tool = require::Tool::HelmPython;
    let python = tool.locate();
    if python.is_none() {
        missing.push(format!(
            "{tool}, Helm v4.2.3's engine (looked for a Python able to `import helm_python` at {}; \
             {} points elsewhere; install: {})",
            tool.path().display(),
            tool.variable(),
            tool.install()
        ));
    }
    match python {
        Some(python) if missing.is_empty() => Ok((component, python)),
        _ => Err(format!(
            "benches/helm: missing prerequisites:\n  - {}",
            missing.join("\n  - ")
        )),
    }
}

fn engine_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/helm/helm_engine.py")
}

fn params() -> Vec<(String, String)> {
    vec![
        ("releaseName".into(), RELEASE.into()),
        ("namespace".into(), NAMESPACE.into()),
    ]
}

/// The plugin's render of `chart`: its objects as JSON.
/// One render with the plugin, what the controller calls: the objects as
/// the host parsed them from the plugin's output.
fn plugin_objects(plugin: &Plugin, view: &Arc<dyn SourceView>, chart: &str) -> Vec<Object> {
    let context = AppContext {
        name: "bench".into(),
        namespace: NAMESPACE.into(),
        path: chart.into(),
        ..AppContext::default()
    };
    plugin
        .render_blocking(view.clone(), &context, &params(), &[])
        .unwrap_or_else(|e| panic!("the plugin fails to render {chart}: {e}"))
}

/// The plugin's objects as values, to compare them with Helm's.
fn plugin_render(plugin: &Plugin, view: &Arc<dyn SourceView>, chart: &str) -> Vec<Value> {
    plugin_objects(plugin, view, chart)
        .iter()
        .map(|o| Value::Object(o.value().clone()))
        .collect()
}

/// One `helm template`-like process: the manifest and its peak RSS (KiB).
fn helm_process(python: &Path, chart: &Path) -> (String, u64) {
    let out = Command::new(python)
        .arg(engine_script())
        .args(["once".as_ref(), chart.as_os_str()])
        .args([RELEASE, NAMESPACE])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "Helm fails to render {}: {stderr}",
        chart.display()
    );
    let rss = stderr
        .lines()
        .find_map(|l| l.strip_prefix("maxrss_kib="))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no maxrss_kib line from the Helm process: {stderr}"));
    (String::from_utf8(out.stdout).unwrap(), rss)
}

fn objects(stream: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(stream)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// Helm's engine loaded once in a process of its own (`serve`).
struct InProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// Peak RSS (KiB) once the library is loaded, before any render.
    ready_maxrss: u64,
    /// RSS (KiB) at the same moment.
    ready_rss: u64,
}

/// One answer of the in-process engine.
struct Batch {
    seconds: Vec<f64>,
    /// Peak RSS so far (KiB).
    maxrss: u64,
    /// RSS after the batch (KiB).
    rss: u64,
}

impl InProcess {
    fn start(python: &Path) -> InProcess {
        let mut child = Command::new(python)
            .arg(engine_script())
            .args(["serve", RELEASE, NAMESPACE])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut engine = InProcess {
            child,
            stdin,
            stdout,
            ready_maxrss: 0,
            ready_rss: 0,
        };
        let ready = engine.answer();
        assert_eq!(ready["ready"], true, "{ready}");
        engine.ready_maxrss = ready["maxrss_kib"].as_u64().unwrap();
        engine.ready_rss = ready["rss_kib"].as_u64().unwrap();
        engine
    }

    fn answer(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!("the in-process Helm engine answered {line:?} ({e}); see its stderr above")
        })
    }

    fn render(&mut self, chart: &Path, count: u32) -> Batch {
        self.render_with(chart, count, None)
            .unwrap_or_else(|e| panic!("Helm fails to render {}: {e}", chart.display()))
    }

    /// `count` renders of `chart` with the values file `values` (relative
    /// to the chart), or Helm's error.
    fn render_with(
        &mut self,
        chart: &Path,
        count: u32,
        values: Option<&str>,
    ) -> Result<Batch, String> {
        writeln!(
            self.stdin,
            "{}\t{count}\t{}",
            chart.display(),
            values.unwrap_or("")
        )
        .unwrap();
        self.stdin.flush().unwrap();
        let answer = self.answer();
        if let Some(error) = answer["error"].as_str() {
            return Err(error.to_owned());
        }
        Ok(Batch {
            seconds: answer["seconds"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_f64().unwrap())
                .collect(),
            maxrss: answer["maxrss_kib"].as_u64().unwrap(),
            rss: answer["rss_kib"].as_u64().unwrap(),
        })
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The smallest memory limit (64 KiB pages) under which the plugin renders
/// `chart`: the peak linear memory of one instance.
fn plugin_peak_memory(
    host: &PluginHost,
    bytes: &[u8],
    view: &Arc<dyn SourceView>,
    chart: &str,
) -> u64 {
    const PAGE: u64 = 64 << 10;
    let renders = |pages: u64| {
        let limits = Limits {
            memory: pages * PAGE,
            ..Limits::default()
        };
        let plugin = host
            .load("helm", bytes, World::Renderer, Some(limits))
            .unwrap();
        let context = AppContext {
            name: "bench".into(),
            namespace: NAMESPACE.into(),
            path: chart.into(),
            ..AppContext::default()
        };
        plugin
            .render_blocking(view.clone(), &context, &params(), &[])
            .is_ok()
    };
    let (mut low, mut high) = (0, host.config().max_memory / PAGE);
    assert!(
        renders(high),
        "{chart} does not render under the largest limit"
    );
    while high - low > 1 {
        let middle = (low + high) / 2;
        if renders(middle) {
            high = middle;
        } else {
            low = middle;
        }
    }
    high * PAGE
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    if n % 2 == 1 {
        samples[n / 2]
    } else {
        (samples[n / 2 - 1] + samples[n / 2]) / 2.0
    }
}

fn ms(seconds: f64) -> String {
    format!("{:.1} ms", seconds * 1e3)
}

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / f64::from(1 << 20))
}

/// `KILN_BENCH_PLUGIN_ONLY`: how many plugin-only renders, if set.
fn plugin_only() -> Option<u32> {
    std::env::var("KILN_BENCH_PLUGIN_ONLY").ok()?.parse().ok()
}

fn bench_chart(
    host: &PluginHost,
    bytes: &[u8],
    plugin: &Plugin,
    python: &Path,
    root: &Path,
    chart: &str,
    rounds: usize,
) {
    let view: Arc<dyn SourceView> = Arc::new(LocalDir::open(root).unwrap());
    let dir = root.join(chart);
    if let Some(n) = plugin_only() {
        let t = Instant::now();
        for _ in 0..n {
            std::hint::black_box(plugin_objects(plugin, &view, chart));
        }
        println!("{chart}: plugin only, {:?} per render", t.elapsed() / n);
        return;
    }
    let ours = plugin_render(plugin, &view, chart);
    let (manifest, _) = helm_process(python, &dir);
    let helm = objects(&manifest);
    if let Some(i) = (0..ours.len().max(helm.len())).find(|&i| ours.get(i) != helm.get(i)) {
        panic!(
            "{chart}: the plugin and Helm disagree at object {i} ({} objects, Helm {}):\n  helm {}\n  ours {}",
            ours.len(),
            helm.len(),
            helm.get(i).map_or("<none>".into(), Value::to_string),
            ours.get(i).map_or("<none>".into(), Value::to_string),
        );
    }
    let bytes_out: usize = manifest.len();
    let peak = plugin_peak_memory(host, bytes, &view, chart);

    let mut engine = InProcess::start(python);
    let (mut a, mut b, mut c, mut c_rss) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Each round's (b)/(a) and (c)/(a): medians of the round's samples.
    let (mut paired_b, mut paired_c) = (Vec::new(), Vec::new());
    let (mut b_maxrss, mut b_rss) = (engine.ready_maxrss, engine.ready_rss);
    // One warm-up of each, then interleaved rounds.
    engine.render(&dir, 1);
    for _ in 0..rounds {
        let (a0, b0, c0) = (a.len(), b.len(), c.len());
        for _ in 0..PER_ROUND.0 {
            let t = Instant::now();
            std::hint::black_box(plugin_objects(plugin, &view, chart));
            a.push(t.elapsed().as_secs_f64());
        }
        let batch = engine.render(&dir, PER_ROUND.1);
        b.extend(batch.seconds);
        (b_maxrss, b_rss) = (batch.maxrss, batch.rss);
        for _ in 0..PER_ROUND.2 {
            let t = Instant::now();
            let (_, rss) = std::hint::black_box(helm_process(python, &dir));
            c.push(t.elapsed().as_secs_f64());
            c_rss.push(rss as f64);
        }
        let plugin = median(a[a0..].to_vec());
        paired_b.push(median(b[b0..].to_vec()) / plugin);
        paired_c.push(median(c[c0..].to_vec()) / plugin);
    }
    if std::env::var_os("KILN_BENCH_SAMPLES").is_some() {
        let list = |v: &[f64]| {
            v.iter()
                .map(|s| format!("{:.1}", s * 1e3))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let ratios = |v: &[f64]| {
            v.iter()
                .map(|r| format!("{r:.1}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        println!(
            "{chart} samples (ms): (a) {}\n  (b) {}\n  (c) {}\n  ratios by round: (b)/(a) {}\n  (c)/(a) {}",
            list(&a),
            list(&b),
            list(&c),
            ratios(&paired_b),
            ratios(&paired_c),
        );
    }
    let (a, b, c) = (median(a), median(b), median(c));
    println!(
        "{chart}: {} objects ({} KiB of YAML), {rounds} interleaved rounds of {}/{}/{} renders, medians per render:",
        ours.len(),
        bytes_out >> 10,
        PER_ROUND.0,
        PER_ROUND.1,
        PER_ROUND.2,
    );
    println!("  (a) plugin, fresh instance per render      {}", ms(a));
    println!(
        "  (b) Helm's engine in-process (SDK)          {}   (b)/(a) = {:.2}x",
        ms(b),
        b / a
    );
    println!(
        "  (c) a helm-template-like process per render {}   (c)/(a) = {:.1}x",
        ms(c),
        c / a
    );
    let spread = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(0.0, f64::max);
        format!("{:.1}x (rounds {lo:.1}x to {hi:.1}x)", median(v.to_vec()))
    };
    println!(
        "  paired by round (each round's medians, the median round): (b)/(a) = {}, (c)/(a) = {}",
        spread(&paired_b),
        spread(&paired_c),
    );
    println!(
        "  memory per render: (a) peak linear memory of one instance {}; (b) over {} renders, peak RSS +{}, \
         RSS +{} (library loaded: RSS {}, peak {}); (c) peak RSS of the process {}",
        mib(peak as f64),
        1 + rounds as u32 * PER_ROUND.1,
        mib(b_maxrss.saturating_sub(engine.ready_maxrss) as f64 * 1024.0),
        mib(b_rss.saturating_sub(engine.ready_rss) as f64 * 1024.0),
        mib(engine.ready_rss as f64 * 1024.0),
        mib(engine.ready_maxrss as f64 * 1024.0),
        mib(median(c_rss) * 1024.0),
    );
}

fn main() {
    let (component, python) = match prerequisites() {
        Ok(found) => found,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(1);
        }
    };
    let rounds = std::env::var("KILN_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(10);
    let tree = tempfile::tempdir().unwrap();
    if let Some(dir) = std::env::var_os("KILN_BENCH_WRITE_CHARTS") {
        // To look at the charts, or render them with other tools.
        let dir = PathBuf::from(dir);
        let written = [charts::fleet(&dir), charts::monitoring(&dir)];
        println!("wrote {written:?} under {}", dir.display());
        return;
    }
    let root = tree.path();
    let charts = [charts::fleet(root), charts::monitoring(root)];
    let bytes = std::fs::read(&component).unwrap();
    let host = PluginHost::new(HostConfig {
        compile_cache: std::env::var_os("KILN_BENCH_COMPILE_CACHE").map(PathBuf::from),
        // The pool of one slot per call fits in valgrind's address space.
        max_concurrency: if std::env::var_os("KILN_BENCH_COMPILE_CACHE").is_some() {
            1
        } else {
            HostConfig::default().max_concurrency
        },
        perf_map: std::env::var_os("KILN_BENCH_PERF_MAP").is_some(),
        keep_resident: std::env::var("KILN_BENCH_KEEP_RESIDENT")
            .ok()
            .and_then(|mib| mib.parse::<u64>().ok())
            .map_or(HostConfig::default().keep_resident, |mib| mib << 20),
        ..HostConfig::default()
    })
    .unwrap();
    let started = Instant::now();
    let plugin = host.load("helm", &bytes, World::Renderer, None).unwrap();
    println!(
        "helm plugin ({} KiB) compiled in {:?} (once; no compile cache)",
        bytes.len() >> 10,
        started.elapsed()
    );
    if let Some(list) = std::env::var_os("KILN_BENCH_SURVEY") {
        survey::run(&host, &bytes, &python, Path::new(&list));
        return;
    }
    let only = std::env::var("KILN_BENCH_CHART").ok();
    for chart in charts {
        if only.as_deref().is_some_and(|only| only != chart) {
            continue;
        }
        bench_chart(&host, &bytes, &plugin, &python, root, chart, rounds);
    }
}

/// The survey's real charts (`KILN_BENCH_SURVEY`): every render the survey
/// found identical, timed once by each way in turn.
mod survey {
    use super::*;

    /// One render of the list `scripts/helm-survey prepare` writes.
    #[derive(serde::Deserialize)]
    struct Render {
        chart: PathBuf,
        values: Option<String>,
        repo: String,
        path: String,
    }

    /// The plugin's limits for real charts: some generate RSA keys (the
    /// survey's `cryptoWork` and deadline).
    fn limits() -> Limits {
        Limits {
            timeout: std::time::Duration::from_secs(300),
            memory: HostConfig::default().max_memory,
            output: 64 << 20,
            ..Limits::default()
        }
    }

    /// One plugin render of `r` (seconds), or its error.
    fn plugin_seconds(plugin: &Plugin, r: &Render) -> Result<f64, String> {
        let view: Arc<dyn SourceView> =
            Arc::new(LocalDir::open(&r.chart).map_err(|e| e.to_string())?);
        let context = AppContext {
            name: "bench".into(),
            namespace: NAMESPACE.into(),
            path: ".".into(),
            ..AppContext::default()
        };
        let mut params = params();
        params.push(("cryptoWork".into(), "1000000".into()));
        if let Some(v) = &r.values {
            params.push(("valueFiles".into(), v.clone()));
        }
        let started = Instant::now();
        plugin
            .render_blocking(view, &context, &params, &[])
            .map_err(|e| format!("{e:#}"))?;
        Ok(started.elapsed().as_secs_f64())
    }

    /// One `helm template`-like process for `r` (wall seconds), or its error.
    fn process_seconds(python: &Path, r: &Render) -> Result<f64, String> {
        let started = Instant::now();
        let out = Command::new(python)
            .arg(engine_script())
            .args(["once".as_ref(), r.chart.as_os_str()])
            .args([RELEASE, NAMESPACE])
            .args(r.values.iter())
            .output()
            .map_err(|e| e.to_string())?;
        let seconds = started.elapsed().as_secs_f64();
        if out.status.success() {
            Ok(seconds)
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    pub(super) fn run(host: &PluginHost, bytes: &[u8], python: &Path, list: &Path) {
        let renders: Vec<Render> = serde_json::from_slice(
            &std::fs::read(list).unwrap_or_else(|e| panic!("{}: {e}", list.display())),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", list.display()));
        let plugin = host
            .load("helm", bytes, World::Renderer, Some(limits()))
            .unwrap();
        let mut engine = InProcess::start(python);
        let samples = std::env::var_os("KILN_BENCH_SAMPLES").is_some();
        // Per render timed by all three: plugin, in-process, process.
        let mut timed: Vec<(f64, f64, f64)> = Vec::new();
        let mut failed = Vec::new();
        for (i, r) in renders.iter().enumerate() {
            let name = format!(
                "{}/{} {}",
                r.repo,
                r.path,
                r.values.as_deref().unwrap_or("(default)")
            );
            let a = plugin_seconds(&plugin, r);
            let b = engine
                .render_with(&r.chart, 1, r.values.as_deref())
                .map(|batch| batch.seconds[0]);
            let c = process_seconds(python, r);
            match (a, b, c) {
                (Ok(a), Ok(b), Ok(c)) => {
                    if samples {
                        eprintln!(
                            "[{}/{}] {name}: plugin {}, in-process {}, process {}",
                            i + 1,
                            renders.len(),
                            ms(a),
                            ms(b),
                            ms(c)
                        );
                    }
                    timed.push((a, b, c));
                }
                (a, b, c) => {
                    let why = [("plugin", a), ("in-process", b), ("process", c)]
                        .into_iter()
                        .filter_map(|(w, r)| {
                            r.err()
                                .map(|e| format!("{w}: {}", e.lines().next().unwrap_or("")))
                        })
                        .collect::<Vec<_>>()
                        .join("; ");
                    eprintln!("[{}/{}] {name}: not timed ({why})", i + 1, renders.len());
                    failed.push(name);
                }
            }
        }
        let total = |f: fn(&(f64, f64, f64)) -> f64| timed.iter().map(f).sum::<f64>();
        let (a, b, c) = (total(|t| t.0), total(|t| t.1), total(|t| t.2));
        let ratios = |f: fn(&(f64, f64, f64)) -> f64| median(timed.iter().map(f).collect());
        println!(
            "survey: {} renders timed ({} not: {:?})\n\
             total: plugin {:.1} s, Helm in-process {:.1} s, a process per render {:.1} s\n\
             ratio of the totals: plugin {:.1}x faster than Helm in-process, {:.1}x faster than a process per render\n\
             median per-render ratio: {:.1}x and {:.1}x; per-render medians: plugin {}, in-process {}, process {}",
            timed.len(),
            failed.len(),
            failed,
            a,
            b,
            c,
            b / a,
            c / a,
            ratios(|t| t.1 / t.0),
            ratios(|t| t.2 / t.0),
            ms(ratios(|t| t.0)),
            ms(ratios(|t| t.1)),
            ms(ratios(|t| t.2)),
        );
    }
}
