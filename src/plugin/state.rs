//! What a plugin's store holds during one call, and the host side of the
//! interfaces the contract imports (`source`, `log`, and a policy's
//! `cluster`).

use std::sync::Arc;
use std::time::Duration;

use wasmtime::ResourceLimiter;
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::p2::{DynPollable, Pollable, subscribe};
use wasmtime_wasi::{
    HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView,
};

use super::bindings::policy::kiln::plugin::cluster as wit_cluster;
use super::bindings::renderer::kiln::plugin::{log, source as wit, types};
use super::cluster::{Answer, ClusterKey, ClusterReads};
use super::config::Limits;
use crate::source::{EntryKind, Escape, SourceError, SourcePath, SourceView};

/// Store data of one call.
pub(crate) struct CallState {
    plugin: Arc<str>,
    view: Arc<dyn SourceView>,
    /// What a policy may read of its destination; `None`: no cluster.
    cluster: Option<Arc<ClusterReads>>,
    wasi: WasiCtx,
    table: ResourceTable,
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
    pub(crate) limiter: MemoryLimiter,
    /// The first attempt to leave the source tree, if any: it fails the call.
    pub(crate) denied: Option<(String, Escape)>,
    log_budget: usize,
}

impl CallState {
    pub(crate) fn new(
        plugin: Arc<str>,
        view: Arc<dyn SourceView>,
        cluster: Option<Arc<ClusterReads>>,
        limits: &Limits,
    ) -> Self {
        let stdout = MemoryOutputPipe::new(limits.log);
        let stderr = MemoryOutputPipe::new(limits.log);
        CallState {
            plugin,
            view,
            cluster,
            wasi: empty_wasi(stdout.clone(), stderr.clone()),
            table: {
                // Host-side memory a guest can make the host hold, outside
                // its linear memory: bounded too.
                let mut table = ResourceTable::new();
                table.set_max_capacity(MAX_RESOURCES);
                table
            },
            stdout,
            stderr,
            limiter: MemoryLimiter::new(limits.memory),
            denied: None,
            log_budget: limits.log,
        }
    }

    /// Forwards what the plugin wrote to stdout/stderr to the log and
    /// returns the tail of stderr (where a panic message lands).
    pub(crate) fn drain_stdio(&self) -> Option<String> {
        let plugin = &*self.plugin;
        for line in String::from_utf8_lossy(&self.stdout.contents()).lines() {
            tracing::info!(target: "kiln::plugin::guest", plugin, stream = "stdout", "{line}");
        }
        let stderr = String::from_utf8_lossy(&self.stderr.contents()).into_owned();
        for line in stderr.lines() {
            tracing::warn!(target: "kiln::plugin::guest", plugin, stream = "stderr", "{line}");
        }
        let tail: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        (!tail.is_empty()).then(|| tail[tail.len().saturating_sub(3)..].join(" / "))
    }

    fn source_error(&mut self, error: SourceError) -> wit::SourceError {
        match error {
            SourceError::NotFound(p) => wit::SourceError::NotFound(p.to_string()),
            SourceError::IsADirectory(p) => wit::SourceError::IsADirectory(p.to_string()),
            SourceError::NotADirectory(p) => wit::SourceError::NotADirectory(p.to_string()),
            SourceError::Denied { path, escape } => {
                tracing::warn!(plugin = &*self.plugin, %path, %escape, "plugin tried to leave the source tree");
                if self.denied.is_none() {
                    self.denied = Some((path.clone(), escape));
                }
                wit::SourceError::Denied(path)
            }
            SourceError::TooLarge { path, .. } => wit::SourceError::TooLarge(path.to_string()),
            error @ SourceError::TooManyReads { .. } => {
                tracing::warn!(plugin = &*self.plugin, error = %error, "plugin read too many paths");
                wit::SourceError::Io(error.to_string())
            }
            // I/O details stay on the host: they may name host paths.
            error @ SourceError::Io { .. } => {
                tracing::warn!(plugin = &*self.plugin, error = %error, "source read failed");
                wit::SourceError::Io("the host could not read the source".to_owned())
            }
        }
    }

    fn path(&mut self, raw: &str) -> Result<SourcePath, wit::SourceError> {
        SourcePath::parse(raw).map_err(|e| self.source_error(e.into()))
    }
}

