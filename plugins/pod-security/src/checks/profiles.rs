//! Checks on security profiles: seccomp (baseline and restricted) and
//! AppArmor.

use super::text::{go_quote, join_quote, pluralize, sorted_set};
use super::{BadValue, Errors, FieldError, Fields, Outcome, Pod, Violation};
use crate::model::Profile;

/// Seccomp annotation on the pod (up to v1.18).
const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
/// Seccomp annotation on a container, followed by its name (up to v1.18).
const SECCOMP_CONTAINER_ANNOTATION: &str = "container.seccomp.security.alpha.kubernetes.io/";
/// AppArmor annotation on a container, followed by its name.
const APPARMOR_CONTAINER_ANNOTATION: &str = "container.apparmor.security.beta.kubernetes.io/";

fn valid_seccomp_type(profile: &Profile) -> bool {
    matches!(profile.type_.as_str(), "Localhost" | "RuntimeDefault")
}

fn valid_seccomp_annotation(value: &str) -> bool {
    value == "runtime/default" || value == "docker/default" || value.starts_with("localhost/")
}

/// `seccompProfile_baseline` up to v1.18: the seccomp annotations may only
/// name the runtime's default or a local profile.
pub fn seccomp_baseline_1_0(pod: &Pod<'_>) -> Outcome {
    let mut forbidden = Vec::new();
    let mut fields = Fields::default();
    let mut errors = Errors::new();
    let mut offends = |key: &str, value: &str, fields: &mut Fields| {
        forbidden.push(format!("{key}={}", go_quote(value)));
        fields.push(|| pod.annotation_field(key));
        errors.push(FieldError::forbidden(
            pod.annotation_key(key),
            BadValue::Text(value.to_owned()),
        ));
    };
    if let Some(value) = pod.meta.annotation(SECCOMP_POD_ANNOTATION)
        && !valid_seccomp_annotation(value)
    {
        offends(SECCOMP_POD_ANNOTATION, value, &mut fields);
    }
    for c in pod.spec.containers() {
        let key = format!("{SECCOMP_CONTAINER_ANNOTATION}{}", c.name());
        if let Some(value) = pod.meta.annotation(&key)
            && !valid_seccomp_annotation(value)
        {
            offends(&key, value, &mut fields);
        }
    }
    let forbidden = sorted_set(forbidden);
    (!forbidden.is_empty()).then(|| {
        Violation::new(
            "seccompProfile",
            format!(
                "forbidden {} {}",
                pluralize("annotation", "annotations", forbidden.len()),
                forbidden.join(", ")
            ),
            fields,
        )
        .with_errors(errors)
    })
}

/// `seccompProfile_baseline` from v1.19: `seccompProfile.type`, where set,
/// is `RuntimeDefault` or `Localhost`.
pub fn seccomp_baseline_1_19(pod: &Pod<'_>) -> Outcome {
    let scan = SeccompScan::of(pod);
    scan.explicit_violation()
}

/// `seccompProfile_restricted` (v1.19): the pod or every container sets
/// `seccompProfile.type` to `RuntimeDefault` or `Localhost`.
pub fn seccomp_restricted_1_19(pod: &Pod<'_>) -> Outcome {
    let scan = SeccompScan::of(pod);
    if let Some(violation) = scan.explicit_violation() {
        return Some(violation);
    }
    (!scan.implicit.is_empty()).then(|| {
        Violation::new(
            "seccompProfile",
            format!(
                r#"pod or {} {} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#,
                pluralize("container", "containers", scan.implicit.len()),
                join_quote(&scan.implicit)
            ),
            scan.implicit_fields,
        )
        .with_errors(scan.implicit_errors)
    })
}

/// `seccompProfile_restricted` from v1.25: Windows pods are exempt.
pub fn seccomp_restricted_1_25(pod: &Pod<'_>) -> Outcome {
    if pod.spec.is_windows() {
        return None;
    }
    seccomp_restricted_1_19(pod)
}

/// Where a pod sets seccomp profiles, and where it leaves them unset.
struct SeccompScan<'a> {
    pod_bad: bool,
    explicit: Vec<&'a str>,
    values: Vec<&'a str>,
    explicit_fields: Fields,
    explicit_errors: Errors,
    implicit: Vec<&'a str>,
    implicit_fields: Fields,
    implicit_errors: Errors,
}

