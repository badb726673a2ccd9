//! `cargo run --example build -- ROOT [PATH]`: builds a kustomization
//! natively and prints it as `kustomize build` does (for comparing with
//! `kubectl kustomize` while developing).

fn main() {
    let mut args = std::env::args().skip(1);
    let root = args.next().expect("usage: build ROOT [PATH]");
    let path = args.next().unwrap_or_default();
    let files = kiln_kustomize::fs::DirFiles(root.into());
    match kiln_kustomize::build::build(&files, &path, &Default::default()) {
        Ok(objects) => print!("{}", kiln_kustomize::yaml::stream(&objects)),
        Err(failure) => {
            eprintln!("error: {failure}");
            std::process::exit(1);
        }
    }
}
