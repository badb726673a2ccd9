//! `validate.podSecurity`: the Pod Security Standards, run as Kyverno runs
//! them, with the checks of Kiln's `pod-security` plugin (shared, not
//! copied).
//!
//! Kyverno evaluates its own build of Pod Security Admission (a fork at
//! release 1.34 that lists every offending field, `WithFieldErrors`) and
//! differs from the admission controller in ways a policy's verdict
//! depends on, kept here:
//! - every check of the level runs, restricted checks beside the baseline
//!   ones they override in Pod Security Admission (`capabilities_baseline`
//!   and `capabilities_restricted` both); the `privileged` level is not
//!   special (every check runs, as Kyverno's loop has it);
//! - a check runs at the newest of its versions the policy's version
//!   reaches, or at its first one when the version is older than that;
//! - `latest` is the newest version the fork knows, 1.34;
//! - `exclude` entries remove field errors: an entry without `images`
//!   evaluates the pod with one empty container and removes, for each
//!   field error of its control there, one error at the same path (indexes
//!   read as `*`); an entry with `images` evaluates only the containers
//!   whose image matches and removes errors at the same path of the
//!   container with the same name; `restrictedField` narrows to one path,
//!   `values` to errors whose every bad value matches one of them;
//! - a check whose field errors are all removed no longer fails, and
//!   `hostProbesAndHostLifecycle` (which lists none) is never excluded.

use kiln_pod_security::checks::{CHECKS, FieldError, Pod, Violation};
use kiln_pod_security::model::{Container, ObjectMeta, PodSpec, items};
use kiln_pod_security::{Level, Version};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::wildcard;

/// The newest minor version Kyverno's build of Pod Security Admission
/// knows: `latest`, and any newer version, evaluate as this one.
pub const KYVERNO_PSA_MINOR: u32 = 34;

/// The controls an exclusion can name, with the checks each covers
/// (Kyverno's `PSS_control_name_to_ids`).
const CONTROLS: &[(&str, &[&str])] = &[
    (
        "Capabilities",
        &["capabilities_baseline", "capabilities_restricted"],
    ),
    (
        "Seccomp",
        &["seccompProfile_baseline", "seccompProfile_restricted"],
    ),
    ("Privileged Containers", &["privileged"]),
    ("Host Ports", &["hostPorts"]),
    ("/proc Mount Type", &["procMount"]),
    ("HostProcess", &["windowsHostProcess"]),
    ("SELinux", &["seLinuxOptions"]),
    ("Host Namespaces", &["hostNamespaces"]),
    ("HostPath Volumes", &["hostPathVolumes"]),
    ("Sysctls", &["sysctls"]),
    ("AppArmor", &["appArmorProfile"]),
    ("Privilege Escalation", &["allowPrivilegeEscalation"]),
    ("Running as Non-root", &["runAsNonRoot"]),
    ("Running as Non-root user", &["runAsUser"]),
    ("Volume Types", &["restrictedVolumes"]),
];

/// Controls of containers only: an exclusion names the images.
const CONTAINER_LEVEL: &[&str] = &[
    "Capabilities",
    "Privileged Containers",
    "Host Ports",
    "/proc Mount Type",
    "Privilege Escalation",
];

/// Controls of the pod only: an exclusion names no images.
const POD_LEVEL: &[&str] = &[
    "Host Namespaces",
    "HostPath Volumes",
    "Sysctls",
    "Volume Types",
];

/// One `exclude` entry (of the rule, or of a PolicyException's
/// `podSecurity`).
#[derive(Debug, Clone)]
pub struct Exclusion {
    control: &'static str,
    checks: &'static [&'static str],
    images: Vec<String>,
    restricted_field: String,
    values: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawExclusion {
    control_name: String,
    #[serde(default)]
    images: Vec<String>,
    #[serde(default)]
    restricted_field: String,
    #[serde(default)]
    values: Vec<String>,
}

