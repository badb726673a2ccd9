//! `kiln diff` and `kiln sync`: the cluster half of the pipeline, one shot.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::ArgMatches;
use serde_json::Value;

use kiln::cluster::Cluster;
use kiln::diff::{self, DiffOptions, IgnoreDifferences, IgnoreRules};
use kiln::sync::{Action, Application, Engine, Outcome, RetryPolicy, SyncOptions};

use super::args::parse_duration;
use super::exit;
use super::render::{PipelineArgs, pipeline, print_report, status_of};

/// How to reach the cluster.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Cluster")]
pub(crate) struct ClusterArgs {
    /// Kubeconfig file. Default: $KUBECONFIG, then ~/.kube/config, then the
    /// in-cluster service account.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,

    /// Kubeconfig context. Default: the current context.
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
}

impl ClusterArgs {
    async fn connect(&self) -> anyhow::Result<Cluster> {
        Ok(Cluster::connect(self.kubeconfig.as_deref(), self.context.as_deref()).await?)
    }
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Format {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Color {
    Auto,
    Always,
    Never,
}

impl Color {
    pub(crate) fn enabled(self) -> bool {
        match self {
            Self::Always => true,
            Self::Never => false,
            Self::Auto => std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }
}

/// Compare an application's rendered manifests with the cluster.
///
/// Each object is predicted with a server-side dry-run apply and compared
/// with the live object after normalization (server-populated fields,
/// defaults and other writers' fields are not drift). Objects the
/// application tracks that are no longer rendered show as Extraneous.
/// Secret values are never printed, only hashes of them.
#[derive(Debug, clap::Args)]
// `--version` is the chart's version here; `kiln --version` prints Kiln's.
#[command(disable_version_flag = true)]
#[command(after_help = "\
Examples:
  kiln diff examples/guestbook --namespace guestbook --kubeconfig kiln-dev-cluster.kubeconfig
  kiln diff --repo https://github.com/org/apps --path apps/web -o json --ignore-differences ignore.yaml

Exit status: 0 in sync, 1 out of sync (drift, missing or extraneous objects), 2 an error.")]
pub(crate) struct DiffArgs {
    #[command(flatten)]
    pipeline: PipelineArgs,

    #[command(flatten)]
    cluster: ClusterArgs,

    /// Argo CD-style ignoreDifferences rules (a YAML list of {group, kind,
    /// name, namespace, jsonPointers, jqPathExpressions,
    /// managedFieldsManagers}).
    #[arg(help_heading = "Diff", long, value_name = "FILE")]
    ignore_differences: Option<PathBuf>,

    #[command(flatten)]
    jq: super::JqArgs,

    /// Output: a status line per object and unified YAML diffs, or JSON.
    #[arg(help_heading = "Diff", short, long, value_enum, default_value = "text")]
    output: Format,

    /// Color the text output.
    #[arg(help_heading = "Diff", long, value_enum, default_value = "auto")]
    color: Color,
}

/// Apply an application's rendered manifests to the cluster.
///
/// Server-side apply with field manager `kiln`, in phases (PreSync, Sync,
/// PostSync, SyncFail hooks) and waves (`kiln.dev/sync-wave` or Argo CD's
/// annotation), each wave waiting for the previous one to be healthy. An
/// enforced policy that fails stops the sync before anything is applied.
#[derive(Debug, clap::Args)]
// `--version` is the chart's version here; `kiln --version` prints Kiln's.
#[command(disable_version_flag = true)]
#[command(after_help = "\
Sync options use Argo CD's spelling: CreateNamespace=true, PruneLast=true, ApplyOutOfSyncOnly=true,
Replace=true, ServerSideApply=false, Validate=false, PrunePropagationPolicy=background,
FailOnSharedResource=true.

Examples:
  kiln sync examples/guestbook --namespace guestbook --sync-option CreateNamespace=true --prune
  kiln sync --repo https://github.com/org/apps --path apps/web --dry-run

Exit status: 0 synced, 1 an enforced policy blocked the sync (nothing was applied), 2 an error or
a failed sync (the output says, per object, what happened).")]
pub(crate) struct SyncArgs {
    #[command(flatten)]
    pipeline: PipelineArgs,

    #[command(flatten)]
    cluster: ClusterArgs,

    /// Delete tracked objects that are no longer rendered.
    #[arg(help_heading = "Sync", long)]
    prune: bool,

    /// Server-side dry run: report what would happen, change nothing.
    #[arg(help_heading = "Sync", long)]
    dry_run: bool,

    /// Take over fields another field manager applied.
    #[arg(help_heading = "Sync", long)]
    force: bool,

    /// A sync option (repeatable).
    #[arg(help_heading = "Sync", long = "sync-option", value_name = "NAME=VALUE")]
    sync_options: Vec<String>,

    /// How long a wave may take to become healthy, and a hook to finish.
    #[arg(help_heading = "Sync", long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    timeout: Duration,

    /// Retries of a failed sync.
    #[arg(help_heading = "Sync", long, value_name = "N", default_value_t = 0)]
    retry_limit: u32,

    /// Wait before the first retry (doubled each time, at most 3m).
    #[arg(help_heading = "Sync", long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    retry_backoff: Duration,

    /// Output: a line per object, or JSON.
    #[arg(help_heading = "Sync", short, long, value_enum, default_value = "text")]
    output: Format,
}

fn application(args: &PipelineArgs, name: &str) -> Application {
    Application {
        name: name.to_owned(),
        namespace: Some(args.namespace.clone()).filter(|ns| !ns.is_empty()),
    }
}

fn values(objects: &[kiln::manifest::Object]) -> Vec<Value> {
    objects
        .iter()
        .map(|o| Value::Object(o.value().clone()))
        .collect()
}

pub(crate) async fn diff(args: &DiffArgs, matches: &ArgMatches) -> anyhow::Result<u8> {
    let rules: Vec<IgnoreDifferences> = match &args.ignore_differences {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            kiln::manifest::check_yaml(&text)
                .with_context(|| format!("{}: refused", path.display()))?;
            serde_yaml::from_str(&text).with_context(|| {
                format!("{}: not a list of ignoreDifferences rules", path.display())
            })?
        }
        None => Vec::new(),
    };
    let options = DiffOptions {
        ignore: IgnoreRules::new(rules, &diff::Jq::new(args.jq.config())).await?,
        ..DiffOptions::default()
    };
    let (objects, report, context) = pipeline(&args.pipeline, matches).await?;
    print_report(&report);
    let cluster = args.cluster.connect().await?;
    let engine = Engine::new(
        &cluster,
        application(&args.pipeline, &context.name),
        SyncOptions::default(),
    );
    let diff = engine.diff(values(&objects), &options).await?;
    match args.output {
        Format::Text => print!("{}", diff::output::text(&diff, args.color.enabled())),
        Format::Json => println!("{}", diff::output::json(&diff)),
    }
    Ok(if diff.in_sync() {
        exit::OK
    } else {
        exit::DRIFT
    })
}

pub(crate) async fn sync(args: &SyncArgs, matches: &ArgMatches) -> anyhow::Result<u8> {
    let mut options = SyncOptions {
        prune: args.prune,
        dry_run: args.dry_run,
        force: args.force,
        health_timeout: args.timeout,
        retry: RetryPolicy {
            limit: args.retry_limit,
            duration: args.retry_backoff,
            ..RetryPolicy::default()
        },
        ..SyncOptions::default()
    };
    for option in &args.sync_options {
        options.set(option)?;
    }
    if options.create_namespace && args.pipeline.namespace.is_empty() {
        eprintln!(
            "warning: CreateNamespace=true creates the destination namespace, and none was \
             given (--namespace): nothing will be created"
        );
    }
    let (objects, report, context) = pipeline(&args.pipeline, matches).await?;
    print_report(&report);
    match status_of(&report) {
        exit::OK => {}
        exit::POLICY_BLOCKED => {
            eprintln!(
                "sync stopped: an enforced policy blocked the manifests; nothing was applied"
            );
            return Ok(exit::POLICY_BLOCKED);
        }
        status => {
            eprintln!("sync stopped: an enforced policy could not run; nothing was applied");
            return Ok(status);
        }
    }
    if objects.is_empty() && !args.prune {
        bail!("the application rendered no objects; nothing to sync");
    }
    let cluster = args.cluster.connect().await?;
    let engine = Engine::new(
        &cluster,
        application(&args.pipeline, &context.name),
        options,
    );
    let result = engine.sync(values(&objects)).await?;
    match args.output {
        Format::Json => println!("{}", serde_json::to_string_pretty(&result)?),
        Format::Text => {
            for object in &result.objects {
                let place = match (object.phase, object.wave) {
                    (Some(phase), Some(wave)) => format!("{phase}/{wave}"),
                    _ if object.action == Action::NeverRun => "-".to_owned(),
                    _ => "prune".to_owned(),
                };
                let message = if object.message.is_empty() {
                    String::new()
                } else {
                    format!(": {}", object.message)
                };
                println!(
                    "{:<14} {:<11} {}{message}",
                    object.action.to_string(),
                    place,
                    object.key
                );
            }
            let failed = result.count(Action::Failed) + result.count(Action::HookFailed);
            println!(
                "\nsync {}{}: {} (health: {}{})",
                if result.outcome == Outcome::Succeeded {
                    "succeeded"
                } else {
                    "FAILED"
                },
                if result.attempts > 1 {
                    format!(" after {} attempts", result.attempts)
                } else {
                    String::new()
                },
                result.message,
                result.health,
                if failed > 0 {
                    format!(", {failed} object(s) failed")
                } else {
                    String::new()
                },
            );
        }
    }
    Ok(if result.outcome == Outcome::Succeeded {
        exit::OK
    } else {
        exit::ERROR
    })
}