/// A WASI with nothing in it: no arguments, no environment, no preopened
/// directories, no network (every socket address denied, no name lookup),
/// stdin closed, stdout/stderr captured into bounded buffers, clocks frozen
/// and randomness deterministic, so a plugin's output depends on its inputs
/// alone.
fn empty_wasi(stdout: MemoryOutputPipe, stderr: MemoryOutputPipe) -> WasiCtx {
    WasiCtxBuilder::new()
        .stdout(stdout)
        .stderr(stderr)
        .wall_clock(FrozenClock)
        .monotonic_clock(FrozenClock)
        .secure_random(wasmtime_wasi::Deterministic::new(vec![
            0x6b, 0x69, 0x6c, 0x6e,
        ]))
        .insecure_random(wasmtime_wasi::Deterministic::new(vec![
            0x6b, 0x69, 0x6c, 0x6e,
        ]))
        .insecure_random_seed(0)
        .max_random_size(MAX_RANDOM_BYTES)
        .allow_ip_name_lookup(false)
        .allow_tcp(false)
        .allow_udp(false)
        .socket_addr_check(|_, _| Box::pin(async { false }))
        .build()
}

/// A clock that always reads zero (the Unix epoch, for the wall clock).
struct FrozenClock;

/// The `wasi:clocks/monotonic-clock` a plugin really gets, shadowing
/// wasmtime-wasi's: it reads zero, and every timer it hands out is already
/// due. wasmtime-wasi's timers sleep on the host thread that runs the call,
/// where epoch interruption cannot reach, so `std::thread::sleep` in a
/// guest would hold a host thread and a concurrency permit for as long as it
/// asked. With due timers a sleep returns at once, and a guest that waits
/// for the clock to move spins until its CPU deadline traps it.
struct DueTimers<'a> {
    table: &'a mut ResourceTable,
}

struct DueTimersData;

impl HasData for DueTimersData {
    type Data<'a> = DueTimers<'a>;
}

/// A timer that is always due.
struct Due;

#[async_trait::async_trait]
impl Pollable for Due {
    async fn ready(&mut self) {}
}

impl DueTimers<'_> {
    fn due(&mut self) -> wasmtime::Result<Resource<DynPollable>> {
        let timer = self.table.push(Due)?;
        subscribe(self.table, timer)
    }
}

impl monotonic_clock::Host for DueTimers<'_> {
    fn now(&mut self) -> wasmtime::Result<monotonic_clock::Instant> {
        Ok(0)
    }

    fn resolution(&mut self) -> wasmtime::Result<monotonic_clock::Duration> {
        Ok(1_000_000_000)
    }

    fn subscribe_instant(
        &mut self,
        _when: monotonic_clock::Instant,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        self.due()
    }

    fn subscribe_duration(
        &mut self,
        _duration: monotonic_clock::Duration,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        self.due()
    }
}

/// Replaces the monotonic clock of the WASI already in `linker` with
/// [`DueTimers`].
pub(crate) fn link_due_timers(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let linked =
        monotonic_clock::add_to_linker::<CallState, DueTimersData>(linker, |state| DueTimers {
            table: &mut state.table,
        });
    linker.allow_shadowing(false);
    linked
}

impl HostWallClock for FrozenClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Caps the linear memory of a whole call — every memory of every core
/// instance of the component together, not each memory on its own — and
/// remembers whether the cap was hit, so that the trap that usually follows
/// (an allocation failure aborts) is reported as out-of-memory rather than
/// as a generic trap.
pub(crate) struct MemoryLimiter {
    pub(crate) limit: u64,
    /// Bytes of linear memory the call's instances hold together.
    pub(crate) used: u64,
    pub(crate) exceeded: bool,
}

impl MemoryLimiter {
    pub(crate) fn new(limit: u64) -> Self {
        MemoryLimiter {
            limit,
            used: 0,
            exceeded: false,
        }
    }
}

/// Resources (pollables, streams) a call may hold at once on the host.
const MAX_RESOURCES: usize = 10_000;
/// Random bytes one WASI call may ask for.
const MAX_RANDOM_BYTES: u64 = 1 << 20;

/// Table elements a plugin may have: generous for any real component.
const MAX_TABLE_ELEMENTS: usize = 100_000;

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let growth = desired.saturating_sub(current) as u64;
        let total = self.used.saturating_add(growth);
        if total > self.limit {
            self.exceeded = true;
            return Ok(false);
        }
        self.used = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

impl types::Host for CallState {}

