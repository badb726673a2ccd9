//! `--chart` of `kiln render`, `kiln diff` and `kiln sync`: a Helm chart
//! from a Helm repository or an OCI registry, fetched by the host.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};

use kiln::artifact::RegistryCredentials;
use kiln::plugin::AppContext;
use kiln::source::SourceView;
use kiln::source::git::{
    CredentialProvider, Credentials, NoCredentials, PrefixCredentials, Secret,
};
use kiln::source::helm::{ChartFetcher, ChartRef, HelmConfig};

use super::args::{parse_duration, parse_size};

/// Where a chart comes from, and how it is fetched.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Helm chart")]
pub(crate) struct ChartArgs {
    /// Render a Helm chart: a chart NAME of the Helm repository --repo
    /// (https://…, or oci://REGISTRY/PATH, or REGISTRY/PATH with
    /// --enable-oci), or a full oci://REGISTRY/PATH/NAME reference.
    /// Credentials: KILN_HELM_USERNAME and KILN_HELM_PASSWORD for the Helm
    /// repository (sent to its origin only); --registry-config for OCI.
    #[arg(long, value_name = "NAME|oci://REF")]
    pub(crate) chart: Option<String>,

    /// --repo is an OCI registry path written without oci://
    /// (registry.example.com/charts), as Argo CD writes one: a repository
    /// added with `argocd repo add … --type helm --enable-oci`, or a
    /// repository Secret with `enableOCI: "true"`. The same as
    /// --repo oci://registry.example.com/charts.
    #[arg(long, requires = "chart")]
    pub(crate) enable_oci: bool,

    /// The chart's version: exact, or a semver constraint as Helm reads it
    /// (`1.2.*`, `~1.2`, `^1.2`, `>=1.0 <2.0`). Default: the latest release.
    #[arg(
        long = "version",
        value_name = "VERSION",
        requires = "chart",
        default_value = "",
        hide_default_value = true
    )]
    pub(crate) chart_version: String,

    /// Directory of the unpacked-chart cache. Default: ~/.cache/kiln/charts.
    #[arg(long, value_name = "DIR", requires = "chart")]
    chart_cache: Option<PathBuf>,

    /// Byte budget of the chart cache (least recently used charts go first).
    #[arg(long, value_name = "SIZE", default_value = "1Gi", value_parser = parse_size)]
    chart_cache_size: u64,

    /// The largest chart archive (.tgz) accepted, compressed.
    #[arg(long, value_name = "SIZE", default_value = "16Mi", value_parser = parse_size)]
    chart_max_size: u64,

    /// Deadline of the whole chart fetch (index, archive, dependencies).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    chart_timeout: Duration,

    /// Deadline of each request of a chart fetch (an index, an archive):
    /// a repository that does not answer frees its download slot at it.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    chart_request_timeout: Duration,

    /// PEM file of extra CA certificates to trust for HTTPS chart repositories.
    #[arg(long, value_name = "FILE", requires = "chart")]
    chart_ca_file: Option<PathBuf>,
}

impl ChartArgs {
    /// Fetches the chart; the view has the chart's files at its root.
    pub(crate) async fn fetch(
        &self,
        repo: Option<&str>,
        registry: RegistryCredentials,
    ) -> anyhow::Result<(Arc<dyn SourceView>, AppContext)> {
        let chart = self.chart.as_deref().context("--chart is required")?;
        let reference = chart_ref(repo, chart, &self.chart_version, self.enable_oci)?;
        let cache = match &self.chart_cache {
            Some(dir) => dir.clone(),
            None => super::default_cache_dir()
                .context("no cache directory: set HOME or pass --chart-cache")?
                .join("charts"),
        };
        let mut config = HelmConfig::new(cache);
        config.cache_max_bytes = self.chart_cache_size;
        config.archive.compressed = self.chart_max_size;
        config.deadline = self.chart_timeout;
        config.timeout = self.chart_request_timeout.min(self.chart_timeout);
        if let Some(file) = &self.chart_ca_file {
            config.tls_roots_pem = std::fs::read(file)
                .with_context(|| format!("--chart-ca-file {}", file.display()))?;
        }
        let credentials = credentials_from_env(&reference);
        let fetcher = ChartFetcher::new(config, credentials)?;
        let fetched = fetcher.fetch_with(&reference, &registry).await?;
        tracing::info!(chart = %reference, version = %fetched.version, digest = %fetched.digest, source = %fetched.source, "chart fetched");
        let repo_url = match &reference {
            ChartRef::Repo { repo, .. } => repo.clone(),
            ChartRef::Oci { repository, .. } => format!("oci://{repository}"),
        };
        let context = AppContext {
            name: reference.name().to_owned(),
            repo_url,
            revision: fetched.version.clone(),
            ..AppContext::default()
        };
        Ok((fetched.view, context))
    }
}

/// The chart `chart` of `--repo` `repo` at `version`: Argo CD's OCI form
/// (`registry/path`) with `--enable-oci`; without it, a URL without a
/// scheme is refused with what to write instead.
fn chart_ref(
    repo: Option<&str>,
    chart: &str,
    version: &str,
    enable_oci: bool,
) -> anyhow::Result<ChartRef> {
    let repo = repo.map(str::trim).filter(|r| !r.is_empty());
    match repo {
        Some(repo) if repo.contains("://") && enable_oci => bail!(
            "--enable-oci: --repo {repo} has a scheme: --enable-oci is for an OCI registry \
             path written without oci:// (registry.example.com/charts)"
        ),
        Some(repo) if !repo.contains("://") && !enable_oci => bail!(
            "--repo {repo}: no scheme: if it is an OCI registry path written as Argo CD \
             does (a repository added with --enable-oci), pass --enable-oci or write \
             --repo oci://{repo}; a Helm repository URL starts with https:// or http://"
        ),
        None if enable_oci => bail!("--enable-oci needs --repo REGISTRY/PATH"),
        _ => Ok(ChartRef::of_application(
            repo.unwrap_or(""),
            chart,
            version,
            enable_oci,
        )?),
    }
}

/// The Helm repository's credentials, from the environment (never from the
/// command line, where they would show in `ps`).
fn credentials_from_env(reference: &ChartRef) -> Arc<dyn CredentialProvider> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    match (reference, var("KILN_HELM_PASSWORD")) {
        (ChartRef::Repo { repo, .. }, Some(password)) => Arc::new(PrefixCredentials::new().with(
            repo,
            Credentials::Basic {
                username: var("KILN_HELM_USERNAME").unwrap_or_else(|| "kiln".into()),
                password: Secret::new(password),
            },
        )),
        _ => Arc::new(NoCredentials),
    }
}
