//! Calls into a loaded plugin: each in a fresh store with the plugin's
//! limits, every way of failing mapped to its own [`PluginError`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument as _;
use wasmtime::{Store, Trap, UpdateDeadline};

use super::bindings::policy::exports::kiln::plugin::review as wit_review;
use super::bindings::policy::{Policy as PolicyBindings, PolicyPre};
use super::bindings::renderer::RendererPre;
use super::bindings::renderer::exports::kiln::plugin::render as wit_render;
use super::bindings::renderer::kiln::plugin::types as wit;
use super::bindings::rule_policy::exports::kiln::plugin::rules::{
    self as wit_rules, GuestIndices as RulesIndices,
};
use super::cache::CacheOutcome;
use super::cluster::ClusterReads;
use super::config::Limits;
use super::contract::World;
use super::error::{GuestFailure, PluginError, Result};
use super::host::HostInner;
use super::state::CallState;
use super::types::{
    AppContext, Finding, ObjectRef, Params, RuleOutcome, RuleRef, RuleResult, Severity,
};
use crate::digest::Digest;
use crate::interrupt::Interrupt;
use crate::manifest::{self, Object};
use crate::source::SourceView;

/// A component linked for its world, ready to instantiate.
pub(super) enum Pre {
    Renderer(RendererPre<CallState>),
    Policy {
        pre: PolicyPre<CallState>,
        /// The `rules` export, when the component has it.
        rules: Option<RulesIndices>,
    },
}

/// A loaded plugin, ready to be called any number of times, concurrently.
/// Cheap to clone.
#[derive(Clone)]
pub struct Plugin {
    inner: Arc<PluginInner>,
}

/// Everything a loaded plugin holds; built by the host's loader.
pub(super) struct PluginInner {
    pub(super) name: Arc<str>,
    pub(super) digest: Digest,
    pub(super) world: World,
    pub(super) limits: Limits,
    pub(super) outcome: CacheOutcome,
    pub(super) pre: Pre,
    pub(super) host: Arc<HostInner>,
}

impl From<PluginInner> for Plugin {
    fn from(inner: PluginInner) -> Self {
        Plugin {
            inner: Arc::new(inner),
        }
    }
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.inner.name)
            .field("digest", &self.inner.digest)
            .field("world", &self.inner.world)
            .finish_non_exhaustive()
    }
}

impl Plugin {
    /// The plugin's name (used in every message about it).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Digest of the component's bytes.
    pub fn digest(&self) -> Digest {
        self.inner.digest
    }

    /// The world it implements.
    pub fn world(&self) -> World {
        self.inner.world
    }

    /// Its limits.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// Whether loading it hit the compile cache.
    pub fn cache_outcome(&self) -> CacheOutcome {
        self.inner.outcome
    }

    /// Renders: `input` are the previous plugin's objects. Runs on the
    /// blocking pool once a concurrency permit is free.
    pub async fn render(
        &self,
        view: Arc<dyn SourceView>,
        context: AppContext,
        params: Params,
        input: Vec<Object>,
    ) -> Result<Vec<Object>> {
        let this = self.clone();
        self.off_thread(move || this.render_blocking(view, &context, &params, &input))
            .await
    }

    /// Validates a policy's settings.
    pub async fn validate_settings(&self, settings: Params) -> Result<()> {
        let this = self.clone();
        self.off_thread(move || this.validate_settings_blocking(&settings))
            .await
    }

    /// Reviews a rendered set with a policy. `cluster` is what it may read
    /// of its destination (`None`: there is none, and its lookups are
    /// answered `no-cluster`).
    pub async fn review(
        &self,
        view: Arc<dyn SourceView>,
        cluster: Option<Arc<ClusterReads>>,
        context: AppContext,
        objects: Arc<[Object]>,
        settings: Params,
    ) -> Result<Vec<Finding>> {
        let this = self.clone();
        self.off_thread(move || this.review_blocking(view, cluster, &context, &objects, &settings))
            .await
    }

