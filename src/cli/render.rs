//! `kiln render`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, bail};
use clap::ArgMatches;

use kiln::manifest::{self, Object};
use kiln::plugin::{AppContext, Params, Severity, World};
use kiln::policy::report::{self, Entry, ReportOptions, Scopes};
use kiln::policy::{self, Mode, PolicySource, PolicyStep, Report};
use kiln::render::{self, DirectoryOptions, Step};
use kiln::source::{LocalDir, SourceView};

use super::args::parse_key_value;
use super::{HostArgs, exit};

/// Render an application directory through renderer plugins, then review the
/// result with policy plugins.
///
/// Prints the rendered manifests on stdout and the policy report on stderr.
/// Without --plugin, the built-in directory renderer reads the plain YAML and
/// JSON files of DIR.
#[derive(Debug, clap::Args)]
// `--version` is the chart's version here; `kiln --version` prints Kiln's.
#[command(disable_version_flag = true)]
#[command(after_help = "\
Each --param belongs to the --plugin before it; each --setting and --mode to the --policy before it.

Examples:
  kiln render --repo https://github.com/org/apps --revision v1.2.* --path apps/web
  kiln render examples/guestbook --plugin plugins/dist/values.wasm --param replicas=3 \\
      --policy plugins/dist/required-labels.wasm --setting labels=app,team
  kiln render apps/web --root . --plugin a.wasm --plugin b.wasm -o json
  kiln render --chart web --repo https://charts.example.com --version '1.2.*' \\
      --plugin plugins/dist/helm.wasm --param releaseName=web --param set=replicas=3
  kiln render --chart oci://registry.example.com/charts/web --version 1.2.3 \\
      --plugin plugins/dist/helm.wasm
  kiln render --chart web --repo registry.example.com/charts --enable-oci --version 1.2.3 \\
      --plugin plugins/dist/helm.wasm

With --chart, --repo is the Helm repository (or oci://REGISTRY/PATH, or REGISTRY/PATH with
--enable-oci, as Argo CD writes an OCI registry) and the chart's files are the source the
plugin reads; dependencies that Chart.yaml declares but charts/ does not vendor are fetched
too.

Exit status: 0 rendered (policies passed or only warned), 1 an enforced policy blocked the
result, 2 an error (unreadable input, a plugin failed, a policy could not run; the message
names the plugin or policy). Unless the status is 0, nothing is printed on stdout (so that
`kiln render ... | kubectl apply -f -` never applies what a policy refused);
--output-on-block prints the manifests anyway, for inspection.")]
pub(crate) struct RenderArgs {
    /// Output format of the manifests. `json` prints a List whose `policy`
    /// field carries the policy results (`blocked`, and per policy its mode,
    /// findings and error).
    #[arg(
        help_heading = "Output",
        short,
        long,
        value_enum,
        default_value = "yaml"
    )]
    output: Format,

    /// Also write the findings to FILE as wgpolicyk8s.io/v1alpha2 reports
    /// (YAML documents): one PolicyReport per namespace, a
    /// ClusterPolicyReport for cluster-scoped objects, each named
    /// `kiln-APP` (see docs/policies.md). Written even when a policy blocks.
    #[arg(help_heading = "Output", long, value_name = "FILE")]
    policy_report: Option<PathBuf>,

    /// Results one report of --policy-report lists at most; its summary
    /// still counts them all, and the annotation kiln.dev/omitted-results
    /// says how many were left out.
    #[arg(help_heading = "Output", long, value_name = "N", default_value_t = report::DEFAULT_MAX_RESULTS,
          requires = "policy_report")]
    policy_report_max_results: usize,

    /// Print the manifests even when an enforced policy blocked them or a
    /// policy could not run (the exit status still says so). Without it,
    /// stdout stays empty then.
    #[arg(help_heading = "Output", long)]
    output_on_block: bool,

    // After the output options: their heading comes first in --help.
    #[command(flatten)]
    pub(crate) pipeline: PipelineArgs,
}

/// Where an application comes from and how it is rendered and reviewed:
/// shared by `kiln render`, `kiln diff` and `kiln sync`.
#[derive(Debug, clap::Args)]
pub(crate) struct PipelineArgs {
    /// The application's directory (a local source; or use --repo or --chart).
    #[arg(required_unless_present_any = ["repo", "chart"], conflicts_with = "chart")]
    dir: Option<PathBuf>,

