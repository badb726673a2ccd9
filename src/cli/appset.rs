//! `kiln appset`: ApplicationSets offline.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use kiln::api::appset::ApplicationSet;
use kiln::appset::{self, ClusterInfo, Sources, TemplateRequest, Templater};
use kiln::plugin::{Plugin, World};
use kiln::source::{LocalDir, SourceView};

use super::HostArgs;

/// ApplicationSet tools.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum AppSetCommand {
    Generate(Box<GenerateArgs>),
    /// One line per ApplicationSet: its Applications, whether they are up
    /// to date, and what went wrong.
    #[command(after_help = "\
Examples:
  kiln appset list
  kiln appset list -o yaml

Exit status: 0 printed, 2 an error (no cluster, ApplicationSets not served).")]
    List(ListArgs),
    /// One ApplicationSet: its generators, policy, conditions and
    /// Applications.
    #[command(after_help = "\
Examples:
  kiln appset get guestbook-envs
  kiln appset get guestbook-envs -o json | jq .status.conditions

Exit status: 0 printed, 2 an error (no such ApplicationSet, no cluster).")]
    Get(GetArgs),
}

/// `kiln appset list`.
#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    /// Output format: text, json, yaml (wide is text here).
    #[arg(long, short = 'o', value_enum, default_value = "text")]
    output: super::app::Output,

    #[command(flatten)]
    where_: super::app::AppArgs,
}

/// `kiln appset get`.
#[derive(Debug, clap::Args)]
pub(crate) struct GetArgs {
    /// The ApplicationSet's name.
    name: String,

    /// Output format: text, json, yaml (wide is text here).
    #[arg(long, short = 'o', value_enum, default_value = "text")]
    output: super::app::Output,

    #[command(flatten)]
    where_: super::app::AppArgs,
}

/// Print the Applications an ApplicationSet generates, without a cluster
/// (what `argocd appset generate` prints, offline).
///
/// FILE holds one ApplicationSet (`kiln.dev/v1alpha1`; `-` reads standard
/// input). Git generators read the checkout `--source DIR` whatever
/// repository and revision they name (a working tree as it is); the
/// clusters generator reads `--clusters FILE` (a YAML list of `{name,
/// server, project, labels, annotations}`) besides `in-cluster`.
/// Templates are rendered by the `appset` plugin in the sandbox, as the
/// controller renders them. Nothing is applied.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  kiln appset generate examples/appsets/guestbook.yaml --source .
  kiln appset generate set.yaml --source ../deploy -o json

Exit status: 0 printed, 2 an error (an invalid set, a generator or template that fails; the message names the field or parameter set).")]
pub(crate) struct GenerateArgs {
    /// The ApplicationSet file (`-`: standard input).
    #[arg(value_name = "FILE")]
    file: String,

    /// The checkout git generators read.
    #[arg(long, value_name = "DIR")]
    source: Option<PathBuf>,

    /// Registered clusters, for the clusters generator (YAML list).
    #[arg(long, value_name = "FILE")]
    clusters: Option<PathBuf>,

    /// The plugin that renders templates. Default: the first-party
    /// `appset.wasm`, looked for as `kiln policy test` looks for its
    /// plugins.
    #[arg(long, value_name = "REF")]
    appset_plugin: Option<String>,

    /// Output: `yaml` (documents) or `json` (a List).
    #[arg(short, long, value_enum, default_value = "yaml")]
    output: Output,

    /// Applications (and parameter sets) the set may generate.
    #[arg(long, value_name = "N", default_value_t = appset::Limits::default().max_applications)]
    max_applications: usize,

    #[command(flatten)]
    host: HostArgs,

    #[command(flatten)]
    registry: super::plugin::RegistryArgs,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Output {
    Yaml,
    Json,
}

pub(crate) async fn run(command: &AppSetCommand) -> anyhow::Result<u8> {
    match command {
        AppSetCommand::Generate(args) => generate(args).await,
        AppSetCommand::List(args) => list(args).await,
        AppSetCommand::Get(args) => get(args).await,
    }
}

async fn sets(where_: &super::app::AppArgs) -> anyhow::Result<kube::Api<ApplicationSet>> {
    let (_, client) = super::app::api_and_client(where_).await?;
    Ok(kube::Api::namespaced(client, &where_.namespace))
}

/// The condition `kind` of `set`, if it has one.
fn condition<'s>(set: &'s ApplicationSet, kind: &str) -> Option<&'s kiln::api::Condition> {
    set.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == kind)
}

