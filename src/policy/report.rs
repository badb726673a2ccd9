//! Policy findings as `wgpolicyk8s.io/v1alpha2` PolicyReports and
//! ClusterPolicyReports: the format Policy Reporter, Kyverno and Kubewarden
//! users already read.
//!
//! How a finding becomes a report result (documented in docs/policies.md):
//!
//! | Kiln                                  | `result` | `severity` | `scored` |
//! |---------------------------------------|----------|------------|----------|
//! | `error` finding, `enforce` mode       | `fail`   | `high`     | true     |
//! | `error` finding, `audit` mode         | `fail`   | `high`     | false    |
//! | `error` finding, `warn` mode          | `warn`   | `high`     | false    |
//! | `warning` finding (any mode)          | `warn`   | `medium`   | false    |
//! | `info` finding (any mode)             | `pass`   | `info`     | false    |
//! | the policy could not run              | `error`  | —          | mode is `enforce` |
//!
//! `audit` is Kyverno's Audit: a violation recorded as `fail` that blocks
//! nothing. Every result carries the properties `mode` and, when known,
//! `fieldPath`. A report lists at most [`ReportOptions::max_results`]
//! results (the most serious first); its `summary` counts every result,
//! listed or not, and the annotation [`OMITTED_ANNOTATION`] says how many
//! were left out.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use super::{Mode, Report};
use crate::plugin::{ObjectRef, RuleRef, Severity};

/// The API group of policy reports.
pub const GROUP: &str = "wgpolicyk8s.io";
/// The `apiVersion` of the reports Kiln writes.
pub const API_VERSION: &str = "wgpolicyk8s.io/v1alpha2";
/// `source` of every result Kiln writes.
pub const SOURCE: &str = "kiln";
/// The annotation counting the results a report left out.
pub const OMITTED_ANNOTATION: &str = "kiln.dev/omitted-results";
/// The annotation naming the Application a report belongs to
/// (`NAMESPACE/NAME`).
pub const APPLICATION_ANNOTATION: &str = "kiln.dev/application";
/// The label marking reports Kiln manages.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "kiln";
/// Default of [`ReportOptions::max_results`]: with messages of at most
/// [`MAX_MESSAGE`] bytes a report stays well below etcd's 1.5 MiB object
/// limit.
pub const DEFAULT_MAX_RESULTS: usize = 500;
/// The longest result message kept, in bytes.
pub const MAX_MESSAGE: usize = 1024;

/// `PolicyReport` (namespaced) or `ClusterPolicyReport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReportKind {
    /// The findings about one namespace's objects.
    PolicyReport,
    /// The findings about cluster-scoped objects.
    ClusterPolicyReport,
}

/// A `wgpolicyk8s.io/v1alpha2` PolicyReport or ClusterPolicyReport.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyReport {
    /// Always [`API_VERSION`].
    pub api_version: String,
    /// Which of the two.
    pub kind: ReportKind,
    /// Name, namespace (PolicyReport only), labels, annotations.
    pub metadata: ObjectMeta,
    /// The object the report is about, when it is about one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<ObjectReference>,
    /// Counts of every result, listed or left out.
    pub summary: Summary,
    /// The results (at most [`ReportOptions::max_results`]).
    #[serde(default)]
    pub results: Vec<ReportResult>,
}

impl PolicyReport {
    /// How many results were left out of `results` (the
    /// [`OMITTED_ANNOTATION`]).
    pub fn omitted(&self) -> usize {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(OMITTED_ANNOTATION))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }
}

/// Counts per result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// `pass` results.
    pub pass: u64,
    /// `fail` results.
    pub fail: u64,
    /// `warn` results.
    pub warn: u64,
    /// `error` results.
    pub error: u64,
    /// `skip` results.
    pub skip: u64,
}

impl Summary {
    fn count(&mut self, outcome: Outcome) {
        let slot = match outcome {
            Outcome::Pass => &mut self.pass,
            Outcome::Fail => &mut self.fail,
            Outcome::Warn => &mut self.warn,
            Outcome::Error => &mut self.error,
            Outcome::Skip => &mut self.skip,
        };
        *slot = slot.saturating_add(1);
    }
}

