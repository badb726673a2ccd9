//! `kiln source ...` and the `--repo` source of other commands.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use kiln::plugin::AppContext;
use kiln::source::git::{
    CredentialProvider, Credentials, GitConfig, GitSource, NoCredentials, PrefixCredentials,
    RepoUrl, Revision, Secret,
};
use kiln::source::{SourcePath, SourceView};

use super::args::parse_duration;
use super::exit;

/// Work with Git sources.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum SourceCommand {
    /// Print the commit a revision resolves to, from a ref advertisement only
    /// (like `git ls-remote`; nothing is fetched).
    ///
    /// REVISION is HEAD, a branch, a tag, a full commit id or a semver
    /// constraint over tags (`v1.2.*`, `>=1.0.0 <2.0.0`).
    #[command(after_help = "\
Examples:
  kiln source resolve https://github.com/org/apps 'v1.2.*'
  kiln source resolve file:///srv/git/apps.git main

Exit status: 0 resolved (the commit is printed), 2 an error (no such repository or revision, a
host that does not answer, credentials refused: the message names the repository).")]
    Resolve {
        /// Repository URL (https://, http://, ssh://, git@host:path, git://, file://).
        url: String,
        /// The revision.
        #[arg(default_value = "HEAD")]
        revision: String,
        #[command(flatten)]
        options: GitOptions,
    },
}

/// Options of the Git engine.
#[derive(Debug, clap::Args)]
pub(crate) struct GitOptions {
    /// Directory of the repository cache. Default: ~/.cache/kiln/repos.
    #[arg(long, value_name = "DIR")]
    repo_cache: Option<PathBuf>,

    /// Deadline of each Git network operation.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    git_timeout: Duration,

    /// Fetch with depth 1 (huge repositories).
    #[arg(long)]
    shallow: bool,

    /// PEM file of extra CA certificates to trust for HTTPS repositories
    /// (a private CA or a self-signed server).
    #[arg(long, value_name = "FILE")]
    git_ca_file: Option<PathBuf>,
}

/// `--repo` and friends of `kiln render`.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Git source")]
pub(crate) struct GitArgs {
    /// Render from this Git repository instead of a local directory.
    /// Credentials: KILN_GIT_USERNAME and KILN_GIT_PASSWORD (or a token in
    /// KILN_GIT_PASSWORD) for HTTPS, KILN_GIT_SSH_KEY_FILE for SSH.
    #[arg(long, value_name = "URL")]
    pub(crate) repo: Option<String>,

    /// The revision to render (HEAD, branch, tag, commit, semver constraint).
    #[arg(long, default_value = "HEAD", requires = "repo")]
    revision: String,

    /// The application's path inside the repository.
    #[arg(long, value_name = "PATH", default_value = ".", requires = "repo")]
    path: String,

    #[command(flatten)]
    options: GitOptions,
}

impl GitOptions {
    fn engine(&self, url: &RepoUrl) -> anyhow::Result<GitSource> {
        let cache = match &self.repo_cache {
            Some(dir) => dir.clone(),
            None => super::default_cache_dir()
                .context("no cache directory: set HOME or pass --repo-cache")?
                .join("repos"),
        };
        let mut config = GitConfig::new(cache);
        config.timeout = self.git_timeout;
        config.shallow = self.shallow;
        if let Some(file) = &self.git_ca_file {
            config.tls_roots_pem =
                std::fs::read(file).with_context(|| format!("--git-ca-file {}", file.display()))?;
        }
        Ok(GitSource::new(config, credentials_from_env(url)?)?)
    }
}

/// Credentials for the one repository a command works with, from the
/// environment (never from the command line, where they would show in `ps`).
fn credentials_from_env(url: &RepoUrl) -> anyhow::Result<Arc<dyn CredentialProvider>> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let credentials = if let Some(file) = var("KILN_GIT_SSH_KEY_FILE") {
        let key = std::fs::read_to_string(&file)
            .with_context(|| format!("KILN_GIT_SSH_KEY_FILE: cannot read {file}"))?;
        Some(Credentials::SshKey {
            private_key: Secret::new(key),
        })
    } else {
        var("KILN_GIT_PASSWORD").map(|password| Credentials::Basic {
            username: var("KILN_GIT_USERNAME").unwrap_or_else(|| "kiln".into()),
            password: Secret::new(password),
        })
    };
    Ok(match credentials {
        Some(c) => Arc::new(PrefixCredentials::new().with(url.as_str(), c)),
        None => Arc::new(NoCredentials),
    })
}

impl GitArgs {
    /// Resolves, fetches if needed, and returns the view and context.
    pub(crate) async fn checkout(&self) -> anyhow::Result<(Arc<dyn SourceView>, AppContext)> {
        let raw = self.repo.as_deref().context("--repo is required")?;
        let url = RepoUrl::parse(raw)?;
        let engine = self.options.engine(&url)?;
        let view = engine.poll(&url, &Revision::parse(&self.revision)).await?;
        let path =
            SourcePath::parse(&self.path).with_context(|| format!("--path {}", self.path))?;
        let name = path
            .file_name()
            .or_else(|| url.key().rsplit('/').next())
            .unwrap_or("app")
            .to_owned();
        let context = AppContext {
            name,
            repo_url: url.to_string(),
            revision: view.commit().to_string(),
            path: path.as_str().to_owned(),
            ..AppContext::default()
        };
        Ok((Arc::new(view), context))
    }
}

pub(crate) async fn run(command: &SourceCommand) -> anyhow::Result<u8> {
    match command {
        SourceCommand::Resolve {
            url,
            revision,
            options,
        } => {
            let url = RepoUrl::parse(url)?;
            let engine = options.engine(&url)?;
            let commit = engine.resolve(&url, &Revision::parse(revision)).await?;
            println!("{commit}");
            Ok(exit::OK)
        }
    }
}