    /// Runs `call` on the blocking pool once a concurrency permit is free,
    /// under a hard wall-clock limit: [`Limits::timeout`] plus the host's
    /// [`HostConfig::wall_clock_grace`](super::HostConfig::wall_clock_grace).
    /// The epoch deadline stops running guest code at the timeout; the hard
    /// limit is the backstop for a call stuck where epochs cannot reach (in
    /// a host function): the caller gets [`PluginError::Timeout`] and the
    /// concurrency permit back, and the stuck thread is left to finish on
    /// its own, holding its share of the memory budget until it does.
    async fn off_thread<T: Send + 'static>(
        &self,
        call: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let host = &self.inner.host;
        let closed = |_| self.host_error("the plugin host is shutting down");
        let permit = host.permits.clone().acquire_owned().await.map_err(closed)?;
        let units = self.inner.limits.memory.div_ceil(super::host::BUDGET_UNIT);
        let memory = host
            .memory
            .clone()
            .acquire_many_owned(u32::try_from(units).unwrap_or(u32::MAX))
            .await
            .map_err(closed)?;
        let span = tracing::Span::current();
        // The memory reservation goes with the thread: an abandoned call
        // still holds its memory until it really ends.
        let timeout = self.inner.limits.timeout;
        let hard = timeout.saturating_add(host.config.wall_clock_grace);
        // The wall-clock limit counts from when the call starts running
        // (a full blocking pool makes it wait, not time out unstarted).
        let joined = crate::interrupt::blocking_within(hard, move || {
            let _memory = memory;
            span.in_scope(call)
        })
        .instrument(tracing::Span::current())
        .await;
        drop(permit);
        match joined {
            Ok(joined) => joined
                .map_err(|e| self.host_error(format!("plugin call panicked on the host: {e}")))?,
            Err(_) => {
                tracing::error!(
                    plugin = self.name(),
                    ?hard,
                    "plugin call passed its wall-clock limit; abandoned"
                );
                Err(PluginError::Timeout {
                    plugin: self.name().to_owned(),
                    timeout,
                })
            }
        }
    }

    /// [`render`](Self::render) on the current thread.
    ///
    /// This does not wait for a concurrency permit: callers running more than
    /// [`HostConfig::max_concurrency`](super::HostConfig::max_concurrency) calls at once through it may see
    /// instantiation fail once the allocator's slots are exhausted.
    pub fn render_blocking(
        &self,
        view: Arc<dyn SourceView>,
        context: &AppContext,
        params: &Params,
        input: &[Object],
    ) -> Result<Vec<Object>> {
        let Pre::Renderer(pre) = &self.inner.pre else {
            return Err(self.wrong_world(World::Renderer));
        };
        let context = wit_context(context);
        let params = wit_params(params);
        let input: Vec<wit::Manifest> = input
            .iter()
            .map(|o| wit::Manifest {
                content: o.to_json(),
                source: o.source().map(str::to_owned),
            })
            .collect();
        let manifests = self.call(view, None, |store| {
            let instance = pre.instantiate(&mut *store)?;
            instance
                .kiln_plugin_render()
                .call_render(store, &context, &params, &input)
        })?;
        let manifests = manifests.map_err(|e| PluginError::Failed {
            plugin: self.name().to_owned(),
            failure: render_failure(e),
        })?;
        let size: u64 = manifests.iter().map(|m| m.content.len() as u64).sum();
        if size > self.inner.limits.output {
            return Err(PluginError::OutputTooLarge {
                plugin: self.name().to_owned(),
                size,
                limit: self.inner.limits.output,
            });
        }
        // The output's bytes are bounded above; its nodes, over all its
        // manifests, here (a manifest is parsed only within what is left).
        let budget = manifest::ParseBudget::new(manifest::ParseLimits {
            bytes: self.inner.limits.output,
            ..manifest::ParseLimits::default()
        })
        .with_interrupt(Interrupt::current());
        let mut objects = Vec::new();
        for manifest in manifests {
            let parsed =
                manifest::parse_within(&manifest.content, manifest.source.as_deref(), &budget)
                    .map_err(|error| PluginError::InvalidOutput {
                        plugin: self.name().to_owned(),
                        error,
                    })?;
            objects.extend(parsed);
        }
        Ok(objects)
    }

    /// [`validate_settings`](Self::validate_settings) on the current thread
    /// (see [`render_blocking`](Self::render_blocking) about concurrency).
    pub fn validate_settings_blocking(&self, settings: &Params) -> Result<()> {
        let Pre::Policy { pre, .. } = &self.inner.pre else {
            return Err(self.wrong_world(World::Policy));
        };
        let settings = wit_params(settings);
        let view: Arc<dyn SourceView> = Arc::new(crate::source::EmptyView);
        self.call(view, None, |store| {
            let instance = pre.instantiate(&mut *store)?;
            instance
                .kiln_plugin_review()
                .call_validate_settings(store, &settings)
        })?
        .map_err(|message| PluginError::InvalidSettings {
            plugin: self.name().to_owned(),
            message,
        })
    }

    /// [`review`](Self::review) on the current thread (see
    /// [`render_blocking`](Self::render_blocking) about concurrency). A
    /// policy that reports its rules is reviewed through them, so that its
    /// findings name their rule.
    pub fn review_blocking(
        &self,
        view: Arc<dyn SourceView>,
        cluster: Option<Arc<ClusterReads>>,
        context: &AppContext,
        objects: &[Object],
        settings: &Params,
    ) -> Result<Vec<Finding>> {
        if self.reports_rules() {
            let results = self.call_rules(view, cluster, context, objects, settings)?;
            return self.findings_of(results, objects);
        }
        let Pre::Policy { pre, .. } = &self.inner.pre else {
            return Err(self.wrong_world(World::Policy));
        };
        let request = wit_review::ReviewRequest {
            context: wit_context(context),
            manifests: wit_manifests(objects),
            settings: wit_params(settings),
        };
        let findings = self.call(view, cluster, |store| {
            let instance: PolicyBindings = pre.instantiate(&mut *store)?;
            instance.kiln_plugin_review().call_review(store, &request)
        })?;
        let findings = findings.map_err(|message| self.failed(message))?;
        Ok(findings.into_iter().map(finding).collect())
    }

    /// Whether this policy reports each rule's result (it exports the
    /// contract's `rules` interface).
    pub fn reports_rules(&self) -> bool {
        matches!(&self.inner.pre, Pre::Policy { rules: Some(_), .. })
    }

    /// The result of every rule of a policy on every object, passes and
    /// skips included; for a policy that [reports its
    /// rules](Self::reports_rules).
    pub async fn review_rules(
        &self,
        view: Arc<dyn SourceView>,
        cluster: Option<Arc<ClusterReads>>,
        context: AppContext,
        objects: Arc<[Object]>,
        settings: Params,
    ) -> Result<Vec<RuleResult>> {
        let this = self.clone();
        self.off_thread(move || {
            this.review_rules_blocking(view, cluster, &context, &objects, &settings)
        })
        .await
    }

    /// [`review_rules`](Self::review_rules) on the current thread.
    pub fn review_rules_blocking(
        &self,
        view: Arc<dyn SourceView>,
        cluster: Option<Arc<ClusterReads>>,
        context: &AppContext,
        objects: &[Object],
        settings: &Params,
    ) -> Result<Vec<RuleResult>> {
        let results = self.call_rules(view, cluster, context, objects, settings)?;
        results
            .into_iter()
            .map(|r| self.rule_result(r, objects))
            .collect()
    }

    /// Calls `rules.review-rules`; the results as the guest gave them, their
    /// number and names checked.
    fn call_rules(
        &self,
        view: Arc<dyn SourceView>,
        cluster: Option<Arc<ClusterReads>>,
        context: &AppContext,
        objects: &[Object],
        settings: &Params,
    ) -> Result<Vec<wit_rules::RuleResult>> {
        let Pre::Policy {
            pre,
            rules: Some(rules),
        } = &self.inner.pre
        else {
            return Err(PluginError::ContractMismatch {
                plugin: self.name().to_owned(),
                detail: "it does not report its rules (no kiln:plugin/rules export): \
                         it is a policy of findings only"
                    .into(),
            });
        };
        let (context, manifests, settings) = (
            wit_context(context),
            wit_manifests(objects),
            wit_params(settings),
        );
        let results = self.call(view, cluster, |store| {
            let instance = pre.instance_pre().instantiate(&mut *store)?;
            let rules = rules.load(&mut *store, &instance)?;
            rules.call_review_rules(store, &context, &manifests, &settings)
        })?;
        let results = results.map_err(|message| self.failed(message))?;
        if results.len() > MAX_RULE_RESULTS {
            return Err(self.failed(format!(
                "{} rule results, more than the {MAX_RULE_RESULTS} a review may report",
                results.len()
            )));
        }
        if let Some(long) = results
            .iter()
            .flat_map(|r| [&r.policy, &r.rule])
            .find(|name| name.len() > MAX_RULE_NAME)
        {
            return Err(self.failed(format!(
                "a rule result names a policy or rule of {} bytes (at most {MAX_RULE_NAME}): {}",
                long.len(),
                crate::text::bounded(long, 64)
            )));
        }
        Ok(results)
    }

    /// The findings of a policy's rule results: `fail` and `warn`; an
    /// `error` fails the review closed, naming the rule and object. Passes
    /// and skips are dropped without being lifted.
    fn findings_of(
        &self,
        results: Vec<wit_rules::RuleResult>,
        objects: &[Object],
    ) -> Result<Vec<Finding>> {
        let mut findings = Vec::new();
        for result in results {
            if matches!(
                result.outcome,
                wit_rules::Outcome::Pass | wit_rules::Outcome::Skip
            ) {
                continue;
            }
            let result = self.rule_result(result, objects)?;
            if result.outcome == RuleOutcome::Error {
                let on = result
                    .object
                    .as_ref()
                    .map(|o| format!(" on {o}"))
                    .unwrap_or_default();
                return Err(self.failed(format!("rule {}{on}: {}", result.rule, result.message)));
            }
            findings.extend(result.to_finding());
        }
        Ok(findings)
    }

    fn rule_result(&self, r: wit_rules::RuleResult, objects: &[Object]) -> Result<RuleResult> {
        let object = match r.manifest {
            None => None,
            Some(index) => {
                let object = usize::try_from(index)
                    .ok()
                    .and_then(|i| objects.get(i))
                    .ok_or_else(|| {
                        self.failed(format!(
                            "rule {}/{} reported a result for manifest {index}, but the set has {}",
                            r.policy,
                            r.rule,
                            objects.len()
                        ))
                    })?;
                Some(ObjectRef {
                    api_version: object.api_version().to_owned(),
                    kind: object.kind().to_owned(),
                    namespace: object.namespace().map(str::to_owned),
                    name: object.name().to_owned(),
                })
            }
        };
        Ok(RuleResult {
            rule: RuleRef {
                policy: r.policy,
                rule: r.rule,
            },
            object,
            field_path: r.field_path,
            outcome: match r.outcome {
                wit_rules::Outcome::Pass => RuleOutcome::Pass,
                wit_rules::Outcome::Fail => RuleOutcome::Fail,
                wit_rules::Outcome::Warn => RuleOutcome::Warn,
                wit_rules::Outcome::Error => RuleOutcome::Error,
                wit_rules::Outcome::Skip => RuleOutcome::Skip,
            },
            message: r.message,
        })
    }

    fn failed(&self, message: String) -> PluginError {
        PluginError::Failed {
            plugin: self.name().to_owned(),
            failure: GuestFailure::Other(message),
        }
    }

    /// Runs one call in a fresh store and turns every way it can fail into
    /// the matching error.
    fn call<T>(
        &self,
        view: Arc<dyn SourceView>,
        cluster: Option<Arc<ClusterReads>>,
        body: impl FnOnce(&mut Store<CallState>) -> wasmtime::Result<T>,
    ) -> Result<T> {
        let host = &self.inner.host;
        let limits = &self.inner.limits;
        let mut store = Store::new(
            &host.engine,
            CallState::new(self.inner.name.clone(), view, cluster, limits),
        );
        store.limiter(|state| &mut state.limiter);
        // What a guest hands the host in one call (a review's results, a
        // render's manifests) is bounded by the memory it may hold, not by
        // wasmtime's default of 128 MiB (a review of 10,000 objects by 181
        // Kyverno policies returns more).
        store.set_hostcall_fuel(usize::try_from(limits.memory).unwrap_or(usize::MAX));
        Self::set_deadline(&mut store, host.config.epoch_tick, limits.timeout);

        let started = Instant::now();
        let result = body(&mut store);
        let stderr = store.data().drain_stdio();
        let state = store.data();
        tracing::debug!(plugin = self.name(), elapsed = ?started.elapsed(), ok = result.is_ok(), "plugin call");

        let plugin = self.name().to_owned();
        // The most specific cause wins: an escape attempt, then memory.
        if let Some((path, escape)) = state.denied.clone() {
            return Err(PluginError::AccessDenied {
                plugin,
                path,
                escape,
            });
        }
        let error = match result {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        if state.limiter.exceeded {
            return Err(PluginError::OutOfMemory {
                plugin,
                limit: limits.memory,
            });
        }
        if error.is::<Interrupted>() {
            return Err(PluginError::Interrupted { plugin });
        }
        Err(match error.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => PluginError::Timeout {
                plugin,
                timeout: limits.timeout,
            },
            Some(Trap::StackOverflow) => PluginError::StackOverflow { plugin },
            Some(trap) => PluginError::Trap {
                plugin,
                trap: trap.to_string(),
                stderr,
            },
            None => PluginError::Host {
                plugin,
                message: format!("{error:#}"),
            },
        })
    }

    /// Stops the guest at `timeout` (counted in epoch ticks), and, checked
    /// every [`INTERRUPT_CHECK`] ticks, once the current
    /// [interrupt](Interrupt::current) is raised.
    fn set_deadline(store: &mut Store<CallState>, tick: Duration, timeout: Duration) {
        let tick = tick.as_nanos().max(1);
        let mut left = u64::try_from(timeout.as_nanos().div_ceil(tick))
            .unwrap_or(u64::MAX)
            .max(1);
        let interrupt = Interrupt::current();
        let slice = left.min(INTERRUPT_CHECK);
        left -= slice;
        store.set_epoch_deadline(slice);
        store.epoch_deadline_callback(move |_| {
            if interrupt.is_raised() {
                return Err(Interrupted.into());
            }
            if left == 0 {
                return Err(Trap::Interrupt.into());
            }
            let slice = left.min(INTERRUPT_CHECK);
            left -= slice;
            Ok(UpdateDeadline::Continue(slice))
        });
    }

    fn wrong_world(&self, wanted: World) -> PluginError {
        PluginError::ContractMismatch {
            plugin: self.name().to_owned(),
            detail: format!("it is a {}, but was called as a {wanted}", self.inner.world),
        }
    }

    fn host_error(&self, message: impl Into<String>) -> PluginError {
        PluginError::Host {
            plugin: self.name().to_owned(),
            message: message.into(),
        }
    }
}

