//! The plugin host: one wasmtime engine, its linker, the compile cache and
//! the epoch ticker; loading components into [`Plugin`]s.

use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clru::{CLruCache, CLruCacheConfig, WeightScale};
use tokio::sync::Semaphore;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::bindings::policy::PolicyPre;
use super::bindings::renderer::{Renderer as RendererBindings, RendererPre};
use super::bindings::rule_policy::exports::kiln::plugin::rules::GuestIndices as RulesIndices;
use super::cache::{CacheOutcome, CompileCache};
use super::call::{Plugin, PluginInner, Pre};
use super::config::{HostConfig, Limits};
use super::contract::{self, World};
use super::error::{PluginError, Result};
use super::state::CallState;
use crate::digest::Digest;

/// Core instances one component may create (its main module, the WASI
/// adapter and shims): a component needing more is refused at instantiation.
const MAX_CORE_INSTANCES_PER_COMPONENT: u32 = 16;
/// Linear memories one component may have; their sum is capped by
/// [`Limits::memory`] in any case.
const MAX_MEMORIES_PER_COMPONENT: u32 = 4;
/// Tables one component may have.
const MAX_TABLES_PER_COMPONENT: u32 = 8;
/// Bytes of each pooled table kept resident between calls (a Rust
/// component's tables are a few KiB).
const TABLE_KEEP_RESIDENT: usize = 64 << 10;

/// The host could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the plugin host: {message}")]
pub struct HostError {
    message: String,
}

impl HostError {
    fn new(message: impl Into<String>) -> Self {
        HostError {
            message: message.into(),
        }
    }
}

/// Runs plugins. Cheap to clone; all clones share one engine, one compile
/// cache and one concurrency limit. Safe to use from many tasks at once.
#[derive(Clone)]
pub struct PluginHost {
    inner: Arc<HostInner>,
}

pub(super) struct HostInner {
    pub(super) engine: Engine,
    linker: Linker<CallState>,
    cache: Option<CompileCache>,
    compiled: Mutex<CLruCache<Digest, Component, std::hash::RandomState, ByImageSize>>,
    pub(super) permits: Arc<Semaphore>,
    /// The memory budget, one permit per MiB ([`HostConfig::memory_budget`]).
    pub(super) memory: Arc<Semaphore>,
    pub(super) config: HostConfig,
    ticker: Option<Ticker>,
}

impl std::fmt::Debug for PluginHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginHost")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// Weighs compiled components by the size of their machine code.
pub(super) struct ByImageSize;

impl WeightScale<Digest, Component> for ByImageSize {
    fn weight(&self, _digest: &Digest, component: &Component) -> usize {
        let range = component.image_range();
        (range.end as usize).saturating_sub(range.start as usize)
    }
}

/// Units of [`HostConfig::memory_budget`]: a call reserves its memory limit
/// rounded up to whole MiB.
pub(super) const BUDGET_UNIT: u64 = 1 << 20;