impl Exclusion {
    /// Reads one entry; a control Kyverno does not know is an error, never
    /// an exclusion that removes nothing.
    pub fn parse(value: &Value) -> Result<Self, String> {
        let raw: RawExclusion =
            serde_json::from_value(value.clone()).map_err(|e| format!("exclude: {e}"))?;
        let (control, checks) = CONTROLS
            .iter()
            .find(|(name, _)| *name == raw.control_name)
            .ok_or_else(|| {
                format!(
                    "exclude: unknown controlName {:?} (known: {})",
                    raw.control_name,
                    CONTROLS
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
        // Kyverno refuses these (`PodSecurityStandard.Validate`): each would
        // otherwise exclude more, or less, than it says.
        if CONTAINER_LEVEL.contains(control) && raw.images.is_empty() {
            return Err(format!(
                "exclude: {control}: exclude.images must be specified for the container level control"
            ));
        }
        if POD_LEVEL.contains(control) && !raw.images.is_empty() {
            return Err(format!(
                "exclude: {control}: exclude.images must not be specified for the pod level control"
            ));
        }
        if !raw.restricted_field.is_empty() && raw.values.is_empty() {
            return Err(format!(
                "exclude: {control}: values is required with restrictedField"
            ));
        }
        if raw.restricted_field.is_empty() && !raw.values.is_empty() {
            return Err(format!(
                "exclude: {control}: restrictedField is required with values"
            ));
        }
        Ok(Exclusion {
            control,
            checks,
            images: raw.images,
            restricted_field: raw.restricted_field,
            values: raw.values,
        })
    }

    /// Reads a list of entries.
    pub fn parse_all(value: Option<&Value>) -> Result<Vec<Self>, String> {
        match value {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items.iter().map(Exclusion::parse).collect(),
            Some(other) => Err(format!("exclude must be a list, not {other}")),
        }
    }

    /// The control it names.
    pub fn control(&self) -> &str {
        self.control
    }
}

/// A rule's `validate.podSecurity`.
#[derive(Debug, Clone)]
pub struct PodSecurity {
    level: Level,
    /// The level as written (messages print it).
    level_text: String,
    /// The version as written.
    version_text: String,
    minor: u32,
    excludes: Vec<Exclusion>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawPodSecurity {
    level: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    exclude: Option<Value>,
}

impl PodSecurity {
    /// Reads `validate.podSecurity`.
    pub fn parse(value: &Value) -> Result<Self, String> {
        let raw: RawPodSecurity = serde_json::from_value(value.clone())
            .map_err(|e| format!("validate.podSecurity: {e}"))?;
        let level = Level::parse(&raw.level)
            .map_err(|e| format!("validate.podSecurity.level {:?}: {e}", raw.level))?;
        let minor = match raw.version.as_str() {
            "" | "latest" => KYVERNO_PSA_MINOR,
            text => match Version::parse(text) {
                Ok(Version::V1(minor)) => minor.min(KYVERNO_PSA_MINOR),
                Ok(Version::Latest) => KYVERNO_PSA_MINOR,
                Err(e) => {
                    return Err(format!(
                        "failed to parse pod security api version: {text:?}: {e}"
                    ));
                }
            },
        };
        let excludes = Exclusion::parse_all(raw.exclude.as_ref())
            .map_err(|e| format!("validate.podSecurity.{e}"))?;
        Ok(PodSecurity {
            level,
            level_text: raw.level,
            version_text: raw.version,
            minor,
            excludes,
        })
    }

    /// How many `exclude` entries it has.
    pub fn exclusions(&self) -> usize {
        self.excludes.len()
    }

    /// Evaluates `resource` (a Pod or a pod controller), with `more`
    /// exclusions (those of the PolicyExceptions that cover it): `Ok(None)`
    /// when it passes, `Ok(Some(message))` with Kyverno's message when it
    /// fails, `Err` when it is not a pod-bearing object Kyverno reads.
    pub fn evaluate(
        &self,
        resource: &Value,
        rule: &str,
        more: &[Exclusion],
    ) -> Result<Verdict, String> {
        let kind = resource.get("kind").and_then(Value::as_str).unwrap_or("");
        let (spec, meta) = pod_of(resource, kind)?;
        let checks = evaluate(&spec, &meta, self.level, self.minor);
        let mut remaining = exclude(checks, &self.excludes, &spec, &meta, self)?;
        if remaining.is_empty() {
            return Ok(Verdict::Pass);
        }
        if !more.is_empty() {
            remaining = exclude(remaining, more, &spec, &meta, self)?;
            if remaining.is_empty() {
                return Ok(Verdict::Excepted);
            }
        }
        Ok(Verdict::Fail(format!(
            "Validation rule '{rule}' failed. It violates PodSecurity \"{}:{}\": {}",
            self.level_text,
            self.version_text,
            describe(&remaining, kind)
        )))
    }
}

/// What a `podSecurity` rule says about an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No check fails.
    Pass,
    /// Checks fail, and PolicyExceptions exclude every one.
    Excepted,
    /// Checks fail: Kyverno's message.
    Fail(String),
}

/// The pod spec and metadata Kyverno reads from `resource`, by kind; the
/// metadata of a CronJob's pods is its job template's, as in Kyverno.
fn pod_of(resource: &Value, kind: &str) -> Result<(PodSpec, ObjectMeta), String> {
    let (spec, meta) = match kind {
        "Pod" => ("/spec", "/metadata"),
        "DaemonSet"
        | "Deployment"
        | "Job"
        | "StatefulSet"
        | "ReplicaSet"
        | "ReplicationController" => ("/spec/template/spec", "/spec/template/metadata"),
        "CronJob" => (
            "/spec/jobTemplate/spec/template/spec",
            "/spec/jobTemplate/metadata",
        ),
        _ => {
            return Err(format!(
                "Error while getting new resource: could not find correct resource type ({kind} has no pods)"
            ));
        }
    };
    Ok((read(resource, spec)?, read(resource, meta)?))
}

fn read<T: DeserializeOwned + Default>(resource: &Value, pointer: &str) -> Result<T, String> {
    match resource.pointer(pointer) {
        None | Some(Value::Null) => Ok(T::default()),
        Some(value) => T::deserialize(value).map_err(|e| {
            format!(
                "Error while getting new resource: {}: {e}",
                pointer.trim_start_matches('/').replace('/', ".")
            )
        }),
    }
}

/// One failed check.
#[derive(Debug, Clone)]
struct Failed {
    id: &'static str,
    violation: Violation,
}

/// Every check Kyverno runs at `level` and `minor` on the pod, failed ones
/// kept, in check order.
fn evaluate(spec: &PodSpec, meta: &ObjectMeta, level: Level, minor: u32) -> Vec<Failed> {
    let pod = Pod {
        meta,
        spec,
        meta_path: "metadata",
        spec_path: "spec",
    };
    CHECKS
        .iter()
        // The checks the fork has (it knows nothing newer than its latest).
        .filter(|c| c.versions[0].minimum <= KYVERNO_PSA_MINOR)
        .filter(|c| level != Level::Baseline || c.level == Level::Baseline)
        .filter_map(|c| {
            let versioned = c.at(minor).unwrap_or(&c.versions[0]);
            (versioned.check)(&pod).map(|violation| Failed {
                id: c.id,
                violation,
            })
        })
        .collect()
}

/// A field path with every run of digits read as `*`.
fn starred(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_digits = false;
    for ch in path.chars() {
        if ch.is_ascii_digit() {
            if !in_digits {
                out.push('*');
            }
            in_digits = true;
        } else {
            out.push(ch);
            in_digits = false;
        }
    }
    out
}

/// The container a field path names, if it names one: its list and index
/// (Kyverno reads the second word of the path and its first number).
fn container_at(path: &str) -> Option<(&str, usize)> {
    let mut words = path
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| !w.is_empty());
    let list = words.nth(1)?;
    if !matches!(
        list,
        "containers" | "initContainers" | "ephemeralContainers"
    ) {
        return None;
    }
    let digits: String = path
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .collect();
    Some((list, digits.parse().ok()?))
}

/// The name of the container at `list[index]` of `spec`.
fn container_name<'s>(spec: &'s PodSpec, list: &str, index: usize) -> &'s str {
    let containers = match list {
        "initContainers" => items(&spec.init_containers),
        "ephemeralContainers" => items(&spec.ephemeral_containers),
        _ => items(&spec.containers),
    };
    containers.get(index).map_or("", |c| c.name.as_str())
}

