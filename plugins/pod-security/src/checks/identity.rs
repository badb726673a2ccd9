//! Checks on who the pod runs as: `runAsNonRoot`, `runAsUser` and
//! `seLinuxOptions`.

use super::text::{join_quote, pluralize, sorted_set};
use super::{BadValue, Errors, FieldError, Fields, Outcome, Pod, Violation};
use crate::model::SeLinuxOptions;

/// `runAsNonRoot` (restricted, v1.0): the pod or every container must set
/// `runAsNonRoot: true`, and none may set it to `false`.
pub fn run_as_non_root_1_0(pod: &Pod<'_>) -> Outcome {
    let mut setters = Vec::new();
    let mut explicit_fields = Fields::default();
    // Kyverno's build lists the explicit errors, then the implicit ones,
    // whichever violation is reported.
    let (mut explicit_errors, mut implicit_errors) = (Errors::new(), Errors::new());
    let mut pod_non_root = false;
    match pod
        .spec
        .security_context
        .as_ref()
        .and_then(|s| s.run_as_non_root)
    {
        Some(false) => {
            setters.push("pod".to_owned());
            explicit_fields.push(|| pod.spec_field("securityContext.runAsNonRoot"));
            explicit_errors.push(FieldError::forbidden(
                pod.spec_field("securityContext.runAsNonRoot"),
                BadValue::Bool(false),
            ));
        }
        Some(true) => pod_non_root = true,
        None => {}
    }
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    let mut implicit_fields = Fields::default();
    for c in pod.spec.containers() {
        match c.security_context().and_then(|s| s.run_as_non_root) {
            Some(false) => {
                explicit.push(c.name());
                explicit_fields.push(|| pod.container_field(&c, "securityContext.runAsNonRoot"));
                explicit_errors.push(FieldError::forbidden(
                    pod.container_field(&c, "securityContext.runAsNonRoot"),
                    BadValue::Bool(false),
                ));
            }
            Some(true) => {}
            None if !pod_non_root => {
                implicit.push(c.name());
                implicit_fields.push(|| pod.container_field(&c, "securityContext.runAsNonRoot"));
                implicit_errors.push(FieldError::required(
                    pod.container_field(&c, "securityContext.runAsNonRoot"),
                ));
            }
            None => {}
        }
    }
    if !explicit.is_empty() {
        setters.push(format!(
            "{} {}",
            pluralize("container", "containers", explicit.len()),
            join_quote(&explicit)
        ));
    }
    explicit_errors.extend(implicit_errors);
    let errors = explicit_errors;
    if !setters.is_empty() {
        return Some(
            Violation::new(
                "runAsNonRoot != true",
                format!(
                    "{} must not set securityContext.runAsNonRoot=false",
                    setters.join(" and ")
                ),
                explicit_fields,
            )
            .with_errors(errors),
        );
    }
    (!implicit.is_empty()).then(|| {
        Violation::new(
            "runAsNonRoot != true",
            format!(
                "pod or {} {} must set securityContext.runAsNonRoot=true",
                pluralize("container", "containers", implicit.len()),
                join_quote(&implicit)
            ),
            implicit_fields,
        )
        .with_errors(errors)
    })
}

/// `runAsNonRoot` from v1.35: pods in a user namespace are exempt.
pub fn run_as_non_root_1_35(pod: &Pod<'_>) -> Outcome {
    if pod.spec.in_user_namespace() {
        return None;
    }
    run_as_non_root_1_0(pod)
}

