//! Helm charts fetched by the host: from a Helm repository (`index.yaml`,
//! a semver constraint, the archive pinned by the index's digest) or an OCI
//! registry (pinned by the manifest digest), unpacked safely into a
//! content-addressed cache and served read-only to the `helm` plugin as a
//! [`SourceView`]. Dependencies a chart declares but does not vendor in
//! `charts/` are fetched the same way and mounted at `charts/NAME`.
//!
//! The sandbox never fetches anything: the plugin only reads the view.
//!
//! - [`access`]: which dependency repositories one fetch may use, and
//!   with whose credentials;
//! - [`index`]: `index.yaml` and Helm's semver constraints;
//! - [`fetch`]: HTTP downloads with credentials for the repository's origin;
//! - [`oci`]: Helm's OCI artifact layout;
//! - [`archive`]: unpacking `.tgz` with caps, refusing escapes and links;
//! - [`cache`]: unpacked charts by digest under a byte budget;
//! - [`view`]: a view with fetched dependencies mounted in it.

pub mod access;
pub mod archive;
pub mod cache;
pub mod fetch;
pub mod index;
pub mod oci;
pub mod slots;
pub mod view;

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::artifact::RegistryCredentials;
use crate::digest::Digest;
use crate::source::git::{CredentialProvider, NoCredentials};
use crate::source::{LocalDir, SourcePath, SourceView};

pub use access::{Admission, AllowAll, ChartAccess, NeededRepository, RepositoryGate};
pub use archive::{ArchiveError, ArchiveLimits};
pub use cache::{CacheError, ChartCache, DEFAULT_MAX_CACHE_BYTES};
pub use fetch::{Download, FetchError, HttpFetcher};
pub use index::{Constraint, Index, IndexError};
pub use oci::OciError;
pub use view::{FileOverlay, MountView};

/// Default deadline of a whole chart fetch (index, archive, dependencies):
/// 5 minutes.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);
/// Default number of downloads in flight at once to one origin (scheme,
/// host, port): 4.
pub const DEFAULT_MAX_CONCURRENT_DOWNLOADS: usize = 4;
/// Default number of downloads in flight at once in all: 8 (each holds its
/// body, up to an index's or an archive's limit).
pub const DEFAULT_MAX_DOWNLOADS: usize = 8;
/// Default budget of the index cache: 64 MiB of chart entries (each
/// repository's index is kept by chart, only the entries of charts asked
/// for).
pub const DEFAULT_INDEX_CACHE_BYTES: usize = 64 << 20;
/// Default depth of dependencies fetched (a dependency's dependencies...): 8.
pub const DEFAULT_MAX_DEPENDENCY_DEPTH: usize = 8;
/// Default number of dependencies fetched for one chart, all levels: 64.
pub const DEFAULT_MAX_DEPENDENCIES: usize = 64;
/// Default cap on a `Chart.yaml`, `Chart.lock`, `requirements.yaml` or
/// `requirements.lock` read for dependencies: 1 MiB.
pub const DEFAULT_MAX_CHART_FILE: u64 = 1 << 20;

/// Where a chart comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ChartRef {
    /// A chart of a Helm repository (`https://charts.example.com`).
    Repo {
        /// The repository URL (no trailing `/`).
        repo: String,
        /// The chart's name in the index.
        chart: String,
        /// A version or semver constraint (empty: the latest release).
        version: String,
    },
    /// A chart in an OCI registry.
    Oci {
        /// `registry/path/name` (no `oci://`).
        repository: String,
        /// A version (tag), semver constraint or `sha256:` digest.
        version: String,
    },
}

impl ChartRef {
    /// A chart named `chart` (a name, or a full `oci://` reference) in
    /// repository `repo` (an `http(s)://` Helm repository or an `oci://`
    /// registry path; `None` with an `oci://` chart), at `version`.
    pub fn new(repo: Option<&str>, chart: &str, version: &str) -> Result<Self, ChartError> {
        let bad = |message: &str| ChartError::BadReference {
            reference: format!(
                "{}{chart}",
                repo.map(|r| format!("{r} ")).unwrap_or_default()
            ),
            message: message.to_owned(),
        };
        let version = version.trim().to_owned();
        if let Some(rest) = chart.strip_prefix("oci://") {
            if repo.is_some_and(|r| !r.is_empty()) {
                return Err(bad("an oci:// chart takes no repository"));
            }
            let rest = rest.trim_end_matches('/');
            // `oci://reg/charts/web:1.2.3` or `@sha256:…`.
            let (repository, version) = match split_tag(rest) {
                Some((repository, tag)) if version.is_empty() => (repository, tag.to_owned()),
                Some(_) => return Err(bad("give the version once: in the reference or --version")),
                None => (rest, version),
            };
            return Ok(ChartRef::Oci {
                repository: repository.to_owned(),
                version,
            });
        }
        if chart.is_empty() || chart.contains(['/', '\\']) || chart.starts_with('.') {
            return Err(bad("a chart name is one path segment"));
        }
        let repo = repo.ok_or_else(|| bad("a chart name needs a repository URL"))?;
        let repo = repo.trim_end_matches('/');
        if let Some(registry) = repo.strip_prefix("oci://") {
            return Ok(ChartRef::Oci {
                repository: format!("{registry}/{chart}"),
                version,
            });
        }
        if !(repo.starts_with("https://") || repo.starts_with("http://")) {
            return Err(bad(
                "a Helm repository URL starts with https://, http:// or oci:// \
                 (an OCI registry written without oci://, as Argo CD allows, needs \
                 a repository Secret for it with `type: helm` and `enableOCI: \"true\"`)",
            ));
        }
        Ok(ChartRef::Repo {
            repo: repo.to_owned(),
            chart: chart.to_owned(),
            version,
        })
    }