/// `result` of a report result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The policy could not be evaluated. (Declared first: the most
    /// serious results are listed first.)
    Error,
    /// The requirements are not met.
    Fail,
    /// The requirements are not met; not scored.
    Warn,
    /// The requirements are met.
    Pass,
    /// The policy was not selected.
    Skip,
}

/// `severity` of a report result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportSeverity {
    /// Critical.
    Critical,
    /// High: Kiln's `error`.
    High,
    /// Medium: Kiln's `warning`.
    Medium,
    /// Low.
    Low,
    /// Info: Kiln's `info`.
    Info,
}

/// `metav1.Timestamp`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Timestamp {
    /// Seconds since the Unix epoch.
    pub seconds: i64,
    /// Nanoseconds within the second.
    pub nanos: i32,
}

impl Timestamp {
    /// The current time.
    pub fn now() -> Self {
        let now = jiff::Timestamp::now();
        Timestamp {
            seconds: now.as_second(),
            nanos: now.subsec_nanosecond(),
        }
    }
}

/// One result of a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportResult {
    /// Always [`SOURCE`].
    pub source: String,
    /// The policy: Kiln's policy (the plugin's name), or for a policy that
    /// reports its rules, the policy the rule belongs to (Kiln's policy is
    /// then the `kilnPolicy` property).
    pub policy: String,
    /// The rule within the policy (empty for a policy of findings only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rule: String,
    /// How serious; none for a policy that could not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<ReportSeverity>,
    /// When the policy ran.
    pub timestamp: Timestamp,
    /// The outcome.
    pub result: Outcome,
    /// Whether the result counts against the resource (enforced policies).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scored: bool,
    /// The object concerned (none: the rendered set as a whole).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ObjectReference>,
    /// What the policy said (at most [`MAX_MESSAGE`] bytes).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// `mode`, and `fieldPath` when the finding names a field.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, String>,
}

/// What one entry says: a finding of some severity, or a policy that could
/// not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Said {
    /// A finding.
    Finding(Severity),
    /// The policy could not run.
    Failed,
}

/// One thing a policy said, before it is placed in a report.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The policy.
    pub policy: String,
    /// Its mode.
    pub mode: Mode,
    /// A finding, or a failure to run.
    pub said: Said,
    /// The object concerned; `None` for the set as a whole.
    pub object: Option<ObjectRef>,
    /// The field, when known.
    pub field_path: Option<String>,
    /// The message (or why the policy could not run).
    pub message: String,
    /// The rule that said it, when the policy reports its rules.
    pub rule: Option<RuleRef>,
}

impl Entry {
    /// Every finding and failure of a policy evaluation, in order.
    pub fn from_report(report: &Report) -> Vec<Entry> {
        let mut entries = Vec::new();
        for result in &report.results {
            entries.extend(result.findings.iter().map(|f| Entry {
                policy: result.policy.clone(),
                mode: result.mode,
                said: Said::Finding(f.severity),
                object: f.object.clone(),
                field_path: f.field_path.clone(),
                message: f.message.clone(),
                rule: f.rule.clone(),
            }));
            if let Some(error) = &result.error {
                entries.push(Entry {
                    policy: result.policy.clone(),
                    mode: result.mode,
                    said: Said::Failed,
                    object: None,
                    field_path: None,
                    message: format!("the policy failed to run: {error}"),
                    rule: None,
                });
            }
        }
        entries
    }

