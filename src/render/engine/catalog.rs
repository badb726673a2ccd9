//! The plugin catalog: plugins described by the controller
//! ([`PluginDescription`]) to verified, compiled plugins.
//!
//! For each use: fetch the reference (file, `https://` with a pin,
//! `oci://`; registry credentials from the request) → find the signatures
//! stored beside it → verify them against the description's requirements
//! → compile. Verification happens before the first compile and is cached
//! by component digest and requirement; a plugin without verification does
//! not run. Mutable references (tags, unpinned files) are resolved again
//! every [`CatalogConfig::resolve_interval`]; when one now names another
//! component, that component is verified anew before it runs.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clru::CLruCache;
use tokio::sync::{Mutex, OnceCell};
use tokio::time::Instant;

use crate::artifact::{Fetcher, PluginRef, RegistryCredentials, Store};
use crate::condition::{Reason, Stop};
use crate::digest::Digest;
use crate::plugin::{Limits, Plugin, PluginHost};
use crate::render::remote::PluginDescription;
use crate::trust::{self, Requirement, Signatures, TrustRoot, Verified};

/// The longest CPU deadline a Plugin resource may give its calls.
pub const MAX_PLUGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// Where plugins come from and how they are trusted.
#[derive(Clone, Debug)]
pub struct CatalogConfig {
    /// The content-addressed store of fetched components.
    pub store: PathBuf,
    /// The Sigstore trusted root for bundles; `None`: the public-good root.
    pub trusted_root: Option<PathBuf>,
    /// How often a mutable reference (a tag, an unpinned file) is resolved
    /// again.
    pub resolve_interval: Duration,
    /// Deadline of one registry or HTTPS operation.
    pub timeout: Duration,
    /// Deadline of a whole load: fetch, signatures, verification and
    /// compile (a registry answering each request slowly must not hold the
    /// plugin for hours). Default: 5 min.
    pub load_timeout: Duration,
    /// Whether Plugin references may name files on the controller's own
    /// filesystem. Default `false`: anyone who writes Plugins could make
    /// the controller read (and hash into a condition) any file it can
    /// read. For local trials and tests only.
    pub allow_file_plugins: bool,
}

impl Default for CatalogConfig {
    fn default() -> Self {
        Self {
            store: std::env::temp_dir().join("kiln-plugins"),
            trusted_root: None,
            resolve_interval: Duration::from_secs(60),
            timeout: Duration::from_secs(30),
            load_timeout: Duration::from_secs(300),
            allow_file_plugins: false,
        }
    }
}

struct Entry {
    at: Instant,
    digest: Digest,
    plugin: Plugin,
}

/// One catalog key's loaded plugin, behind its own lock: held while the
/// plugin is fetched, verified and compiled, so that loads of one reference
/// are a single flight while loads of other references go on.
type Slot = Arc<Mutex<Option<Entry>>>;

/// How many loaded plugins (per reference, world, limits and signers) the
/// catalog keeps; the least recently used go first.
pub const CATALOG_ENTRIES: usize = 256;
/// How many verification results the catalog remembers.
pub const VERIFIED_ENTRIES: usize = 1024;

/// Loaded plugins and verification results.
pub struct Catalog {
    config: CatalogConfig,
    root: OnceCell<Arc<TrustRoot>>,
    slots: std::sync::Mutex<CLruCache<String, Slot>>,
    verified: std::sync::Mutex<CLruCache<(Digest, String), Verified>>,
}

impl Catalog {
    /// An empty catalog.
    pub fn new(config: CatalogConfig) -> Self {
        Self {
            config,
            root: OnceCell::new(),
            slots: std::sync::Mutex::new(CLruCache::new(bounded(CATALOG_ENTRIES))),
            verified: std::sync::Mutex::new(CLruCache::new(bounded(VERIFIED_ENTRIES))),
        }
    }

