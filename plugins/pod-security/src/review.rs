//! Reviewing a rendered set: every pod and pod template checked against the
//! policy of its namespace, one finding per failed check.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::checks::{self, CheckFn, Pod, Violation};
use crate::level::{Level, LevelVersion};
use crate::model::PodTemplateSpec;
use crate::namespaces::NamespacePolicy;
use crate::settings::Settings;
use crate::workload;

/// Longest Pod Security Admission text (reason and detail) a finding
/// carries, in bytes; longer ones (it lists every offending container by
/// name) are cut at a character boundary and say how much was cut. The
/// check id and the other offending fields ([`MAX_LISTED_FIELDS`]) come on
/// top.
pub const MAX_MESSAGE_BYTES: usize = 8 * 1024;

/// How many offending field paths besides the first a finding's message
/// lists.
pub const MAX_LISTED_FIELDS: usize = 5;

/// The check id of findings about a pod template the checks cannot read
/// (a field of the wrong type: the API server would refuse the object).
pub const INVALID_TEMPLATE_CHECK: &str = "podTemplate";

/// The check id of findings about an invalid policy label on a Namespace.
pub const INVALID_LABEL_CHECK: &str = "namespaceLabels";

/// One manifest of the rendered set.
#[derive(Debug, Clone, Copy)]
pub struct Manifest<'a> {
    /// JSON text of one object.
    pub content: &'a str,
    /// Where it came from, for error messages.
    pub source: Option<&'a str>,
}

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// An audit-label violation.
    Info,
    /// A warn-label violation.
    Warning,
    /// An enforced violation.
    Error,
}

/// The object a finding is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectId {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.namespace`, when set.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The object concerned.
    pub object: ObjectId,
    /// The first offending field.
    pub field_path: Option<String>,
    /// The check's id, Pod Security Admission's wording and the other
    /// offending fields.
    pub message: String,
    /// How serious it is.
    pub severity: Severity,
    /// The check's id (`privileged`, ...).
    pub check: &'static str,
}

/// Why a review could not be done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReviewError {
    /// A manifest is not a JSON object this policy can read.
    #[error("manifest {index} (from {}) is not readable JSON: {error}", origin.as_deref().unwrap_or("unknown source"))]
    NotJson {
        /// Its index in the set.
        index: usize,
        /// Where it came from.
        origin: Option<String>,
        /// The parser's message.
        error: String,
    },
}

/// The checks of each level and version met so far.
#[derive(Default)]
struct Evaluator {
    checks: HashMap<(Level, u32), Vec<(&'static str, CheckFn)>>,
}

impl Evaluator {
    fn evaluate(&mut self, at: LevelVersion, pod: &Pod<'_>) -> Vec<(&'static str, Violation)> {
        let minor = at.version.effective_minor();
        let checks = self
            .checks
            .entry((at.level, minor))
            .or_insert_with(|| checks::checks_for(at.level, minor));
        checks
            .iter()
            .filter_map(|(id, check)| check(pod).map(|v| (*id, v)))
            .collect()
    }
}

fn str_at<'v>(value: &'v Value, pointer: &str) -> Option<&'v str> {
    value.pointer(pointer).and_then(Value::as_str)
}

/// The object's identity; `None` without an `apiVersion` and a `kind`
/// (then it is no kind this policy checks). A nameless object keeps its
/// `generateName` (or an empty name): the API server names it, and it must
/// not escape the checks for want of a name.
fn object_id(object: &Value) -> Option<ObjectId> {
    Some(ObjectId {
        api_version: str_at(object, "/apiVersion")?.to_owned(),
        kind: str_at(object, "/kind")?.to_owned(),
        namespace: str_at(object, "/metadata/namespace").map(str::to_owned),
        name: str_at(object, "/metadata/name")
            .or_else(|| str_at(object, "/metadata/generateName"))
            .unwrap_or_default()
            .to_owned(),
    })
}

