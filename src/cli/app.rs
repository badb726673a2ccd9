//! `kiln app ...`: Applications as the Kubernetes API holds them, in
//! readable tables (like `argocd app ...`). `diff` runs the controller's own
//! comparison here; `sync` and `rollback` ask the controller for an
//! operation (the `kiln.dev/operation` annotation) and wait for its result.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use kube::api::{Api, ListParams, Patch, PatchParams};

use kiln::api::{Application, OPERATION_ANNOTATION, Operation, SyncOperation};
use kiln::controller::{CompareTo, Context, ControllerConfig, ControllerSecrets};
use kiln::source::git::{GitConfig, GitSource};

use super::args::parse_duration;
use super::cluster::{Color, Format};
use super::{HostArgs, default_cache_dir, exit};

/// Look at Applications.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum AppCommand {
    /// One line per Application: sync, health, revision, conditions.
    List(ListArgs),
    /// One Application: its source, destination, status, resources and history.
    Get(GetArgs),
    /// Ask the controller to reconcile an Application now.
    #[command(after_help = "\
Examples:
  kiln app refresh guestbook
  kiln app refresh guestbook -n team-a

Exit status: 0 asked (the kiln.dev/refresh annotation is set), 2 an error (no such Application,
no cluster).")]
    Refresh(NamedAppArgs),
    /// The revisions an Application was synced to, oldest first.
    #[command(after_help = "\
Examples:
  kiln app history guestbook
  kiln app rollback guestbook 3      # back to the entry with id 3

Exit status: 0 printed, 2 an error (no such Application, no cluster).")]
    History(NamedAppArgs),
    /// Compare an Application with its destination, as the controller does.
    Diff(AppDiffArgs),
    /// Ask the controller to sync an Application now, and wait for the result.
    Sync(AppSyncArgs),
    /// Sync an Application back to a revision of its history.
    Rollback(AppRollbackArgs),
}

/// Compare an Application with its destination: the controller's own
/// comparison (project rules, render through the Application's plugins,
/// policies, server-side diff), run here. Plugin references must be
/// readable from this machine; repository credentials come from the
/// controller's Secrets when this user may read them.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  kiln app diff guestbook
  kiln app diff guestbook --revision v1.2.0 -o json

Exit status: 0 in sync, 1 out of sync, 2 an error (including a project or
plugin problem, printed as the controller would record it).")]
pub(crate) struct AppDiffArgs {
    /// The Application's name.
    name: String,

    /// Compare this revision instead of spec.source.targetRevision.
    #[arg(long, value_name = "REV")]
    revision: Option<String>,

    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value = "text")]
    output: Format,

    /// Colored diffs.
    #[arg(long, value_enum, default_value = "auto")]
    color: Color,

    /// Directory of the Git cache. Default: ~/.cache/kiln/repos.
    #[arg(long, value_name = "DIR")]
    git_cache: Option<PathBuf>,

    /// Accept a repository on this machine's filesystem (file://, a plain
    /// path), as `kiln controller --allow-file-repositories` does.
    #[arg(long)]
    allow_file_repositories: bool,

    #[command(flatten)]
    where_: AppArgs,

    #[command(flatten)]
    host: HostArgs,
}

/// How to wait for an operation.
#[derive(Debug, clap::Args)]
pub(crate) struct OperationArgs {
    /// Delete tracked resources that Git no longer has.
    #[arg(long)]
    prune: bool,

    /// Validate everything with the API server and change nothing.
    #[arg(long)]
    dry_run: bool,

    /// How long to wait for the controller's result.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    timeout: Duration,

    /// Ask, and return without waiting for the result.
    #[arg(long = "async")]
    no_wait: bool,
}

/// Ask the controller to sync an Application now (like `argocd app sync`).
///
/// The request is the kiln.dev/operation annotation; the controller runs it
/// whether or not the Application syncs automatically, records the result
/// in status.operationState and removes the annotation.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  kiln app sync guestbook
  kiln app sync guestbook --prune --dry-run
  kiln app sync guestbook --revision 4f1c2e9   # only without automated sync