    async fn root(&self) -> Result<Arc<TrustRoot>, Stop> {
        self.root
            .get_or_try_init(|| async {
                let path = self.config.trusted_root.clone();
                let loaded = tokio::task::spawn_blocking(move || match &path {
                    Some(path) => TrustRoot::from_file(path),
                    None => TrustRoot::public_good(),
                })
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
                Ok::<_, String>(Arc::new(loaded))
            })
            .await
            .cloned()
            .map_err(|e| Stop::new(Reason::TrustedRootUnavailable, e))
    }

    fn remembered(&self, digest: &Digest, requirement: &str) -> bool {
        self.verified
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(*digest, requirement.to_owned()))
            .is_some()
    }

    fn remember(&self, digest: Digest, requirement: String, verified: Verified) {
        self.verified
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .put((digest, requirement), verified);
    }

    /// The slot of `key`, made if missing. The catalog's own lock is held
    /// only for this lookup, never across I/O.
    fn slot(&self, key: &str) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = slots.get(key) {
            return slot.clone();
        }
        let slot = Slot::default();
        slots.put(key.to_owned(), slot.clone());
        slot
    }
}

fn bounded(n: usize) -> std::num::NonZeroUsize {
    std::num::NonZeroUsize::new(n).unwrap_or(std::num::NonZeroUsize::MIN)
}

/// Whether a reference always names the same bytes.
fn immutable(reference: &PluginRef) -> bool {
    match reference {
        PluginRef::Oci { digest, .. } => digest.is_some(),
        PluginRef::File { sha256, .. } => sha256.is_some(),
        _ => true,
    }
}

/// Registry credentials from Docker config texts (each a
/// `kubernetes.io/dockerconfigjson` Secret's `.dockerconfigjson`), named
/// for messages.
pub fn registry_credentials<'a>(
    configs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<RegistryCredentials, Stop> {
    let mut all = RegistryCredentials::none();
    for (name, json) in configs {
        let found = RegistryCredentials::from_docker_config(json).map_err(|e| {
            Stop::new(
                Reason::InvalidRegistrySecret,
                format!("registry Secret {name}: {e}"),
            )
        })?;
        all.merge(found);
    }
    Ok(all)
}

impl Catalog {
    /// Fetches, verifies (before the first compile) and compiles the
    /// plugin `described`, within [`CatalogConfig::load_timeout`]. Loads
    /// of one reference are a single flight.
    pub async fn materialize(
        &self,
        host: &PluginHost,
        registry: &RegistryCredentials,
        described: &PluginDescription,
    ) -> Result<Plugin, Stop> {
        let deadline = self.config.load_timeout;
        let name = &described.name;
        tokio::time::timeout(
            deadline,
            self.materialize_unbounded(host, registry, described),
        )
        .await
        .map_err(|_| {
            Stop::new(
                Reason::PluginFetchFailed,
                format!("plugin {name:?}: loading it took longer than {deadline:?}"),
            )
        })?
    }