/// Advances the engine's epoch on a fixed tick, which is what turns
/// [`Limits::timeout`] into a trap in a runaway plugin.
struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    fn start(engine: Engine, tick: Duration) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("kiln-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    engine.increment_epoch();
                }
            })?;
        Ok(Ticker {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl PluginHost {
    /// Starts a host: configures the engine (component model, epoch
    /// interruption, pooling allocator), links the contract's imports and an
    /// empty WASI, opens the compile cache and starts the epoch ticker.
    pub fn new(config: HostConfig) -> Result<Self, HostError> {
        if config.max_concurrency == 0 {
            return Err(HostError::new("max_concurrency must be at least 1"));
        }
        // Calls reserve whole MiB, rounded up; the budget holds whole MiB,
        // rounded down: the largest call must fit in those terms, or it
        // would wait for ever.
        let budget_units =
            (config.memory_budget / BUDGET_UNIT).min(Semaphore::MAX_PERMITS as u64) as usize;
        if config.max_memory.div_ceil(BUDGET_UNIT) > budget_units as u64 {
            return Err(HostError::new(format!(
                "the plugin memory budget ({} bytes) is smaller than the largest memory limit a plugin may have ({} bytes)",
                config.memory_budget, config.max_memory
            )));
        }
        let mut wasm = Config::new();
        wasm.wasm_component_model(true).epoch_interruption(true);
        if config.perf_map {
            wasm.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        if config.pooling {
            // Twice the concurrency: a call abandoned at its wall-clock limit
            // keeps its slot until its thread ends, and must not starve the
            // calls that take its permit.
            let n = 2 * config.max_concurrency as u32;
            let mut pool = PoolingAllocationConfig::default();
            // A Rust component holds a handful of core instances (the main
            // module plus adapter shims), one or two memories and tables.
            pool.total_component_instances(n)
                .total_core_instances(n * MAX_CORE_INSTANCES_PER_COMPONENT)
                .total_memories(n * MAX_MEMORIES_PER_COMPONENT)
                .total_tables(n * MAX_TABLES_PER_COMPONENT)
                .max_core_instances_per_component(MAX_CORE_INSTANCES_PER_COMPONENT)
                .max_memories_per_component(MAX_MEMORIES_PER_COMPONENT)
                .max_tables_per_component(MAX_TABLES_PER_COMPONENT)
                .max_memory_size(config.max_memory as usize);
            // Zeroed in place between calls rather than handed back to the
            // kernel: the next call in the slot takes no page faults there.
            let keep =
                usize::try_from(config.keep_resident.min(config.max_memory)).unwrap_or(usize::MAX);
            pool.linear_memory_keep_resident(keep)
                .table_keep_resident(keep.min(TABLE_KEEP_RESIDENT));
            wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        }
        let engine = Engine::new(&wasm).map_err(|e| HostError::new(format!("{e:#}")))?;

        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|e| HostError::new(format!("{e:#}")))?;
        super::state::link_due_timers(&mut linker).map_err(|e| HostError::new(format!("{e:#}")))?;
        RendererBindings::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |s| s)
            .map_err(|e| HostError::new(format!("{e:#}")))?;
        // A policy's `cluster` (a renderer importing it is answered
        // `no-cluster`: renders never see the destination).
        super::bindings::policy::kiln::plugin::cluster::add_to_linker::<
            CallState,
            HasSelf<CallState>,
        >(&mut linker, |s| s)
        .map_err(|e| HostError::new(format!("{e:#}")))?;

        let cache = match &config.compile_cache {
            Some(dir) => Some(
                CompileCache::open(dir, &engine)
                    .map_err(|e| HostError::new(format!("compile cache: {e}")))?,
            ),
            None => None,
        };
        let ticker = Ticker::start(engine.clone(), config.epoch_tick)
            .map_err(|e| HostError::new(format!("epoch ticker: {e}")))?;
        Ok(PluginHost {
            inner: Arc::new(HostInner {
                engine,
                linker,
                cache,
                compiled: Mutex::new(CLruCache::with_config(
                    CLruCacheConfig::new(
                        NonZeroUsize::new(config.compiled_size as usize)
                            .unwrap_or(NonZeroUsize::MIN),
                    )
                    .with_scale(ByImageSize),
                )),
                permits: Arc::new(Semaphore::new(config.max_concurrency)),
                memory: Arc::new(Semaphore::new(budget_units)),
                config,
                ticker: Some(ticker),
            }),
        })
    }

    /// The configuration the host runs with.
    pub fn config(&self) -> &HostConfig {
        &self.inner.config
    }

    /// Bytes of [`HostConfig::memory_budget`] reserved by running calls
    /// (including calls abandoned at their wall-clock limit whose thread
    /// has not ended yet).
    pub fn memory_reserved(&self) -> u64 {
        let total =
            (self.inner.config.memory_budget / BUDGET_UNIT).min(Semaphore::MAX_PERMITS as u64);
        let free = self.inner.memory.available_permits() as u64;
        total.saturating_sub(free) * BUDGET_UNIT
    }

    /// Loads a component file; the plugin is named after the file stem.
    pub fn load_file(&self, path: &Path, world: World, limits: Option<Limits>) -> Result<Plugin> {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        let bytes = std::fs::read(path).map_err(|source| PluginError::Read {
            plugin: name.clone(),
            path: path.to_path_buf(),
            source,
        })?;
        self.load(&name, &bytes, world, limits)
    }

    /// Loads a component: checks the contract, compiles it (or loads it from
    /// the compile cache) and links it, ready for calls.
    pub fn load(
        &self,
        name: &str,
        bytes: &[u8],
        world: World,
        limits: Option<Limits>,
    ) -> Result<Plugin> {
        let started = Instant::now();
        let plugin = || name.to_owned();
        let limits = limits.unwrap_or(self.inner.config.default_limits);
        if limits.memory > self.inner.config.max_memory {
            return Err(PluginError::InvalidLimits {
                plugin: plugin(),
                detail: format!(
                    "memory limit {} exceeds the host's maximum of {} bytes",
                    limits.memory, self.inner.config.max_memory
                ),
            });
        }
        let info = contract::inspect(bytes).map_err(|e| PluginError::NotAComponent {
            plugin: plugin(),
            reason: e.to_string(),
        })?;
        contract::check(&info, world).map_err(|detail| PluginError::ContractMismatch {
            plugin: plugin(),
            detail,
        })?;
        let (component, outcome) =
            self.compile(bytes, &info.digest)
                .map_err(|e| PluginError::Compile {
                    plugin: plugin(),
                    message: format!("{e:#}"),
                })?;
        let instance_pre = self.inner.linker.instantiate_pre(&component).map_err(|e| {
            PluginError::ContractMismatch {
                plugin: plugin(),
                detail: format!("{e:#}"),
            }
        })?;
        let pre = match world {
            World::Renderer => RendererPre::new(instance_pre).map(Pre::Renderer),
            World::Policy => info
                .reports_rules
                .then(|| RulesIndices::new(&instance_pre))
                .transpose()
                .and_then(|rules| {
                    PolicyPre::new(instance_pre).map(|pre| Pre::Policy { pre, rules })
                }),
        }
        .map_err(|e| PluginError::ContractMismatch {
            plugin: plugin(),
            detail: format!("{e:#}"),
        })?;
        tracing::debug!(plugin = name, digest = %info.digest, ?outcome, elapsed = ?started.elapsed(), "plugin loaded");
        Ok(Plugin::from(PluginInner {
            name: name.into(),
            digest: info.digest,
            world,
            limits,
            outcome,
            pre,
            host: self.inner.clone(),
        }))
    }

    fn compile(
        &self,
        bytes: &[u8],
        digest: &Digest,
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let memo = || {
            self.inner
                .compiled
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        };
        if let Some(component) = memo().get(digest) {
            return Ok((component.clone(), CacheOutcome::Hit));
        }
        let (component, outcome) = match &self.inner.cache {
            Some(cache) => cache.load_or_compile(&self.inner.engine, bytes, digest)?,
            None => (
                Component::new(&self.inner.engine, bytes)?,
                CacheOutcome::Compiled,
            ),
        };
        // A component larger than the whole memo is simply not kept.
        let _ = memo().put_with_weight(*digest, component.clone());
        Ok((component, outcome))
    }
}

impl Drop for HostInner {
    fn drop(&mut self) {
        // Stop the ticker thread before the engine goes away.
        self.ticker.take();
    }
}
