//! Checks on each container's security context, ports, probes and
//! lifecycle handlers.

use super::text::{join_quote, pluralize, sorted_set};
use super::{BadValue, Errors, FieldError, Fields, Outcome, Pod, Violation};
use crate::model::{ContainerAt, Handler, items};

/// `privileged` (baseline, v1.0): no container may set `privileged: true`.
pub fn privileged(pod: &Pod<'_>) -> Outcome {
    let mut bad = Vec::new();
    let mut fields = Fields::default();
    let mut errors = Errors::new();
    for c in pod.spec.containers() {
        if c.security_context().and_then(|s| s.privileged) == Some(true) {
            bad.push(c.name());
            fields.push(|| pod.container_field(&c, "securityContext.privileged"));
            errors.push(FieldError::forbidden(
                pod.container_field(&c, "securityContext.privileged"),
                BadValue::Bool(true),
            ));
        }
    }
    (!bad.is_empty()).then(|| {
        Violation::new(
            "privileged",
            format!(
                "{} {} must not set securityContext.privileged=true",
                pluralize("container", "containers", bad.len()),
                join_quote(&bad)
            ),
            fields,
        )
        .with_errors(errors)
    })
}

/// `allowPrivilegeEscalation` (restricted, v1.8): every container must set
/// `allowPrivilegeEscalation: false`.
pub fn allow_privilege_escalation_1_8(pod: &Pod<'_>) -> Outcome {
    let mut bad = Vec::new();
    let mut fields = Fields::default();
    let mut errors = Errors::new();
    for c in pod.spec.containers() {
        let context = c.security_context();
        let allowed = context.and_then(|s| s.allow_privilege_escalation);
        if allowed != Some(false) {
            bad.push(c.name());
            fields.push(|| pod.container_field(&c, "securityContext.allowPrivilegeEscalation"));
            let path = pod.container_field(&c, "securityContext.allowPrivilegeEscalation");
            errors.push(match (context, allowed) {
                (None, _) => FieldError::required(path),
                (Some(_), None) => FieldError::forbidden(path, BadValue::Text("nil".into())),
                (Some(_), Some(_)) => FieldError::forbidden(path, BadValue::Bool(true)),
            });
        }
    }
    (!bad.is_empty()).then(|| {
        Violation::new(
            "allowPrivilegeEscalation != false",
            format!(
                "{} {} must set securityContext.allowPrivilegeEscalation=false",
                pluralize("container", "containers", bad.len()),
                join_quote(&bad)
            ),
            fields,
        )
        .with_errors(errors)
    })
}

/// `allowPrivilegeEscalation` from v1.25: Windows pods are exempt.
pub fn allow_privilege_escalation_1_25(pod: &Pod<'_>) -> Outcome {
    if pod.spec.is_windows() {
        return None;
    }
    allow_privilege_escalation_1_8(pod)
}

/// The capabilities a baseline container may add.
const BASELINE_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// `capabilities_baseline` (v1.0): only the default capabilities may be added.
pub fn capabilities_baseline(pod: &Pod<'_>) -> Outcome {
    let mut bad = Vec::new();
    let mut added = Vec::new();
    let mut fields = Fields::default();
    let mut errors = Errors::new();
    for c in pod.spec.containers() {
        let Some(caps) = c.security_context().and_then(|s| s.capabilities.as_ref()) else {
            continue;
        };
        let mut forbidden = Vec::new();
        for (i, cap) in items(&caps.add).iter().enumerate() {
            if !BASELINE_CAPABILITIES.contains(&cap.as_str()) {
                forbidden.push(cap.as_str());
                added.push(cap.as_str());
                fields.push(|| {
                    pod.container_field(&c, &format!("securityContext.capabilities.add[{i}]"))
                });
            }
        }
        if !forbidden.is_empty() {
            bad.push(c.name());
            errors.push(FieldError::forbidden(
                pod.container_field(&c, "securityContext.capabilities.add"),
                BadValue::List(sorted_set(forbidden)),
            ));
        }
    }
    (!bad.is_empty()).then(|| {
        Violation::new(
            "non-default capabilities",
            format!(
                "{} {} must not include {} in securityContext.capabilities.add",
                pluralize("container", "containers", bad.len()),
                join_quote(&bad),
                join_quote(&sorted_set(added))
            ),
            fields,
        )
        .with_errors(errors)
    })
}