/// `runAsUser` (restricted, v1.23): neither the pod nor a container may set
/// `runAsUser: 0`.
pub fn run_as_user_1_23(pod: &Pod<'_>) -> Outcome {
    let mut setters = Vec::new();
    let mut fields = Fields::default();
    let mut errors = Errors::new();
    if pod
        .spec
        .security_context
        .as_ref()
        .and_then(|s| s.run_as_user)
        == Some(0)
    {
        setters.push("pod".to_owned());
        fields.push(|| pod.spec_field("securityContext.runAsUser"));
        errors.push(FieldError::forbidden(
            pod.spec_field("securityContext.runAsUser"),
            BadValue::Int(0),
        ));
    }
    let mut bad = Vec::new();
    for c in pod.spec.containers() {
        if c.security_context().and_then(|s| s.run_as_user) == Some(0) {
            bad.push(c.name());
            fields.push(|| pod.container_field(&c, "securityContext.runAsUser"));
            errors.push(FieldError::forbidden(
                pod.container_field(&c, "securityContext.runAsUser"),
                BadValue::Int(0),
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
    (!setters.is_empty()).then(|| {
        Violation::new(
            "runAsUser=0",
            format!("{} must not set runAsUser=0", setters.join(" and ")),
            fields,
        )
        .with_errors(errors)
    })
}

/// `runAsUser` from v1.35: pods in a user namespace are exempt.
pub fn run_as_user_1_35(pod: &Pod<'_>) -> Outcome {
    if pod.spec.in_user_namespace() {
        return None;
    }
    run_as_user_1_23(pod)
}

/// SELinux types allowed up to v1.30.
const SELINUX_TYPES_1_0: &[&str] = &["", "container_t", "container_init_t", "container_kvm_t"];
/// SELinux types allowed from v1.31.
const SELINUX_TYPES_1_31: &[&str] = &[
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

/// `seLinuxOptions` (baseline, v1.0).
pub fn se_linux_options_1_0(pod: &Pod<'_>) -> Outcome {
    se_linux_options(pod, SELINUX_TYPES_1_0)
}

/// `seLinuxOptions` from v1.31 (`container_engine_t` allowed).
pub fn se_linux_options_1_31(pod: &Pod<'_>) -> Outcome {
    se_linux_options(pod, SELINUX_TYPES_1_31)
}

/// What is wrong in SELinux options, accumulated over the pod.
#[derive(Default)]
struct SeLinuxFindings<'a> {
    types: Vec<&'a str>,
    user: bool,
    role: bool,
}

impl<'a> SeLinuxFindings<'a> {
    /// Records what is wrong in `opts` (whose path is `at`) and its field
    /// errors in `errors`; tells whether they are valid.
    fn valid(
        &mut self,
        opts: &'a SeLinuxOptions,
        allowed: &[&str],
        at: &str,
        errors: &mut Errors,
    ) -> bool {
        let mut valid = true;
        let mut offends = |field: &str, value: &str| {
            valid = false;
            errors.push(FieldError::forbidden(
                format!("{at}.seLinuxOptions.{field}"),
                BadValue::Text(value.to_owned()),
            ));
        };
        if !allowed.contains(&opts.type_.as_str()) {
            offends("type", opts.type_.as_str());
            self.types.push(opts.type_.as_str());
        }
        if !opts.user.as_str().is_empty() {
            offends("user", opts.user.as_str());
            self.user = true;
        }
        if !opts.role.as_str().is_empty() {
            offends("role", opts.role.as_str());
            self.role = true;
        }
        valid
    }
}

fn se_linux_options(pod: &Pod<'_>, allowed: &[&str]) -> Outcome {
    let mut found = SeLinuxFindings::default();
    let mut setters = Vec::new();
    let mut fields = Fields::default();
    let mut errors = Errors::new();
    if let Some(opts) = pod
        .spec
        .security_context
        .as_ref()
        .and_then(|s| s.se_linux_options.as_ref())
        && !found.valid(
            opts,
            allowed,
            &pod.spec_field("securityContext"),
            &mut errors,
        )
    {
        setters.push("pod".to_owned());
        fields.push(|| pod.spec_field("securityContext.seLinuxOptions"));
    }
    let mut bad = Vec::new();
    for c in pod.spec.containers() {
        if let Some(opts) = c
            .security_context()
            .and_then(|s| s.se_linux_options.as_ref())
            && !found.valid(
                opts,
                allowed,
                &pod.container_field(&c, "securityContext"),
                &mut errors,
            )
        {
            bad.push(c.name());
            fields.push(|| pod.container_field(&c, "securityContext.seLinuxOptions"));
        }
    }
    if !bad.is_empty() {
        setters.push(format!(
            "{} {}",
            pluralize("container", "containers", bad.len()),
            join_quote(&bad)
        ));
    }
    if setters.is_empty() {
        return None;
    }
    let mut data = Vec::new();
    let types = sorted_set(found.types);
    if !types.is_empty() {
        data.push(format!(
            "{} {}",
            pluralize("type", "types", types.len()),
            join_quote(&types)
        ));
    }
    if found.user {
        data.push("user may not be set".to_owned());
    }
    if found.role {
        data.push("role may not be set".to_owned());
    }
    Some(
        Violation::new(
            "seLinuxOptions",
            format!(
                "{} set forbidden securityContext.seLinuxOptions: {}",
                setters.join(" and "),
                data.join("; ")
            ),
            fields,
        )
        .with_errors(errors),
    )
}