/// `text`, cut to [`MAX_MESSAGE_BYTES`] at a character boundary.
fn bounded(mut text: String) -> String {
    if let Some(cut) = checks::text::cut_at(&mut text, MAX_MESSAGE_BYTES) {
        text.push_str(&format!("… ({cut} more bytes)"));
    }
    text
}

fn finding(
    object: &ObjectId,
    check: &'static str,
    verb: &str,
    at: LevelVersion,
    violation: Violation,
    severity: Severity,
) -> Finding {
    let mut message = format!(
        "[{check}] {verb} PodSecurity \"{at}\": {}",
        bounded(violation.describe())
    );
    let paths = &violation.fields.paths;
    if paths.len() > 1 {
        let listed = &paths[1..paths.len().min(1 + MAX_LISTED_FIELDS)];
        let unlisted = paths.len() - 1 - listed.len() + violation.fields.more;
        message.push_str("; also at ");
        message.push_str(&listed.join(", "));
        if unlisted > 0 {
            message.push_str(&format!(" and {unlisted} more"));
        }
    }
    Finding {
        object: object.clone(),
        field_path: paths.first().cloned(),
        message,
        severity,
        check,
    }
}

/// Parses one manifest of the set.
fn parse(index: usize, manifest: &Manifest<'_>) -> Result<Value, ReviewError> {
    serde_json::from_str(manifest.content).map_err(|e| ReviewError::NotJson {
        index,
        origin: manifest.source.map(str::to_owned),
        error: e.to_string(),
    })
}

/// The policies of the Namespaces of the set (when the settings ask for
/// them), and findings for their invalid labels.
fn namespace_policies(
    settings: &Settings,
    manifests: &[Manifest<'_>],
    findings: &mut Vec<Finding>,
) -> Result<HashMap<String, NamespacePolicy>, ReviewError> {
    let mut policies = HashMap::new();
    if !settings.namespace_labels {
        return Ok(policies);
    }
    let defaults = NamespacePolicy::from_settings(settings.enforce);
    for (index, manifest) in manifests.iter().enumerate() {
        // Only Namespaces matter here: skip parsing what cannot be one (a
        // kind written with `\u` escapes is parsed to be sure).
        if !manifest.content.contains("Namespace") && !manifest.content.contains("\\u") {
            continue;
        }
        let object = parse(index, manifest)?;
        if str_at(&object, "/apiVersion") != Some("v1")
            || str_at(&object, "/kind") != Some("Namespace")
        {
            continue;
        }
        let Some(id) = object_id(&object) else {
            continue;
        };
        let labels: BTreeMap<String, String> = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.starts_with(crate::namespaces::LABEL_PREFIX))
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
            .collect();
        let (policy, errors) = NamespacePolicy::from_labels(&labels, defaults);
        for error in errors {
            findings.push(Finding {
                object: id.clone(),
                field_path: Some(format!("metadata.labels.{}", error.label)),
                message: bounded(format!(
                    "[{INVALID_LABEL_CHECK}] Invalid value: {}: {} (Pod Security Admission refuses this Namespace)",
                    checks::text::go_quote(&error.value),
                    error.reason,
                )),
                severity: Severity::Error,
                check: INVALID_LABEL_CHECK,
            });
        }
        policies.insert(id.name, policy);
    }
    Ok(policies)
}

