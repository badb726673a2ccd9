//! Checks on pod-level fields: host namespaces, volumes and sysctls.

use super::text::{join_quote, pluralize, sorted_set};
use super::{BadValue, Errors, FieldError, Fields, Outcome, Pod, Violation};
use crate::model::{Volume, items};

/// `hostNamespaces` (baseline, v1.0): no `hostNetwork`, `hostPID`, `hostIPC`.
pub fn host_namespaces(pod: &Pod<'_>) -> Outcome {
    let mut set = Vec::new();
    let mut fields = Fields::default();
    let mut errors = Errors::new();
    for (field, value) in [
        ("hostNetwork", pod.spec.host_network),
        ("hostPID", pod.spec.host_pid),
        ("hostIPC", pod.spec.host_ipc),
    ] {
        if value == Some(true) {
            set.push(format!("{field}=true"));
            fields.push(|| pod.spec_field(field));
            errors.push(FieldError::forbidden(
                pod.spec_field(field),
                BadValue::Bool(true),
            ));
        }
    }
    (!set.is_empty())
        .then(|| Violation::new("host namespaces", set.join(", "), fields).with_errors(errors))
}

/// `hostPathVolumes` (baseline, v1.0): no `hostPath` volume.
pub fn host_path_volumes(pod: &Pod<'_>) -> Outcome {
    let mut bad = Vec::new();
    let mut fields = Fields::default();
    let mut errors = Errors::new();
    for (i, volume) in items(&pod.spec.volumes).iter().enumerate() {
        if let Some(host_path) = &volume.host_path {
            bad.push(volume.name.as_str());
            fields.push(|| pod.spec_field(&format!("volumes[{i}].hostPath")));
            errors.push(FieldError::forbidden(
                pod.spec_field(&format!("volumes[{i}].hostPath")),
                BadValue::Text(host_path.path.as_str().to_owned()),
            ));
        }
    }
    (!bad.is_empty()).then(|| {
        Violation::new(
            "hostPath volumes",
            format!(
                "{} {}",
                pluralize("volume", "volumes", bad.len()),
                join_quote(&bad)
            ),
            fields,
        )
        .with_errors(errors)
    })
}

/// Whether a volume uses one of the sources restricted pods may use. A
/// volume that sets no source at all is one: the API server defaults it to
/// an `emptyDir` before admission sees it.
fn allowed_source(v: &Volume) -> bool {
    restricted_source(v).is_none()
        || v.config_map.is_some()
        || v.csi.is_some()
        || v.downward_api.is_some()
        || v.empty_dir.is_some()
        || v.ephemeral.is_some()
        || v.image.is_some()
        || v.persistent_volume_claim.is_some()
        || v.projected.is_some()
        || v.secret.is_some()
}

/// The restricted source a volume uses, named (and chosen, when it sets
/// several) as Pod Security Admission names it; the field path's last part.
fn restricted_source(v: &Volume) -> Option<&'static str> {
    let sources = [
        (v.host_path.is_some(), "hostPath"),
        (v.gce_persistent_disk.is_some(), "gcePersistentDisk"),
        (v.aws_elastic_block_store.is_some(), "awsElasticBlockStore"),
        (v.git_repo.is_some(), "gitRepo"),
        (v.nfs.is_some(), "nfs"),
        (v.iscsi.is_some(), "iscsi"),
        (v.glusterfs.is_some(), "glusterfs"),
        (v.rbd.is_some(), "rbd"),
        (v.flex_volume.is_some(), "flexVolume"),
        (v.cinder.is_some(), "cinder"),
        (v.cephfs.is_some(), "cephfs"),
        (v.flocker.is_some(), "flocker"),
        (v.fc.is_some(), "fc"),
        (v.azure_file.is_some(), "azureFile"),
        (v.vsphere_volume.is_some(), "vsphereVolume"),
        (v.quobyte.is_some(), "quobyte"),
        (v.azure_disk.is_some(), "azureDisk"),
        (v.photon_persistent_disk.is_some(), "photonPersistentDisk"),
        (v.portworx_volume.is_some(), "portworxVolume"),
        (v.scale_io.is_some(), "scaleIO"),
        (v.storageos.is_some(), "storageos"),
    ];
    sources
        .into_iter()
        .find_map(|(set, name)| set.then_some(name))
}

