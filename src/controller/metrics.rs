//! The controller's metrics, served on `/metrics` ([`super::http`]).

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;

/// The controller's metrics.
pub struct Metrics {
    registry: Registry,
    /// Reconciles by result (`ok`, `condition`, `error`).
    pub reconciles: Family<Labels, Counter>,
    /// Reconcile durations in seconds.
    pub reconcile_seconds: Histogram,
    /// Syncs by outcome (`succeeded`, `failed`).
    pub syncs: Family<Labels, Counter>,
    /// Webhook deliveries by result.
    pub webhooks: Family<Labels, Counter>,
    /// Renders actually run (cache misses that rendered).
    pub renders: Counter,
    /// Plugin call durations in seconds, by plugin and world.
    pub plugin_call_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    /// Syncs started by self-heal (drift reverted at a revision already
    /// synced), and those deferred by its back-off.
    pub self_heals: Family<Labels, Counter>,
    /// Renders answered by each render server replica.
    pub render_server_requests: Family<Labels, Counter>,
    /// Renders a replica could not take (unreachable), sent to the next.
    pub render_server_failovers: Family<Labels, Counter>,
    /// Policy findings in the Applications' status now (a gauge: what
    /// Prometheus users expect of a current state, as Policy Reporter's
    /// results are), by policy, severity and mode.
    pub policy_findings: Family<Labels, Gauge>,
    /// The live watches' gauges and counters.
    pub live: super::live::LiveMetrics,
    pub(super) git_lookups: Gauge,
    pub(super) git_fetches: Gauge,
    pub(super) cache_hits: Gauge,
    pub(super) cache_misses: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::with_kube_requests(crate::cluster::requests::RequestCounts::default())
    }
}

impl Metrics {
    /// The metrics, serving `requests` (the API request counts of the
    /// clients made with the controller's client options) as
    /// `kiln_kube_requests_total{cluster,verb}`.
    pub fn with_kube_requests(requests: crate::cluster::requests::RequestCounts) -> Self {
        let mut registry = Registry::with_prefix("kiln");
        registry.register(
            "kube_requests",
            "Requests to Kubernetes API servers, by cluster and verb",
            requests,
        );
        let reconciles = Family::<Labels, Counter>::default();
        registry.register(
            "reconciles",
            "Application reconciles, by result",
            reconciles.clone(),
        );
        let reconcile_seconds = Histogram::new(exponential_buckets(0.005, 2.0, 14));
        registry.register(
            "reconcile_duration_seconds",
            "Duration of one reconcile",
            reconcile_seconds.clone(),
        );
        let syncs = Family::<Labels, Counter>::default();
        registry.register("syncs", "Syncs, by outcome", syncs.clone());
        let webhooks = Family::<Labels, Counter>::default();
        registry.register(
            "webhooks",
            "Git webhook deliveries, by result",
            webhooks.clone(),
        );
        let renders = Counter::default();
        registry.register(
            "renders",
            "Renders run (not served from the render cache)",
            renders.clone(),
        );
        let plugin_call_seconds: Family<Labels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.001, 2.0, 14)));
        registry.register(
            "plugin_call_duration_seconds",
            "Duration of one plugin call (render or review), by plugin and world",
            plugin_call_seconds.clone(),
        );
        let self_heals = Family::<Labels, Counter>::default();
        registry.register(
            "self_heals",
            "Self-heal decisions on drift, by result (synced, backed_off)",
            self_heals.clone(),
        );
        let render_server_requests = Family::<Labels, Counter>::default();
        registry.register(
            "render_server_requests",
            "Renders answered by the render server, by replica",
            render_server_requests.clone(),
        );
        let render_server_failovers = Family::<Labels, Counter>::default();
        registry.register(
            "render_server_failovers",
            "Renders a render server replica could not take (unreachable) and that went to the next, by replica",
            render_server_failovers.clone(),
        );
        let policy_findings = Family::<Labels, Gauge>::default();
        registry.register(
            "policy_findings",
            "Policy findings in the Applications' status now (at most 100 per Application), by policy, severity and mode",
            policy_findings.clone(),
        );
        let Sampled {
            live,
            cache_hits,
            cache_misses,
            git_lookups,
            git_fetches,
        } = Sampled::register(&mut registry);
        Self {
            registry,
            reconciles,
            reconcile_seconds,
            syncs,
            webhooks,
            renders,
            plugin_call_seconds,
            self_heals,
            render_server_requests,
            render_server_failovers,
            policy_findings,
            live,
            git_lookups,
            git_fetches,
            cache_hits,
            cache_misses,
        }
    }
}

impl Metrics {
    /// Counts a reconcile that took `took`: `ok`, or stopped with a
    /// condition.
    pub fn observe_reconcile(&self, took: std::time::Duration, ok: bool) {
        self.reconcile_seconds.observe(took.as_secs_f64());
        let result = if ok { "ok" } else { "condition" };
        self.reconciles
            .get_or_create(&vec![("result".into(), result.into())])
            .inc();
    }

    /// The OpenMetrics text of every metric (what `/metrics` serves, less
    /// the Git and cache figures it samples first).
    pub fn encode(&self) -> Option<String> {
        let mut text = String::new();
        encode(&mut text, &self.registry).ok()?;
        Some(text)
    }
}

/// The metrics whose values are set from elsewhere: the live watches'
/// (their own counters) and the render cache's and Git engine's figures
/// (sampled when `/metrics` is served).
struct Sampled {
    live: super::live::LiveMetrics,
    cache_hits: Gauge,
    cache_misses: Gauge,
    git_lookups: Gauge,
    git_fetches: Gauge,
}

impl Sampled {
    fn register(registry: &mut Registry) -> Self {
        let live = super::live::LiveMetrics::default();
        registry.register(
            "live_watches",
            "Live watches running (one per managed kind a shard's Applications need), by cluster",
            live.watches.clone(),
        );
        registry.register(
            "live_cache_bytes",
            "Bytes (JSON) of live objects the watches' caches hold",
            live.cache_bytes.clone(),
        );
        registry.register(
            "live_cache_dropped",
            "Live caches dropped for going over the byte budget (the kind is read from the API server), by cluster and kind",
            live.dropped.clone(),
        );
        let cache_hits = Gauge::default();
        registry.register(
            "render_cache_hits",
            "Renders served from the render cache",
            cache_hits.clone(),
        );
        let cache_misses = Gauge::default();
        registry.register(
            "render_cache_misses",
            "Render cache lookups that missed",
            cache_misses.clone(),
        );
        let git_lookups = Gauge::default();
        registry.register(
            "git_ref_lookups",
            "Ref advertisements requested from Git servers",
            git_lookups.clone(),
        );
        let git_fetches = Gauge::default();
        registry.register(
            "git_fetches",
            "Fetches from Git servers",
            git_fetches.clone(),
        );
        Self {
            live,
            cache_hits,
            cache_misses,
            git_lookups,
            git_fetches,
        }
    }
}