/// `capabilities_restricted` (v1.22): every container drops `ALL` and adds
/// nothing but `NET_BIND_SERVICE`.
pub fn capabilities_restricted_1_22(pod: &Pod<'_>) -> Outcome {
    let mut missing_drop = Vec::new();
    let mut adding = Vec::new();
    let mut forbidden = Vec::new();
    let mut fields = Fields::default();
    // Kyverno's build lists every missing drop, then every forbidden add.
    let (mut drop_errors, mut add_errors) = (Errors::new(), Errors::new());
    let drop_path =
        |c: &ContainerAt<'_>| pod.container_field(c, "securityContext.capabilities.drop");
    for c in pod.spec.containers() {
        let Some(caps) = c.security_context().and_then(|s| s.capabilities.as_ref()) else {
            missing_drop.push(c.name());
            fields.push(|| drop_path(&c));
            drop_errors.push(FieldError::required(drop_path(&c)));
            continue;
        };
        let drop = items(&caps.drop);
        if !drop.iter().any(|d| d.as_str() == "ALL") {
            missing_drop.push(c.name());
            fields.push(|| drop_path(&c));
            drop_errors.push(if drop.is_empty() {
                FieldError::required(drop_path(&c))
            } else {
                FieldError::forbidden(
                    drop_path(&c),
                    BadValue::List(sorted_set(drop.iter().map(|d| d.as_str()))),
                )
            });
        }
        let mut added = Vec::new();
        for (i, cap) in items(&caps.add).iter().enumerate() {
            if cap.as_str() != "NET_BIND_SERVICE" {
                added.push(cap.as_str());
                forbidden.push(cap.as_str());
                fields.push(|| {
                    pod.container_field(&c, &format!("securityContext.capabilities.add[{i}]"))
                });
            }
        }
        if !added.is_empty() {
            adding.push(c.name());
            add_errors.push(FieldError::forbidden(
                pod.container_field(&c, "securityContext.capabilities.add"),
                BadValue::List(sorted_set(added)),
            ));
        }
    }
    drop_errors.extend(add_errors);
    let mut details = Vec::new();
    if !missing_drop.is_empty() {
        details.push(format!(
            r#"{} {} must set securityContext.capabilities.drop=["ALL"]"#,
            pluralize("container", "containers", missing_drop.len()),
            join_quote(&missing_drop)
        ));
    }
    if !adding.is_empty() {
        details.push(format!(
            "{} {} must not include {} in securityContext.capabilities.add",
            pluralize("container", "containers", adding.len()),
            join_quote(&adding),
            join_quote(&sorted_set(forbidden))
        ));
    }
    (!details.is_empty()).then(|| {
        Violation::new("unrestricted capabilities", details.join("; "), fields)
            .with_errors(drop_errors)
    })
}

/// `capabilities_restricted` from v1.25: Windows pods are exempt.
pub fn capabilities_restricted_1_25(pod: &Pod<'_>) -> Outcome {
    if pod.spec.is_windows() {
        return None;
    }
    capabilities_restricted_1_22(pod)
}

/// `procMount` (baseline v1.0; restricted from v1.35): `procMount` may
/// only be `Default`.
pub fn proc_mount_1_0(pod: &Pod<'_>) -> Outcome {
    let mut bad = Vec::new();
    let mut types = Vec::new();
    let mut fields = Fields::default();
    let mut errors = Errors::new();
    for c in pod.spec.containers() {
        let Some(mount) = c.security_context().and_then(|s| s.proc_mount.as_deref()) else {
            continue;
        };
        if mount != "Default" {
            bad.push(c.name());
            types.push(mount);
            fields.push(|| pod.container_field(&c, "securityContext.procMount"));
            errors.push(FieldError::forbidden(
                pod.container_field(&c, "securityContext.procMount"),
                BadValue::Text(mount.to_owned()),
            ));
        }
    }
    (!bad.is_empty()).then(|| {
        Violation::new(
            "procMount",
            format!(
                "{} {} must not set securityContext.procMount to {}",
                pluralize("container", "containers", bad.len()),
                join_quote(&bad),
                join_quote(&sorted_set(types))
            ),
            fields,
        )
        .with_errors(errors)
    })
}

/// `procMount` (baseline) from v1.35: pods in a user namespace may use any.
pub fn proc_mount_1_35_baseline(pod: &Pod<'_>) -> Outcome {
    if pod.spec.in_user_namespace() {
        return None;
    }
    proc_mount_1_0(pod)
}

