//! Policy: reviewing a rendered set before anything is applied.
//!
//! Each policy plugin runs in a [`Mode`]: `enforce` blocks the sync when the
//! policy reports an `error` finding (or cannot run at all: policies fail
//! closed), `warn` reports without blocking, `audit` only records. All
//! policies see the whole set at once and run concurrently.

pub mod report;
pub mod suite;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use tokio::task::JoinSet;
use tracing::Instrument as _;

use crate::manifest::Object;
use crate::plugin::{AppContext, Finding, Params, Plugin, Severity};
use crate::source::SourceView;

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

/// A policy plugin with its settings and mode.
#[derive(Debug, Clone)]
pub struct PolicyStep {
    /// The loaded policy.
    pub plugin: Plugin,
    /// Its settings, in order.
    pub settings: Params,
    /// How its findings count.
    pub mode: Mode,
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
}

/// Runs every policy over `objects`, concurrently; each first validates its
/// settings. A policy that fails is reported, never propagated: what that
/// means for the sync is up to its mode.
pub async fn evaluate(
    view: Arc<dyn SourceView>,
    context: &AppContext,
    objects: Vec<Object>,
    policies: &[PolicyStep],
) -> Report {
    let objects: Arc<[Object]> = objects.into();
    let mut tasks = JoinSet::new();
    for (index, step) in policies.iter().cloned().enumerate() {
        let (view, context, objects) = (view.clone(), context.clone(), objects.clone());
        let span = tracing::info_span!("policy", policy = step.plugin.name(), mode = %step.mode);
        tasks.spawn(
            async move {
                let started = std::time::Instant::now();
                let outcome = match step.plugin.validate_settings(step.settings.clone()).await {
                    Ok(()) => {
                        step.plugin
                            .review(view, context, objects, step.settings.clone())
                            .await
                    }
                    Err(e) => Err(e),
                };
                let (findings, error) = match outcome {
                    Ok(findings) => (findings, None),
                    Err(e) => {
                        tracing::warn!(error = %e, "policy could not review");
                        (Vec::new(), Some(e.to_string()))
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
                })
            })
            .collect(),
    }
}
