//! One wgpolicyk8s.io PolicyReport per Application, in step with its
//! `status.policy`, and the `kiln_policy_findings` gauge.
//!
//! The report (`kiln-APP`, [`crate::policy::report::name_for`]) lives in the
//! Application's destination namespace on the destination cluster, written
//! by server-side apply with the controller's field manager, labelled
//! `app.kubernetes.io/managed-by=kiln` and annotated with the Application
//! (`kiln.dev/application: NAMESPACE/NAME`; no ownerReference, which cannot
//! cross namespaces). Its results are emptied when the findings go away and
//! it is deleted with the Application (through the resources finalizer).
//! An Application without a destination namespace gets no report. A cluster
//! without the PolicyReport CRD is logged once and looked at again every
//! [`ABSENT_RECHECK`]; the status is kept either way.

use std::collections::HashMap;
use std::hash::{Hash as _, Hasher as _};
use std::str::FromStr as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::Value;

use super::destination::Target;
use super::metrics::Metrics;
use crate::api::{Application, PolicyStatus};
use crate::cluster::{Cluster, ClusterError};
use crate::plugin::{ObjectRef, RuleRef, Severity};
use crate::policy::Mode;
use crate::policy::report::{
    self, APPLICATION_ANNOTATION, Entry, OMITTED_ANNOTATION, ReportOptions, Said,
};

/// How long a cluster found without the PolicyReport CRD is left alone.
pub const ABSENT_RECHECK: Duration = Duration::from_secs(300);

/// The `kind` and `apiVersion` of the reports.
const KIND: &str = "PolicyReport";

/// The labels of one `kiln_policy_findings` series.
type Series = Vec<(String, String)>;

/// What the controller last wrote, per Application; shared by reconciles.
#[derive(Default)]
pub struct PolicyReports {
    /// Per Application (`NAMESPACE/NAME`): the digest of the report last
    /// applied (its results less their timestamps), and where.
    applied: Mutex<HashMap<String, (u64, String, String)>>,
    /// Per Application: its findings counted in the gauge.
    counted: Mutex<HashMap<String, HashMap<Series, i64>>>,
    /// Servers found without the CRD, and when.
    absent: Mutex<HashMap<String, Instant>>,
}

