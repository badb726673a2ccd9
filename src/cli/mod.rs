//! Command-line interface. Parsing, output and exit codes live here; the
//! work is done by the library.

mod app;
mod appset;
mod args;
mod chart;
mod cluster;
mod controller;
mod crds;
mod dev_cluster;
mod load;
mod plugin;
mod policy;
mod render;
mod render_server;
mod source;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

/// Exit codes shared by the commands.
pub(crate) mod exit {
    /// Success.
    pub const OK: u8 = 0;
    /// The command ran, and an enforced policy blocked the result.
    pub const POLICY_BLOCKED: u8 = 1;
    /// `kiln diff`: the cluster differs from the rendered manifests.
    pub const DRIFT: u8 = 1;
    /// An error: bad input, a plugin failed, a file was unreadable.
    pub const ERROR: u8 = 2;
}

/// Kiln: GitOps with sandboxed WebAssembly renderers and policies.
///
/// Renderers (Kustomize-like, Helm-like, anything) and admission policies are
/// WebAssembly components run in a sandbox that sees nothing but a read-only
/// view of the source tree.
#[derive(Debug, Parser)]
#[command(name = "kiln", version, propagate_version = true, max_term_width = 100)]
pub(crate) struct Cli {
    /// More output: `-v` prints the full error chain and info logs, `-vv` debug logs.
    /// `KILN_LOG` (a tracing filter such as `kiln=debug`) overrides the log level.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, help_heading = "Global options")]
    verbose: u8,

    /// The most threads that run blocking work at once (Git, files, plugin
    /// calls, cache reads); more waits its turn. Each thread keeps its
    /// allocator's pages, so this bounds memory too: tokio's default of
    /// 512 let a cold start of 1,000 Applications grow 110 threads and
    /// 480 MiB (docs/benchmarks.md).
    #[arg(long, global = true, value_name = "N", env = "KILN_BLOCKING_THREADS", help_heading = "Global options",
          default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..))]
    blocking_threads: u16,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Render(Box<render::RenderArgs>),
    Diff(Box<cluster::DiffArgs>),
    Sync(Box<cluster::SyncArgs>),
    Crds(crds::CrdsArgs),
    Controller(Box<controller::ControllerArgs>),
    RenderServer(Box<render_server::RenderServerArgs>),
    Certs(render_server::CertsArgs),
    #[command(subcommand)]
    App(app::AppCommand),
    #[command(subcommand)]
    Appset(appset::AppSetCommand),
    #[command(subcommand)]
    Plugin(plugin::PluginCommand),
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    #[command(subcommand)]
    Source(source::SourceCommand),
    DevCluster(dev_cluster::DevClusterArgs),
    /// Internal: runs `ignoreDifferences` jq expressions for another kiln
    /// process (requests on stdin, answers on stdout).
    #[command(name = kiln::diff::jq::WORKER_SUBCOMMAND, hide = true)]
    JqWorker {
        /// Resident memory, in bytes, past which the worker ends itself.
        max_memory: u64,
    },
}

/// Options of the plugin host shared by commands that run plugins.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Plugin host")]
pub(crate) struct HostArgs {
    /// Directory of the compile cache (precompiled plugins, keyed by digest).
    /// Default: $XDG_CACHE_HOME/kiln/compiled or ~/.cache/kiln/compiled.
    /// Created 0700; refused if owned by another user or writable by group
    /// or others (see docs/security.md).
    #[arg(long, value_name = "DIR")]
    compile_cache: Option<PathBuf>,

    /// Do not use the on-disk compile cache.
    #[arg(long, conflicts_with = "compile_cache")]
    no_compile_cache: bool,

    /// CPU deadline of one plugin call, e.g. `10s`, `500ms`.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = args::parse_duration)]
    plugin_timeout: std::time::Duration,

    /// Memory cap of one plugin call, e.g. `256Mi`, `1Gi`.
    #[arg(long, value_name = "SIZE", default_value = "256Mi", value_parser = args::parse_size)]
    plugin_memory: u64,

    /// Cap on the manifests one plugin call may return, e.g. `32Mi`.
    #[arg(long, value_name = "SIZE", default_value = "32Mi", value_parser = args::parse_size)]
    plugin_output: u64,

    /// Plugin calls that run at once; further calls wait. Default: 2 per
    /// core.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    plugin_concurrency: Option<u16>,

    /// The largest memory cap a Plugin resource may ask for
    /// (spec.limits.memory), e.g. `512Mi`.
    #[arg(long, value_name = "SIZE", default_value = "512Mi", value_parser = args::parse_size)]
    plugin_max_memory: u64,

    /// Memory all running plugin calls may hold together: each call
    /// reserves its memory cap before it starts, so plugins never hold more
    /// than this, e.g. `1Gi`.
    #[arg(long, value_name = "SIZE", default_value = "1Gi", value_parser = args::parse_size)]
    plugin_memory_budget: u64,