/// Applies `exclusions` in turn to the failed checks of the pod. Each
/// comparison is charged to the rule's budget (many containers times many
/// excluded errors is quadratic).
fn exclude(
    mut failed: Vec<Failed>,
    exclusions: &[Exclusion],
    spec: &PodSpec,
    meta: &ObjectMeta,
    policy: &PodSecurity,
) -> Result<Vec<Failed>, String> {
    for exclusion in exclusions {
        if exclusion.images.is_empty() {
            // The pod with one empty container: what stays is pod-level.
            let mut bare = spec.clone();
            bare.containers = Some(vec![Container {
                name: kiln_pod_security::model::GoString("fake".into()),
                ..Container::default()
            }]);
            bare.init_containers = None;
            bare.ephemeral_containers = None;
            let found = evaluate(&bare, meta, policy.level, policy.minor);
            remove(&mut failed, &found, exclusion, None, spec)?;
        } else {
            let matching = |list: &Option<Vec<Container>>| -> Option<Vec<Container>> {
                let kept: Vec<Container> = items(list)
                    .iter()
                    .filter(|c| {
                        exclusion
                            .images
                            .iter()
                            .any(|p| wildcard::matches(p, c.image.as_str()))
                    })
                    .cloned()
                    .collect();
                (!kept.is_empty()).then_some(kept)
            };
            let only = PodSpec {
                init_containers: matching(&spec.init_containers),
                containers: matching(&spec.containers),
                ephemeral_containers: matching(&spec.ephemeral_containers),
                ..PodSpec::default()
            };
            let found = evaluate(&only, &ObjectMeta::default(), policy.level, policy.minor);
            remove(&mut failed, &found, exclusion, Some(&only), spec)?;
        }
    }
    Ok(failed)
}

