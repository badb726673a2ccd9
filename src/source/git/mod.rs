//! The Git source engine: cheap polling, one fetch per repository, trees
//! served straight from the object database.
//!
//! - **Repository cache**: one bare repository per [`RepoUrl`] under a cache
//!   root. It is disposable: missing, half-written or corrupt repositories
//!   are rebuilt transparently, with one log line.
//! - **Ref lookups** use a ref advertisement only (protocol v2 `ls-refs`
//!   with ref prefixes; `git ls-remote`): no objects are transferred. A
//!   [`Revision`] is resolved against it; a full commit id needs no lookup.
//! - **Single-flight**: concurrent lookups of one repository share one
//!   request, concurrent fetches one fetch; different repositories proceed in
//!   parallel up to [`GitConfig::max_parallel`]. Every network operation has
//!   a timeout, so a dead server delays only its own repository.
//! - **Fetch only when needed**: when the resolved commit is not present.
//! - [`GitTreeView`] serves `(repository, commit)` as a
//!   [`SourceView`](crate::source::SourceView), straight from the object
//!   database.

mod credentials;
mod known_hosts;
mod remote;
mod revision;
mod tree;
mod url;

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

pub use credentials::{CredentialProvider, Credentials, NoCredentials, PrefixCredentials, Secret};
pub use known_hosts::{KnownHostsSource, StaticKnownHosts};
pub use revision::{AdvertisedRef, NotFound, RefList, Revision};
pub use tree::GitTreeView;
pub use url::{RepoUrl, UrlError, UrlPrefix, pattern_key};

/// A full (SHA-1) commit id.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CommitId([u8; 20]);

impl CommitId {
    /// From the raw 20 bytes.
    pub fn from_bytes(bytes: [u8; 20]) -> Self {
        CommitId(bytes)
    }

    fn to_gix(self) -> gix::ObjectId {
        gix::ObjectId::Sha1(self.0)
    }

    fn from_gix(id: &gix::oid) -> Option<Self> {
        id.as_bytes().try_into().ok().map(CommitId)
    }
}

/// Not a full 40-digit hexadecimal commit id.
#[derive(Debug, Clone, thiserror::Error)]
#[error("`{0}` is not a full 40-digit commit id")]
pub struct ParseCommitIdError(String);

impl FromStr for CommitId {
    type Err = ParseCommitIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut bytes = [0u8; 20];
        if s.len() != 40 || hex::decode_to_slice(s, &mut bytes).is_err() {
            return Err(ParseCommitIdError(s.to_owned()));
        }
        Ok(CommitId(bytes))
    }
}

impl fmt::Display for CommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for CommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Configuration of the engine.
#[derive(Debug, Clone)]
pub struct GitConfig {
    /// Directory holding one bare repository per URL. Created if missing.
    pub cache_root: PathBuf,
    /// Repositories whose network operations may run at once. Default: 8.
    pub max_parallel: usize,
    /// Deadline to establish a connection. Default: 15 s.
    pub connect_timeout: Duration,
    /// Deadline of a whole ref lookup or fetch, and of any single read on the
    /// connection. Default: 120 s.
    pub timeout: Duration,
    /// Fetch with depth 1 (for huge repositories). Default: `false`.
    pub shallow: bool,
    /// Ref lookups younger than this are reused: the window in which all
    /// Applications of a repository share one lookup (concurrent callers
    /// share one request regardless). A webhook refresh calls
    /// [`GitSource::forget_refs`] instead of waiting. Default: 5 s.
    pub lookup_ttl: Duration,
    /// PEM certificates trusted for HTTPS in addition to the system's roots
    /// (a private CA, a self-signed server). Default: none.
    pub tls_roots_pem: Vec<u8>,
    /// Configured SSH known hosts (OpenSSH `known_hosts` lines, as Argo
    /// CD's `ssh_known_hosts`). When the source gives a list, SSH host keys
    /// are checked against it only: an unknown host or a different key is
    /// refused ([`GitError::HostKey`]). Default: none (trust on first use).
    pub ssh_known_hosts: Option<Arc<dyn KnownHostsSource>>,
    /// The file in which trust on first use records SSH hosts (and checks
    /// them against afterwards). Keep it on storage that survives restarts:
    /// a new, empty file trusts whatever key a host presents next.
    /// Default: `known_hosts` in the cache root.
    pub ssh_known_hosts_store: Option<PathBuf>,
}