Exit status: 0 the sync succeeded, 2 it failed or no result came in time.")]
pub(crate) struct AppSyncArgs {
    /// The Application's name.
    name: String,

    /// Sync this revision instead of spec.source.targetRevision (refused
    /// while automated sync is enabled: it would undo it at once).
    #[arg(long, value_name = "REV")]
    revision: Option<String>,

    #[command(flatten)]
    operation: OperationArgs,

    #[command(flatten)]
    where_: AppArgs,
}

/// Sync an Application back to a revision it was synced to before (like
/// `argocd app rollback`). Needs automated sync disabled, or the
/// controller would return to the target revision at once.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  kiln app history guestbook
  kiln app rollback guestbook        # the revision before the current one
  kiln app rollback guestbook 3

Exit status: 0 the rollback's sync succeeded, 2 it failed, no result came in time, or there is no
such history entry.")]
pub(crate) struct AppRollbackArgs {
    /// The Application's name.
    name: String,

    /// The history id to return to (`kiln app history`). Default: the
    /// entry before the last.
    id: Option<i64>,

    #[command(flatten)]
    operation: OperationArgs,

    #[command(flatten)]
    where_: AppArgs,
}

/// Where the Applications are.
#[derive(Debug, clap::Args)]
pub(crate) struct AppArgs {
    /// Kubeconfig file. Default: $KUBECONFIG, ~/.kube/config, in-cluster.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,

    /// Kubeconfig context.
    #[arg(long, value_name = "NAME")]
    context: Option<String>,

    /// The namespace of the Applications.
    #[arg(long, short = 'n', default_value = "kiln")]
    pub(crate) namespace: String,
}

/// One Application.
#[derive(Debug, clap::Args)]
pub(crate) struct NamedAppArgs {
    /// The Application's name.
    name: String,

    #[command(flatten)]
    where_: AppArgs,
}

async fn api(args: &AppArgs) -> anyhow::Result<Api<Application>> {
    Ok(api_and_client(args).await?.0)
}

pub(crate) async fn api_and_client(
    args: &AppArgs,
) -> anyhow::Result<(Api<Application>, kube::Client)> {
    let cluster =
        kiln::cluster::Cluster::connect(args.kubeconfig.as_deref(), args.context.as_deref())
            .await?;
    let client = cluster.client().clone();
    Ok((Api::namespaced(client.clone(), &args.namespace), client))
}

fn short(revision: Option<&String>) -> String {
    revision
        .map(|r| r.chars().take(8).collect())
        .unwrap_or_else(|| "-".into())
}