    async fn materialize_unbounded(
        &self,
        host: &PluginHost,
        registry: &RegistryCredentials,
        described: &PluginDescription,
    ) -> Result<Plugin, Stop> {
        let catalog = self;
        let name = described.name.as_str();
        let world = described.world;
        let reference = PluginRef::parse(&described.reference).map_err(|e| {
            Stop::new(
                Reason::InvalidPluginReference,
                format!("plugin {name:?}: spec.ref: {e}"),
            )
        })?;
        if matches!(reference, PluginRef::File { .. }) && !catalog.config.allow_file_plugins {
            return Err(Stop::new(
                Reason::FilePluginNotAllowed,
                format!(
                    "plugin {name:?}: spec.ref names a file on the renderer's filesystem; \
                     use oci:// or https://, or start the controller (or render server) with --allow-file-plugins (development only)"
                ),
            ));
        }
        let mut requirements = Vec::new();
        for spec in &described.verify {
            requirements.push(spec.requirement(Path::new("/")).map_err(|e| {
                Stop::new(
                    Reason::InvalidPluginVerification,
                    format!("plugin {name:?}: verify: {e}"),
                )
            })?);
        }
        if requirements.is_empty() {
            return Err(Stop::new(
                Reason::VerificationNotConfigured,
                format!("plugin {name:?} names no verification"),
            ));
        }
        let mut limits: Limits = described.limits.into();
        limits.timeout = limits.timeout.min(MAX_PLUGIN_TIMEOUT);
        let key = format!(
            "{}|{world:?}|{limits:?}|{requirements:?}",
            described.reference
        );

        let slot = catalog.slot(&key);
        let mut entry_slot = slot.lock().await;
        let previous = entry_slot.as_ref().map(|e| e.digest);
        if let Some(entry) = entry_slot.as_ref()
            && (immutable(&reference) || entry.at.elapsed() < catalog.config.resolve_interval)
        {
            return Ok(entry.plugin.clone());
        }
        let store_dir = &catalog.config.store;
        let store = Store::open(store_dir).map_err(|e| {
            Stop::new(
                Reason::PluginStoreUnavailable,
                format!(
                    "plugin store {}: {}",
                    store_dir.display(),
                    crate::text::chain(&e)
                ),
            )
        })?;
        let fetcher = Fetcher::new(store, registry.clone(), catalog.config.timeout);
        let fetched = fetcher.fetch(&reference).await.map_err(|e| {
            Stop::new(
                Reason::PluginFetchFailed,
                format!("plugin {name:?}: {}", crate::text::chain(&e)),
            )
        })?;
        if let (Some(entry), Some(was)) = (entry_slot.as_mut(), previous)
            && was == fetched.digest
        {
            entry.at = Instant::now();
            return Ok(entry.plugin.clone());
        }
        if let Some(was) = previous {
            tracing::warn!(plugin = name, reference = %described.reference, %was, now = %fetched.digest,
                "the plugin's reference now names another component; verifying it");
        }

        // Verify before the first compile.
        let mut signatures: Option<Signatures> = None;
        for requirement in &requirements {
            let requirement_key = format!("{requirement:?}");
            if catalog.remembered(&fetched.digest, &requirement_key) {
                continue;
            }
            if signatures.is_none() && !requirement.insecure {
                signatures = Some(
                    Signatures::beside(&fetcher, &reference, &fetched)
                        .await
                        .map_err(|e| {
                            Stop::new(
                                Reason::PluginFetchFailed,
                                format!("plugin {name:?}: signatures: {}", crate::text::chain(&e)),
                            )
                        })?,
                );
            }
            let verified = verify(
                catalog,
                &fetched.bytes,
                signatures.clone().unwrap_or_default(),
                requirement.clone(),
            )
            .await
            .map_err(|e| {
                Stop::new(
                    Reason::SignatureVerificationFailed,
                    format!(
                        "plugin {name:?} ({} = component {}) refused: {e}",
                        fetched.resolved, fetched.digest
                    ),
                )
            })?;
            if let Verified::Insecure { digest } = &verified {
                tracing::warn!(plugin = name, %digest, "plugin runs UNVERIFIED (spec.verify.insecure: true)");
            }
            catalog.remember(fetched.digest, requirement_key, verified);
        }

        let host = host.clone();
        let plugin_name = name.to_owned();
        let bytes = fetched.bytes;
        let plugin = tokio::task::spawn_blocking(move || {
            host.load(&plugin_name, &bytes, world, Some(limits))
        })
        .await
        .map_err(|e| Stop::new(Reason::PluginLoadFailed, e.to_string()))?
        .map_err(|e| {
            Stop::new(
                Reason::PluginLoadFailed,
                format!("plugin {name:?}: {}", crate::text::chain(&e)),
            )
        })?;
        *entry_slot = Some(Entry {
            at: Instant::now(),
            digest: fetched.digest,
            plugin: plugin.clone(),
        });
        Ok(plugin)
    }
}

async fn verify(
    catalog: &Catalog,
    bytes: &[u8],
    signatures: Signatures,
    requirement: Requirement,
) -> Result<Verified, String> {
    if requirement.insecure {
        return Ok(Verified::Insecure {
            digest: Digest::of(bytes),
        });
    }
    let root = catalog.root().await.map_err(|s| s.message)?;
    let bytes = bytes.to_vec();
    tokio::task::spawn_blocking(move || trust::verify(&bytes, &signatures, &requirement, &root))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}