/// The most rule results one review may report (a policy's `rules` export);
/// more fails the review naming the plugin.
const MAX_RULE_RESULTS: usize = 1_000_000;

/// The longest policy or rule name a rule result may carry (a Kubernetes
/// object name's bound): names go into statuses and policy reports.
const MAX_RULE_NAME: usize = 253;

/// How often (in epoch ticks) a running guest checks its render's interrupt:
/// every 50 ms at the default tick.
const INTERRUPT_CHECK: u64 = 5;

/// The guest was stopped because its render was given up.
#[derive(Debug, thiserror::Error)]
#[error("the render was given up")]
struct Interrupted;

fn wit_context(context: &AppContext) -> wit::AppContext {
    wit::AppContext {
        name: context.name.clone(),
        namespace: context.namespace.clone(),
        project: context.project.clone(),
        repo_url: context.repo_url.clone(),
        revision: context.revision.clone(),
        path: context.path.clone(),
    }
}

fn wit_params(params: &Params) -> Vec<wit::Param> {
    params
        .iter()
        .map(|(key, value)| wit::Param {
            key: key.clone(),
            value: value.clone(),
        })
        .collect()
}

fn render_failure(error: wit_render::RenderError) -> GuestFailure {
    match error {
        wit_render::RenderError::InvalidParameters(m) => GuestFailure::InvalidParameters(m),
        wit_render::RenderError::InvalidInput(e) => GuestFailure::InvalidInput {
            file: e.file,
            line: e.line,
            message: e.message,
        },
        wit_render::RenderError::Failed(m) => GuestFailure::Other(m),
    }
}

fn finding(f: wit_review::Finding) -> Finding {
    Finding {
        object: f.object.map(|o| ObjectRef {
            api_version: o.api_version,
            kind: o.kind,
            namespace: o.namespace,
            name: o.name,
        }),
        field_path: f.field_path,
        message: f.message,
        severity: match f.severity {
            wit_review::Severity::Info => Severity::Info,
            wit_review::Severity::Warning => Severity::Warning,
            wit_review::Severity::Error => Severity::Error,
        },
        rule: None,
    }
}

fn wit_manifests(objects: &[Object]) -> Vec<wit::Manifest> {
    objects
        .iter()
        .map(|o| wit::Manifest {
            content: o.to_json(),
            source: o.source().map(str::to_owned),
        })
        .collect()
}
