//! `kiln app list|get|refresh`: Applications as the Kubernetes API holds
//! them, in readable tables (like `argocd app list/get`).

use std::path::PathBuf;

use anyhow::Context as _;
use kube::api::{Api, ListParams, Patch, PatchParams};

use kiln::api::Application;

use super::exit;

/// Look at Applications.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum AppCommand {
    /// One line per Application: sync, health, revision, conditions.
    List(AppArgs),
    /// One Application: its source, destination, status, resources and history.
    Get(NamedAppArgs),
    /// Ask the controller to reconcile an Application now.
    Refresh(NamedAppArgs),
    /// The revisions an Application was synced to, oldest first.
    History(NamedAppArgs),
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
    namespace: String,
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
    let cluster =
        kiln::cluster::Cluster::connect(args.kubeconfig.as_deref(), args.context.as_deref())
            .await?;
    Ok(Api::namespaced(cluster.client().clone(), &args.namespace))
}

fn short(revision: Option<&String>) -> String {
    revision
        .map(|r| r.chars().take(8).collect())
        .unwrap_or_else(|| "-".into())
}

pub(crate) async fn run(command: &AppCommand) -> anyhow::Result<u8> {
    match command {
        AppCommand::List(args) => {
            let apps = api(args)
                .await?
                .list(&ListParams::default())
                .await
                .context("cannot list Applications")?;
            println!(
                "{:<24} {:<12} {:<10} {:<12} {:<10} CONDITION",
                "NAME", "PROJECT", "SYNC", "HEALTH", "REVISION"
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
                println!(
                    "{:<24} {:<12} {:<10} {:<12} {:<10} {condition}",
                    app.metadata.name.unwrap_or_default(),
                    app.spec.project,
                    sync,
                    health,
                    revision
                );
            }
        }
        AppCommand::Get(args) => {
            let app = api(&args.where_)
                .await?
                .get(&args.name)
                .await
                .with_context(|| format!("Application {}", args.name))?;
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
                    println!(
                        "Policy:      {} [{}] {}: {}",
                        finding.policy,
                        finding.severity,
                        finding.object.as_deref().unwrap_or("(set)"),
                        finding.message
                    );
                }
            }
            if !status.resources.is_empty() {
                println!(
                    "\n{:<40} {:<16} {:<12} HEALTH",
                    "RESOURCE", "NAMESPACE", "STATUS"
                );
                for r in &status.resources {
                    let kind = if r.group.is_empty() {
                        r.kind.clone()
                    } else {
                        format!("{}/{}", r.group, r.kind)
                    };
                    println!(
                        "{:<40} {:<16} {:<12} {}",
                        format!("{kind}/{}", r.name),
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
        }
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