fn key(app: &Application) -> String {
    format!(
        "{}/{}",
        app.metadata.namespace.as_deref().unwrap_or_default(),
        app.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The entries of a status: its findings, a policy that failed to run as
/// such, each object's `apiVersion` looked up in the rendered set.
pub fn entries(status: &PolicyStatus, objects: &[Value]) -> Vec<Entry> {
    status
        .findings
        .iter()
        .map(|f| {
            let mode = Mode::from_str(&f.mode).unwrap_or_default();
            let said = match f.message.strip_prefix(crate::policy::status::FAILED_TO_RUN) {
                Some(_) if f.object.is_none() => Said::Failed,
                _ => Said::Finding(match f.severity.as_str() {
                    "error" => Severity::Error,
                    "warning" => Severity::Warning,
                    _ => Severity::Info,
                }),
            };
            Entry {
                policy: f.policy.clone(),
                mode,
                said,
                object: f.object.as_deref().map(|o| object_ref(o, objects)),
                field_path: f.field_path.clone(),
                message: f.message.clone(),
                rule: f.rule.as_ref().map(|r| RuleRef {
                    policy: r.policy.clone(),
                    rule: r.name.clone(),
                }),
            }
        })
        .collect()
}

/// `Kind/namespace/name` or `Kind/name` (as the status writes them) back to
/// a reference, with the `apiVersion` of the rendered object it names.
fn object_ref(text: &str, objects: &[Value]) -> ObjectRef {
    let parts: Vec<&str> = text.splitn(3, '/').collect();
    let (kind, namespace, name) = match parts[..] {
        [kind, namespace, name] => (kind, Some(namespace), name),
        [kind, name] => (kind, None, name),
        _ => ("", None, text),
    };
    // Policies name objects as they will be applied (policy::placement):
    // a namespaced object the render left without a namespace is named in
    // the destination namespace.
    let named = |o: &&Value| {
        o.get("kind").and_then(Value::as_str) == Some(kind)
            && o.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
    };
    fn rendered_namespace(o: &Value) -> Option<&str> {
        o.pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|ns| !ns.is_empty())
    }
    let api_version = objects
        .iter()
        .filter(named)
        .find(|o| namespace.is_none() || rendered_namespace(o) == namespace)
        .or_else(|| {
            objects
                .iter()
                .filter(named)
                .find(|o| rendered_namespace(o).is_none())
        })
        .and_then(|o| o.get("apiVersion").and_then(Value::as_str))
        .unwrap_or_default();
    ObjectRef {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        namespace: namespace.map(str::to_owned),
        name: name.to_owned(),
    }
}

/// The report of one Application (what [`PolicyReports::publish`] applies).
pub fn build(app: &Application, status: &PolicyStatus, objects: &[Value]) -> report::PolicyReport {
    let name = app.metadata.name.clone().unwrap_or_default();
    let namespace = app.spec.destination.namespace.clone().unwrap_or_default();
    let options = ReportOptions {
        name: report::name_for(&name),
        annotations: [(APPLICATION_ANNOTATION.to_owned(), key(app))].into(),
        ..ReportOptions::default()
    };
    let mut built = report::single(&entries(status, objects), &namespace, &options);
    // The status itself left some out.
    let omitted = built.omitted() + status.omitted as usize;
    if omitted > 0 {
        built
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(OMITTED_ANNOTATION.into(), omitted.to_string());
    }
    built
}

/// The digest of a report, less its timestamps: equal reports are not
/// written again.
fn digest(report: &report::PolicyReport) -> u64 {
    let mut value = serde_json::to_value(report).unwrap_or_default();
    if let Some(results) = value.get_mut("results").and_then(Value::as_array_mut) {
        for result in results {
            if let Some(map) = result.as_object_mut() {
                map.remove("timestamp");
            }
        }
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.to_string().hash(&mut hasher);
    hasher.finish()
}

impl PolicyReports {
    /// Writes the Application's report on its destination and counts its
    /// findings in the gauge. Never fails the reconcile: problems are
    /// logged and retried on the next reconcile.
    pub async fn publish(
        &self,
        app: &Application,
        target: &Target,
        status: &PolicyStatus,
        objects: &[Value],
        metrics: &Metrics,
        manager: &str,
    ) {
        self.count(app, status, metrics);
        let Some(namespace) = app
            .spec
            .destination
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
        else {
            tracing::debug!("no destination namespace: no PolicyReport");
            return;
        };
        let built = build(app, status, objects);
        let digest = digest(&built);
        let app_key = key(app);
        let name = built.metadata.name.clone().unwrap_or_default();
        if self
            .applied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&app_key)
            == Some(&(digest, target.server.clone(), namespace.clone()))
        {
            return;
        }
        let Some(resolved) = self.resolve(&target.server, &target.cluster).await else {
            return;
        };
        let api = target.cluster.api(&resolved, Some(&namespace));
        let body = match serde_json::to_value(&built) {
            Ok(body) => body,
            Err(e) => {
                tracing::warn!(error = %e, "cannot encode the PolicyReport");
                return;
            }
        };
        match api
            .patch(
                &name,
                &PatchParams::apply(manager).force(),
                &Patch::Apply(&body),
            )
            .await
        {
            Ok(_) => {
                self.applied
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(app_key, (digest, target.server.clone(), namespace));
            }
            // The namespace may not exist before the first sync creates it.
            Err(e) => tracing::info!(
                error = %crate::text::chain(&e),
                report = %name,
                %namespace,
                "cannot write the PolicyReport; retrying on the next reconcile"
            ),
        }
    }

    /// Deletes the report of an Application being deleted, and takes its
    /// findings out of the gauge. `Err` when the report is still there.
    pub async fn remove(
        &self,
        app: &Application,
        target: &Target,
        metrics: &Metrics,
    ) -> Result<(), kube::Error> {
        self.count(app, &PolicyStatus::default(), metrics);
        let app_key = key(app);
        self.applied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&app_key);
        let Some(namespace) = app
            .spec
            .destination
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
        else {
            return Ok(());
        };
        let Some(resolved) = self.resolve(&target.server, &target.cluster).await else {
            return Ok(());
        };
        let api = target.cluster.api(&resolved, Some(&namespace));
        let name = report::name_for(app.metadata.name.as_deref().unwrap_or_default());
        // Only Kiln's own report of this Application.
        match api.get_opt(&name).await? {
            Some(found)
                if found
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(APPLICATION_ANNOTATION))
                    == Some(&app_key) =>
            {
                match api.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                    Err(e) => Err(e),
                }
            }
            _ => Ok(()),
        }
    }

    /// The PolicyReport resource of `cluster`; `None` (logged once per
    /// cluster) when it does not serve it.
    async fn resolve(&self, server: &str, cluster: &Cluster) -> Option<crate::cluster::Resolved> {
        if let Some(since) = self
            .absent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(server)
            && since.elapsed() < ABSENT_RECHECK
        {
            return None;
        }
        match cluster.resolve(report::API_VERSION, KIND).await {
            Ok(resolved) => {
                self.absent
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(server);
                Some(resolved)
            }
            Err(ClusterError::UnknownKind { .. }) => {
                let first = self
                    .absent
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(server.to_owned(), Instant::now())
                    .is_none();
                if first {
                    tracing::warn!(
                        %server,
                        "the cluster does not serve wgpolicyk8s.io/v1alpha2 PolicyReport: policy findings stay in the Applications' status only (install deploy/policy-reports/)"
                    );
                }
                None
            }
            Err(e) => {
                tracing::info!(%server, error = %crate::text::chain(&e), "cannot look up the PolicyReport kind");
                None
            }
        }
    }

    /// Replaces the Application's share of `kiln_policy_findings`.
    fn count(&self, app: &Application, status: &PolicyStatus, metrics: &Metrics) {
        let mut now: HashMap<Series, i64> = HashMap::new();
        for finding in &status.findings {
            let labels = vec![
                ("policy".to_owned(), finding.policy.clone()),
                ("severity".to_owned(), finding.severity.clone()),
                ("mode".to_owned(), finding.mode.clone()),
            ];
            *now.entry(labels).or_default() += 1;
        }
        let mut counted = self.counted.lock().unwrap_or_else(|e| e.into_inner());
        let before = counted.remove(&key(app)).unwrap_or_default();
        for (labels, n) in &before {
            // The guard of `get_or_create` must be gone before `remove`.
            let previous = metrics.policy_findings.get_or_create(labels).dec_by(*n);
            if previous == *n {
                // Nothing left: the series goes, as it would in a fresh
                // process.
                metrics.policy_findings.remove(labels);
            }
        }
        for (labels, n) in &now {
            metrics.policy_findings.get_or_create(labels).inc_by(*n);
        }
        if !now.is_empty() {
            counted.insert(key(app), now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::PolicyFinding;

    fn finding(object: Option<&str>, severity: &str, message: &str) -> PolicyFinding {
        PolicyFinding {
            policy: "required-labels".into(),
            mode: "warn".into(),
            severity: severity.into(),
            object: object.map(Into::into),
            field_path: None,
            message: message.into(),
            rule: None,
        }
    }

    #[test]
    fn status_findings_become_report_results_with_their_objects() {
        let app: Application = serde_json::from_value(serde_json::json!({
            "apiVersion": "kiln.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": "web", "namespace": "kiln"},
            "spec": {"source": {"repoURL": "x"}, "destination": {"namespace": "shop"}}
        }))
        .unwrap();
        let status = PolicyStatus {
            blocked: false,
            findings: vec![
                finding(Some("Deployment/shop/web"), "error", "missing label"),
                finding(Some("ClusterRole/reader"), "warning", "w"),
                finding(
                    None,
                    "error",
                    &format!("{}trap", crate::policy::status::FAILED_TO_RUN),
                ),
            ],
            omitted: 7,
        };
        let objects = vec![
            serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "shop"}}),
            serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "reader"}}),
        ];
        let built = build(&app, &status, &objects);
        assert_eq!(built.metadata.name.as_deref(), Some("kiln-web"));
        assert_eq!(built.metadata.namespace.as_deref(), Some("shop"));
        let annotations = built.metadata.annotations.clone().unwrap();
        assert_eq!(annotations[APPLICATION_ANNOTATION], "kiln/web");
        assert_eq!(annotations[OMITTED_ANNOTATION], "7");
        assert_eq!(built.summary.error, 1);
        assert_eq!(built.summary.warn, 2, "error findings in warn mode warn");
        let resources: Vec<_> = built
            .results
            .iter()
            .flat_map(|r| &r.resources)
            .map(|r| (r.api_version.clone().unwrap(), r.name.clone().unwrap()))
            .collect();
        assert_eq!(
            resources,
            [
                ("apps/v1".to_owned(), "web".to_owned()),
                (
                    "rbac.authorization.k8s.io/v1".to_owned(),
                    "reader".to_owned()
                )
            ]
        );
        // Only the timestamps differ: the same report.
        let again = build(&app, &status, &objects);
        assert_eq!(digest(&built), digest(&again));
        let cleared = build(&app, &PolicyStatus::default(), &objects);
        assert!(cleared.results.is_empty());
        assert_ne!(digest(&built), digest(&cleared));
    }

    #[test]
    fn the_gauge_follows_each_applications_current_findings() {
        let metrics = Metrics::default();
        let reports = PolicyReports::default();
        let app = |name: &str| -> Application {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "kiln.dev/v1alpha1", "kind": "Application",
                "metadata": {"name": name, "namespace": "kiln"},
                "spec": {"source": {"repoURL": "x"}, "destination": {}}
            }))
            .unwrap()
        };
        let two = PolicyStatus {
            findings: vec![
                finding(Some("ConfigMap/a"), "error", "x"),
                finding(Some("ConfigMap/b"), "error", "x"),
            ],
            ..PolicyStatus::default()
        };
        reports.count(&app("a"), &two, &metrics);
        reports.count(&app("b"), &two, &metrics);
        reports.count(&app("a"), &two, &metrics);
        let series =
            "kiln_policy_findings{policy=\"required-labels\",severity=\"error\",mode=\"warn\"}";
        let text = metrics.encode().unwrap();
        assert!(text.contains(&format!("{series} 4\n")), "{text}");
        reports.count(&app("a"), &PolicyStatus::default(), &metrics);
        reports.count(&app("b"), &PolicyStatus::default(), &metrics);
        let text = metrics.encode().unwrap();
        assert!(!text.contains(series), "{text}");
    }
}