    /// The report result of this entry.
    pub fn to_result(&self, timestamp: Timestamp) -> ReportResult {
        let (result, severity, scored) = match self.said {
            Said::Failed => (Outcome::Error, None, self.mode == Mode::Enforce),
            Said::Finding(Severity::Error) => match self.mode {
                Mode::Enforce => (Outcome::Fail, Some(ReportSeverity::High), true),
                Mode::Warn => (Outcome::Warn, Some(ReportSeverity::High), false),
                _ => (Outcome::Fail, Some(ReportSeverity::High), false),
            },
            Said::Finding(Severity::Warning) => {
                (Outcome::Warn, Some(ReportSeverity::Medium), false)
            }
            Said::Finding(_) => (Outcome::Pass, Some(ReportSeverity::Info), false),
        };
        let mut properties = BTreeMap::from([("mode".to_owned(), self.mode.to_string())]);
        if let Some(path) = &self.field_path {
            properties.insert("fieldPath".into(), path.clone());
        }
        // A rule's result reads as its policy engine's own report does: the
        // policy its author named and the rule; the Kiln policy that ran it
        // is a property.
        let (policy, rule) = match &self.rule {
            Some(rule) => {
                properties.insert("kilnPolicy".into(), self.policy.clone());
                (rule.policy.clone(), rule.rule.clone())
            }
            None => (self.policy.clone(), String::new()),
        };
        ReportResult {
            source: SOURCE.into(),
            policy,
            rule,
            severity,
            timestamp,
            result,
            scored,
            resources: self.object.iter().map(object_reference).collect(),
            message: crate::text::bounded(&self.message, MAX_MESSAGE),
            properties,
        }
    }
}

/// The longest name a report gets (a DNS subdomain).
const MAX_NAME: usize = 253;

/// The name of an application's reports: `kiln-APP`, made a valid object
/// name (lowercase letters, digits, `-` and `.`; at most 253 bytes).
pub fn name_for(application: &str) -> String {
    let mut name: String = format!("kiln-{application}")
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-' | '.') => c,
            _ => '-',
        })
        .take(MAX_NAME)
        .collect();
    while name.ends_with(['-', '.']) {
        name.pop();
    }
    name
}

/// A report's reference to an object.
pub fn object_reference(object: &ObjectRef) -> ObjectReference {
    ObjectReference {
        api_version: Some(object.api_version.clone()).filter(|v| !v.is_empty()),
        kind: Some(object.kind.clone()).filter(|v| !v.is_empty()),
        namespace: object.namespace.clone(),
        name: Some(object.name.clone()).filter(|v| !v.is_empty()),
        ..ObjectReference::default()
    }
}

/// How reports are named and bounded.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// `metadata.name` of every report (e.g. `kiln-APP`).
    pub name: String,
    /// Labels of every report. Default: [`MANAGED_BY_LABEL`]=[`MANAGED_BY`].
    pub labels: BTreeMap<String, String>,
    /// Annotations of every report (e.g. [`APPLICATION_ANNOTATION`]).
    /// Default: none.
    pub annotations: BTreeMap<String, String>,
    /// Results one report lists at most. Default: [`DEFAULT_MAX_RESULTS`].
    pub max_results: usize,
    /// When the policies ran. Default: now.
    pub timestamp: Timestamp,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            name: "kiln".into(),
            labels: BTreeMap::from([(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned())]),
            annotations: BTreeMap::new(),
            max_results: DEFAULT_MAX_RESULTS,
            timestamp: Timestamp::now(),
        }
    }
}

/// Where an entry's result goes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Placement {
    /// The PolicyReport of this namespace.
    Namespace(String),
    /// The ClusterPolicyReport.
    Cluster,
}

/// The reports of one evaluation: one PolicyReport per namespace, and a
/// ClusterPolicyReport when there are results about cluster-scoped objects.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reports {
    /// PolicyReports, by namespace.
    pub namespaced: Vec<PolicyReport>,
    /// The ClusterPolicyReport.
    pub cluster: Option<PolicyReport>,
}

impl Reports {
    /// Every report, the namespaced ones first.
    pub fn all(&self) -> impl Iterator<Item = &PolicyReport> {
        self.namespaced.iter().chain(&self.cluster)
    }
}

/// Splits `entries` into reports: each goes where `place` says.
pub fn split(
    entries: &[Entry],
    place: impl Fn(&Entry) -> Placement,
    options: &ReportOptions,
) -> Reports {
    let mut groups: BTreeMap<Placement, Vec<&Entry>> = BTreeMap::new();
    for entry in entries {
        groups.entry(place(entry)).or_default().push(entry);
    }
    let mut reports = Reports::default();
    for (placement, entries) in groups {
        match placement {
            Placement::Namespace(namespace) => {
                reports
                    .namespaced
                    .push(build(entries, Some(namespace), options))
            }
            Placement::Cluster => reports.cluster = Some(build(entries, None, options)),
        }
    }
    reports
}