async fn list(args: &ListArgs) -> anyhow::Result<u8> {
    let sets = match sets(&args.where_).await?.list(&Default::default()).await {
        Ok(sets) => sets,
        Err(kube::Error::Api(status)) if status.code == 404 => anyhow::bail!(
            "cannot list ApplicationSets: the cluster does not serve kiln.dev ApplicationSets: \
             install Kiln's CRDs first (kiln crds | kubectl apply --server-side -f -)"
        ),
        Err(e) => return Err(anyhow::Error::new(e).context("cannot list ApplicationSets")),
    };
    if let Some(printed) = super::app::as_data(args.output, &sets)? {
        print!("{printed}");
        return Ok(0);
    }
    println!(
        "{:<32} {:<13} {:<11} CONDITION",
        "NAME", "APPLICATIONS", "UP-TO-DATE"
    );
    for set in &sets.items {
        let count = set.status.as_ref().map_or(0, |s| s.application_count);
        let up = condition(set, "ResourcesUpToDate").map_or("Unknown", |c| c.status.as_str());
        let error = condition(set, "ErrorOccurred")
            .filter(|c| c.status == "True")
            .and_then(|c| c.message.as_deref())
            .map(|m| kiln::text::bounded(m, 120))
            .unwrap_or_default();
        println!(
            "{:<32} {:<13} {:<11} {error}",
            set.metadata.name.as_deref().unwrap_or_default(),
            count,
            up
        );
    }
    Ok(0)
}

async fn get(args: &GetArgs) -> anyhow::Result<u8> {
    let set = sets(&args.where_)
        .await?
        .get(&args.name)
        .await
        .with_context(|| format!("ApplicationSet {}", args.name))?;
    if let Some(printed) = super::app::as_data(args.output, &set)? {
        print!("{printed}");
        return Ok(0);
    }
    let spec = &set.spec;
    println!("Name:         {}", args.name);
    let kinds: Vec<String> = spec
        .generators
        .iter()
        .filter_map(|g| g.as_object())
        .flat_map(|g| g.keys().filter(|k| *k != "selector").cloned())
        .collect();
    println!("Generators:   {}", kinds.join(", "));
    println!(
        "Templates:    {}",
        if spec.go_template { "Go" } else { "{{param}}" }
    );
    let policy = spec
        .sync_policy
        .as_ref()
        .and_then(|p| p.applications_sync.as_deref())
        .unwrap_or("sync");
    println!("Sync policy:  {policy}");
    let status = set.status.clone().unwrap_or_default();
    println!("Conditions:");
    for c in &status.conditions {
        println!(
            "  {:<20} {:<6} {}",
            c.type_,
            c.status,
            c.message.as_deref().unwrap_or_default()
        );
    }
    println!("Applications ({}):", status.application_count);
    for name in &status.applications {
        println!("  {name}");
    }
    Ok(0)
}

/// The largest ApplicationSet (or clusters) file read.
const MAX_FILE: u64 = 4 * 1024 * 1024;

/// `path` (`-`: standard input) as text, at most [`MAX_FILE`] bytes.
fn read_input(path: &str) -> anyhow::Result<String> {
    let mut text = String::new();
    let read = if path == "-" {
        std::io::stdin()
            .take(MAX_FILE + 1)
            .read_to_string(&mut text)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(MAX_FILE + 1).read_to_string(&mut text))
    };
    read.with_context(|| format!("cannot read {path}"))?;
    if text.len() as u64 > MAX_FILE {
        anyhow::bail!("{path}: larger than {MAX_FILE} bytes");
    }
    Ok(text)
}

