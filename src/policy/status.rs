//! The policy part of an Application's status ([`PolicyStatus`]): the
//! findings of a [`Report`] bounded for the status.

use super::Report;
use crate::api::{PolicyFinding, PolicyRule, PolicyStatus};

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
            rule: None,
        });
        let reported = result.findings.iter().map(|f| PolicyFinding {
            policy: result.policy.clone(),
            mode: result.mode.to_string(),
            severity: f.severity.to_string(),
            object: f.object.as_ref().map(ToString::to_string),
            field_path: f.field_path.clone(),
            message: f.message.clone(),
            rule: f.rule.as_ref().map(|r| PolicyRule {
                policy: r.policy.clone(),
                name: r.rule.clone(),
            }),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::{Finding, ObjectRef, Severity};
    use crate::policy::{Mode, PolicyResult};

    fn finding(name: &str, path: &str, message: &str) -> Finding {
        Finding {
            object: Some(ObjectRef {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: None,
                name: name.into(),
            }),
            field_path: Some(path.into()),
            message: message.into(),
            severity: Severity::Error,
            rule: None,
        }
    }

    #[test]
    fn findings_in_the_status_are_unique_bounded_and_counted() {
        let mut findings = vec![
            finding("a", "metadata.labels", "missing label x"),
            finding("a", "metadata.labels", "missing label x"),
            finding("a", "spec.template.metadata.labels", "missing label x"),
            finding("b", "metadata.labels", &"long ".repeat(1000)),
        ];
        findings.extend((0..200).map(|i| finding(&format!("n{i}"), "metadata", "m")));
        let report = Report {
            results: vec![PolicyResult {
                policy: "required-labels".into(),
                mode: Mode::Enforce,
                findings,
                error: None,
                duration: std::time::Duration::ZERO,
                read_set: Default::default(),
                lookups: Default::default(),
                pending: Vec::new(),
                cached: false,
            }],
        };
        let status = policy_status(&report);
        assert_eq!(status.findings.len(), MAX_FINDINGS);
        // 204 findings, one repeated: 203 distinct, 100 kept.
        assert_eq!(status.omitted, 103);
        assert_eq!(
            status.findings[1].field_path.as_deref(),
            Some("spec.template.metadata.labels"),
            "the same message at another field is another finding"
        );
        assert!(status.findings[2].message.len() <= MAX_FINDING_MESSAGE + 40);
        assert!(status.findings[2].message.ends_with("bytes cut)"));
    }
}
