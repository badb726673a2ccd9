//! `kiln plugin ...`.

use std::path::PathBuf;

use anyhow::Context as _;

use kiln::plugin::contract::{self, VERSION};

use super::exit;

/// Work with plugin components.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum PluginCommand {
    /// Show what a component is: world, contract version, imports, exports,
    /// digest and size. Nothing is compiled or run.
    Inspect {
        /// The component.
        file: PathBuf,
        /// Output format.
        #[arg(short, long, value_enum, default_value = "text")]
        output: Format,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Format {
    Text,
    Json,
}

pub(crate) async fn run(command: &PluginCommand) -> anyhow::Result<u8> {
    match command {
        PluginCommand::Inspect { file, output } => {
            let bytes =
                std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
            let info = contract::inspect(&bytes).with_context(|| file.display().to_string())?;
            match output {
                Format::Json => println!("{}", serde_json::to_string_pretty(&info)?),
                Format::Text => {
                    let world = info
                        .world
                        .map_or_else(|| "none (not a Kiln plugin)".to_owned(), |w| w.to_string());
                    let contract = match info.contract_version {
                        Some(v) => format!(
                            "{}@{v} ({})",
                            contract::PACKAGE,
                            if v.is_compatible_with(VERSION) {
                                format!("accepted by this host, which speaks {VERSION}")
                            } else {
                                format!("NOT accepted: this host speaks {VERSION}")
                            }
                        ),
                        None => "none".to_owned(),
                    };
                    println!("file:     {}", file.display());
                    println!("world:    {world}");
                    println!("contract: {contract}");
                    println!("digest:   {}", info.digest);
                    println!("size:     {} bytes", info.size);
                    println!("imports:");
                    for import in &info.imports {
                        println!("  {import}");
                    }
                    println!("exports:");
                    for export in &info.exports {
                        println!("  {export}");
                    }
                }
            }
            Ok(exit::OK)
        }
    }
}