pub(crate) async fn run(command: &AppCommand) -> anyhow::Result<u8> {
    match command {
        AppCommand::List(args) => return list(args).await,
        AppCommand::Get(args) => return get(args).await,
        AppCommand::History(args) => {
            let app = api(&args.where_)
                .await?
                .get(&args.name)
                .await
                .with_context(|| format!("Application {}", args.name))?;
            let history = app.status.unwrap_or_default().history;
            println!("{:<4} {:<22} REVISION", "ID", "DEPLOYED");
            for entry in history {
                println!(
                    "{:<4} {:<22} {}",
                    entry.id, entry.deployed_at, entry.revision
                );
            }
        }
        AppCommand::Diff(args) => return diff(args).await,
        AppCommand::Sync(args) => {
            let apps = api(&args.where_).await?;
            let app = apps
                .get(&args.name)
                .await
                .with_context(|| format!("Application {}", args.name))?;
            if let Some(revision) = &args.revision
                && automated(&app)
                && *revision != app.spec.source.target_revision
            {
                bail!(
                    "cannot sync Application {} to revision {revision:?}: automated sync is enabled and follows targetRevision {:?}; disable spec.syncPolicy.automated first",
                    args.name,
                    app.spec.source.target_revision
                );
            }
            let sync = SyncOperation {
                revision: args.revision.clone(),
                prune: args.operation.prune,
                dry_run: args.operation.dry_run,
            };
            return operate(
                &apps,
                &args.name,
                sync,
                "kiln app sync".into(),
                &args.operation,
            )
            .await;
        }
        AppCommand::Rollback(args) => {
            let apps = api(&args.where_).await?;
            let app = apps
                .get(&args.name)
                .await
                .with_context(|| format!("Application {}", args.name))?;
            if automated(&app) {
                bail!(
                    "cannot roll back Application {}: automated sync is enabled and would return to targetRevision {:?} at once; disable spec.syncPolicy.automated first",
                    args.name,
                    app.spec.source.target_revision
                );
            }
            let history = app.status.clone().unwrap_or_default().history;
            let entry = match args.id {
                Some(id) => history.iter().find(|h| h.id == id).with_context(|| {
                    format!(
                        "Application {} has no history id {id} (it has: {})",
                        args.name,
                        history
                            .iter()
                            .map(|h| h.id.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })?,
                None => history.iter().rev().nth(1).with_context(|| {
                    format!(
                        "Application {} has no earlier revision to roll back to (history: {} entries)",
                        args.name,
                        history.len()
                    )
                })?,
            };
            eprintln!(
                "rolling back {} to history id {} (revision {})",
                args.name, entry.id, entry.revision
            );
            let sync = SyncOperation {
                revision: Some(entry.revision.clone()),
                prune: args.operation.prune,
                dry_run: args.operation.dry_run,
            };
            let by = format!("kiln app rollback {}", entry.id);
            return operate(&apps, &args.name, sync, by, &args.operation).await;
        }
        AppCommand::Refresh(args) => {
            let patch = serde_json::json!({"metadata": {"annotations": {kiln::api::REFRESH_ANNOTATION: kiln::units::now()}}});
            api(&args.where_)
                .await?
                .patch(&args.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .with_context(|| format!("Application {}", args.name))?;
            println!("refresh requested for {}", args.name);
        }
    }
    Ok(exit::OK)
}

/// `GROUP/KIND/NAME`, or `KIND/NAME` for the core group.
fn resource(group: &str, kind: &str, name: &str) -> String {
    if group.is_empty() {
        format!("{kind}/{name}")
    } else {
        format!("{group}/{kind}/{name}")
    }
}

fn automated(app: &Application) -> bool {
    app.spec
        .sync_policy
        .as_ref()
        .is_some_and(|p| p.automated.is_some())
}

/// Asks for an operation and (unless `--async`) waits for its result.
async fn operate(
    apps: &Api<Application>,
    name: &str,
    sync: SyncOperation,
    initiated_by: String,
    args: &OperationArgs,
) -> anyhow::Result<u8> {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let operation = Operation {
        id: id.clone(),
        sync,
        initiated_by: Some(initiated_by),
    };
    let patch = serde_json::json!({"metadata": {"annotations": {
        OPERATION_ANNOTATION: serde_json::to_string(&operation)?,
    }}});
    apps.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("cannot request a sync of Application {name}"))?;
    if args.no_wait {
        println!("sync of {name} requested (operation {id})");
        return Ok(exit::OK);
    }
    eprintln!("waiting for the controller to sync {name} (operation {id})");
    let deadline = tokio::time::Instant::now() + args.timeout;
    let state = loop {
        let app = apps
            .get(name)
            .await
            .with_context(|| format!("Application {name}"))?;
        let state = app.status.and_then(|s| s.operation_state);
        if let Some(state) = state.filter(|s| s.id.as_deref() == Some(id.as_str())) {
            break state;
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "no result for the sync of Application {name} within {:?}: is `kiln controller` running for this namespace? (the request stays in annotation {OPERATION_ANNOTATION})",
                args.timeout
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    if !state.resources.is_empty() {
        println!(
            "{:<44} {:<16} {:<12} MESSAGE",
            "RESOURCE", "NAMESPACE", "RESULT"
        );
        for r in &state.resources {
            println!(
                "{:<44} {:<16} {:<12} {}",
                resource(&r.group, &r.kind, &r.name),
                r.namespace.as_deref().unwrap_or("-"),
                r.action,
                r.message.as_deref().unwrap_or_default()
            );
        }
    }
    let message = state.message.as_deref().unwrap_or_default();
    // The sync's own summary already says "(dry run)": once is enough.
    let dry_run = state.dry_run && !message.contains("(dry run)");
    println!(
        "{}: {message} at {}{}",
        state.phase,
        short(state.revision.as_ref()),
        if dry_run { " (dry run)" } else { "" }
    );
    Ok(if state.phase == "Succeeded" {
        exit::OK
    } else {
        exit::ERROR
    })
}

async fn diff(args: &AppDiffArgs) -> anyhow::Result<u8> {
    let (apps, client) = api_and_client(&args.where_).await?;
    let app = apps
        .get(&args.name)
        .await
        .with_context(|| format!("Application {}", args.name))?;
    let namespace = &args.where_.namespace;
    // Credentials and clusters as the controller sees them, when readable.
    let secrets = match ControllerSecrets::list(client.clone(), namespace).await {
        Ok(secrets) => secrets,
        Err(e) => {
            eprintln!(
                "warning: cannot read the Secrets of namespace {namespace} ({e}); private repositories and registered clusters are not available"
            );
            ControllerSecrets::fixed([])
        }
    };
    let cache = match &args.git_cache {
        Some(dir) => dir.clone(),
        None => default_cache_dir()
            .context("no cache directory: set --git-cache or HOME")?
            .join("repos"),
    };
    let mut git_config = GitConfig::new(cache);
    match kiln::controller::known_hosts::SshKnownHosts::read(client.clone(), namespace).await {
        Ok(known_hosts) => git_config.ssh_known_hosts = Some(Arc::new(known_hosts)),
        Err(e) => eprintln!(
            "warning: cannot read the ConfigMap kiln-ssh-known-hosts of namespace {namespace} ({e}); SSH hosts are trusted on first use"
        ),
    }
    let git = GitSource::new(git_config, Arc::new(secrets.repo_credentials()))?;
    let mut config = ControllerConfig {
        namespace: namespace.clone(),
        allow_file_repositories: args.allow_file_repositories,
        make_random_seed_key: false,
        watch: false,
        ..ControllerConfig::default()
    };
    if let Some(dir) = default_cache_dir() {
        config.catalog.store = dir.join("plugins");
    }
    let ctx = Context::new(client, git, args.host.host()?, config, secrets);
    let to = CompareTo {
        revision: args.revision.clone(),
    };
    let comparison = kiln::controller::compare(&app, &ctx, &to)
        .await
        .map_err(|stop| anyhow::anyhow!("Application {}: {stop}", args.name))?;
    for finding in &comparison.policy.findings {
        eprintln!(
            "policy {} [{} {}] {}: {}",
            finding.policy,
            finding.mode,
            finding.severity,
            finding.object.as_deref().unwrap_or("(set)"),
            finding.message
        );
    }
    if comparison.blocked {
        eprintln!("an enforced policy fails: the controller would apply nothing");
    }
    eprintln!(
        "{} at {} on {} ({})",
        args.name,
        short(Some(&comparison.commit)),
        comparison.target.name,
        comparison.target.server
    );
    match args.output {
        Format::Text => print!(
            "{}",
            kiln::diff::output::text(&comparison.diff, args.color.enabled())
        ),
        Format::Json => println!("{}", kiln::diff::output::json(&comparison.diff)),
    }
    Ok(if comparison.diff.in_sync() {
        exit::OK
    } else {
        exit::DRIFT
    })
}

/// `kiln app list`: a table (`-o wide`: with repository, path and
/// destination), or the Applications as the API serves them (`-o json`,
/// `-o yaml`: a List).
async fn list(args: &ListArgs) -> anyhow::Result<u8> {
    let apps = match api(&args.where_).await?.list(&ListParams::default()).await {
        Ok(apps) => apps,
        // A list is refused 404 only when the resource is not served.
        Err(kube::Error::Api(status)) if status.code == 404 => anyhow::bail!(
            "cannot list Applications: the cluster does not serve kiln.dev Applications: \
             install Kiln's CRDs first (kiln crds | kubectl apply --server-side -f -)"
        ),
        Err(e) => return Err(anyhow::Error::new(e).context("cannot list Applications")),
    };
    if let Some(printed) = as_data(args.output, &apps)? {
        print!("{printed}");
        return Ok(exit::OK);
    }
    let wide = matches!(args.output, Output::Wide);
    let extra = |destination: &str, repo: &str, path: &str| {
        if wide {
            format!("{destination:<32} {repo:<48} {path:<24} ")
        } else {
            String::new()
        }
    };
    println!(
        "{:<24} {:<12} {:<10} {:<12} {:<10} {}CONDITION",
        "NAME",
        "PROJECT",
        "SYNC",
        "HEALTH",
        "REVISION",
        extra("DESTINATION", "REPO", "PATH")
    );
    for app in apps.items {
        let status = app.status.clone().unwrap_or_default();
        let sync = status
            .sync
            .as_ref()
            .map_or("-", |s| s.status.as_str())
            .to_owned();
        let health = status
            .health
            .as_ref()
            .map_or("-", |h| h.status.as_str())
            .to_owned();
        let revision = short(status.sync.as_ref().and_then(|s| s.revision.as_ref()));
        let condition = status
            .conditions
            .first()
            .map(|c| c.type_.clone())
            .unwrap_or_default();
        let destination = &app.spec.destination;
        let destination = format!(
            "{}/{}",
            destination
                .server
                .as_deref()
                .or(destination.name.as_deref())
                .unwrap_or("in-cluster"),
            destination.namespace.as_deref().unwrap_or("-")
        );
        let source = &app.spec.source;
        println!(
            "{:<24} {:<12} {:<10} {:<12} {:<10} {}{condition}",
            app.metadata.name.clone().unwrap_or_default(),
            app.spec.project,
            sync,
            health,
            revision,
            extra(&destination, &source.repo_url, &source.path)
        );
    }
    Ok(exit::OK)
}

/// `kiln app get`: a summary, or the Application as the API serves it
/// (`-o json`, `-o yaml`).
async fn get(args: &GetArgs) -> anyhow::Result<u8> {
    let app = api(&args.where_)
        .await?
        .get(&args.name)
        .await
        .with_context(|| format!("Application {}", args.name))?;
    if let Some(printed) = as_data(args.output, &app)? {
        print!("{printed}");
        return Ok(exit::OK);
    }
    let spec = &app.spec;
    let status = app.status.clone().unwrap_or_default();
    println!("Name:        {}", args.name);
    println!("Project:     {}", spec.project);
    println!(
        "Source:      {} {} path {}",
        spec.source.repo_url, spec.source.target_revision, spec.source.path
    );
    for plugin in &spec.source.plugins {
        println!("  plugin:    {} {:?}", plugin.name, plugin.parameters);
    }
    println!(
        "Destination: {} namespace {}",
        spec.destination
            .server
            .as_deref()
            .or(spec.destination.name.as_deref())
            .unwrap_or("in-cluster"),
        spec.destination.namespace.as_deref().unwrap_or("-")
    );
    let automated = spec.sync_policy.as_ref().and_then(|p| p.automated.as_ref());
    println!(
        "Sync policy: {}",
        automated.map_or("manual".to_owned(), |a| format!(
            "automated (prune: {}, selfHeal: {})",
            a.prune, a.self_heal
        ))
    );
    let sync = status.sync.as_ref();
    println!(
        "Sync:        {} at {}",
        sync.map_or("-", |s| s.status.as_str()),
        short(sync.and_then(|s| s.revision.as_ref()))
    );
    println!(
        "Health:      {}",
        status.health.as_ref().map_or("-", |h| h.status.as_str())
    );
    if let Some(operation) = &status.operation_state {
        println!(
            "Last sync:   {} — {}",
            operation.phase,
            operation.message.as_deref().unwrap_or_default()
        );
    }
    for condition in &status.conditions {
        println!(
            "Condition:   {} ({}): {}",
            condition.type_,
            condition.reason.as_deref().unwrap_or("-"),
            condition.message.as_deref().unwrap_or_default()
        );
    }
    if let Some(policy) = &status.policy {
        for finding in &policy.findings {
            let field = finding
                .field_path
                .as_deref()
                .map(|f| format!(" {f}"))
                .unwrap_or_default();
            println!(
                "Policy:      {} [{}] {}{field}: {}",
                finding.policy,
                finding.severity,
                finding.object.as_deref().unwrap_or("(set)"),
                finding.message
            );
        }
        if policy.omitted > 0 {
            println!("Policy:      … and {} more findings", policy.omitted);
        }
    }
    if !status.resources.is_empty() {
        println!(
            "\n{:<40} {:<16} {:<12} HEALTH",
            "RESOURCE", "NAMESPACE", "STATUS"
        );
        for r in &status.resources {
            println!(
                "{:<40} {:<16} {:<12} {}",
                resource(&r.group, &r.kind, &r.name),
                r.namespace.as_deref().unwrap_or("-"),
                r.status,
                r.health.as_deref().unwrap_or("-")
            );
        }
    }
    if !status.history.is_empty() {
        println!("\nHISTORY");
        for entry in &status.history {
            println!("{:<4} {} {}", entry.id, entry.deployed_at, entry.revision);
        }
    }
    Ok(exit::OK)
}

/// How `list` and `get` print.
#[derive(Clone, Copy, Debug, Default, clap::ValueEnum)]
pub(crate) enum Output {
    /// A table (`list`) or a summary (`get`).
    #[default]
    Text,
    /// The table with the repository, path and destination (`list`).
    Wide,
    /// As the API serves it, JSON.
    Json,
    /// As the API serves it, YAML.
    Yaml,
}

/// List Applications.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  kiln app list
  kiln app list -n team-a -o wide
  kiln app list -o yaml

Exit status: 0 listed (also when there are none), 2 an error (no cluster, no CRDs).")]
pub(crate) struct ListArgs {
    /// Output format: text, wide, json, yaml.
    #[arg(long, short = 'o', value_enum, default_value = "text")]
    output: Output,

    #[command(flatten)]
    where_: AppArgs,
}

/// Show one Application.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  kiln app get guestbook
  kiln app get guestbook -o json | jq .status.sync

Exit status: 0 printed, 2 an error (no such Application, no cluster).")]
pub(crate) struct GetArgs {
    /// The Application's name.
    name: String,

    /// Output format: text, json, yaml (wide is text here).
    #[arg(long, short = 'o', value_enum, default_value = "text")]
    output: Output,

    #[command(flatten)]
    where_: AppArgs,
}

/// `value` as JSON or YAML text when `output` asks for data.
pub(crate) fn as_data(
    output: Output,
    value: &impl serde::Serialize,
) -> anyhow::Result<Option<String>> {
    Ok(match output {
        Output::Text | Output::Wide => None,
        Output::Json => Some(serde_json::to_string_pretty(value)? + "\n"),
        Output::Yaml => Some(serde_yaml::to_string(value)?),
    })
}
