//! Renders a chart directory natively and prints what `helm template`
//! prints: `cargo run --example render -- CHART_DIR [--set K=V]...`.
//! `KILN_RENDER_REPEAT=N` first renders the chart N times and prints the
//! time per render (profile the engine natively with it: `cargo build
//! --release --example render`, then `perf record` the binary).

use kiln_helm::chart::DirSource;
use kiln_helm::{Options, render, stream};

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .expect("usage: render CHART_DIR [--set K=V|--set-string K=V|-f FILE]...");
    let mut opts = Options::default();
    while let Some(flag) = args.next() {
        let value = args.next().expect("a value after the flag");
        match flag.as_str() {
            "--set" => opts.set.push(value),
            "--set-string" => opts.set_string.push(value),
            "-f" => opts.value_files.push(value),
            other => panic!("unknown flag {other}"),
        }
    }
    // KILN_RENDER_REPEAT=N renders N times first (to profile the engine).
    let repeat: usize = std::env::var("KILN_RENDER_REPEAT")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let src = DirSource(dir.into());
    let started = std::time::Instant::now();
    for _ in 0..repeat {
        render(&src, ".", &opts).expect("the chart renders");
    }
    if repeat > 0 {
        eprintln!(
            "{repeat} renders, {:?} per render",
            started.elapsed() / repeat as u32
        );
    }
    match render(&src, ".", &opts) {
        Ok(docs) => print!("{}", stream(&docs)),
        Err(e) => {
            eprintln!("Error: {e}");
            std::process::exit(2);
        }
    }
}
