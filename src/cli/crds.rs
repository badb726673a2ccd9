//! `kiln crds`: the CustomResourceDefinitions of Kiln's API.

use std::path::PathBuf;

use anyhow::Context as _;

use super::exit;

/// Print the CustomResourceDefinitions of Kiln's API (kiln.dev/v1alpha1:
/// Application, AppProject, Plugin), generated from the controller's types.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  kiln crds | kubectl apply --server-side -f -
  kiln crds --output-dir deploy/crds

Exit status: 0 printed or written, 2 a file could not be written (the message names it).")]
pub(crate) struct CrdsArgs {
    /// Write one file per CRD (NAME.yaml) into DIR instead of printing them.
    #[arg(long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
}

pub(crate) fn run(args: &CrdsArgs) -> anyhow::Result<u8> {
    let crds = kiln::api::crds();
    match &args.output_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            for (name, yaml) in crds {
                let path = dir.join(format!("{name}.yaml"));
                std::fs::write(&path, yaml)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
        }
        None => {
            let documents: Vec<String> = crds.into_iter().map(|(_, yaml)| yaml).collect();
            print!("{}", documents.join("---\n"));
        }
    }
    Ok(exit::OK)
}