    /// Root of the source tree plugins may read (DIR must be inside it).
    /// Default: DIR itself. Paths such as `../base` work within the root.
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with = "repo",
        help_heading = "Source"
    )]
    root: Option<PathBuf>,

    #[command(flatten)]
    git: super::source::GitArgs,

    #[command(flatten)]
    chart: super::chart::ChartArgs,

    /// A renderer component; repeat for a chain (each gets the previous
    /// output). REF is a file, `oci://REGISTRY/REPO:TAG`, `https://…@sha256:…`,
    /// or a first-party plugin's name (`helm`, `kustomize`, `values`), found
    /// in $KILN_PLUGIN_PATH, beside the kiln binary or in `plugins/dist/`.
    #[arg(long = "plugin", value_name = "REF", help_heading = "Renderers")]
    plugins: Vec<String>,

    /// A parameter for the preceding --plugin.
    #[arg(long = "param", value_name = "KEY=VALUE", value_parser = parse_key_value, help_heading = "Renderers")]
    params: Vec<(String, String)>,

    /// A policy component; repeat for several.
    #[arg(long = "policy", value_name = "REF", help_heading = "Policies")]
    policies: Vec<String>,

    /// A setting for the preceding --policy.
    #[arg(long = "setting", value_name = "KEY=VALUE", value_parser = parse_key_value, help_heading = "Policies")]
    settings: Vec<(String, String)>,

    /// Mode of the preceding --policy: enforce (default: blocks on errors), warn, audit.
    #[arg(long = "mode", value_name = "MODE", help_heading = "Policies")]
    modes: Vec<Mode>,

    /// The policies' source: the directory every --policy reads its files
    /// from (templates, constraints, bindings), as an AppProject's policy
    /// reads the security team's repository; settings paths are relative
    /// to it and cannot leave it. Default: the application's source
    /// (--root, or --repo), paths relative to DIR.
    #[arg(long, value_name = "DIR", help_heading = "Policies")]
    policy_root: Option<PathBuf>,

    /// Built-in directory renderer: include subdirectories.
    #[arg(long, help_heading = "Directory renderer")]
    recurse: bool,

    /// Built-in directory renderer: the most bytes of manifests it reads
    /// over all its files.
    #[arg(long, value_name = "SIZE", default_value = "64Mi", value_parser = super::args::parse_size,
          help_heading = "Directory renderer")]
    max_manifest_bytes: u64,

    /// Built-in directory renderer: the most nodes (YAML/JSON values,
    /// keys included) it parses over all its files.
    #[arg(long, value_name = "N", default_value_t = kiln::manifest::ParseLimits::DEFAULT_NODES,
          help_heading = "Directory renderer")]
    max_manifest_nodes: u64,

    /// Application name given to plugins. Default: DIR's name.
    #[arg(long, help_heading = "Application")]
    name: Option<String>,

    /// Destination namespace: given to plugins, and (diff, sync) where
    /// namespaced objects without one go.
    #[arg(
        short = 'n',
        long,
        default_value = "",
        hide_default_value = true,
        help_heading = "Application"
    )]
    pub(crate) namespace: String,

    /// Project given to plugins.
    #[arg(long, default_value = "default", help_heading = "Application")]
    project: String,

    /// Verify every plugin against this trust policy before it is compiled
    /// (see docs/plugins.md). Without it, a local file plugin runs with a
    /// warning and an oci:// or https:// plugin is refused unless
    /// --insecure-skip-verify is given.
    #[arg(long, value_name = "FILE", help_heading = "Trust")]
    trust_policy: Option<PathBuf>,

    /// Without --trust-policy, run oci:// and https:// plugins unverified
    /// (development only; each is reported with a loud warning).
    #[arg(long, conflicts_with = "trust_policy", help_heading = "Trust")]
    insecure_skip_verify: bool,

    #[command(flatten)]
    host: HostArgs,

    #[command(flatten)]
    registry: super::plugin::RegistryArgs,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Format {
    Yaml,
    Json,
}

/// Groups the values of `child` (e.g. `params`) under the occurrence of
/// `parent` (e.g. `plugins`) that precedes each on the command line.
fn group_by_preceding<T: Clone + Send + Sync + 'static>(
    matches: &ArgMatches,
    parent: &str,
    parent_flag: &str,
    child: &str,
    child_flag: &str,
) -> anyhow::Result<Vec<Vec<T>>> {
    let parents: Vec<usize> = matches
        .indices_of(parent)
        .map(Iterator::collect)
        .unwrap_or_default();
    let mut groups = vec![Vec::new(); parents.len()];
    let values = matches.get_many::<T>(child).into_iter().flatten();
    let indices = matches.indices_of(child).into_iter().flatten();
    for (value, index) in values.zip(indices) {
        let Some(owner) = parents.iter().rposition(|p| *p < index) else {
            bail!("{child_flag} must follow the {parent_flag} it belongs to");
        };
        groups[owner].push(value.clone());
    }
    Ok(groups)
}

