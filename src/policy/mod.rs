//! Policy: reviewing a rendered set before anything is applied.
//!
//! Each policy plugin runs in a [`Mode`]: `enforce` blocks the sync when the
//! policy reports an `error` finding (or cannot run at all: policies fail
//! closed), `warn` reports without blocking, `audit` only records. All
//! policies see the whole set at once and run concurrently.
//!
//! Each policy reads files (templates, constraints, bindings) through its
//! own [`PolicySource`]: the Application's tree, or a tree of its own (an
//! AppProject's policy reading the security team's repository, so that the
//! application's team cannot edit what judges it). What each policy read is
//! recorded ([`PolicyResult::read_set`]).

mod cache;

pub use cache::{DEFAULT_REVIEWS, MAX_CACHED_FINDINGS, ReviewCache, evaluate_cached};

pub mod placement;
pub mod report;
pub mod status;
pub mod suite;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use tokio::task::JoinSet;
use tracing::Instrument as _;

use crate::manifest::Object;
use crate::plugin::cluster::{ClusterKey, ClusterReads, ClusterView, Lookups};
use crate::plugin::{AppContext, Finding, Params, Plugin, Severity};
use crate::source::{ReadSet, RecordingView, SourceView};

/// How a policy's findings affect a sync.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Mode {
    /// `error` findings, or a policy that cannot run, block the sync.
    #[default]
    Enforce,
    /// Findings are reported as warnings; nothing is blocked.
    Warn,
    /// Findings are only recorded.
    Audit,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Enforce => "enforce",
            Mode::Warn => "warn",
            Mode::Audit => "audit",
        })
    }
}

/// The text is not a mode.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a policy mode (enforce, warn or audit)")]
pub struct ParseModeError(String);

impl FromStr for Mode {
    type Err = ParseModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "enforce" => Ok(Mode::Enforce),
            "warn" => Ok(Mode::Warn),
            "audit" => Ok(Mode::Audit),
            other => Err(ParseModeError(other.to_owned())),
        }
    }
}

/// A policy plugin with its settings, mode and source.
#[derive(Debug, Clone)]
pub struct PolicyStep {
    /// The loaded policy.
    pub plugin: Plugin,
    /// Its settings, in order.
    pub settings: Params,
    /// How its findings count.
    pub mode: Mode,
    /// What its `source` interface reads.
    pub source: PolicySource,
}

/// The tree a policy reads through its `source` interface.
#[derive(Debug, Clone)]
pub enum PolicySource {
    /// The Application's own tree (the context's repository, revision and
    /// path).
    Application(Arc<dyn SourceView>),
    /// A tree of its own: the policy sees `view` as the whole source, and
    /// its context names this repository and commit with an empty path
    /// (settings paths are relative to the view's root).
    Own {
        /// The tree (already cut to the source's path).
        view: Arc<dyn SourceView>,
        /// The repository, for the policy's context and messages.
        repo_url: String,
        /// The commit.
        revision: String,
    },
    /// Its source could not be read: the policy cannot run (it fails
    /// closed in `enforce` mode).
    Unavailable {
        /// The repository.
        repo_url: String,
        /// Why, with its causes.
        error: String,
    },
}

impl PolicySource {
    /// The view and context the policy runs with, or why it cannot run.
    fn open(&self, context: &AppContext) -> Result<(Arc<dyn SourceView>, AppContext), String> {
        match self {
            PolicySource::Application(view) => Ok((view.clone(), context.clone())),
            PolicySource::Own {
                view,
                repo_url,
                revision,
            } => Ok((
                view.clone(),
                AppContext {
                    repo_url: repo_url.clone(),
                    revision: revision.clone(),
                    path: String::new(),
                    ..context.clone()
                },
            )),
            PolicySource::Unavailable { repo_url, error } => {
                Err(format!("cannot read its policy source {repo_url}: {error}"))
            }
        }
    }
}

/// What one policy said.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyResult {
    /// The policy's name.
    pub policy: String,
    /// The mode it ran in.
    pub mode: Mode,
    /// Its findings.
    pub findings: Vec<Finding>,
    /// Why it could not review, if it could not (invalid settings, a trap...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How long the review took (for metrics).
    #[serde(skip)]
    pub duration: std::time::Duration,
    /// What the policy read of its source (relative to that source's view).
    #[serde(skip)]
    pub read_set: ReadSet,
    /// What it asked of the destination cluster, with the answers.
    #[serde(skip)]
    pub lookups: Lookups,
    /// Objects of the destination it asked for that the review's
    /// [`ClusterView`] did not hold: the result is incomplete, and the
    /// review is to be run again with them.
    #[serde(skip)]
    pub pending: Vec<ClusterKey>,
    /// Whether this result was reused from a [`ReviewCache`] (the policy
    /// did not run).
    #[serde(skip)]
    pub cached: bool,
}