impl GitConfig {
    /// Defaults, with the cache under `cache_root`.
    pub fn new(cache_root: impl Into<PathBuf>) -> Self {
        GitConfig {
            cache_root: cache_root.into(),
            max_parallel: 8,
            connect_timeout: Duration::from_secs(15),
            timeout: Duration::from_secs(120),
            shallow: false,
            lookup_ttl: Duration::from_secs(5),
            tls_roots_pem: Vec::new(),
            ssh_known_hosts: None,
            ssh_known_hosts_store: None,
        }
    }
}

/// A Git operation failed. Messages name the repository; they never contain
/// credentials.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitError {
    /// The URL is unusable.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// The revision names nothing on the remote.
    #[error("{url}")]
    Revision {
        /// The repository.
        url: RepoUrl,
        /// What was not found.
        #[source]
        source: NotFound,
    },
    /// The operation did not finish in time.
    #[error("{url}: {operation} timed out after {after:?}")]
    Timeout {
        /// The repository.
        url: RepoUrl,
        /// `ref lookup` or `fetch`.
        operation: &'static str,
        /// The deadline.
        after: Duration,
    },
    /// The SSH server's host key is not trusted: the host is not in the
    /// configured known hosts, or presents another key than the one
    /// configured or recorded on first use.
    #[error("{url}: SSH host key refused: {detail}")]
    HostKey {
        /// The repository.
        url: RepoUrl,
        /// The host, and the fingerprints presented and expected.
        detail: String,
    },
    /// The server refused our credentials, or asked for some we lack.
    #[error("{url}: authentication failed (check the repository credentials)")]
    Auth {
        /// The repository.
        url: RepoUrl,
    },
    /// Talking to the server failed.
    #[error("{url}: {operation} failed: {message}")]
    Remote {
        /// The repository.
        url: RepoUrl,
        /// `ref lookup` or `fetch`.
        operation: &'static str,
        /// What went wrong.
        message: String,
    },
    /// The fetched commit cannot be read even after rebuilding the cache.
    #[error("{url}: commit {commit} is not readable: {message}")]
    Commit {
        /// The repository.
        url: RepoUrl,
        /// The commit.
        commit: CommitId,
        /// What went wrong.
        message: String,
    },
    /// The repository cache is damaged; the engine rebuilds it.
    #[error("{url}: the repository cache is damaged: {message}")]
    CorruptCache {
        /// The repository.
        url: RepoUrl,
        /// What is damaged.
        message: String,
    },
    /// The configuration is invalid.
    #[error("git configuration: {0}")]
    Config(String),
    /// The local repository cache cannot be created.
    #[error("repository cache {}: {message}", path.display())]
    Cache {
        /// The directory.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// A `Result` with [`GitError`].
pub type Result<T, E = GitError> = std::result::Result<T, E>;

/// Counters of network operations, for tests, metrics and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Ref advertisements requested.
    pub ref_lookups: u64,
    /// Fetches performed.
    pub fetches: u64,
    /// Repository caches rebuilt because they were missing or corrupt.
    pub rebuilds: u64,
    /// Repository caches opened from disk (once per repository while it
    /// stays in the engine, unless its directory disappears).
    pub opens: u64,
}

#[derive(Debug, Default)]
struct Counters {
    ref_lookups: AtomicU64,
    fetches: AtomicU64,
    rebuilds: AtomicU64,
    opens: AtomicU64,
}

/// One repository's shared state.
struct Repo {
    url: RepoUrl,
    /// The last ref lookup and when it completed; its mutex is the
    /// single-flight: callers queue on it, and one that arrived before the
    /// stored lookup completed takes that result.
    lookup: tokio::sync::Mutex<Option<(Instant, Arc<RefList>)>>,
    /// Serializes fetches (and cache rebuilds) of this repository.
    fetch: tokio::sync::Mutex<()>,
    /// The cache, once opened (or created): kept open, since opening reads
    /// its configuration, refs and pack indexes, and every resync of every
    /// Application of the repository checks a tree out.
    opened: Mutex<Option<gix::ThreadSafeRepository>>,
    /// When a tree of it was last checked out ([`GitSource::evict_idle`]).
    used: Mutex<Instant>,
}