/// One PolicyReport in `namespace` holding every entry (the controller's
/// report of one Application). No entries: a report with no results.
pub fn single(entries: &[Entry], namespace: &str, options: &ReportOptions) -> PolicyReport {
    build(
        entries.iter().collect(),
        Some(namespace.to_owned()),
        options,
    )
}

/// One report: entries deduplicated, the most serious first, bounded.
fn build(entries: Vec<&Entry>, namespace: Option<String>, options: &ReportOptions) -> PolicyReport {
    let mut seen = HashSet::new();
    let mut results: Vec<ReportResult> = entries
        .into_iter()
        .filter(|e| seen.insert(*e))
        .map(|e| e.to_result(options.timestamp))
        .collect();
    // Stable: within one outcome, the policies' own order.
    results.sort_by_key(|r| r.result);
    let mut summary = Summary::default();
    for result in &results {
        summary.count(result.result);
    }
    let omitted = results.len().saturating_sub(options.max_results);
    results.truncate(options.max_results);
    let mut annotations = options.annotations.clone();
    if omitted > 0 {
        annotations.insert(OMITTED_ANNOTATION.into(), omitted.to_string());
    }
    let kind = if namespace.is_some() {
        ReportKind::PolicyReport
    } else {
        ReportKind::ClusterPolicyReport
    };
    PolicyReport {
        api_version: API_VERSION.into(),
        kind,
        metadata: ObjectMeta {
            name: Some(options.name.clone()),
            namespace,
            labels: Some(options.labels.clone()).filter(|l| !l.is_empty()),
            annotations: Some(annotations).filter(|a| !a.is_empty()),
            ..ObjectMeta::default()
        },
        scope: None,
        summary,
        results,
    }
}

/// Places entries without a cluster: by the object's namespace; an object
/// without one by its kind's scope (Kubernetes' own kinds, CRDs of the
/// rendered set), a namespaced one in `default_namespace`. Entries about no
/// object go to `default_namespace`, or the ClusterPolicyReport when it is
/// empty.
#[derive(Debug, Clone, Default)]
pub struct Scopes {
    default_namespace: String,
    defined: crate::sync::DefinedScopes,
}

impl Scopes {
    /// Scopes of `objects`' kinds, with `default_namespace` for namespaced
    /// objects that name none (`""`: `default`, as kubectl does).
    pub fn new(objects: &[serde_json::Value], default_namespace: &str) -> Self {
        Scopes {
            default_namespace: default_namespace.to_owned(),
            defined: crate::sync::DefinedScopes::of(objects),
        }
    }

    /// Whether `object`'s kind is namespaced.
    pub fn namespaced(&self, object: &ObjectRef) -> bool {
        let group = object
            .api_version
            .rsplit_once('/')
            .map(|(g, _)| g)
            .unwrap_or_default();
        let key = crate::manifest::ObjectKey {
            group: group.to_owned(),
            kind: object.kind.clone(),
            namespace: object.namespace.clone(),
            name: object.name.clone(),
        };
        if let Some(namespaced) = self.defined.namespaced(&key) {
            return namespaced;
        }
        if object.namespace.is_some() {
            return true;
        }
        !super::placement::builtin_cluster_scoped(group, &object.kind)
    }

    /// Where `entry`'s result goes.
    pub fn place(&self, entry: &Entry) -> Placement {
        match &entry.object {
            Some(object) if self.namespaced(object) => Placement::Namespace(
                object
                    .namespace
                    .clone()
                    .filter(|ns| !ns.is_empty())
                    .unwrap_or_else(|| self.fallback_namespace()),
            ),
            Some(_) => Placement::Cluster,
            None if self.default_namespace.is_empty() => Placement::Cluster,
            None => Placement::Namespace(self.default_namespace.clone()),
        }
    }