/// Removes from `failed`, for each field error of `found` (the excluded
/// part, evaluated alone; `matching` is its spec when it is containers
/// picked by image) that the exclusion covers, one error at the same path
/// (and, for a container's field, of the container with the same name).
fn remove(
    failed: &mut Vec<Failed>,
    found: &[Failed],
    exclusion: &Exclusion,
    matching: Option<&PodSpec>,
    spec: &PodSpec,
) -> Result<(), String> {
    for excluded in found.iter().filter(|f| exclusion.checks.contains(&f.id)) {
        let Some(errors) = &excluded.violation.errors else {
            continue;
        };
        for error in errors {
            let path = starred(&error.path);
            let container = matching.and_then(|only| {
                container_at(&error.path).map(|(list, i)| container_name(only, list, i))
            });
            if !exclusion.restricted_field.is_empty() && path != exclusion.restricted_field {
                continue;
            }
            if !exclusion.values.is_empty()
                && !error
                    .bad_values()
                    .iter()
                    .all(|v| exclusion.values.iter().any(|p| wildcard::matches(p, v)))
            {
                continue;
            }
            let left: usize = failed
                .iter()
                .map(|f| f.violation.errors.as_ref().map_or(0, Vec::len))
                .sum();
            let patterns = exclusion.values.len() + exclusion.images.len();
            crate::budget::charge((1 + left + patterns) as u64)?;
            remove_one(
                failed,
                excluded.id,
                &path,
                container,
                matching.is_some(),
                spec,
            );
        }
    }
    Ok(())
}

/// Removes the first error of check `id` at `path` (of `container`, for a
/// container's field when containers were picked by image).
fn remove_one(
    failed: &mut Vec<Failed>,
    id: &str,
    path: &str,
    container: Option<&str>,
    by_image: bool,
    spec: &PodSpec,
) {
    let Some(at) = failed.iter().position(|f| f.id == id) else {
        return;
    };
    let Some(errors) = failed[at].violation.errors.as_mut() else {
        return;
    };
    let same = |e: &FieldError| {
        if starred(&e.path) != path {
            return false;
        }
        match (by_image, container_at(&e.path)) {
            (true, Some((list, i))) => Some(container_name(spec, list, i)) == container,
            _ => true,
        }
    };
    if let Some(index) = errors.iter().position(same) {
        // Kyverno swaps the last error into the removed one's place.
        errors.swap_remove(index);
        if errors.is_empty() {
            failed.remove(at);
        }
    }
}