/// `restrictedVolumes` (restricted, v1.0): only configMap, csi,
/// downwardAPI, emptyDir, ephemeral, image, persistentVolumeClaim,
/// projected and secret volumes.
pub fn restricted_volumes(pod: &Pod<'_>) -> Outcome {
    let mut bad = Vec::new();
    let mut types = Vec::new();
    let mut fields = Fields::default();
    let mut errors = Errors::new();
    for (i, volume) in items(&pod.spec.volumes).iter().enumerate() {
        if allowed_source(volume) {
            continue;
        }
        // Every volume source is known to the model, so a volume that is
        // not allowed names a restricted source; "unknown" is PSA's word
        // for a source it does not know.
        let source = restricted_source(volume).unwrap_or("unknown");
        bad.push(volume.name.as_str());
        types.push(source);
        fields.push(|| pod.spec_field(&format!("volumes[{i}].{source}")));
        errors.push(FieldError::forbidden(
            pod.spec_field(&format!("volumes[{i}].{source}")),
            BadValue::None,
        ));
    }
    (!bad.is_empty()).then(|| {
        let types = sorted_set(types);
        Violation::new(
            "restricted volume types",
            format!(
                "{} {} {} {} {}",
                pluralize("volume", "volumes", bad.len()),
                join_quote(&bad),
                pluralize("uses", "use", bad.len()),
                pluralize(
                    "restricted volume type",
                    "restricted volume types",
                    types.len()
                ),
                join_quote(&types)
            ),
            fields,
        )
        .with_errors(errors)
    })
}

/// Safe sysctls from v1.0.
const SYSCTLS_1_0: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
];
/// Added in v1.27.
const SYSCTLS_1_27: &[&str] = &["net.ipv4.ip_local_reserved_ports"];
/// Added in v1.29.
const SYSCTLS_1_29: &[&str] = &[
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];
/// Added in v1.32.
const SYSCTLS_1_32: &[&str] = &["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"];
/// Added in v1.37.
const SYSCTLS_1_37: &[&str] = &[
    "net.ipv4.tcp_slow_start_after_idle",
    "net.ipv4.tcp_notsent_lowat",
];

/// `sysctls` (baseline): only the safe sysctls of the version.
fn sysctls(pod: &Pod<'_>, allowed: &[&[&str]]) -> Outcome {
    let mut bad = Vec::new();
    let mut fields = Fields::default();
    let mut errors = Errors::new();
    let sysctls = pod
        .spec
        .security_context
        .as_ref()
        .map(|s| items(&s.sysctls))
        .unwrap_or(&[]);
    for (i, sysctl) in sysctls.iter().enumerate() {
        let name = sysctl.name.as_str();
        if !allowed.iter().any(|set| set.contains(&name)) {
            bad.push(name);
            fields.push(|| pod.spec_field(&format!("securityContext.sysctls[{i}].name")));
            errors.push(FieldError::forbidden(
                pod.spec_field(&format!("securityContext.sysctls[{i}].name")),
                BadValue::Text(name.to_owned()),
            ));
        }
    }
    (!bad.is_empty())
        .then(|| Violation::new("forbidden sysctls", bad.join(", "), fields).with_errors(errors))
}

/// `sysctls` v1.0.
pub fn sysctls_1_0(pod: &Pod<'_>) -> Outcome {
    sysctls(pod, &[SYSCTLS_1_0])
}

/// `sysctls` v1.27.
pub fn sysctls_1_27(pod: &Pod<'_>) -> Outcome {
    sysctls(pod, &[SYSCTLS_1_0, SYSCTLS_1_27])
}

/// `sysctls` v1.29.
pub fn sysctls_1_29(pod: &Pod<'_>) -> Outcome {
    sysctls(pod, &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29])
}

/// `sysctls` v1.32.
pub fn sysctls_1_32(pod: &Pod<'_>) -> Outcome {
    sysctls(
        pod,
        &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29, SYSCTLS_1_32],
    )
}

/// `sysctls` v1.37.
pub fn sysctls_1_37(pod: &Pod<'_>) -> Outcome {
    sysctls(
        pod,
        &[
            SYSCTLS_1_0,
            SYSCTLS_1_27,
            SYSCTLS_1_29,
            SYSCTLS_1_32,
            SYSCTLS_1_37,
        ],
    )
}