/// `hostPorts` (baseline, v1.0): no container port may set a `hostPort`.
pub fn host_ports(pod: &Pod<'_>) -> Outcome {
    let mut bad = Vec::new();
    let mut ports = Vec::new();
    let mut fields = Fields::default();
    let mut errors = Errors::new();
    for c in pod.spec.containers() {
        let mut valid = true;
        for (i, port) in items(&c.container.ports).iter().enumerate() {
            let host_port = port.host_port.unwrap_or(0);
            if host_port != 0 {
                valid = false;
                ports.push(host_port.to_string());
                fields.push(|| pod.container_field(&c, &format!("ports[{i}].hostPort")));
                errors.push(FieldError::forbidden(
                    pod.container_field(&c, &format!("ports[{i}].hostPort")),
                    BadValue::Int(i64::from(host_port)),
                ));
            }
        }
        if !valid {
            bad.push(c.name());
        }
    }
    (!bad.is_empty()).then(|| {
        // Sorted as strings, as Pod Security Admission sorts them.
        let ports = sorted_set(ports);
        Violation::new(
            "hostPort",
            format!(
                "{} {} {} {} {}",
                pluralize("container", "containers", bad.len()),
                join_quote(&bad),
                pluralize("uses", "use", bad.len()),
                pluralize("hostPort", "hostPorts", ports.len()),
                ports.join(", ")
            ),
            fields,
        )
        .with_errors(errors)
    })
}

/// `hostProbesAndHostLifecycle` (baseline, v1.34): probes and lifecycle
/// handlers may not name a `host`.
pub fn host_probes_and_host_lifecycle(pod: &Pod<'_>) -> Outcome {
    let mut bad = Vec::new();
    let mut hosts = Vec::new();
    let mut fields = Fields::default();
    for c in pod.spec.containers() {
        let lifecycle = c.container.lifecycle.as_ref();
        let handlers = [
            ("livenessProbe", c.container.liveness_probe.as_ref()),
            ("readinessProbe", c.container.readiness_probe.as_ref()),
            ("startupProbe", c.container.startup_probe.as_ref()),
            (
                "lifecycle.postStart",
                lifecycle.and_then(|l| l.post_start.as_ref()),
            ),
            (
                "lifecycle.preStop",
                lifecycle.and_then(|l| l.pre_stop.as_ref()),
            ),
        ];
        for (place, handler) in handlers {
            let Some(Handler {
                http_get,
                tcp_socket,
            }) = handler
            else {
                continue;
            };
            for (action, value) in [("httpGet", http_get), ("tcpSocket", tcp_socket)] {
                let Some(host) = value.as_ref().map(|a| a.host.as_str()) else {
                    continue;
                };
                if !host.is_empty() {
                    bad.push(c.name());
                    hosts.push(host);
                    fields.push(|| pod.container_field(&c, &format!("{place}.{action}.host")));
                }
            }
        }
    }
    (!bad.is_empty()).then(|| {
        // Both are sets in Pod Security Admission: sorted, without repeats.
        let (bad, hosts) = (sorted_set(bad), sorted_set(hosts));
        Violation::new(
            "probe or lifecycle host",
            format!(
                "{} {} {} {} {}",
                pluralize("container", "containers", bad.len()),
                join_quote(&bad),
                pluralize("uses", "use", bad.len()),
                pluralize(
                    "probe or lifecycle host",
                    "probe or lifecycle hosts",
                    hosts.len()
                ),
                join_quote(&hosts)
            ),
            fields,
        )
    })
}

/// `windowsHostProcess` (baseline, v1.0): neither the pod nor a container
/// may set `windowsOptions.hostProcess: true`.
pub fn windows_host_process(pod: &Pod<'_>) -> Outcome {
    let mut fields = Fields::default();
    let pod_level = pod
        .spec
        .security_context
        .as_ref()
        .and_then(|s| s.windows_options.as_ref())
        .and_then(|w| w.host_process)
        == Some(true);
    let mut errors = Errors::new();
    if pod_level {
        fields.push(|| pod.spec_field("securityContext.windowsOptions.hostProcess"));
        errors.push(FieldError::forbidden(
            pod.spec_field("securityContext.windowsOptions.hostProcess"),
            BadValue::Bool(true),
        ));
    }
    let mut bad = Vec::new();
    for c in pod.spec.containers() {
        let set = c
            .security_context()
            .and_then(|s| s.windows_options.as_ref())
            .and_then(|w| w.host_process)
            == Some(true);
        if set {
            bad.push(c.name());
            fields.push(|| pod.container_field(&c, "securityContext.windowsOptions.hostProcess"));
            errors.push(FieldError::forbidden(
                pod.container_field(&c, "securityContext.windowsOptions.hostProcess"),
                BadValue::Bool(true),
            ));
        }
    }
    let mut setters = Vec::new();
    if pod_level {
        setters.push("pod".to_owned());
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
            "hostProcess",
            format!(
                "{} must not set securityContext.windowsOptions.hostProcess=true",
                setters.join(" and ")
            ),
            fields,
        )
        .with_errors(errors)
    })
}