/// Kyverno's list of the failed checks: `(Forbidden reason: R, field error
/// list: [E, ...])` each, with the paths of a controller's template as
/// Kyverno rewrites them.
fn describe(failed: &[Failed], kind: &str) -> String {
    let rewrite = |path: &str| {
        let path = match kind {
            "DaemonSet"
            | "Deployment"
            | "Job"
            | "StatefulSet"
            | "ReplicaSet"
            | "ReplicationController" => path.replace("spec", "spec.template.spec"),
            "CronJob" => path.replace("spec", "spec.jobTemplate.spec.template.spec"),
            _ => path.to_owned(),
        };
        path.replace("metadata", "spec.template.metadata")
    };
    failed
        .iter()
        .map(|f| {
            let errors: Vec<String> = f
                .violation
                .errors
                .iter()
                .flatten()
                .map(|e| {
                    FieldError {
                        path: rewrite(&e.path),
                        ..e.clone()
                    }
                    .describe()
                })
                .collect();
            format!(
                "(Forbidden reason: {}, field error list: [{}])",
                f.violation.reason,
                errors.join(", ")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(level: &str, exclude: Value) -> PodSecurity {
        PodSecurity::parse(&json!({"level": level, "version": "latest", "exclude": exclude}))
            .unwrap()
    }

    fn pod(containers: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"containers": containers}})
    }

    fn hardened(name: &str, image: &str) -> Value {
        json!({"name": name, "image": image, "securityContext": {
            "allowPrivilegeEscalation": false, "runAsNonRoot": true,
            "seccompProfile": {"type": "RuntimeDefault"},
            "capabilities": {"drop": ["ALL"]}}})
    }

    #[test]
    fn paths_are_starred_and_containers_found() {
        assert_eq!(
            starred("spec.containers[12].ports[0].hostPort"),
            "spec.containers[*].ports[*].hostPort"
        );
        assert_eq!(
            container_at("spec.initContainers[3].securityContext.privileged"),
            Some(("initContainers", 3))
        );
        assert_eq!(container_at("spec.volumes[0].hostPath"), None);
        assert_eq!(container_at("metadata.annotations[a]"), None);
    }

    #[test]
    fn a_hardened_pod_passes_restricted_and_a_privileged_one_fails_baseline() {
        let ok = pod(json!([hardened("a", "nginx")]));
        assert_eq!(
            rule("restricted", json!([])).evaluate(&ok, "r", &[]),
            Ok(Verdict::Pass)
        );
        let bad = pod(json!([{"name": "a", "image": "nginx",
            "securityContext": {"privileged": true}}]));
        let Ok(Verdict::Fail(message)) = rule("baseline", json!([])).evaluate(&bad, "r", &[])
        else {
            panic!("a privileged container passed baseline");
        };
        assert_eq!(
            message,
            "Validation rule 'r' failed. It violates PodSecurity \"baseline:latest\": (Forbidden reason: privileged, field error list: [spec.containers[0].securityContext.privileged is forbidden, forbidden values found: true])"
        );
    }

    #[test]
    fn capabilities_excluded_by_image_only_for_matching_containers() {
        let mut added = hardened("a", "ghcr.io/app:1");
        added["securityContext"]["capabilities"]["add"] = json!(["NET_ADMIN"]);
        let mut other = hardened("b", "docker.io/other");
        other["securityContext"]["capabilities"]["add"] = json!(["SYS_ADMIN"]);
        let policy = rule(
            "restricted",
            json!([{"controlName": "Capabilities", "images": ["ghcr.io/*"]}]),
        );
        // Only `a`'s image is excluded: `b` still fails.
        let both = pod(json!([added.clone(), other]));
        let Ok(Verdict::Fail(message)) = policy.evaluate(&both, "r", &[]) else {
            panic!("b's capability was excluded");
        };
        assert!(message.contains("spec.containers[1]"), "{message}");
        assert!(!message.contains("spec.containers[0]"), "{message}");
        assert_eq!(
            policy.evaluate(&pod(json!([added])), "r", &[]),
            Ok(Verdict::Pass)
        );
    }

    #[test]
    fn restricted_field_and_values_narrow_an_exclusion() {
        let mut added = hardened("a", "nginx");
        added["securityContext"]["capabilities"]["add"] = json!(["NET_ADMIN", "SYS_TIME"]);
        let narrow = |values: Value| {
            rule(
                "restricted",
                json!([{"controlName": "Capabilities", "images": ["*"],
                    "restrictedField": "spec.containers[*].securityContext.capabilities.add",
                    "values": values}]),
            )
        };
        let p = pod(json!([added]));
        // Every bad value must be allowed.
        assert!(matches!(
            narrow(json!(["NET_ADMIN"])).evaluate(&p, "r", &[]),
            Ok(Verdict::Fail(_))
        ));
        assert_eq!(
            narrow(json!(["NET_ADMIN", "SYS_*"])).evaluate(&p, "r", &[]),
            Ok(Verdict::Pass)
        );
    }

    #[test]
    fn a_pod_level_exclusion_removes_one_error_per_path() {
        // Two containers without seccomp; excluding the control without
        // images removes the one error the empty container has, as Kyverno.
        let mut a = hardened("a", "x");
        let mut b = hardened("b", "y");
        a["securityContext"]
            .as_object_mut()
            .unwrap()
            .remove("seccompProfile");
        b["securityContext"]
            .as_object_mut()
            .unwrap()
            .remove("seccompProfile");
        let p = pod(json!([a.clone(), b]));
        let pod_level = rule("restricted", json!([{"controlName": "Seccomp"}]));
        // A container-level control without images is refused, as Kyverno
        // refuses it (it would clear a real container's error).
        let error = PodSecurity::parse(
            &json!({"level": "restricted", "exclude": [{"controlName": "Capabilities"}]}),
        )
        .unwrap_err();
        assert!(
            error.contains("exclude.images must be specified"),
            "{error}"
        );
        let error = PodSecurity::parse(&json!({"level": "baseline", "exclude": [
            {"controlName": "Host Namespaces", "images": ["*"]}]}))
        .unwrap_err();
        assert!(error.contains("must not be specified"), "{error}");
        let error = PodSecurity::parse(&json!({"level": "baseline", "exclude": [
            {"controlName": "Seccomp", "values": ["x"]}]}))
        .unwrap_err();
        assert!(error.contains("restrictedField is required"), "{error}");
        assert!(matches!(
            pod_level.evaluate(&p, "r", &[]),
            Ok(Verdict::Fail(_))
        ));
        assert_eq!(
            pod_level.evaluate(&pod(json!([a])), "r", &[]),
            Ok(Verdict::Pass)
        );
    }

    #[test]
    fn exceptions_exclude_after_the_rule() {
        let bad = pod(json!([{"name": "a", "image": "nginx",
            "securityContext": {"privileged": true}}]));
        let policy = rule("baseline", json!([]));
        let grant =
            Exclusion::parse(&json!({"controlName": "Privileged Containers", "images": ["nginx"]}))
                .unwrap();
        assert_eq!(policy.evaluate(&bad, "r", &[grant]), Ok(Verdict::Excepted));
    }

    #[test]
    fn controllers_are_read_from_their_template_and_other_kinds_refused() {
        let deployment = json!({"kind": "Deployment", "spec": {"template": {"spec": {
            "hostNetwork": true, "containers": [{"name": "a", "image": "x"}]}}}});
        let Ok(Verdict::Fail(message)) =
            rule("baseline", json!([])).evaluate(&deployment, "r", &[])
        else {
            panic!("hostNetwork passed");
        };
        assert!(
            message.contains("spec.template.spec.hostNetwork is forbidden"),
            "{message}"
        );
        let error = rule("baseline", json!([]))
            .evaluate(&json!({"kind": "Namespace"}), "r", &[])
            .unwrap_err();
        assert!(
            error.contains("could not find correct resource type"),
            "{error}"
        );
        let typed = json!({"kind": "Pod", "spec": {"hostNetwork": "yes"}});
        assert!(
            rule("baseline", json!([]))
                .evaluate(&typed, "r", &[])
                .is_err()
        );
    }

    #[test]
    fn what_kyverno_refuses_is_an_error() {
        let error = PodSecurity::parse(&json!({"level": "strict"})).unwrap_err();
        assert!(error.contains("level"), "{error}");
        let error =
            PodSecurity::parse(&json!({"level": "baseline", "version": "1.2.3"})).unwrap_err();
        assert!(error.contains("version"), "{error}");
        let error = PodSecurity::parse(
            &json!({"level": "baseline", "exclude": [{"controlName": "Capabilites"}]}),
        )
        .unwrap_err();
        assert!(error.contains("unknown controlName"), "{error}");
        let error = PodSecurity::parse(
            &json!({"level": "baseline", "exclude": [{"controlName": "Capabilities", "image": ["x"]}]}),
        )
        .unwrap_err();
        assert!(error.contains("unknown field"), "{error}");
    }
}