    fn fallback_namespace(&self) -> String {
        if self.default_namespace.is_empty() {
            "default".into()
        } else {
            self.default_namespace.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::Finding;
    use crate::policy::PolicyResult;

    fn object(kind: &str, api_version: &str, namespace: Option<&str>, name: &str) -> ObjectRef {
        ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.map(Into::into),
            name: name.into(),
        }
    }

    fn finding(object: ObjectRef, severity: Severity, message: &str) -> Finding {
        Finding {
            object: Some(object),
            field_path: Some("metadata.labels".into()),
            message: message.into(),
            severity,
            rule: None,
        }
    }

    fn report(results: Vec<(&str, Mode, Vec<Finding>, Option<&str>)>) -> Report {
        Report {
            results: results
                .into_iter()
                .map(|(policy, mode, findings, error)| PolicyResult {
                    policy: policy.into(),
                    mode,
                    findings,
                    error: error.map(Into::into),
                    duration: std::time::Duration::ZERO,
                    read_set: Default::default(),
                    lookups: Default::default(),
                    pending: Vec::new(),
                    cached: false,
                })
                .collect(),
        }
    }

    fn options() -> ReportOptions {
        ReportOptions {
            name: "kiln-web".into(),
            timestamp: Timestamp {
                seconds: 1,
                nanos: 2,
            },
            ..ReportOptions::default()
        }
    }

    #[test]
    fn namespaced_and_cluster_scoped_objects_go_to_their_reports() {
        let report = report(vec![
            (
                "required-labels",
                Mode::Enforce,
                vec![
                    finding(
                        object("ConfigMap", "v1", Some("shop"), "a"),
                        Severity::Error,
                        "missing team",
                    ),
                    // No namespace: the destination namespace.
                    finding(
                        object("Deployment", "apps/v1", None, "web"),
                        Severity::Warning,
                        "w",
                    ),
                    finding(
                        object("ClusterRole", "rbac.authorization.k8s.io/v1", None, "r"),
                        Severity::Error,
                        "missing team",
                    ),
                    // Defined cluster-scoped by a CRD of the set.
                    finding(
                        object("Widget", "example.com/v1", None, "w1"),
                        Severity::Info,
                        "i",
                    ),
                ],
                None,
            ),
            ("broken", Mode::Warn, vec![], Some("trap")),
        ]);
        let crd = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "names": {"kind": "Widget"}, "scope": "Cluster"}
        });
        let scopes = Scopes::new(&[crd], "web");
        let entries = Entry::from_report(&report);
        let reports = split(&entries, |e| scopes.place(e), &options());
        let namespaces: Vec<_> = reports
            .namespaced
            .iter()
            .map(|r| r.metadata.namespace.clone().unwrap())
            .collect();
        assert_eq!(namespaces, ["shop", "web"]);
        let web = &reports.namespaced[1];
        assert_eq!(web.kind, ReportKind::PolicyReport);
        // The failure to run sorts first.
        assert_eq!(web.results[0].result, Outcome::Error);
        assert_eq!(web.results[0].policy, "broken");
        assert!(!web.results[0].scored);
        assert_eq!(web.results[1].result, Outcome::Warn);
        assert_eq!(web.results[1].severity, Some(ReportSeverity::Medium));
        assert_eq!(
            web.summary,
            Summary {
                warn: 1,
                error: 1,
                ..Summary::default()
            }
        );
        let cluster = reports.cluster.as_ref().unwrap();
        assert_eq!(cluster.kind, ReportKind::ClusterPolicyReport);
        assert_eq!(cluster.metadata.namespace, None);
        assert_eq!(cluster.summary.fail, 1);
        assert_eq!(cluster.summary.pass, 1);
        assert_eq!(
            cluster.results[0].resources[0].kind.as_deref(),
            Some("ClusterRole")
        );
        let shop = &reports.namespaced[0];
        assert!(shop.results[0].scored);
        assert_eq!(shop.results[0].severity, Some(ReportSeverity::High));
        assert_eq!(shop.results[0].properties["mode"], "enforce");
        assert_eq!(shop.results[0].properties["fieldPath"], "metadata.labels");
    }

    #[test]
    fn a_rule_result_names_its_policy_and_rule_as_its_engine_does() {
        let mut found = finding(object("Pod", "v1", Some("ns"), "x"), Severity::Error, "bad");
        found.rule = Some(RuleRef {
            policy: "disallow-privileged".into(),
            rule: "privileged-containers".into(),
        });
        let report = report(vec![("kyverno", Mode::Enforce, vec![found], None)]);
        let one = single(&Entry::from_report(&report), "ns", &options());
        let result = &one.results[0];
        assert_eq!(result.policy, "disallow-privileged");
        assert_eq!(result.rule, "privileged-containers");
        assert_eq!(result.properties["kilnPolicy"], "kyverno");
        assert_eq!(result.result, Outcome::Fail);
    }

    #[test]
    fn the_wire_form_is_the_wg_policy_schema() {
        let report = report(vec![(
            "p",
            Mode::Audit,
            vec![finding(
                object("Pod", "v1", Some("ns"), "x"),
                Severity::Error,
                "bad",
            )],
            None,
        )]);
        let one = single(&Entry::from_report(&report), "ns", &options());
        let value = serde_json::to_value(&one).unwrap();
        assert_eq!(
            value,
            serde_json::json!({
                "apiVersion": "wgpolicyk8s.io/v1alpha2",
                "kind": "PolicyReport",
                "metadata": {
                    "name": "kiln-web", "namespace": "ns",
                    "labels": {"app.kubernetes.io/managed-by": "kiln"}
                },
                "summary": {"pass": 0, "fail": 1, "warn": 0, "error": 0, "skip": 0},
                "results": [{
                    "source": "kiln", "policy": "p", "severity": "high",
                    "timestamp": {"seconds": 1, "nanos": 2}, "result": "fail",
                    "resources": [{"apiVersion": "v1", "kind": "Pod", "namespace": "ns", "name": "x"}],
                    "message": "bad",
                    "properties": {"fieldPath": "metadata.labels", "mode": "audit"}
                }]
            })
        );
        let back: PolicyReport = serde_json::from_value(value).unwrap();
        assert_eq!(back, one);
    }

    #[test]
    fn reports_are_bounded_deduplicated_and_count_what_they_leave_out() {
        let mut findings: Vec<Finding> = (0..30)
            .map(|i| {
                finding(
                    object("Pod", "v1", Some("ns"), &format!("p{i}")),
                    Severity::Warning,
                    &"long ".repeat(1000),
                )
            })
            .collect();
        findings.push(findings[0].clone());
        findings.push(finding(
            object("Pod", "v1", Some("ns"), "last"),
            Severity::Error,
            "the worst",
        ));
        let report = report(vec![("p", Mode::Enforce, findings, None)]);
        let options = ReportOptions {
            max_results: 10,
            ..options()
        };
        let one = single(&Entry::from_report(&report), "ns", &options);
        assert_eq!(one.results.len(), 10);
        // 32 entries, one repeated: 31 results, 10 listed.
        assert_eq!(one.omitted(), 21);
        assert_eq!(one.summary.warn, 30);
        assert_eq!(one.summary.fail, 1);
        assert_eq!(one.results[0].message, "the worst", "most serious first");
        assert!(one.results[1].message.len() <= MAX_MESSAGE + 40);
    }

    #[test]
    fn report_names_are_valid_object_names() {
        assert_eq!(name_for("web"), "kiln-web");
        assert_eq!(name_for("My_App."), "kiln-my-app");
        assert_eq!(name_for(&"x".repeat(400)).len(), MAX_NAME);
    }

    #[test]
    fn no_findings_is_a_report_with_no_results() {
        let one = single(&[], "ns", &options());
        assert!(one.results.is_empty());
        assert_eq!(one.summary, Summary::default());
        assert_eq!(one.omitted(), 0);
        let value = serde_json::to_value(&one).unwrap();
        assert_eq!(value["results"], serde_json::json!([]));
    }
}
