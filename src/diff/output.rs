//! Showing a diff: a unified YAML diff for terminals (colored on request)
//! and JSON for machines. Both come from [`ObjectDiff`]s, whose objects are
//! already masked, so no Secret value can reach an output.

use serde_json::Value;

use super::{ObjectDiff, Report, SyncStatus};

const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const CYAN: &str = "\x1b[36m";
const RESET: &str = "\x1b[0m";

fn yaml(value: Option<&Value>) -> String {
    value
        .map(|v| serde_yaml::to_string(v).unwrap_or_default())
        .unwrap_or_default()
}

/// The unified diff of one object, live (`-`) to desired (`+`); empty when
/// it is synced.
pub fn unified(diff: &ObjectDiff, color: bool) -> String {
    if diff.status == SyncStatus::Synced {
        return String::new();
    }
    let (live, desired) = (yaml(diff.live.as_ref()), yaml(diff.desired.as_ref()));
    let text = similar::TextDiff::from_lines(&live, &desired);
    let body = text
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("live/{}", diff.key),
            &format!("desired/{}", diff.key),
        )
        .to_string();
    if !color {
        return body;
    }
    body.lines()
        .map(|line| {
            let paint = if line.starts_with("+++") || line.starts_with("---") {
                None
            } else if line.starts_with('+') {
                Some(GREEN)
            } else if line.starts_with('-') {
                Some(RED)
            } else if line.starts_with("@@") {
                Some(CYAN)
            } else {
                None
            };
            match paint {
                Some(code) => format!("{code}{line}{RESET}\n"),
                None => format!("{line}\n"),
            }
        })
        .collect()
}

/// One line per object (`OutOfSync  apps/Deployment default/web`), then the
/// diffs of those that are not synced, then a summary line.
pub fn text(report: &Report, color: bool) -> String {
    let mut out = String::new();
    for object in &report.objects {
        out.push_str(&format!(
            "{:<11} {}\n",
            object.status.to_string(),
            object.key
        ));
    }
    for object in report
        .objects
        .iter()
        .filter(|o| o.status != SyncStatus::Synced)
    {
        out.push('\n');
        out.push_str(&unified(object, color));
    }
    out.push_str(&format!(
        "\n{} object{}: {} synced, {} out of sync, {} missing, {} extraneous\n",
        report.objects.len(),
        if report.objects.len() == 1 { "" } else { "s" },
        report.count(SyncStatus::Synced),
        report.count(SyncStatus::OutOfSync),
        report.count(SyncStatus::Missing),
        report.count(SyncStatus::Extraneous),
    ));
    out
}

/// The report as JSON.
pub fn json(report: &Report) -> String {
    serde_json::to_string_pretty(report).unwrap_or_default()
}