    /// The chart of an Application's source: `spec.source.repoURL` (may be
    /// empty with an `oci://` chart), `chart` and `targetRevision`.
    /// `enable_oci` is Argo CD's convention for OCI registries written
    /// without `oci://` (`registry.example.com/charts`): the repository
    /// Secret of that URL says `type: helm` and `enableOCI: "true"`; such a
    /// URL is then read as `oci://registry.example.com/charts`.
    pub fn of_application(
        repo: &str,
        chart: &str,
        version: &str,
        enable_oci: bool,
    ) -> Result<Self, ChartError> {
        let repo = repo.trim();
        if repo.is_empty() {
            return Self::new(None, chart, version);
        }
        if enable_oci && !repo.contains("://") {
            return Self::new(Some(&format!("oci://{repo}")), chart, version);
        }
        Self::new(Some(repo), chart, version)
    }

    /// The OCI registry (`host[:port]`) of an OCI chart.
    pub fn registry(&self) -> Option<&str> {
        match self {
            ChartRef::Repo { .. } => None,
            ChartRef::Oci { repository, .. } => repository.split('/').next(),
        }
    }

    /// The chart's name (the last path segment of an OCI reference).
    pub fn name(&self) -> &str {
        match self {
            ChartRef::Repo { chart, .. } => chart,
            ChartRef::Oci { repository, .. } => repository.rsplit('/').next().unwrap_or(repository),
        }
    }
}

/// `repo:tag` or `repo@sha256:…` (a `:` after the last `/` is a tag; one
/// before it is a port).
fn split_tag(reference: &str) -> Option<(&str, &str)> {
    if let Some((repo, digest)) = reference.split_once('@') {
        return Some((repo, digest));
    }
    let slash = reference.rfind('/')?;
    let colon = reference[slash..].find(':')? + slash;
    Some((&reference[..colon], &reference[colon + 1..]))
}

impl fmt::Display for ChartRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChartRef::Repo {
                repo,
                chart,
                version,
            } => write!(f, "{repo} chart {chart} version {}", or_latest(version)),
            ChartRef::Oci {
                repository,
                version,
            } => write!(f, "oci://{repository} version {}", or_latest(version)),
        }
    }
}

fn or_latest(version: &str) -> &str {
    if version.is_empty() {
        "(latest)"
    } else {
        version
    }
}

/// A chart could not be fetched. Messages name the chart, URL, version or
/// file; never a credential.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChartError {
    /// The chart reference is malformed.
    #[error("{reference}: {message}")]
    BadReference {
        /// The reference as given.
        reference: String,
        /// What is wrong.
        message: String,
    },
    /// The index is unusable or has no matching version.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// A download failed.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// An OCI pull failed.
    #[error(transparent)]
    Oci(#[from] OciError),
    /// The archive was refused or the cache failed.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// The archive's digest is not the one the index pins.
    #[error("{url}: digest mismatch: index.yaml pins sha256:{expected}, the archive is {found}")]
    DigestMismatch {
        /// The archive's URL.
        url: String,
        /// The index's digest (hex).
        expected: String,
        /// The archive's digest.
        found: Digest,
    },
    /// The index lists the version with no archive URL.
    #[error("{chart} {version}: index.yaml lists no archive URL")]
    NoUrl {
        /// The chart.
        chart: String,
        /// The version.
        version: String,
    },
    /// A dependency could not be fetched.
    #[error("{chart}: dependency `{dependency}`: {source}")]
    Dependency {
        /// The chart declaring it.
        chart: String,
        /// The dependency's name.
        dependency: String,
        /// Why.
        source: Box<ChartError>,
    },
    /// A dependency's repository may not be used (the project's
    /// `sourceRepos`).
    #[error("{chart}: dependency `{dependency}` from {repository}: {message}")]
    DependencyRefused {
        /// The chart declaring it.
        chart: String,
        /// The dependency's name.
        dependency: String,
        /// The repository URL, as the chart writes it.
        repository: String,
        /// Why.
        message: String,
    },
    /// Dependency repositories the fetch's gate could not decide on
    /// ([`Admission::Unknown`]): nothing was sent to them.
    #[error(
        "dependency repositories not granted to this fetch: {}",
        list(repositories)
    )]
    RepositoriesNeeded {
        /// Each, with the chart and dependency naming it.
        repositories: Vec<NeededRepository>,
    },
    /// `Chart.yaml`, `Chart.lock`, `requirements.yaml` or `requirements.lock`
    /// is unusable, or dependencies go too deep.
    #[error("{chart}: {message}")]
    Chart {
        /// The chart (or file).
        chart: String,
        /// What is wrong.
        message: String,
    },
    /// The whole fetch took longer than its deadline.
    #[error("{chart}: fetching took longer than {after:?}")]
    Deadline {
        /// The chart.
        chart: String,
        /// The deadline.
        after: Duration,
    },
}

