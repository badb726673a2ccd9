//! The `kiln` command: a thin layer over the `kiln` library.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