impl wit_cluster::Host for CallState {
    fn get(
        &mut self,
        key: wit_cluster::ObjectKey,
    ) -> Result<Option<String>, wit_cluster::ClusterError> {
        let (reads, key) = self.cluster_key(key)?;
        cluster_answer(reads.get(key))
    }

    fn exists(&mut self, key: wit_cluster::ObjectKey) -> Result<bool, wit_cluster::ClusterError> {
        let (reads, key) = self.cluster_key(key)?;
        cluster_answer(reads.exists(key))
    }
}

impl CallState {
    /// The review's cluster reads and the key the guest named, checked.
    fn cluster_key(
        &self,
        key: wit_cluster::ObjectKey,
    ) -> Result<(Arc<ClusterReads>, ClusterKey), wit_cluster::ClusterError> {
        let reads = self
            .cluster
            .clone()
            .ok_or(wit_cluster::ClusterError::NoCluster)?;
        let key = ClusterKey::new(
            &key.api_version,
            &key.kind,
            key.namespace.as_deref(),
            &key.name,
        )
        .map_err(|e| wit_cluster::ClusterError::NotPermitted(format!("not an object key: {e}")))?;
        Ok((reads, key))
    }
}

/// A view's answer as the contract gives it.
fn cluster_answer<T>(answer: Answer<T>) -> Result<T, wit_cluster::ClusterError> {
    match answer {
        Answer::Known(value) => Ok(value),
        Answer::Pending => Err(wit_cluster::ClusterError::Pending),
        Answer::Unavailable(reason) => Err(wit_cluster::ClusterError::Unavailable(reason)),
    }
}

impl wit::Host for CallState {
    fn read_file(&mut self, path: String) -> Result<Vec<u8>, wit::SourceError> {
        let path = self.path(&path)?;
        self.view.read_file(&path).map_err(|e| self.source_error(e))
    }

    fn read_dir(&mut self, path: String) -> Result<Vec<wit::DirEntry>, wit::SourceError> {
        let path = self.path(&path)?;
        let entries = self
            .view
            .read_dir(&path)
            .map_err(|e| self.source_error(e))?;
        Ok(entries
            .into_iter()
            .map(|e| wit::DirEntry {
                name: e.name,
                kind: entry_kind(e.kind),
            })
            .collect())
    }

    fn stat(&mut self, path: String) -> Result<Option<wit::Metadata>, wit::SourceError> {
        let path = self.path(&path)?;
        let metadata = self.view.stat(&path).map_err(|e| self.source_error(e))?;
        Ok(metadata.map(|m| wit::Metadata {
            kind: entry_kind(m.kind),
            size: m.size,
        }))
    }
}

fn entry_kind(kind: EntryKind) -> wit::EntryKind {
    match kind {
        EntryKind::File => wit::EntryKind::File,
        EntryKind::Directory => wit::EntryKind::Directory,
    }
}

impl log::Host for CallState {
    fn log(&mut self, level: log::Level, message: String) {
        let plugin = &*self.plugin;
        if self.log_budget == 0 {
            return;
        }
        let message = if message.len() > self.log_budget {
            let mut cut = self.log_budget;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            self.log_budget = 0;
            tracing::warn!(target: "kiln::plugin::guest", plugin, "log limit reached; further messages of this call are dropped");
            &message[..cut]
        } else {
            self.log_budget -= message.len();
            &message[..]
        };
        match level {
            log::Level::Trace => {
                tracing::trace!(target: "kiln::plugin::guest", plugin, "{message}")
            }
            log::Level::Debug => {
                tracing::debug!(target: "kiln::plugin::guest", plugin, "{message}")
            }
            log::Level::Info => tracing::info!(target: "kiln::plugin::guest", plugin, "{message}"),
            log::Level::Warn => tracing::warn!(target: "kiln::plugin::guest", plugin, "{message}"),
            log::Level::Error => {
                tracing::error!(target: "kiln::plugin::guest", plugin, "{message}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_limit_holds_for_all_memories_of_a_call_together() {
        let mut limiter = MemoryLimiter::new(100);
        // Two memories of 60 each: each alone is under the limit, together
        // they are not.
        assert!(limiter.memory_growing(0, 60, None).unwrap());
        assert!(!limiter.memory_growing(0, 60, None).unwrap());
        assert!(limiter.exceeded);
        // Growing the first by what is left still works.
        assert!(limiter.memory_growing(60, 100, None).unwrap());
        assert!(!limiter.memory_growing(100, 101, None).unwrap());
    }
}