async fn generate(args: &GenerateArgs) -> anyhow::Result<u8> {
    let text = read_input(&args.file)?;
    let objects = kiln::manifest::parse(&text, Some(&args.file))?;
    let [object] = objects.as_slice() else {
        anyhow::bail!(
            "{}: holds {} documents, not one ApplicationSet",
            args.file,
            objects.len()
        );
    };
    if object.kind() != "ApplicationSet" {
        anyhow::bail!("{}: a {}, not an ApplicationSet", args.file, object.kind());
    }
    let mut set: ApplicationSet =
        serde_json::from_value(serde_json::Value::Object(object.value().clone()))
            .with_context(|| format!("{}: not an ApplicationSet", args.file))?;
    if set.metadata.namespace.is_none() {
        set.metadata.namespace = Some("kiln".into());
    }
    let loader =
        super::load::Loader::new(args.host.host()?, args.registry.fetcher()?, None, false)?;
    let reference = args.appset_plugin.as_deref().unwrap_or("appset");
    let plugin = loader
        .load(reference, World::Renderer)
        .await
        .with_context(|| format!("cannot load the appset plugin {reference}"))?;
    let sources = OfflineSources {
        source: match &args.source {
            Some(dir) => Some(Arc::new(
                LocalDir::open(dir).with_context(|| format!("cannot open {}", dir.display()))?,
            )),
            None => None,
        },
        clusters: match &args.clusters {
            Some(path) => read_clusters(path)?,
            None => Vec::new(),
        },
    };
    let limits = appset::Limits {
        max_applications: args.max_applications,
        ..appset::Limits::default()
    };
    let name = set.metadata.name.clone().unwrap_or_default();
    let generated = appset::generate(&set, &sources, &CliTemplater { plugin }, limits)
        .await
        .with_context(|| format!("ApplicationSet {name}"))?;
    match args.output {
        Output::Yaml => {
            for app in &generated.applications {
                print!("---\n{}", serde_yaml::to_string(app)?);
            }
        }
        Output::Json => {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": generated.applications});
            println!("{}", serde_json::to_string_pretty(&list)?);
        }
    }
    Ok(0)
}

fn read_clusters(path: &Path) -> anyhow::Result<Vec<ClusterInfo>> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Entry {
        name: String,
        server: String,
        #[serde(default)]
        project: Option<String>,
        #[serde(default)]
        labels: std::collections::BTreeMap<String, String>,
        #[serde(default)]
        annotations: std::collections::BTreeMap<String, String>,
    }
    let shown = path.display().to_string();
    let text = read_input(&shown)?;
    kiln_yaml_limits::check(&text, &kiln_yaml_limits::YamlLimits::default())
        .with_context(|| shown.clone())?;
    let entries: Vec<Entry> =
        serde_yaml::from_str(&text).with_context(|| format!("{shown}: not a list of clusters"))?;
    Ok(entries
        .into_iter()
        .map(|e| ClusterInfo {
            name: e.name,
            server: e.server,
            project: e.project,
            labels: e.labels,
            annotations: e.annotations,
        })
        .collect())
}

/// A checkout for every repository, and the clusters of a file.
struct OfflineSources {
    source: Option<Arc<LocalDir>>,
    clusters: Vec<ClusterInfo>,
}

#[async_trait::async_trait]
impl Sources for OfflineSources {
    async fn tree(&self, repo_url: &str, _revision: &str) -> Result<Arc<dyn SourceView>, String> {
        match &self.source {
            Some(dir) => Ok(dir.clone()),
            None => Err(format!(
                "a git generator reads {repo_url}: give --source DIR (a checkout of it)"
            )),
        }
    }

    async fn clusters(&self) -> Result<Vec<ClusterInfo>, String> {
        Ok(self.clusters.clone())
    }
}

/// The `appset` plugin loaded by the command.
struct CliTemplater {
    plugin: Plugin,
}

#[async_trait::async_trait]
impl Templater for CliTemplater {
    async fn render(&self, request: TemplateRequest) -> Result<Vec<serde_json::Value>, String> {
        appset::render_with(&self.plugin, &request).await
    }
}