/// Reviews a rendered set. `default_namespace` is the namespace of objects
/// that set none (the Application's destination namespace). Objects are
/// parsed one at a time, so memory holds the set's text and one object.
pub fn review(
    settings: &Settings,
    default_namespace: &str,
    manifests: &[Manifest<'_>],
) -> Result<Vec<Finding>, ReviewError> {
    let mut findings = Vec::new();
    let policies = namespace_policies(settings, manifests, &mut findings)?;
    let fallback = NamespacePolicy::from_settings(settings.enforce);
    let mut evaluator = Evaluator::default();
    for (index, manifest) in manifests.iter().enumerate() {
        let object = parse(index, manifest)?;
        let Some(id) = object_id(&object) else {
            continue;
        };
        let Some(template) = workload::pod_template(&object, &id.api_version, &id.kind) else {
            continue;
        };
        let namespace = id.namespace.as_deref().unwrap_or(default_namespace);
        let policy = policies.get(namespace).copied().unwrap_or(fallback);
        if [policy.enforce, policy.warn, policy.audit]
            .iter()
            .all(|lv| lv.level == Level::Privileged)
        {
            continue;
        }
        let parsed: PodTemplateSpec = match serde_path_to_error::deserialize(template.value) {
            Ok(parsed) => parsed,
            Err(e) => {
                findings.push(invalid_template(&id, template.path, &e));
                continue;
            }
        };
        let (meta, spec) = (
            parsed.metadata.unwrap_or_default(),
            parsed.spec.unwrap_or_default(),
        );
        if spec
            .runtime_class_name
            .as_ref()
            .is_some_and(|rc| settings.exempt_runtime_classes.contains(rc))
        {
            continue;
        }
        let pod = Pod {
            meta: &meta,
            spec: &spec,
            meta_path: template.meta_path,
            spec_path: template.spec_path,
        };
        review_pod(&mut evaluator, &id, &pod, policy, &mut findings);
    }
    Ok(findings)
}

/// The finding for a pod template whose fields have the wrong types.
fn invalid_template(
    id: &ObjectId,
    template_path: &str,
    e: &serde_path_to_error::Error<serde_json::Error>,
) -> Finding {
    let inner = e.path().to_string();
    let mut path = match (template_path, inner.as_str()) {
        (outer, ".") => outer.to_owned(),
        ("", inner) => inner.to_owned(),
        (outer, inner) => format!("{outer}.{inner}"),
    };
    if checks::text::cut_at(&mut path, checks::MAX_PATH_BYTES).is_some() {
        path.push('…');
    }
    Finding {
        object: id.clone(),
        message: bounded(format!(
            "[{INVALID_TEMPLATE_CHECK}] the pod template cannot be checked: {path}: {} (the API server would refuse it)",
            e.inner()
        )),
        field_path: Some(path),
        severity: Severity::Error,
        check: INVALID_TEMPLATE_CHECK,
    }
}

/// Evaluates one pod as Pod Security Admission does: enforce, then audit
/// (reusing enforce's result when the same), then warn only if enforce
/// allowed the pod.
fn review_pod(
    evaluator: &mut Evaluator,
    id: &ObjectId,
    pod: &Pod<'_>,
    policy: NamespacePolicy,
    findings: &mut Vec<Finding>,
) {
    let enforced = evaluator.evaluate(policy.enforce, pod);
    let allowed = enforced.is_empty();
    let audited = if policy.audit == policy.enforce {
        enforced.clone()
    } else {
        evaluator.evaluate(policy.audit, pod)
    };
    for (check, violation) in enforced {
        findings.push(finding(
            id,
            check,
            "violates",
            policy.enforce,
            violation,
            Severity::Error,
        ));
    }
    for (check, violation) in audited {
        findings.push(finding(
            id,
            check,
            "would violate",
            policy.audit,
            violation,
            Severity::Info,
        ));
    }
    if allowed {
        for (check, violation) in evaluator.evaluate(policy.warn, pod) {
            findings.push(finding(
                id,
                check,
                "would violate",
                policy.warn,
                violation,
                Severity::Warning,
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review_one(object: serde_json::Value, settings: &[(&str, &str)]) -> Vec<Finding> {
        let settings = Settings::parse(settings.iter().copied()).unwrap();
        let json = object.to_string();
        review(
            &settings,
            "default",
            &[Manifest {
                content: &json,
                source: None,
            }],
        )
        .unwrap()
    }

    #[test]
    fn thousands_of_offenders_give_one_bounded_finding() {
        let containers: Vec<_> = (0..10_000)
            .map(|i| serde_json::json!({"name": format!("c{i}"), "securityContext": {"privileged": true}}))
            .collect();
        let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": containers}});
        let findings = review_one(pod, &[("level", "baseline")]);
        assert_eq!(findings.len(), 1);
        let message = &findings[0].message;
        assert!(
            message.len() < MAX_MESSAGE_BYTES + 1024,
            "{} bytes",
            message.len()
        );
        assert!(
            message.contains("more bytes); also at spec.containers[1].securityContext.privileged")
        );
        assert!(
            message.ends_with(&format!("and {} more", 10_000 - 1 - MAX_LISTED_FIELDS)),
            "{message}"
        );
    }

    #[test]
    fn pods_named_by_generate_name_are_checked() {
        let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "job-"},
            "spec": {"containers": [{"name": "a", "securityContext": {"privileged": true}}]}});
        let findings = review_one(pod, &[("level", "baseline")]);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(findings[0].object.name, "job-");
        // Even with no name at all, a pod is still checked.
        let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "spec": {"hostPID": true, "containers": []}});
        assert_eq!(review_one(pod, &[("level", "baseline")]).len(), 1);
    }

    #[test]
    fn namespaces_with_escaped_kinds_are_read() {
        let settings = Settings::parse([("namespaceLabels", "true")]).unwrap();
        let ns = r#"{"apiVersion":"v1","kind":"Name\u0073pace","metadata":{"name":"a","labels":{"pod-security.kubernetes.io/enforce":"privileged"}}}"#;
        let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"a"},"spec":{"hostPID":true}}"#;
        let manifests = [ns, pod].map(|content| Manifest {
            content,
            source: None,
        });
        assert!(review(&settings, "", &manifests).unwrap().is_empty());
    }

    #[test]
    fn huge_keys_give_bounded_field_paths() {
        let key = format!(
            "container.apparmor.security.beta.kubernetes.io/{}",
            "k".repeat(100_000)
        );
        let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "annotations": {key: "unconfined"}},
            "spec": {"containers": [{"name": "c", "securityContext": {"privileged": "x".repeat(100_000)}}]}});
        let mut wrong = pod.clone();
        wrong["metadata"]["annotations"] = serde_json::json!({"k".repeat(100_000): 1});
        let findings = review_one(wrong, &[("level", "baseline")]);
        assert!(findings[0].field_path.as_ref().unwrap().len() <= checks::MAX_PATH_BYTES + 3);
        let findings = review_one(pod.clone(), &[("level", "baseline")]);
        assert_eq!(findings.len(), 1, "{findings:?}");
        let f = &findings[0];
        assert!(
            f.field_path.as_ref().unwrap().len() <= 1024,
            "{}",
            f.message.len()
        );
        assert!(
            f.message.len() <= MAX_MESSAGE_BYTES + 1024,
            "{}",
            f.message.len()
        );
        let mut pod = pod;
        pod["spec"]["containers"][0]["securityContext"]["privileged"] = serde_json::json!(true);
        let findings = review_one(pod, &[("level", "baseline")]);
        assert_eq!(findings.len(), 2, "{findings:?}");
        for f in findings {
            assert!(f.field_path.as_ref().unwrap().len() <= checks::MAX_PATH_BYTES + 3);
            assert!(
                f.message.len() <= MAX_MESSAGE_BYTES + 6 * 1024,
                "{}",
                f.message.len()
            );
        }
    }

    #[test]
    fn messages_are_cut_on_a_character_boundary() {
        let text = "é".repeat(MAX_MESSAGE_BYTES);
        let cut = bounded(text);
        assert!(cut.ends_with(&format!("… ({} more bytes)", MAX_MESSAGE_BYTES)));
    }

    #[test]
    fn unreadable_json_fails_the_review_with_its_origin() {
        let settings = Settings::default();
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        let err = review(
            &settings,
            "",
            &[Manifest {
                content: &deep,
                source: Some("deep.yaml"),
            }],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("deep.yaml") && err.contains("recursion limit"),
            "{err}"
        );
    }
}
