//! Renders a chart directory natively and prints what `helm template`
//! prints: `cargo run --example render -- CHART_DIR [--set K=V]...`.

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
    match render(&DirSource(dir.into()), ".", &opts) {
        Ok(docs) => print!("{}", stream(&docs)),
        Err(e) => {
            eprintln!("Error: {e}");
            std::process::exit(2);
        }
    }
}
