//! The `kiln` command: a thin layer over the `kiln` library.

mod cli;

/// mimalloc instead of glibc's malloc: the controller at rest spent about
/// 40 % of its CPU in glibc's allocator (consolidating and unlinking free
/// chunks) when comparing thousands of cached objects per second; see
/// docs/benchmarks.md "At rest".
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