pub(crate) async fn run(args: &RenderArgs, matches: &ArgMatches) -> anyhow::Result<u8> {
    let (objects, report, context) = pipeline(&args.pipeline, matches).await?;
    if let Some(file) = &args.policy_report {
        let options = ReportOptions {
            name: report::name_for(&context.name),
            max_results: args.policy_report_max_results,
            ..ReportOptions::default()
        };
        write_policy_reports(file, &objects, &report, &context.namespace, &options)?;
    }
    if objects.is_empty() {
        eprintln!(
            "warning: the application rendered no objects{}",
            if args.pipeline.plugins_given() {
                " (the last plugin returned none)"
            } else if args.pipeline.recurse {
                " (no *.yaml, *.yml or *.json file under its directory holds an object)"
            } else {
                " (no *.yaml, *.yml or *.json file in its directory holds an object; \
                 those of subdirectories need --recurse)"
            }
        );
    }
    let status = status_of(&report);
    if status == exit::OK || args.output_on_block {
        print_objects(&objects, &report, args.output)?;
    }
    print_report(&report);
    if status != exit::OK && !args.output_on_block {
        eprintln!("kiln render: nothing printed on stdout (--output-on-block prints it anyway)");
    }
    Ok(status)
}

/// The exit status a review gives: an enforced policy that could not run
/// is an error (2: the review is incomplete, not a verdict); else a block
/// is 1. A policy in warn or audit mode that could not run is reported and
/// blocks nothing, as in the controller.
pub(crate) fn status_of(report: &Report) -> u8 {
    if report
        .results
        .iter()
        .any(|r| r.mode == Mode::Enforce && r.error.is_some())
    {
        exit::ERROR
    } else if report.blocked() {
        exit::POLICY_BLOCKED
    } else {
        exit::OK
    }
}

impl PipelineArgs {
    /// Whether a renderer plugin was named (else the built-in directory
    /// renderer runs).
    fn plugins_given(&self) -> bool {
        !self.plugins.is_empty()
    }
}

/// Renders the application and reviews it with its policies.
pub(crate) async fn pipeline(
    args: &PipelineArgs,
    matches: &ArgMatches,
) -> anyhow::Result<(Vec<Object>, Report, AppContext)> {
    let params: Vec<Params> =
        group_by_preceding(matches, "plugins", "--plugin", "params", "--param")?;
    let settings: Vec<Params> =
        group_by_preceding(matches, "policies", "--policy", "settings", "--setting")?;
    let modes: Vec<Vec<Mode>> =
        group_by_preceding(matches, "policies", "--policy", "modes", "--mode")?;
    if let Some(i) = modes.iter().position(|m| m.len() > 1) {
        bail!("--policy {} has more than one --mode", args.policies[i]);
    }

    if args.chart.chart.is_none() && !args.chart.chart_version.is_empty() {
        bail!(
            "--version is the chart's version and needs --chart (a Git revision is \
             --revision; Kiln's own version is `kiln --version`)"
        );
    }
    let (view, mut context) = match (&args.dir, &args.git.repo, &args.chart.chart) {
        (_, repo, Some(_)) => {
            if args.plugins.is_empty() {
                bail!(
                    "--chart needs the helm renderer: add --plugin helm (or its file or oci:// reference)"
                );
            }
            args.chart
                .fetch(repo.as_deref(), args.registry.credentials()?)
                .await?
        }
        (Some(dir), None, None) => local_source(dir, args.root.as_deref())?,
        (_, Some(_), None) => args.git.checkout().await?,
        (None, None, None) => bail!("give the application's directory, --repo URL or --chart"),
    };
    if let Some(name) = &args.name {
        context.name = name.clone();
    }
    context.namespace = args.namespace.clone();
    context.project = args.project.clone();

    let loader = super::load::Loader::new(
        args.host.host()?,
        args.registry.fetcher()?,
        args.trust_policy.as_ref(),
        args.insecure_skip_verify,
    )?;
    let mut chain = Vec::new();
    for (reference, params) in args.plugins.iter().zip(params) {
        let plugin = loader.load(reference, World::Renderer).await?;
        chain.push(Step::Plugin { plugin, params });
    }
    if chain.is_empty() {
        chain.push(Step::Directory(DirectoryOptions {
            recurse: args.recurse,
            limits: kiln::manifest::ParseLimits {
                bytes: args.max_manifest_bytes,
                nodes: args.max_manifest_nodes,
            },
        }));
    }
    let source = match &args.policy_root {
        Some(dir) => PolicySource::Own {
            view: Arc::new(
                LocalDir::open(dir)
                    .with_context(|| format!("cannot open the policy root {}", dir.display()))?,
            ),
            repo_url: String::new(),
            revision: "local".into(),
        },
        None => PolicySource::Application(view.clone()),
    };
    let mut policies = Vec::new();
    for ((reference, settings), mode) in args.policies.iter().zip(settings).zip(modes) {
        let plugin = loader.load(reference, World::Policy).await?;
        let mode = mode.first().copied().unwrap_or_default();
        policies.push(PolicyStep {
            plugin,
            settings,
            mode,
            source: source.clone(),
        });
    }

    let rendered = render::render(view.clone(), &context, &chain).await?;
    // Each object is reviewed where `kubectl apply -n NAMESPACE` would put it.
    let reviewed = policy::placement::as_applied(&rendered.objects, &context.namespace, None);
    let report = policy::evaluate(&context, reviewed, &policies, None).await;
    Ok((rendered.objects, report, context))
}

