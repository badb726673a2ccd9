//! The engine, natively, against the real kustomize byte for byte: every
//! tree of the host's `tests/kustomize/` corpus is built here and by
//! `kubectl kustomize` (kustomize v5.5 inside kubectl), and the YAML texts
//! must be identical. (The host's `tests/kustomize.rs` runs the same corpus
//! through the WebAssembly component and compares objects.)

use std::path::{Path, PathBuf};
use std::process::Command;

// The host's rule for missing tools (fail under CI, else a recorded skip).
#[path = "../../../tests/support/require.rs"]
#[allow(dead_code)]
mod require;

use require::{Tool, require};

#[test]
fn every_tree_prints_what_kustomize_prints() {
    let Some(kubectl) = require(Tool::Kubectl) else {
        return;
    };
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/kustomize");
    let mut trees: Vec<PathBuf> = std::fs::read_dir(&corpus)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    trees.sort();
    assert!(trees.len() >= 60, "{} trees", trees.len());
    let mut wrong = Vec::new();
    for tree in &trees {
        let name = tree.file_name().unwrap().to_string_lossy().into_owned();
        let path = std::fs::read_to_string(tree.join("BUILD"))
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        let out = Command::new(&kubectl)
            .arg("kustomize")
            .arg(tree.join(&path))
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}: kubectl kustomize failed");
        let want = String::from_utf8(out.stdout).unwrap();
        let files = kiln_kustomize::fs::DirFiles(tree.clone());
        match kiln_kustomize::build::build(&files, &path, &Default::default()) {
            Err(e) => wrong.push(format!("{name}: {e}")),
            Ok(objects) => {
                let got = kiln_kustomize::yaml::stream(&objects);
                if got != want {
                    let line = got
                        .lines()
                        .zip(want.lines())
                        .position(|(g, w)| g != w)
                        .unwrap_or(got.lines().count().min(want.lines().count()));
                    wrong.push(format!(
                        "{name}: the YAML differs from line {}:\n  kustomize {:?}\n  plugin    {:?}",
                        line + 1,
                        want.lines().nth(line).unwrap_or("<end>"),
                        got.lines().nth(line).unwrap_or("<end>")
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
