//! The plugin catalog: `Plugin` resources to verified, compiled plugins.
//!
//! For each use: read the Plugin resource → fetch its reference (file,
//! `https://` with a pin, `oci://`; registry credentials from the
//! controller's `registry` Secrets) → find the signatures stored beside it →
//! verify them against the Plugin's `verify` (and the project's
//! `pluginVerification`) → compile. Verification happens before the first
//! compile and is cached by component digest and requirement; a plugin
//! without `verify` does not run. Mutable references (tags, unpinned files)
//! are resolved again every [`ControllerConfig::plugin_resolve_interval`];
//! when one now names another component, that component is verified anew
//! before it runs.
//!
//! [`ControllerConfig::plugin_resolve_interval`]: super::ControllerConfig::plugin_resolve_interval

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clru::CLruCache;
use tokio::sync::{Mutex, OnceCell};
use tokio::time::Instant;

use super::context::Context;
use super::project::Project;
use super::secrets::{self, SecretType};
use crate::api::PluginKind;
use crate::artifact::{Fetcher, PluginRef, RegistryCredentials, Store};
use crate::condition::{Reason, Stop};
use crate::digest::Digest;
use crate::plugin::{Limits, Plugin, PluginHost, World};
use crate::render::remote::PluginDescription;
use crate::trust::{self, Requirement, Signatures, TrustRoot, Verified};

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

/// The `.dockerconfigjson` texts of the controller's `registry` Secrets,
/// with the Secret each came from.
fn registry_configs(ctx: &Context) -> Vec<(String, String)> {
    ctx.secrets
        .of_type(SecretType::Registry)
        .iter()
        .filter_map(|secret| {
            secrets::value(secret, ".dockerconfigjson")
                .map(|json| (secrets::name(secret).to_owned(), json))
        })
        .collect()
}

/// The `.dockerconfigjson` texts of the controller's `registry` Secrets
/// (sent to a render server with each request).
pub(super) fn registry_secrets(ctx: &Context) -> Vec<String> {
    registry_configs(ctx)
        .into_iter()
        .map(|(_, json)| json)
        .collect()
}

/// The controller's registry credentials, checked (a malformed Secret is
/// a condition, even when a render server does the fetching).
pub(super) fn controller_registry_credentials(ctx: &Context) -> Result<RegistryCredentials, Stop> {
    let configs = registry_configs(ctx);
    registry_credentials(configs.iter().map(|(n, j)| (n.as_str(), j.as_str())))
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

/// The longest CPU deadline a Plugin resource may give its calls.
pub const MAX_PLUGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// A Plugin resource read and checked: what a renderer needs to fetch,
/// verify and compile it.
pub struct Described {
    /// Reference, world, verifications and limits.
    pub description: PluginDescription,
    /// The Plugin resource's default parameters or settings.
    pub defaults: BTreeMap<String, String>,
    /// Runs unverified (`verify.insecure: true`).
    pub insecure: bool,
}

/// Reads the Plugin resource `name` and checks it against its use (world)
/// and the project's verification rules. Touches no registry and no
/// plugin code: the controller does this even when a render server runs
/// the plugins.
pub(super) async fn describe(
    ctx: &Context,
    project: &Project,
    name: &str,
    world: World,
) -> Result<Described, Stop> {
    let resource = ctx
        .plugins
        .get_opt(name)
        .await
        .map_err(|e| Stop::new(Reason::PluginUnreadable, crate::text::chain(&e)))?
        .ok_or_else(|| {
            Stop::new(
                Reason::PluginNotFound,
                format!(
                    "plugin {name:?} is not in the catalog (no Plugin {name} in namespace {})",
                    ctx.config.namespace
                ),
            )
        })?;
    let spec = &resource.spec;
    let expected = match world {
        World::Renderer => PluginKind::Renderer,
        _ => PluginKind::Policy,
    };
    if spec.kind != expected {
        return Err(Stop::new(
            Reason::PluginKindMismatch,
            format!(
                "plugin {name:?} is a {:?}, used as a {expected:?}",
                spec.kind
            ),
        ));
    }
    let own_spec = spec.verify.clone().ok_or_else(|| {
        Stop::new(Reason::VerificationNotConfigured,
            format!(
                "plugin {name:?} has no spec.verify: every plugin must name who signs it (or say `insecure: true`, for development only)"
            ),
        )
    })?;
    let own = own_spec.requirement(Path::new("/")).map_err(|e| {
        Stop::new(
            Reason::InvalidPluginVerification,
            format!("plugin {name:?}: spec.verify: {e}"),
        )
    })?;
    let mut verify = vec![own_spec];
    if let Some(extra_spec) = project.plugin_verification() {
        let extra = extra_spec.requirement(Path::new("/")).map_err(|e| {
            Stop::new(
                Reason::InvalidPluginVerification,
                format!("project {:?}: spec.pluginVerification: {e}", project.name()),
            )
        })?;
        if own.insecure && !extra.insecure {
            return Err(Stop::new(
                Reason::InsecurePluginRefused,
                format!(
                    "plugin {name:?} is marked insecure, and project {:?} requires its plugins to be signed (spec.pluginVerification)",
                    project.name()
                ),
            ));
        }
        verify.push(extra_spec.clone());
    }
    let limits = plugin_limits(ctx.host.config().default_limits, name, spec.limits.as_ref())?;
    Ok(Described {
        description: PluginDescription {
            name: name.to_owned(),
            reference: spec.reference.clone(),
            world,
            verify,
            limits: limits.into(),
        },
        defaults: spec.defaults.clone(),
        insecure: own.insecure,
    })
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

fn plugin_limits(
    defaults: Limits,
    name: &str,
    limits: Option<&crate::api::PluginLimits>,
) -> Result<Limits, Stop> {
    let mut out = defaults;
    let Some(limits) = limits else { return Ok(out) };
    let bad = |field: &str, text: &str| {
        Stop::new(
            Reason::InvalidPluginLimits,
            format!("plugin {name:?}: limits.{field} {text:?} is invalid"),
        )
    };
    if let Some(text) = &limits.memory {
        out.memory = crate::units::parse_size(text).map_err(|_| bad("memory", text))?;
    }
    if let Some(text) = &limits.timeout {
        out.timeout = crate::units::parse_duration(text).map_err(|_| bad("timeout", text))?;
        if out.timeout > MAX_PLUGIN_TIMEOUT {
            return Err(bad("timeout", text));
        }
    }
    if let Some(text) = &limits.output_size {
        out.output = crate::units::parse_size(text).map_err(|_| bad("outputSize", text))?;
    }
    Ok(out)
}