impl<'a> SeccompScan<'a> {
    fn of(pod: &Pod<'a>) -> Self {
        let mut scan = SeccompScan {
            pod_bad: false,
            explicit: Vec::new(),
            values: Vec::new(),
            explicit_fields: Fields::default(),
            explicit_errors: Errors::new(),
            implicit: Vec::new(),
            implicit_fields: Fields::default(),
            implicit_errors: Errors::new(),
        };
        let mut pod_set = false;
        if let Some(profile) = pod
            .spec
            .security_context
            .as_ref()
            .and_then(|s| s.seccomp_profile.as_ref())
        {
            if valid_seccomp_type(profile) {
                pod_set = true;
            } else {
                scan.pod_bad = true;
                scan.values.push(profile.type_.as_str());
                scan.explicit_fields
                    .push(|| pod.spec_field("securityContext.seccompProfile.type"));
                scan.explicit_errors.push(FieldError::forbidden(
                    pod.spec_field("securityContext.seccompProfile.type"),
                    BadValue::Text(profile.type_.as_str().to_owned()),
                ));
            }
        }
        for c in pod.spec.containers() {
            match c
                .security_context()
                .and_then(|s| s.seccomp_profile.as_ref())
            {
                Some(profile) if !valid_seccomp_type(profile) => {
                    scan.explicit.push(c.name());
                    scan.values.push(profile.type_.as_str());
                    scan.explicit_fields
                        .push(|| pod.container_field(&c, "securityContext.seccompProfile.type"));
                    scan.explicit_errors.push(FieldError::forbidden(
                        pod.container_field(&c, "securityContext.seccompProfile.type"),
                        BadValue::Text(profile.type_.as_str().to_owned()),
                    ));
                }
                Some(_) => {}
                None if !pod_set => {
                    scan.implicit.push(c.name());
                    scan.implicit_fields
                        .push(|| pod.container_field(&c, "securityContext.seccompProfile.type"));
                    scan.implicit_errors.push(FieldError::required(
                        pod.container_field(&c, "securityContext.seccompProfile.type"),
                    ));
                }
                None => {}
            }
        }
        scan
    }

    fn explicit_violation(&self) -> Outcome {
        let mut setters = Vec::new();
        if self.pod_bad {
            setters.push("pod".to_owned());
        }
        if !self.explicit.is_empty() {
            setters.push(format!(
                "{} {}",
                pluralize("container", "containers", self.explicit.len()),
                join_quote(&self.explicit)
            ));
        }
        (!setters.is_empty()).then(|| {
            Violation::new(
                "seccompProfile",
                format!(
                    "{} must not set securityContext.seccompProfile.type to {}",
                    setters.join(" and "),
                    join_quote(&sorted_set(&self.values))
                ),
                self.explicit_fields.clone(),
            )
            .with_errors(self.explicit_errors.clone())
        })
    }
}

fn valid_apparmor_type(profile: &Profile) -> bool {
    matches!(profile.type_.as_str(), "RuntimeDefault" | "Localhost")
}

fn valid_apparmor_annotation(value: &str) -> bool {
    value.is_empty() || value == "runtime/default" || value.starts_with("localhost/")
}

/// `appArmorProfile` (baseline, v1.0): AppArmor profiles (fields and the
/// beta annotations) may only be the runtime's default or a local profile.
pub fn app_armor_profile(pod: &Pod<'_>) -> Outcome {
    let mut setters = Vec::new();
    let mut values = Vec::new();
    let mut fields = Fields::default();
    let mut errors = Errors::new();
    if let Some(profile) = pod
        .spec
        .security_context
        .as_ref()
        .and_then(|s| s.app_armor_profile.as_ref())
        && !valid_apparmor_type(profile)
    {
        setters.push("pod".to_owned());
        values.push(profile.type_.as_str());
        fields.push(|| pod.spec_field("securityContext.appArmorProfile.type"));
        errors.push(FieldError::forbidden(
            pod.spec_field("securityContext.appArmorProfile.type"),
            BadValue::Text(profile.type_.as_str().to_owned()),
        ));
    }
    let mut bad = Vec::new();
    for c in pod.spec.containers() {
        if let Some(profile) = c
            .security_context()
            .and_then(|s| s.app_armor_profile.as_ref())
            && !valid_apparmor_type(profile)
        {
            bad.push(c.name());
            values.push(profile.type_.as_str());
            fields.push(|| pod.container_field(&c, "securityContext.appArmorProfile.type"));
            errors.push(FieldError::forbidden(
                pod.container_field(&c, "securityContext.appArmorProfile.type"),
                BadValue::Text(profile.type_.as_str().to_owned()),
            ));
        }
    }
    if !bad.is_empty() {
        setters.push(format!(
            "{} {}",
            pluralize("container", "containers", bad.len()),
            join_quote(&bad)
        ));
    }
    let mut annotations = Vec::new();
    for (key, value) in pod.meta.annotations() {
        if key.starts_with(APPARMOR_CONTAINER_ANNOTATION) && !valid_apparmor_annotation(value) {
            annotations.push(format!("{key}={}", go_quote(value)));
            fields.push(|| pod.annotation_field(key));
            errors.push(FieldError::forbidden(
                pod.annotation_key(key),
                BadValue::Text(value.to_owned()),
            ));
        }
    }
    let mut values = sorted_set(values);
    if !annotations.is_empty() {
        annotations.sort();
        setters.push(pluralize("annotation", "annotations", annotations.len()).to_owned());
        values.extend(annotations);
    }
    (!setters.is_empty()).then(|| {
        Violation::new(
            pluralize(
                "forbidden AppArmor profile",
                "forbidden AppArmor profiles",
                values.len(),
            ),
            format!(
                "{} must not set AppArmor profile type to {}",
                setters.join(" and "),
                join_quote(&values)
            ),
            fields,
        )
        .with_errors(errors)
    })
}
