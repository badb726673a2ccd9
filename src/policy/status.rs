//! The policy part of an Application's status ([`PolicyStatus`]): the
//! findings of a [`Report`] bounded for the status.

use super::Report;
use crate::api::{PolicyFinding, PolicyStatus};

/// How the status says a policy could not run (the start of its finding's
/// message).
pub const FAILED_TO_RUN: &str = "the policy failed to run: ";

/// Findings an Application's status keeps; the rest are counted in
/// `status.policy.omitted`.
pub const MAX_FINDINGS: usize = 100;
/// The longest finding message kept, in bytes.
pub const MAX_FINDING_MESSAGE: usize = 1024;

/// The policy part of an Application's status: every finding once (a
/// policy reporting the same thing twice is shown once), at most
/// [`MAX_FINDINGS`] of them, each message bounded, and a count of what was
/// left out.
/// The status form of a policy report (bounded).
pub fn policy_status(report: &Report) -> PolicyStatus {
    let mut findings: Vec<PolicyFinding> = Vec::new();
    let mut omitted = 0u32;
    let mut seen = std::collections::HashSet::new();
    for result in &report.results {
        let failure = result.error.as_ref().map(|error| PolicyFinding {
            policy: result.policy.clone(),
            mode: result.mode.to_string(),
            severity: "error".into(),
            object: None,
            field_path: None,
            message: format!("{FAILED_TO_RUN}{error}"),
        });
        let reported = result.findings.iter().map(|f| PolicyFinding {
            policy: result.policy.clone(),
            mode: result.mode.to_string(),
            severity: f.severity.to_string(),
            object: f.object.as_ref().map(ToString::to_string),
            field_path: f.field_path.clone(),
            message: f.message.clone(),
        });
        for mut finding in reported.chain(failure) {
            finding.message = crate::text::bounded(&finding.message, MAX_FINDING_MESSAGE);
            if !seen.insert(finding.clone()) {
                continue;
            }
            if findings.len() < MAX_FINDINGS {
                findings.push(finding);
            } else {
                omitted = omitted.saturating_add(1);
            }
        }
    }
    PolicyStatus {
        blocked: report.blocked(),
        findings,
        omitted,
    }
}