    /// Bytes of compiled plugins kept in memory, e.g. `256Mi`.
    #[arg(long, value_name = "SIZE", default_value = "256Mi", value_parser = args::parse_size)]
    compiled_plugins_size: u64,

    /// Bytes of each plugin memory slot kept resident between calls
    /// (zeroed in place rather than returned to the kernel: the next call
    /// takes no page faults there), e.g. `8Mi`; `0` returns it all. Idle
    /// memory outside the budget: at most this much per slot used (8 per
    /// concurrent call).
    #[arg(long, value_name = "SIZE", default_value = "8Mi", value_parser = args::parse_size)]
    plugin_keep_resident: u64,
}

impl HostArgs {
    pub(crate) fn host(&self) -> anyhow::Result<kiln::plugin::PluginHost> {
        let defaults = kiln::plugin::HostConfig::default();
        let config = kiln::plugin::HostConfig {
            compile_cache: match (&self.compile_cache, self.no_compile_cache) {
                (_, true) => None,
                (Some(dir), false) => Some(dir.clone()),
                (None, false) => default_cache_dir().map(|d| d.join("compiled")),
            },
            default_limits: kiln::plugin::Limits {
                memory: self.plugin_memory,
                timeout: self.plugin_timeout,
                output: self.plugin_output,
                ..Default::default()
            },
            max_memory: self.plugin_max_memory.max(self.plugin_memory),
            memory_budget: self.plugin_memory_budget,
            compiled_size: self.compiled_plugins_size,
            keep_resident: self.plugin_keep_resident,
            max_concurrency: self
                .plugin_concurrency
                .map_or(defaults.max_concurrency, usize::from),
            ..defaults
        };
        Ok(kiln::plugin::PluginHost::new(config)?)
    }
}

/// Limits of `ignoreDifferences` jq expressions, which run in worker
/// processes (docs/security.md).
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "ignoreDifferences jq workers")]
pub(crate) struct JqArgs {
    /// Deadline of one jq expression (ignoreDifferences) on one object; the
    /// worker running it is killed past it. E.g. `1s`, `500ms`.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = args::parse_duration)]
    jq_timeout: std::time::Duration,

    /// jq worker processes running at once.
    #[arg(long, value_name = "N", default_value_t = kiln::diff::jq::DEFAULT_WORKERS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=64))]
    jq_workers: usize,

    /// Memory cap (resident) of one jq worker process, e.g. `128Mi`.
    #[arg(long, value_name = "SIZE", default_value = "128Mi", value_parser = args::parse_size)]
    jq_memory: u64,
}

impl JqArgs {
    /// The configuration of the pool.
    pub(crate) fn config(&self) -> kiln::diff::JqConfig {
        kiln::diff::JqConfig {
            timeout: self.jq_timeout,
            workers: self.jq_workers,
            max_memory: self.jq_memory,
            ..kiln::diff::JqConfig::default()
        }
    }
}

pub(crate) fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("kiln"))
}

/// Parses arguments, runs the command, prints errors, returns the exit code.
pub(crate) fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    if let Command::JqWorker { max_memory } = cli.command {
        // No logging, no runtime: a bare loop the parent kills at will.
        return match kiln::diff::jq::serve(max_memory) {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::from(exit::ERROR),
        };
    }
    init_logging(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(usize::from(cli.blocking_threads))
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::ERROR);
        }
    };
    let result = runtime.block_on(async {
        match &cli.command {
            Command::Render(args) => {
                let sub = matches
                    .subcommand_matches("render")
                    .expect("clap matched `render`");
                render::run(args, sub).await
            }
            Command::Diff(args) => {
                let sub = matches
                    .subcommand_matches("diff")
                    .expect("clap matched `diff`");
                cluster::diff(args, sub).await
            }
            Command::Sync(args) => {
                let sub = matches
                    .subcommand_matches("sync")
                    .expect("clap matched `sync`");
                cluster::sync(args, sub).await
            }
            Command::Crds(args) => crds::run(args),
            Command::Controller(args) => controller::run(args).await,
            Command::RenderServer(args) => render_server::run(args).await,
            Command::Certs(args) => render_server::certs(args),
            Command::App(command) => app::run(command).await,
            Command::Appset(command) => appset::run(command).await,
            Command::Plugin(command) => plugin::run(command).await,
            Command::Policy(command) => policy::run(command).await,
            Command::Source(command) => source::run(command).await,
            Command::DevCluster(args) => dev_cluster::run(args).await,
            Command::JqWorker { .. } => unreachable!("served above"),
        }
    });
    // Blocking work still running (a Git fetch cut short by a forced stop)
    // must not hold the process: it gets a moment, then is abandoned.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            if cli.verbose > 0 {
                // The whole chain, one cause per line.
                eprintln!("error: {error}");
                for cause in error.chain().skip(1) {
                    eprintln!("  caused by: {cause}");
                }
            } else {
                // One line: every message of the chain in words, joined
                // (foreign debug dumps left out, nothing said twice).
                eprintln!("error: {}", kiln::text::chain(error.as_ref()));
            }
            ExitCode::from(exit::ERROR)
        }
    }
}

fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    // kube's HTTP layer logs every failed request at ERROR ("failed with
    // error client error (Connect)"), then returns the same error, which
    // Kiln reports once, in words: below -vv that line is noise.
    let default = if verbose > 1 {
        default.to_owned()
    } else {
        format!("{default},kube_client::client::builder=off")
    };
    let filter = EnvFilter::try_from_env("KILN_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    // Colour only for a person at a terminal: never escape codes in a log
    // file or a pod's log.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .with_target(verbose > 1)
        .init();
}

/// A long-running command's stop: asked at the first SIGINT or SIGTERM
/// (finish what is running), forced `grace` later or at a second signal
/// (exit now). The signals are listened to from the moment it is made, so
/// none is lost to the default action (dying) while the command starts.
/// Cheap to clone.
#[derive(Clone)]
pub(crate) struct Stopping {
    asked: tokio_util::sync::CancellationToken,
    forced: tokio_util::sync::CancellationToken,
}

impl Stopping {
    /// Starts listening for the signals (inside the runtime).
    pub(crate) fn on_signals(grace: std::time::Duration) -> Self {
        let stopping = Self {
            asked: tokio_util::sync::CancellationToken::new(),
            forced: tokio_util::sync::CancellationToken::new(),
        };
        let mut signals = Signals::listen();
        let (asked, forced) = (stopping.asked.clone(), stopping.forced.clone());
        tokio::spawn(async move {
            signals.next().await;
            tracing::info!(?grace, "stop asked; a second signal stops at once");
            asked.cancel();
            tokio::select! {
                () = signals.next() => {}
                () = tokio::time::sleep(grace) => {}
            }
            forced.cancel();
        });
        stopping
    }

    /// Resolves when a stop was asked.
    pub(crate) async fn asked(&self) {
        self.asked.cancelled().await;
    }

    /// Resolves when the stop is forced.
    pub(crate) async fn forced(&self) {
        self.forced.cancelled().await;
    }
}

/// SIGTERM and SIGINT, each registered when made (registering replaces the
/// default action, which ends the process).
struct Signals {
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn listen() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Self {
                terminate: signal(SignalKind::terminate()).ok(),
                interrupt: signal(SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// Resolves at the next signal.
    async fn next(&mut self) {
        #[cfg(unix)]
        {
            async fn one(signal: &mut Option<tokio::signal::unix::Signal>) {
                match signal {
                    Some(signal) => {
                        signal.recv().await;
                    }
                    None => std::future::pending().await,
                }
            }
            let Self {
                terminate,
                interrupt,
            } = self;
            tokio::select! {
                () = one(terminate) => {}
                () = one(interrupt) => {}
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM (what Kubernetes sends a pod).
pub(crate) async fn stop_signal() {
    Signals::listen().next().await;
}

#[cfg(test)]
mod help_tests {
    use clap::CommandFactory as _;

    use super::Cli;

    /// Every command a user can run, with its path (`app list`).
    fn leaves(command: &clap::Command, path: String, out: &mut Vec<(String, clap::Command)>) {
        let children: Vec<&clap::Command> = command
            .get_subcommands()
            .filter(|c| !c.is_hide_set() && c.get_name() != "help")
            .collect();
        if children.is_empty() {
            out.push((path, command.clone()));
            return;
        }
        for child in children {
            let path = format!("{path} {}", child.get_name()).trim().to_owned();
            leaves(child, path, out);
        }
    }

    #[test]
    fn every_command_s_help_shows_examples_and_its_exit_status() {
        let mut cli = Cli::command();
        cli.build();
        let mut all = Vec::new();
        leaves(&cli, String::new(), &mut all);
        assert!(all.len() >= 20, "{} commands", all.len());
        for (path, mut command) in all {
            let help = command.render_long_help().to_string();
            assert!(
                help.contains("\nExamples:\n  kiln "),
                "`kiln {path} --help` shows no examples:\n{help}"
            );
            assert!(
                help.contains("\nExit status: 0 "),
                "`kiln {path} --help` does not say its exit status:\n{help}"
            );
            assert!(
                !help.contains("[default: \"\"]") && !help.contains("[default: ]"),
                "`kiln {path} --help` shows an empty default:\n{help}"
            );
        }
    }

    #[test]
    fn render_help_groups_its_options() {
        let mut cli = Cli::command();
        cli.build();
        let render = cli.find_subcommand_mut("render").expect("render exists");
        let help = render.render_long_help().to_string();
        let headings: Vec<&str> = help
            .lines()
            .filter(|line| !line.starts_with(' ') && line.ends_with(':'))
            .collect();
        assert_eq!(
            headings,
            [
                "Arguments:",
                "Options:",
                "Output:",
                "Source:",
                "Git source:",
                "Helm chart:",
                "Renderers:",
                "Policies:",
                "Directory renderer:",
                "Application:",
                "Trust:",
                "Plugin host:",
                "Registries:",
                "Global options:",
                "Examples:",
            ]
        );
    }
}
