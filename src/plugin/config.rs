//! Host configuration and per-plugin limits.

use std::path::PathBuf;
use std::time::Duration;

/// What one plugin call may use. Every call runs in a fresh store with these
/// limits; exceeding one ends the call with an error naming the plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Linear memory the plugin may grow to, in bytes. Default: 256 MiB.
    pub memory: u64,
    /// Wall-clock CPU deadline of one call, enforced by epoch interruption
    /// (granularity: [`HostConfig::epoch_tick`]). Default: 10 s.
    pub timeout: Duration,
    /// Total bytes of manifests one call may return. Default: 32 MiB.
    pub output: u64,
    /// Bytes of log messages (and captured stdout/stderr) one call may emit;
    /// the rest is dropped with one warning. Default: 64 KiB.
    pub log: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory: 256 << 20,
            timeout: Duration::from_secs(10),
            output: 32 << 20,
            log: 64 << 10,
        }
    }
}

/// Configuration of a [`PluginHost`](super::PluginHost).
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Plugin calls that may run at once; further calls wait. Also sizes the
    /// pooling allocator. Default: 2 per available core.
    pub max_concurrency: usize,
    /// The largest memory limit any plugin may be given: the size of a
    /// memory slot in the pooling allocator. Default: 512 MiB.
    pub max_memory: u64,
    /// Memory all running plugin calls may hold together: a call reserves
    /// its [`Limits::memory`] from this budget before it starts and waits
    /// while the budget is spent, so that `memory_budget` bounds plugin
    /// memory whatever the concurrency and the plugins' limits. Must be at
    /// least [`max_memory`](Self::max_memory). Default: 1 GiB.
    pub memory_budget: u64,
    /// Bytes of compiled plugins kept in memory (least recently used go
    /// first; the on-disk compile cache makes reloading cheap). Default:
    /// 256 MiB.
    pub compiled_size: u64,
    /// Directory of the on-disk compile cache (created `0700` if missing;
    /// refused if another user owns it or group or others may write it).
    /// `None` keeps compiled plugins in memory only. Default: `None`.
    pub compile_cache: Option<PathBuf>,
    /// How often the epoch ticker advances, i.e. the resolution of
    /// [`Limits::timeout`]. Default: 10 ms.
    pub epoch_tick: Duration,
    /// Use wasmtime's pooling instance allocator (pre-reserved slots, the
    /// fastest instantiation). Default: `true`.
    pub pooling: bool,
    /// Bytes at the start of each pooled linear memory kept resident when a
    /// call ends: zeroed in place instead of returned to the kernel, so the
    /// next call in that slot takes no page faults there (a render of a
    /// large Helm chart touches 3–6 MiB: benches/helm.rs, 500 objects, 5.3 MiB). Idle memory outside
    /// [`memory_budget`](Self::memory_budget): at most this much per
    /// memory slot ever used, and there are `8 × max_concurrency` slots
    /// (slots go to the plugin that last used them, so in practice one
    /// per plugin and concurrent call). Capped at
    /// [`max_memory`](Self::max_memory); `0` returns it all. Only with
    /// [`pooling`](Self::pooling). Default: 8 MiB.
    pub keep_resident: u64,
    /// Limits of plugins loaded without their own. Default: [`Limits::default`].
    pub default_limits: Limits,
    /// How long past its [`Limits::timeout`] an async call may run before
    /// the host gives up on it (reporting a timeout and freeing its permit)
    /// even if the epoch deadline has not stopped it, e.g. while it is in
    /// a host function. Default: 2 s.
    pub wall_clock_grace: Duration,
    /// Write a perf map (`/tmp/perf-PID.map`, wasmtime's
    /// `ProfilingStrategy::PerfMap`) naming every compiled plugin function,
    /// so that `perf` profiles, and valgrind's per-address counts, show
    /// plugins' functions by name (`docs/benchmarks.md`, "helm plugin").
    /// For profiling only. Default: `false`.
    pub perf_map: bool,
}

impl Default for HostConfig {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        HostConfig {
            max_concurrency: 2 * cores,
            max_memory: 512 << 20,
            memory_budget: 1 << 30,
            compiled_size: 256 << 20,
            compile_cache: None,
            epoch_tick: Duration::from_millis(10),
            pooling: true,
            keep_resident: 8 << 20,
            default_limits: Limits::default(),
            wall_clock_grace: Duration::from_secs(2),
            perf_map: false,
        }
    }
}