impl Repo {
    /// Keeps `local` as the repository's open cache.
    fn keep(&self, local: &gix::ThreadSafeRepository) {
        *self.opened.lock().unwrap_or_else(PoisonError::into_inner) = Some(local.clone());
    }
}

/// The Git source engine. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct GitSource {
    inner: Arc<Inner>,
}

struct Inner {
    config: GitConfig,
    credentials: Arc<dyn CredentialProvider>,
    repos: Mutex<HashMap<String, Arc<Repo>>>,
    /// The cache root. Repository directories are created, checked and
    /// removed through it, so a name can never reach outside the root.
    root: cap_std::fs::Dir,
    /// Extra HTTPS roots, parsed once.
    tls_roots: Vec<reqwest::Certificate>,
    /// An empty repository that ref lookups run from (they write nothing).
    /// The repository ref lookups run in; re-created when the cache
    /// directory was deleted under a running engine.
    scratch: std::sync::Mutex<gix::ThreadSafeRepository>,
    network: Semaphore,
    counters: Counters,
}

impl fmt::Debug for GitSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitSource")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl GitSource {
    /// An engine with the given configuration and credentials.
    pub fn new(config: GitConfig, credentials: Arc<dyn CredentialProvider>) -> Result<Self> {
        let cache_error = |e: std::io::Error| GitError::Cache {
            path: config.cache_root.clone(),
            message: e.to_string(),
        };
        std::fs::create_dir_all(&config.cache_root).map_err(cache_error)?;
        if let Some(store) = &config.ssh_known_hosts_store
            && let Some(parent) = store.parent().filter(|p| !p.as_os_str().is_empty())
        {
            std::fs::create_dir_all(parent).map_err(|e| GitError::Cache {
                path: parent.to_owned(),
                message: format!("the SSH known-hosts store: {e}"),
            })?;
        }
        let root =
            cap_std::fs::Dir::open_ambient_dir(&config.cache_root, cap_std::ambient_authority())
                .map_err(cache_error)?;
        let tls_roots = if config.tls_roots_pem.is_empty() {
            Vec::new()
        } else {
            reqwest::Certificate::from_pem_bundle(&config.tls_roots_pem)
                .map_err(|e| GitError::Config(format!("tls_roots_pem: {e}")))?
        };
        let network = Semaphore::new(config.max_parallel.max(1));
        let scratch_path = config.cache_root.join(".lookups");
        let scratch = remote::open(&scratch_path)
            .or_else(|_| {
                // Unusable: start it over, like any other cache.
                let _ = root.remove_dir_all(".lookups");
                remote::init(&scratch_path)
            })
            .map_err(|message| GitError::Cache {
                path: scratch_path,
                message,
            })?;
        Ok(GitSource {
            inner: Arc::new(Inner {
                config,
                credentials,
                repos: Mutex::new(HashMap::new()),
                root,
                tls_roots,
                scratch: std::sync::Mutex::new(scratch),
                network,
                counters: Counters::default(),
            }),
        })
    }

    /// Network operations so far.
    pub fn stats(&self) -> Stats {
        let c = &self.inner.counters;
        Stats {
            ref_lookups: c.ref_lookups.load(Ordering::Relaxed),
            fetches: c.fetches.load(Ordering::Relaxed),
            rebuilds: c.rebuilds.load(Ordering::Relaxed),
            opens: c.opens.load(Ordering::Relaxed),
        }
    }

    fn repo(&self, url: &RepoUrl) -> Arc<Repo> {
        let mut repos = self
            .inner
            .repos
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        repos
            .entry(url.key().to_owned())
            .or_insert_with(|| {
                Arc::new(Repo {
                    url: url.clone(),
                    lookup: tokio::sync::Mutex::new(None),
                    fetch: tokio::sync::Mutex::new(()),
                    opened: Mutex::new(None),
                    used: Mutex::new(Instant::now()),
                })
            })
            .clone()
    }

    fn cache_path(&self, url: &RepoUrl) -> PathBuf {
        self.inner.config.cache_root.join(url.cache_dir_name())
    }

    /// The remote's refs (`HEAD`, branches, tags), from a ref advertisement.
    /// Concurrent callers share one request.
    pub async fn ls_refs(&self, url: &RepoUrl) -> Result<Arc<RefList>> {
        let arrived = Instant::now();
        let repo = self.repo(url);
        let mut last = repo.lookup.lock().await;
        // Someone else's lookup completed while we waited, or recently
        // enough: share it.
        if let Some((completed, refs)) = &*last
            && (*completed >= arrived || completed.elapsed() < self.inner.config.lookup_ttl)
        {
            return Ok(refs.clone());
        }
        let scratch = self.scratch()?;
        let refs = self
            .network("ref lookup", url, move |url, options| {
                remote::ls_refs(&scratch, url, options)
            })
            .await?;
        let refs = Arc::new(refs);
        self.inner
            .counters
            .ref_lookups
            .fetch_add(1, Ordering::Relaxed);
        *last = Some((Instant::now(), refs.clone()));
        Ok(refs)
    }

    /// The lookup repository, re-created if the cache directory was deleted
    /// (every cache can be deleted at any time).
    fn scratch(&self) -> Result<gix::ThreadSafeRepository> {
        let mut scratch = self
            .inner
            .scratch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let path = self.inner.config.cache_root.join(".lookups");
        if !path.exists() {
            tracing::info!(path = %path.display(), "the Git cache was deleted; starting it over");
            std::fs::create_dir_all(&self.inner.config.cache_root).map_err(|e| {
                GitError::Cache {
                    path: self.inner.config.cache_root.clone(),
                    message: e.to_string(),
                }
            })?;
            *scratch = remote::init(&path).map_err(|message| GitError::Cache { path, message })?;
        }
        Ok(scratch.clone())
    }

    /// Drops the remembered ref lookup of `url`, so the next resolve asks the
    /// server (a webhook said something changed).
    pub async fn forget_refs(&self, url: &RepoUrl) {
        *self.repo(url).lookup.lock().await = None;
    }

    /// Resolves a revision to a commit: a ref lookup, except for full commit
    /// ids.
    pub async fn resolve(&self, url: &RepoUrl, revision: &Revision) -> Result<CommitId> {
        if let Revision::Commit(id) = revision {
            return Ok(*id);
        }
        let refs = self.ls_refs(url).await?;
        refs.resolve(revision).map_err(|source| GitError::Revision {
            url: url.clone(),
            source,
        })
    }

    /// A view of `commit`, fetching it first if the cache does not have it.
    /// Concurrent callers of one repository cause at most one fetch.
    pub async fn checkout(&self, url: &RepoUrl, commit: CommitId) -> Result<GitTreeView> {
        let repo = self.repo(url);
        let _fetching = repo.fetch.lock().await;
        *repo.used.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
        let path = self.cache_path(url);
        let url = repo.url.clone();

        // A cache that cannot even be opened is rebuilt before anything else.
        let existed = self.inner.root.exists(url.cache_dir_name());
        let kept = repo
            .opened
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let local = match kept {
            // Its directory still there (else it was deleted under us: opened
            // or created again below).
            Some(local) if existed => local,
            _ => {
                let opened = match blocking(move || remote::open(&path)).await {
                    Ok(Ok(opened)) => {
                        self.inner.counters.opens.fetch_add(1, Ordering::Relaxed);
                        opened
                    }
                    _ if existed => self.rebuild(&url).await?,
                    _ => self.create(&url).await?,
                };
                repo.keep(&opened);
                opened
            }
        };
        if let Some(view) = view_if_readable(&local, commit) {
            return Ok(view);
        }
        // Not present (or unreadable): fetch, and if the commit is still not
        // readable, the cache is corrupt: rebuild it once and fetch again.
        let fetched = self.fetch(&url, &local, commit).await;
        if fetched.is_ok()
            && let Some(view) = view_if_readable(&local, commit)
        {
            return Ok(view);
        }
        match fetched {
            Err(error @ (GitError::Timeout { .. } | GitError::Auth { .. })) => return Err(error),
            // A failed fetch into a sound cache is the server's or the
            // network's problem: keep the cache (a monorepo is costly to
            // fetch again) and report it.
            Err(error @ GitError::Remote { .. }) if remote::is_sound(&local) => return Err(error),
            _ => {}
        }
        let local = self.rebuild(&url).await?;
        repo.keep(&local);
        self.fetch(&url, &local, commit).await?;
        view_if_readable(&local, commit).ok_or_else(|| GitError::Commit {
            url: url.clone(),
            commit,
            message: "the server did not send it (is it on a branch or tag the server advertises?)"
                .into(),
        })
    }

    /// Forgets the repositories no tree was checked out of for `idle` and
    /// deletes their caches, and deletes cache directories of repositories
    /// this engine has not used that were last changed longer than `idle`
    /// ago (left by an earlier process). A repository being fetched is
    /// kept. Returns how many caches were deleted. The cache stays bounded
    /// by what is in use: a repository no Application reads any more does
    /// not stay on disk for ever.
    pub async fn evict_idle(&self, idle: Duration) -> usize {
        let idle_repos: Vec<(String, Arc<Repo>)> = {
            let repos = self
                .inner
                .repos
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            repos
                .iter()
                .filter(|(_, r)| {
                    r.used
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .elapsed()
                        >= idle
                })
                .map(|(k, r)| (k.clone(), r.clone()))
                .collect()
        };
        let mut names = Vec::new();
        for (key, repo) in idle_repos {
            // Busy: fetched right now, so not idle after all.
            let Ok(_fetching) = repo.fetch.try_lock() else {
                continue;
            };
            self.inner
                .repos
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&key);
            names.push(repo.url.cache_dir_name());
        }
        let known: std::collections::HashSet<String> = self
            .inner
            .repos
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(|r| r.url.cache_dir_name())
            .collect();
        let root = match self.inner.root.try_clone() {
            Ok(root) => root,
            Err(_) => return 0,
        };
        let removed = blocking(move || {
            let mut removed = 0;
            if let Ok(entries) = root.entries() {
                for entry in entries.flatten() {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    let stale = entry
                        .metadata()
                        .ok()
                        .and_then(|m| m.modified().ok())
                        .and_then(|t| t.into_std().elapsed().ok())
                        .is_some_and(|age| age >= idle);
                    if !name.starts_with('.') && !known.contains(&name) && stale {
                        names.push(name);
                    }
                }
            }
            names.sort();
            names.dedup();
            for name in names {
                match root.remove_dir_all(&name) {
                    Ok(()) => removed += 1,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => tracing::warn!(cache = %name, error = %e, "cannot delete an idle repository cache"),
                }
            }
            removed
        })
        .await
        .unwrap_or(0);
        if removed > 0 {
            tracing::info!(removed, ?idle, "deleted idle repository caches");
        }
        removed
    }

    /// [`resolve`](Self::resolve) then [`checkout`](Self::checkout).
    pub async fn poll(&self, url: &RepoUrl, revision: &Revision) -> Result<GitTreeView> {
        let commit = self.resolve(url, revision).await?;
        self.checkout(url, commit).await
    }

    async fn fetch(
        &self,
        url: &RepoUrl,
        local: &gix::ThreadSafeRepository,
        commit: CommitId,
    ) -> Result<()> {
        let local = local.clone();
        let shallow = self.inner.config.shallow;
        self.network("fetch", url, move |url, options| {
            remote::fetch(&local, url, options, commit, shallow)
        })
        .await?;
        self.inner.counters.fetches.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Replaces an unusable repository cache with an empty one.
    async fn rebuild(&self, url: &RepoUrl) -> Result<gix::ThreadSafeRepository> {
        let path = self.cache_path(url);
        tracing::warn!(repo = %url, path = %path.display(), "repository cache is unusable; rebuilding it");
        self.inner.counters.rebuilds.fetch_add(1, Ordering::Relaxed);
        self.create(url).await
    }

    /// Creates an empty repository cache (removing whatever is there).
    async fn create(&self, url: &RepoUrl) -> Result<gix::ThreadSafeRepository> {
        let path = self.cache_path(url);
        tracing::debug!(repo = %url, path = %path.display(), "creating repository cache");
        let fail = |message: String| GitError::Cache {
            path: path.clone(),
            message,
        };
        let name = url.cache_dir_name();
        if self.inner.root.exists(&name) {
            self.inner
                .root
                .remove_dir_all(&name)
                .map_err(|e| fail(e.to_string()))?;
        }
        // The whole cache directory may have been deleted.
        std::fs::create_dir_all(&self.inner.config.cache_root).map_err(|e| fail(e.to_string()))?;
        let target = path.clone();
        blocking(move || remote::init(&target))
            .await
            .map_err(|e| fail(e.to_string()))?
            .map_err(fail)
    }

    /// Runs a network operation off the async threads, under the parallelism
    /// limit and the overall timeout.
    async fn network<T: Send + 'static>(
        &self,
        operation: &'static str,
        url: &RepoUrl,
        op: impl FnOnce(&RepoUrl, &remote::Options) -> Result<T, remote::Failure> + Send + 'static,
    ) -> Result<T> {
        let _permit = self
            .inner
            .network
            .acquire()
            .await
            .map_err(|_| GitError::Remote {
                url: url.clone(),
                operation,
                message: "the Git engine is shutting down".into(),
            })?;
        let config = &self.inner.config;
        let interrupt = crate::interrupt::Interrupt::current();
        let options = remote::Options {
            host_keys: match config
                .ssh_known_hosts
                .as_ref()
                .and_then(|k| k.known_hosts())
            {
                Some(configured) => known_hosts::HostKeys::Configured(configured),
                None => known_hosts::HostKeys::FirstUse(
                    config
                        .ssh_known_hosts_store
                        .clone()
                        .unwrap_or_else(|| config.cache_root.join("known_hosts")),
                ),
            },
            tls_roots: self.inner.tls_roots.clone(),
            credentials: self.inner.credentials.credentials(url),
            connect_timeout: config.connect_timeout,
            io_timeout: config.timeout,
            interrupt: interrupt.clone(),
        };
        let started = Instant::now();
        let owned_url = url.clone();
        let span = tracing::debug_span!("git", repo = %url, operation);
        // The limit counts from the start: a full blocking pool makes the
        // operation wait, never time out before it began.
        let result = crate::interrupt::blocking_within(config.timeout, move || {
            span.in_scope(|| op(&owned_url, &options))
        })
        .await;
        if result.is_err() {
            // The blocking fetch stops receiving instead of running on.
            interrupt.raise();
        }
        tracing::debug!(repo = %url, operation, elapsed = ?started.elapsed(), "git network operation");
        match result {
            Err(_) => Err(GitError::Timeout {
                url: url.clone(),
                operation,
                after: config.timeout,
            }),
            Ok(Err(join)) => Err(GitError::Remote {
                url: url.clone(),
                operation,
                message: format!("task failed: {join}"),
            }),
            Ok(Ok(Err(failure))) => Err(failure.into_error(url.clone(), operation, config.timeout)),
            Ok(Ok(Ok(value))) => Ok(value),
        }
    }
}

/// The view of `commit` if its commit object and root tree can be read.
fn view_if_readable(local: &gix::ThreadSafeRepository, commit: CommitId) -> Option<GitTreeView> {
    let repo = local.to_thread_local();
    if !repo.has_object(commit.to_gix()) {
        return None;
    }
    let object = repo
        .find_object(commit.to_gix())
        .ok()?
        .try_into_commit()
        .ok()?;
    let root = object.tree_id().ok()?.detach();
    // The committer's time; a commit whose time cannot be read still
    // renders (without a clock).
    let time = object
        .committer()
        .ok()
        .and_then(|signature| signature.time().ok())
        .and_then(|time| jiff::Timestamp::from_second(time.seconds).ok());
    repo.find_object(root)
        .ok()?
        .try_into_tree()
        .ok()?
        .decode()
        .ok()?;
    Some(GitTreeView::new(local.clone(), commit, root, time))
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, tokio::task::JoinError> {
    tokio::task::spawn_blocking(f).await
}