fn list(repositories: &[NeededRepository]) -> String {
    repositories
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl ChartError {
    /// The dependency repositories this fetch was not granted, if that is
    /// why it failed (at any depth).
    pub fn repositories_needed(&self) -> Option<&[NeededRepository]> {
        match self {
            ChartError::RepositoriesNeeded { repositories } => Some(repositories),
            ChartError::Dependency { source, .. } => source.repositories_needed(),
            _ => None,
        }
    }

    /// Whether the fetch failed because a dependency repository was
    /// refused ([`Admission::Refused`]), at any depth.
    pub fn is_refused_dependency(&self) -> bool {
        match self {
            ChartError::DependencyRefused { .. } => true,
            ChartError::Dependency { source, .. } => source.is_refused_dependency(),
            _ => false,
        }
    }
}

/// How charts are fetched and cached; every limit has a documented default.
#[derive(Debug, Clone)]
pub struct HelmConfig {
    /// The unpacked-chart cache (created `0700`).
    pub cache_dir: PathBuf,
    /// Byte budget of the cache. Default: [`DEFAULT_MAX_CACHE_BYTES`].
    pub cache_max_bytes: u64,
    /// Limits of one archive (its compressed size is also the download cap).
    pub archive: ArchiveLimits,
    /// Largest `index.yaml`. Default: [`index::DEFAULT_MAX_INDEX`].
    pub max_index: u64,
    /// Deadline of each request (its download slot is freed at it).
    /// Default: [`fetch::DEFAULT_TIMEOUT`].
    pub timeout: Duration,
    /// Deadline of a whole fetch, dependencies included. Default: [`DEFAULT_DEADLINE`].
    pub deadline: Duration,
    /// Downloads in flight at once to one origin. Default:
    /// [`DEFAULT_MAX_CONCURRENT_DOWNLOADS`].
    pub max_concurrent_downloads: usize,
    /// Downloads in flight at once in all. Default:
    /// [`DEFAULT_MAX_DOWNLOADS`].
    pub max_downloads: usize,
    /// Bytes of index entries kept (by repository and chart, least
    /// recently used first out). Default: [`DEFAULT_INDEX_CACHE_BYTES`].
    pub index_cache_bytes: usize,
    /// Depth of dependencies. Default: [`DEFAULT_MAX_DEPENDENCY_DEPTH`].
    pub max_dependency_depth: usize,
    /// Dependencies of one chart, all levels. Default: [`DEFAULT_MAX_DEPENDENCIES`].
    pub max_dependencies: usize,
    /// Extra trusted CA certificates (PEM) for https repositories.
    pub tls_roots_pem: Vec<u8>,
}

impl HelmConfig {
    /// Defaults, with the cache at `cache_dir`.
    pub fn new(cache_dir: PathBuf) -> Self {
        HelmConfig {
            cache_dir,
            cache_max_bytes: DEFAULT_MAX_CACHE_BYTES,
            archive: ArchiveLimits::default(),
            max_index: index::DEFAULT_MAX_INDEX,
            timeout: fetch::DEFAULT_TIMEOUT,
            deadline: DEFAULT_DEADLINE,
            max_concurrent_downloads: DEFAULT_MAX_CONCURRENT_DOWNLOADS,
            max_downloads: DEFAULT_MAX_DOWNLOADS,
            index_cache_bytes: DEFAULT_INDEX_CACHE_BYTES,
            max_dependency_depth: DEFAULT_MAX_DEPENDENCY_DEPTH,
            max_dependencies: DEFAULT_MAX_DEPENDENCIES,
            tls_roots_pem: Vec::new(),
        }
    }
}

/// A fetched chart: its view (dependencies mounted) and what it resolved to.
#[derive(Debug, Clone)]
pub struct FetchedChart {
    /// The chart's files at the view's root.
    pub view: Arc<dyn SourceView>,
    /// The version resolved.
    pub version: String,
    /// When it was packaged, as its index or OCI manifest says (unparsable:
    /// `None`): a chart's stand-in for a commit's time.
    pub created: Option<jiff::Timestamp>,
    /// The pin: the archive digest (Helm repository) or the manifest
    /// digest (OCI).
    pub digest: Digest,
    /// Where the archive came from (URL or `oci://` reference).
    pub source: String,
    /// Dependencies fetched and mounted: `charts/NAME` → version.
    pub dependencies: Vec<(String, String)>,
}

/// Where a resolved chart was unpacked, and what it was.
struct Located {
    dir: PathBuf,
    version: String,
    digest: Digest,
    source: String,
    created: Option<String>,
}

/// The entries of one chart in the last `index.yaml` seen of a
/// repository.
#[derive(Debug, Clone)]
struct CachedIndex {
    etag: Option<String>,
    index: Arc<Index>,
}

/// The index cache: (normalized repository, chart) → entries, weighed by
/// bytes.
type IndexCache = clru::CLruCache<
    (String, String),
    CachedIndex,
    std::collections::hash_map::RandomState,
    IndexBytes,
>;

/// Weighs a cached index by its entries' bytes.
#[derive(Debug)]
struct IndexBytes;

impl clru::WeightScale<(String, String), CachedIndex> for IndexBytes {
    fn weight(&self, key: &(String, String), cached: &CachedIndex) -> usize {
        key.0.len()
            + key.1.len()
            + cached.etag.as_ref().map_or(0, String::len)
            + cached.index.weight()
    }
}

/// Fetches charts, shared by every render; cheap to clone.
#[derive(Debug, Clone)]
pub struct ChartFetcher {
    inner: Arc<Inner>,
}

/// How many unpinned archive URLs and OCI manifests a fetcher remembers
/// (a few hundred bytes each); one forgotten costs a download again.
const REMEMBERED: std::num::NonZeroUsize = std::num::NonZeroUsize::new(4096).unwrap();

#[derive(Debug)]
struct Inner {
    config: HelmConfig,
    http: HttpFetcher,
    cache: ChartCache,
    indexes: Mutex<IndexCache>,
    /// Archive URL → digest, for indexes that pin none (each archive is
    /// still downloaded once), the [`REMEMBERED`] most recent.
    unpinned: Mutex<clru::CLruCache<String, Digest>>,
    /// OCI manifest digest → archive digest, so a manifest seen before
    /// costs no layer download; the [`REMEMBERED`] most recent.
    manifests: Mutex<clru::CLruCache<Digest, Digest>>,
    downloads: slots::Slots,
}

impl ChartFetcher {
    /// A fetcher; `credentials` for Helm repositories (by URL prefix) a
    /// fetch's [`ChartAccess`] has none for. OCI registry credentials come
    /// with each fetch ([`ChartFetcher::fetch_with`]).
    pub fn new(
        config: HelmConfig,
        credentials: Arc<dyn CredentialProvider>,
    ) -> Result<Self, ChartError> {
        let http = HttpFetcher::new(credentials, config.timeout, &config.tls_roots_pem)?;
        let cache = ChartCache::open(&config.cache_dir, config.cache_max_bytes, config.archive)?;
        Ok(ChartFetcher {
            inner: Arc::new(Inner {
                downloads: slots::Slots::new(config.max_concurrent_downloads, config.max_downloads),
                indexes: Mutex::new(clru::CLruCache::with_config(
                    clru::CLruCacheConfig::new(
                        std::num::NonZeroUsize::new(config.index_cache_bytes.max(1))
                            .unwrap_or(std::num::NonZeroUsize::MIN),
                    )
                    .with_scale(IndexBytes),
                )),
                config,
                http,
                cache,
                unpinned: Mutex::new(clru::CLruCache::new(REMEMBERED)),
                manifests: Mutex::new(clru::CLruCache::new(REMEMBERED)),
            }),
        })
    }

    /// A fetcher for public repositories only.
    pub fn anonymous(config: HelmConfig) -> Result<Self, ChartError> {
        Self::new(config, Arc::new(NoCredentials))
    }

    /// Fetches (or finds in the cache) a chart and its dependencies, within
    /// the configured deadline; OCI registries anonymously.
    pub async fn fetch(&self, chart: &ChartRef) -> Result<FetchedChart, ChartError> {
        self.fetch_with(chart, &RegistryCredentials::none()).await
    }

    /// [`ChartFetcher::fetch`] with the OCI registry credentials of one
    /// fetch.
    pub async fn fetch_with(
        &self,
        chart: &ChartRef,
        registry: &RegistryCredentials,
    ) -> Result<FetchedChart, ChartError> {
        self.fetch_scoped(chart, registry, &ChartAccess::default())
            .await
    }

    /// [`ChartFetcher::fetch_with`] with the Helm repository credentials
    /// and the dependency repositories of `access` (one Application's:
    /// its project's `sourceRepos`, or what a render request granted).
    pub async fn fetch_scoped(
        &self,
        chart: &ChartRef,
        registry: &RegistryCredentials,
        access: &ChartAccess,
    ) -> Result<FetchedChart, ChartError> {
        let deadline = self.inner.config.deadline;
        let mut budget = self.inner.config.max_dependencies;
        let work = self.fetch_at(chart, 0, &mut budget, registry, access);
        match tokio::time::timeout(deadline, work).await {
            Ok(result) => result,
            Err(_) => Err(ChartError::Deadline {
                chart: chart.to_string(),
                after: deadline,
            }),
        }
    }

    async fn fetch_at(
        &self,
        chart: &ChartRef,
        depth: usize,
        budget: &mut usize,
        registry: &RegistryCredentials,
        access: &ChartAccess,
    ) -> Result<FetchedChart, ChartError> {
        let Located {
            dir,
            version,
            digest,
            source,
            created,
        } = match chart {
            ChartRef::Repo {
                repo,
                chart: name,
                version,
            } => self.fetch_repo(repo, name, version, access).await?,
            ChartRef::Oci {
                repository,
                version,
            } => self.fetch_oci(repository, version, registry).await?,
        };
        let base: Arc<dyn SourceView> =
            Arc::new(LocalDir::open(&dir).map_err(|source| CacheError::Io {
                path: dir.clone(),
                source,
            })?);
        let (view, dependencies) = Box::pin(self.mount_dependencies(
            base,
            &SourcePath::root(),
            chart.name(),
            depth,
            budget,
            registry,
            access,
        ))
        .await?;
        Ok(FetchedChart {
            view,
            version,
            digest,
            source,
            dependencies,
            created: created.and_then(|text| text.trim().parse().ok()),
        })
    }

    /// The versions of `chart` in the repository's index: fetched with
    /// `If-None-Match` when seen before (an unchanged index costs one
    /// request and no parse), read keeping only that chart's entries.
    pub async fn index(&self, repo: &str, chart: &str) -> Result<Arc<Index>, ChartError> {
        self.index_with(repo, chart, &ChartAccess::default()).await
    }

    async fn index_with(
        &self,
        repo: &str,
        chart: &str,
        access: &ChartAccess,
    ) -> Result<Arc<Index>, ChartError> {
        let repo = repo.trim_end_matches('/');
        let url = format!("{repo}/index.yaml");
        // One repository however its URL is spelled (case, default port,
        // doubled or trailing slashes), as admission and credentials see it.
        let key = (
            fetch::index_key(repo).map_or_else(|| url.clone(), |k| k.to_string()),
            chart.to_owned(),
        );
        let cached = self
            .inner
            .indexes
            .lock()
            .expect("poisoned")
            .get(&key)
            .cloned();
        let etag = cached.as_ref().and_then(|c| c.etag.as_deref());
        let download = {
            let _slot = self.inner.downloads.acquire(&url).await;
            self.inner
                .http
                .get(
                    repo,
                    &url,
                    self.inner.config.max_index,
                    etag,
                    access.credentials.as_deref(),
                )
                .await?
        };
        match (download, cached) {
            (Download::NotModified, Some(cached)) => Ok(cached.index),
            (Download::NotModified, None) => unreachable!("no If-None-Match without a cache"),
            (Download::Body { bytes, etag }, _) => {
                let (repo_owned, chart_owned) = (repo.to_owned(), chart.to_owned());
                let interrupt = crate::interrupt::Interrupt::current();
                let index = tokio::task::spawn_blocking(move || {
                    Index::parse_chart_until(&bytes, &repo_owned, &chart_owned, &interrupt)
                })
                .await
                .expect("index parse panicked")?;
                let index = Arc::new(index);
                // An entry larger than the whole budget is not kept.
                let _ = self
                    .inner
                    .indexes
                    .lock()
                    .expect("poisoned")
                    .put_with_weight(
                        key,
                        CachedIndex {
                            etag,
                            index: index.clone(),
                        },
                    );
                Ok(index)
            }
        }
    }

    async fn fetch_repo(
        &self,
        repo: &str,
        name: &str,
        constraint: &str,
        access: &ChartAccess,
    ) -> Result<Located, ChartError> {
        let index = self.index_with(repo, name, access).await?;
        let entry = index.resolve(repo, name, constraint)?.clone();
        let first = entry.urls.first().ok_or_else(|| ChartError::NoUrl {
            chart: name.to_owned(),
            version: entry.version.clone(),
        })?;
        let url =
            absolute_url(repo, first).ok_or_else(|| FetchError::BadUrl { url: first.clone() })?;
        let pinned: Option<Digest> = match &entry.digest {
            Some(hex) => {
                let hex = hex.strip_prefix("sha256:").unwrap_or(hex);
                Some(
                    format!("sha256:{hex}")
                        .parse()
                        .map_err(|_| ChartError::Chart {
                            chart: format!("{repo}/index.yaml"),
                            message: format!(
                                "{name} {}: digest `{hex}` is not a SHA-256",
                                entry.version
                            ),
                        })?,
                )
            }
            None => self
                .inner
                .unpinned
                .lock()
                .expect("poisoned")
                .get(&url)
                .copied(),
        };
        // Cache entries are per repository (the one whose index named the
        // archive and whose credentials fetched it), not per the archive
        // URL's origin, which an index chooses: another repository's index
        // naming a private chart's URL and digest gets no cache hit.
        let origin = repo.trim_end_matches('/').to_owned();
        if let Some(digest) = pinned
            && let Some(dir) = self.inner.cache.get_from(&digest, &origin)
        {
            return Ok(Located {
                dir,
                version: entry.version,
                digest,
                source: url,
                created: entry.created,
            });
        }
        let bytes = {
            let _slot = self.inner.downloads.acquire(&url).await;
            match self
                .inner
                .http
                .get(
                    repo,
                    &url,
                    self.inner.config.archive.compressed,
                    None,
                    access.credentials.as_deref(),
                )
                .await
            {
                Ok(Download::Body { bytes, .. }) => bytes,
                Ok(Download::NotModified) => unreachable!("no If-None-Match sent"),
                Err(e) => return Err(e.into()),
            }
        };
        let found = Digest::of(&bytes);
        match (&entry.digest, pinned) {
            (Some(hex), Some(expected)) if expected != found => {
                return Err(ChartError::DigestMismatch {
                    url,
                    expected: hex.strip_prefix("sha256:").unwrap_or(hex).to_owned(),
                    found,
                });
            }
            (None, _) => {
                tracing::warn!(%url, "index.yaml pins no digest for this chart: trusting the archive as served");
                self.inner
                    .unpinned
                    .lock()
                    .expect("poisoned")
                    .put(url.clone(), found);
            }
            _ => {}
        }
        let dir = self.unpack(found, bytes, url.clone()).await?;
        if let Err(e) = self.inner.cache.note_origin(&found, &origin) {
            tracing::warn!(%url, error = %e, "cannot record where a chart came from");
        }
        Ok(Located {
            dir,
            version: entry.version,
            digest: found,
            source: url,
            created: entry.created,
        })
    }

    async fn fetch_oci(
        &self,
        repository: &str,
        version: &str,
        registry: &RegistryCredentials,
    ) -> Result<Located, ChartError> {
        let inner = self.inner.clone();
        let have = move |manifest: &Digest| {
            let archive = inner
                .manifests
                .lock()
                .expect("poisoned")
                .get(manifest)
                .copied();
            archive.is_some_and(|a| inner.cache.get(&a).is_some())
        };
        let pulled = {
            let _slot = self
                .inner
                .downloads
                .acquire(&format!("oci://{repository}"))
                .await;
            oci::pull(
                registry,
                &have,
                repository,
                version,
                self.inner.config.archive.compressed,
                self.inner.config.timeout,
            )
            .await?
        };
        let source = format!("oci://{repository}@{}", pulled.manifest);
        let known = self
            .inner
            .manifests
            .lock()
            .expect("poisoned")
            .get(&pulled.manifest)
            .copied();
        let dir = match (pulled.archive, known.and_then(|a| self.inner.cache.get(&a))) {
            (None, Some(dir)) => dir,
            (Some(archive), _) => {
                let digest = Digest::of(&archive);
                let dir = match self.inner.cache.get(&digest) {
                    Some(dir) => dir,
                    None => self.unpack(digest, archive, source.clone()).await?,
                };
                self.inner
                    .manifests
                    .lock()
                    .expect("poisoned")
                    .put(pulled.manifest, digest);
                dir
            }
            (None, None) => {
                // Evicted between the check and now: pull it again.
                self.inner
                    .manifests
                    .lock()
                    .expect("poisoned")
                    .pop(&pulled.manifest);
                return Box::pin(self.fetch_oci(repository, version, registry)).await;
            }
        };
        Ok(Located {
            dir,
            version: pulled.version,
            digest: pulled.manifest,
            source,
            created: pulled.created,
        })
    }

    async fn unpack(
        &self,
        digest: Digest,
        bytes: Vec<u8>,
        name: String,
    ) -> Result<PathBuf, ChartError> {
        let inner = self.inner.clone();
        Ok(
            crate::interrupt::spawn_blocking(move || inner.cache.put(&digest, &bytes, &name))
                .await
                .expect("unpack panicked")?,
        )
    }

    /// Fetches the dependencies of the chart at `dir` in `view` (named
    /// `label` in errors) that are neither vendored in `charts/` nor local
    /// (`file://`), and mounts them. Before anything is fetched, their
    /// number is held to what is left of the budget, and each repository is
    /// put to `access`'s gate.
    #[allow(clippy::too_many_arguments)]
    async fn mount_dependencies(
        &self,
        view: Arc<dyn SourceView>,
        dir: &SourcePath,
        label: &str,
        depth: usize,
        budget: &mut usize,
        registry: &RegistryCredentials,
        access: &ChartAccess,
    ) -> Result<(Arc<dyn SourceView>, Vec<(String, String)>), ChartError> {
        let chart_name = if label.is_empty() { "." } else { label }.to_owned();
        let needed = dependencies::missing(view.as_ref(), dir)?;
        if needed.is_empty() {
            return Ok((view, Vec::new()));
        }
        if needed.len() > *budget {
            return Err(ChartError::Chart {
                chart: chart_name,
                message: format!(
                    "declares {} dependencies to fetch, more than the {} left of the limit of {} dependencies per chart",
                    needed.len(),
                    *budget,
                    self.inner.config.max_dependencies
                ),
            });
        }
        let mut unknown = Vec::new();
        for dependency in &needed {
            match access.gate.admit(&dependency.repository) {
                Admission::Allowed => {}
                Admission::Unknown => unknown.push(NeededRepository {
                    chart: chart_name.clone(),
                    dependency: dependency.name.clone(),
                    url: dependency.repository.clone(),
                }),
                Admission::Refused(message) => {
                    return Err(ChartError::DependencyRefused {
                        chart: chart_name,
                        dependency: dependency.name.clone(),
                        repository: dependency.repository.clone(),
                        message,
                    });
                }
            }
        }
        if !unknown.is_empty() {
            return Err(ChartError::RepositoriesNeeded {
                repositories: unknown,
            });
        }
        if depth >= self.inner.config.max_dependency_depth {
            return Err(ChartError::Chart {
                chart: chart_name,
                message: format!(
                    "dependencies nest deeper than {} levels",
                    self.inner.config.max_dependency_depth
                ),
            });
        }
        let mut mounted = MountView::new(view);
        let mut fetched = Vec::new();
        for dependency in needed {
            if *budget == 0 {
                return Err(ChartError::Chart {
                    chart: chart_name,
                    message: format!(
                        "more than {} dependencies to fetch",
                        self.inner.config.max_dependencies
                    ),
                });
            }
            *budget -= 1;
            let wrap = |source| ChartError::Dependency {
                chart: chart_name.clone(),
                dependency: dependency.name.clone(),
                source: Box::new(source),
            };
            let reference = ChartRef::new(
                Some(&dependency.repository),
                &dependency.name,
                &dependency.version,
            )
            .map_err(wrap)?;
            // An OCI dependency's own registry credentials, if the gate
            // has some, for its fetch only.
            let extended;
            let registry = match access.gate.registry_credentials(&dependency.repository) {
                Some(extra) if matches!(reference, ChartRef::Oci { .. }) => {
                    let mut merged = registry.clone();
                    merged.merge(extra);
                    extended = merged;
                    &extended
                }
                _ => registry,
            };
            let chart = Box::pin(self.fetch_at(&reference, depth + 1, budget, registry, access))
                .await
                .map_err(wrap)?;
            let at = dir
                .join(&format!("charts/{}", dependency.name))
                .map_err(|e| {
                    wrap(ChartError::Chart {
                        chart: dependency.name.clone(),
                        message: e.to_string(),
                    })
                })?;
            fetched.push((at.to_string(), chart.version.clone()));
            mounted.mount(&at, chart.view);
        }
        Ok((Arc::new(mounted), fetched))
    }
}

/// An index's archive URL made absolute against the repository URL.
fn absolute_url(repo: &str, url: &str) -> Option<String> {
    let base = url::Url::parse(&format!("{repo}/")).ok()?;
    base.join(url).ok().map(String::from)
}

mod dependencies {
    //! Which declared dependencies a chart lacks.

    use super::{ChartError, DEFAULT_MAX_CHART_FILE};
    use crate::source::{EntryKind, SourcePath, SourceView};

    /// A dependency to fetch.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(super) struct Needed {
        pub name: String,
        pub version: String,
        pub repository: String,
    }

    #[derive(Debug, serde::Deserialize)]
    struct Declared {
        /// `Some` when the file has the key (`null` replaces the list
        /// with none, as Helm's reader does), `None` when it has not.
        #[serde(default, deserialize_with = "present")]
        dependencies: Option<Option<Vec<Dependency>>>,
    }

    impl Declared {
        fn dependencies(self) -> Vec<Dependency> {
            self.dependencies.flatten().unwrap_or_default()
        }
    }

    /// A key that is there, whatever its value.
    fn present<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Option<Vec<Dependency>>>, D::Error> {
        serde::Deserialize::deserialize(d).map(Some)
    }

    #[derive(Debug, serde::Deserialize)]
    struct Dependency {
        name: String,
        #[serde(default)]
        version: String,
        #[serde(default)]
        repository: String,
    }

    fn read(
        view: &dyn SourceView,
        dir: &SourcePath,
        file: &str,
    ) -> Result<Option<Declared>, ChartError> {
        let path = dir.join(file).map_err(|e| ChartError::Chart {
            chart: dir.to_string(),
            message: e.to_string(),
        })?;
        let bad = |message: String| ChartError::Chart {
            chart: path.to_string(),
            message,
        };
        match view.stat(&path) {
            Ok(Some(m)) if m.kind == EntryKind::File => {
                if m.size > DEFAULT_MAX_CHART_FILE {
                    return Err(bad(format!(
                        "{} bytes is more than the {DEFAULT_MAX_CHART_FILE}-byte limit",
                        m.size
                    )));
                }
            }
            _ => return Ok(None),
        }
        let bytes = view.read_file(&path).map_err(|e| bad(e.to_string()))?;
        let text = String::from_utf8(bytes).map_err(|e| bad(e.to_string()))?;
        kiln_yaml_limits::check(&text, &kiln_yaml_limits::YamlLimits::default())
            .map_err(|e| bad(e.to_string()))?;
        serde_yaml::from_str(&text)
            .map(Some)
            .map_err(|e| bad(e.to_string()))
    }

    /// The dependencies of the chart at `dir` to fetch: declared in
    /// `Chart.yaml`, or in `requirements.yaml` when it declares them (an
    /// apiVersion v1 chart's; Helm reads it over `Chart.yaml`), versions
    /// pinned by `requirements.lock` or `Chart.lock` when it lists them
    /// (the first read last by Helm's loader, in file-name order), from an
    /// http(s) or oci:// repository, and neither a directory
    /// `charts/NAME` nor an archive `charts/NAME-*.tgz`.
    pub(super) fn missing(
        view: &dyn SourceView,
        dir: &SourcePath,
    ) -> Result<Vec<Needed>, ChartError> {
        let Some(chart) = read(view, dir, "Chart.yaml")? else {
            return Ok(Vec::new());
        };
        let (file, declared) = match read(view, dir, "requirements.yaml")? {
            Some(requirements) if requirements.dependencies.is_some() => {
                ("requirements.yaml", requirements.dependencies())
            }
            _ => ("Chart.yaml", chart.dependencies()),
        };
        let lock = match read(view, dir, "requirements.lock")? {
            Some(lock) => Some(lock),
            None => read(view, dir, "Chart.lock")?,
        }
        .map(Declared::dependencies)
        .unwrap_or_default();
        let vendored: Vec<(String, EntryKind)> = dir
            .join("charts")
            .ok()
            .and_then(|charts| view.read_dir(&charts).ok())
            .unwrap_or_default()
            .into_iter()
            .map(|e| (e.name, e.kind))
            .collect();
        let is_vendored = |name: &str| {
            vendored.iter().any(|(entry, kind)| {
                (entry == name && *kind == EntryKind::Directory)
                    || (*kind == EntryKind::File
                        && entry
                            .strip_prefix(name)
                            .and_then(|rest| rest.strip_prefix('-'))
                            .is_some_and(|rest| rest.ends_with(".tgz")))
            })
        };
        let mut needed = Vec::new();
        for dependency in declared {
            let repository = dependency
                .repository
                .trim()
                .trim_end_matches('/')
                .to_owned();
            if repository.is_empty()
                || repository.starts_with("file://")
                || is_vendored(&dependency.name)
            {
                continue;
            }
            if !(repository.starts_with("https://")
                || repository.starts_with("http://")
                || repository.starts_with("oci://"))
            {
                return Err(ChartError::Chart {
                    chart: dir.join(file).map(|p| p.to_string()).unwrap_or_default(),
                    message: format!(
                        "dependency `{}`: repository `{repository}` is a name from `helm repo add`; write its URL, or vendor the chart in charts/",
                        dependency.name
                    ),
                });
            }
            let locked = lock
                .iter()
                .find(|l| l.name == dependency.name && l.repository.trim() == repository)
                .map(|l| l.version.clone());
            needed.push(Needed {
                name: dependency.name,
                version: locked.unwrap_or(dependency.version),
                repository,
            });
        }
        Ok(needed)
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::source::LocalDir;

        /// What `missing` gives for a chart of these files, or its error.
        fn missing_in(files: &[(&str, &str)]) -> Result<Vec<(String, String)>, String> {
            let dir = tempfile::tempdir().unwrap();
            for (name, text) in files {
                std::fs::write(dir.path().join(name), text).unwrap();
            }
            let view = LocalDir::open(dir.path()).unwrap();
            missing(&view, &SourcePath::root())
                .map(|needed| needed.into_iter().map(|n| (n.name, n.version)).collect())
                .map_err(|e| e.to_string())
        }

        fn declaring(names: &[&str]) -> String {
            let mut out = String::from("dependencies:\n");
            for name in names {
                out.push_str(&format!(
                    "- name: {name}\n  version: \"^1\"\n  repository: https://charts.example.com\n"
                ));
            }
            out
        }

        fn locking(name: &str, version: &str) -> String {
            format!(
                "dependencies:\n- name: {name}\n  version: {version}\n  repository: https://charts.example.com\n"
            )
        }

        #[test]
        fn requirements_yaml_declares_over_chart_yaml_when_it_has_the_key() {
            let chart = format!("apiVersion: v1\nname: app\n{}", declaring(&["a"]));
            let want = |names: &[&str]| -> Vec<(String, String)> {
                names
                    .iter()
                    .map(|n| ((*n).to_owned(), "^1".to_owned()))
                    .collect()
            };
            assert_eq!(missing_in(&[("Chart.yaml", &chart)]).unwrap(), want(&["a"]));
            assert_eq!(
                missing_in(&[
                    ("Chart.yaml", &chart),
                    ("requirements.yaml", &declaring(&["b"]))
                ])
                .unwrap(),
                want(&["b"])
            );
            // Without the key, Chart.yaml's stand; `null` empties them.
            assert_eq!(
                missing_in(&[("Chart.yaml", &chart), ("requirements.yaml", "# none\n")]).unwrap(),
                want(&["a"])
            );
            assert_eq!(
                missing_in(&[
                    ("Chart.yaml", &chart),
                    ("requirements.yaml", "dependencies: null\n")
                ])
                .unwrap(),
                want(&[])
            );
            // requirements.lock pins over Chart.lock.
            let files = [
                ("Chart.yaml", chart.as_str()),
                ("Chart.lock", &locking("a", "1.0.0")),
                ("requirements.lock", &locking("a", "1.2.0")),
            ];
            assert_eq!(missing_in(&files).unwrap(), [("a".into(), "1.2.0".into())]);
            assert_eq!(
                missing_in(&files[..2]).unwrap(),
                [("a".into(), "1.0.0".into())]
            );
        }

        #[test]
        fn hostile_requirements_are_refused_naming_the_file() {
            let chart = "apiVersion: v1\nname: app\n";
            // Too big to read.
            let big = format!("{}# {}\n", declaring(&["a"]), "x".repeat(1 << 20));
            let err =
                missing_in(&[("Chart.yaml", chart), ("requirements.yaml", &big)]).unwrap_err();
            assert!(
                err.starts_with("requirements.yaml: ") && err.contains("byte limit"),
                "{err}"
            );
            // Aliases that expand far beyond the text.
            let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
            for level in 1..12 {
                bomb.push_str(&format!(
                    "{}: &{} [*{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}]\n",
                    (b'a' + level) as char,
                    (b'a' + level) as char,
                    (b'a' + level - 1) as char,
                    (b'a' + level - 1) as char,
                    (b'a' + level - 1) as char,
                    (b'a' + level - 1) as char,
                    (b'a' + level - 1) as char,
                    (b'a' + level - 1) as char,
                    (b'a' + level - 1) as char,
                    (b'a' + level - 1) as char,
                    (b'a' + level - 1) as char,
                    (b'a' + level - 1) as char,
                ));
            }
            for file in ["requirements.yaml", "requirements.lock"] {
                let err = missing_in(&[("Chart.yaml", chart), (file, &bomb)]).unwrap_err();
                assert!(
                    err.starts_with(&format!("{file}: YAML aliases expand to more than")),
                    "{err}"
                );
            }
            // Not YAML of dependencies: the reader's error, naming the file.
            let err = missing_in(&[
                ("Chart.yaml", chart),
                ("requirements.yaml", "dependencies: 7\n"),
            ])
            .unwrap_err();
            assert!(
                err.starts_with("requirements.yaml: dependencies: invalid type"),
                "{err}"
            );
        }
    }
}