/// A local directory as the source: the view is the root, the application
/// is `dir` inside it.
fn local_source(
    dir: &Path,
    root: Option<&Path>,
) -> anyhow::Result<(Arc<dyn SourceView>, AppContext)> {
    let root = root.unwrap_or(dir);
    let view: Arc<dyn SourceView> = Arc::new(
        LocalDir::open(root)
            .with_context(|| format!("cannot open source directory {}", root.display()))?,
    );
    let context = AppContext {
        name: dir_name(dir),
        revision: "local".into(),
        path: relative_path(root, dir)?,
        ..AppContext::default()
    };
    Ok((view, context))
}

fn relative_path(root: &Path, dir: &Path) -> anyhow::Result<String> {
    let root_abs = root
        .canonicalize()
        .with_context(|| format!("cannot open {}", root.display()))?;
    let dir_abs = dir
        .canonicalize()
        .with_context(|| format!("cannot open {}", dir.display()))?;
    let relative = dir_abs.strip_prefix(&root_abs).with_context(|| {
        format!(
            "{} is not inside the source root {}",
            dir.display(),
            root.display()
        )
    })?;
    relative
        .to_str()
        .map(str::to_owned)
        .with_context(|| format!("{} is not valid UTF-8", dir.display()))
}

fn dir_name(dir: &Path) -> String {
    dir.canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "app".into())
}

/// Writes `report` to `file` as PolicyReports and a ClusterPolicyReport;
/// without any finding, one empty PolicyReport (applied, it clears an
/// earlier one).
fn write_policy_reports(
    file: &Path,
    objects: &[Object],
    report: &Report,
    namespace: &str,
    options: &ReportOptions,
) -> anyhow::Result<()> {
    let values: Vec<serde_json::Value> = objects
        .iter()
        .map(|o| serde_json::Value::Object(o.value().clone()))
        .collect();
    let scopes = Scopes::new(&values, namespace);
    let entries = Entry::from_report(report);
    let mut reports = report::split(&entries, |e| scopes.place(e), options);
    if reports.all().next().is_none() {
        let namespace = if namespace.is_empty() {
            "default"
        } else {
            namespace
        };
        reports
            .namespaced
            .push(report::single(&[], namespace, options));
    }
    let mut text = String::new();
    for one in reports.all() {
        text.push_str("---\n");
        text.push_str(&serde_yaml::to_string(one)?);
    }
    std::fs::write(file, text)
        .with_context(|| format!("cannot write the policy report {}", file.display()))
}

fn print_objects(objects: &[Object], report: &Report, format: Format) -> anyhow::Result<()> {
    let text = match format {
        Format::Yaml => manifest::to_yaml_stream(objects),
        Format::Json => {
            let items: Vec<_> = objects
                .iter()
                .map(|o| serde_json::Value::Object(o.value().clone()))
                .collect();
            let policy = serde_json::json!({
                "blocked": report.blocked(),
                "results": report.results,
            });
            let list = serde_json::json!({
                "apiVersion": "v1", "kind": "List", "items": items, "policy": policy,
            });
            serde_json::to_string_pretty(&list)? + "\n"
        }
    };
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        // `kiln render | head` is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

pub(crate) fn print_report(report: &Report) {
    for result in &report.results {
        let errors = result
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count();
        let verdict = if let Some(error) = &result.error {
            format!("FAILED TO RUN: {error}")
        } else if result.findings.is_empty() {
            "passed".to_owned()
        } else {
            format!("{} finding(s), {errors} error(s)", result.findings.len())
        };
        let outcome = if result.blocks() {
            " — BLOCKED".to_owned()
        } else if result.mode != Mode::Enforce && !result.findings.is_empty() {
            format!(" — not blocking ({} mode)", result.mode)
        } else {
            String::new()
        };
        eprintln!(
            "policy {} ({}): {verdict}{outcome}",
            result.policy, result.mode
        );
        for finding in &result.findings {
            let object = finding
                .object
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_else(|| "(set)".into());
            let field = finding
                .field_path
                .as_deref()
                .map(|f| format!(" {f}"))
                .unwrap_or_default();
            eprintln!(
                "  {:<8} {object}{field}: {}",
                finding.severity.to_string(),
                finding.message
            );
        }
    }
}