impl PolicyResult {
    /// Whether this result blocks a sync.
    pub fn blocks(&self) -> bool {
        self.mode == Mode::Enforce
            && (self.error.is_some() || self.findings.iter().any(|f| f.severity == Severity::Error))
    }
}

/// The results of every policy, in the order the policies were given.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// One result per policy.
    pub results: Vec<PolicyResult>,
}

impl Report {
    /// Whether any enforced policy blocks the sync.
    pub fn blocked(&self) -> bool {
        self.results.iter().any(PolicyResult::blocks)
    }

    /// The objects of the destination that policies asked for and the
    /// review's [`ClusterView`] did not hold (sorted, without repeats):
    /// when there are any, the report is incomplete.
    pub fn pending(&self) -> Vec<ClusterKey> {
        let pending: std::collections::BTreeSet<&ClusterKey> =
            self.results.iter().flat_map(|r| &r.pending).collect();
        pending.into_iter().cloned().collect()
    }
}

/// Runs every policy over `objects`, concurrently, each reading its own
/// [`PolicySource`] and what `cluster` holds of the destination (`None`:
/// there is none); each first validates its settings. A policy that fails
/// (or whose source cannot be read) is reported, never propagated: what
/// that means for the sync is up to its mode.
pub async fn evaluate(
    context: &AppContext,
    objects: Vec<Object>,
    policies: &[PolicyStep],
    cluster: Option<&Arc<ClusterView>>,
) -> Report {
    let objects: Arc<[Object]> = objects.into();
    let mut tasks = JoinSet::new();
    for (index, step) in policies.iter().cloned().enumerate() {
        let (context, objects) = (context.clone(), objects.clone());
        let reads = cluster.map(|view| Arc::new(ClusterReads::new(view.clone())));
        let span = tracing::info_span!("policy", policy = step.plugin.name(), mode = %step.mode);
        tasks.spawn(
            async move {
                let started = std::time::Instant::now();
                let mut read_set = ReadSet::default();
                let outcome = match step.source.open(&context) {
                    Err(unavailable) => Err(unavailable),
                    Ok((view, context)) => {
                        match step.plugin.validate_settings(step.settings.clone()).await {
                            Ok(()) => {
                                let recording = Arc::new(RecordingView::new(view));
                                let reviewed = step
                                    .plugin
                                    .review(
                                        recording.clone(),
                                        reads.clone(),
                                        context,
                                        objects,
                                        step.settings.clone(),
                                    )
                                    .await;
                                read_set = recording.read_set();
                                reviewed.map_err(|e| e.to_string())
                            }
                            Err(e) => Err(e.to_string()),
                        }
                    }
                };
                let (findings, error) = match outcome {
                    Ok(findings) => (findings, None),
                    Err(e) => {
                        // The result carries it to whoever reports it (the CLI's summary, the
                        // controller's condition and policy report): logged once, there.
                        tracing::debug!(error = %e, "policy could not review");
                        (Vec::new(), Some(e))
                    }
                };
                (
                    index,
                    PolicyResult {
                        policy: step.plugin.name().to_owned(),
                        mode: step.mode,
                        findings,
                        error,
                        duration: started.elapsed(),
                        read_set,
                        lookups: reads.as_ref().map(|r| r.lookups()).unwrap_or_default(),
                        pending: reads.as_ref().map(|r| r.pending()).unwrap_or_default(),
                        cached: false,
                    },
                )
            }
            .instrument(span),
        );
    }
    let mut results: Vec<Option<PolicyResult>> = vec![None; policies.len()];
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((index, result)) => results[index] = Some(result),
            Err(e) => tracing::error!(error = %e, "policy task failed"),
        }
    }
    Report {
        results: results
            .into_iter()
            .zip(policies)
            .map(|(result, step)| {
                // A task that died is a policy that could not run.
                result.unwrap_or_else(|| PolicyResult {
                    policy: step.plugin.name().to_owned(),
                    mode: step.mode,
                    findings: Vec::new(),
                    error: Some("the policy task failed on the host".into()),
                    duration: std::time::Duration::ZERO,
                    read_set: ReadSet::default(),
                    lookups: Lookups::default(),
                    pending: Vec::new(),
                    cached: false,
                })
            })
            .collect(),
    }
}
