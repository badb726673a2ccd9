//! The parts of a pod (metadata and spec) the checks read, decoded as the
//! API server decodes them: case-sensitive field names, unknown fields
//! ignored, `null` the same as absent, wrong types refused.
//!
//! Everything is optional, as in the Kubernetes API types: the checks treat
//! a missing field as Go treats a nil pointer or a zero value.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

/// A string that may be `null` (Go decodes `null` into a string as `""`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct GoString(pub String);

impl<'de> Deserialize<'de> for GoString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(GoString(
            Option::<String>::deserialize(d)?.unwrap_or_default(),
        ))
    }
}

impl GoString {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A list that may be `null` or absent.
pub type List<T> = Option<Vec<T>>;

/// The items of an optional list.
pub fn items<T>(list: &List<T>) -> &[T] {
    list.as_deref().unwrap_or(&[])
}

/// An object that must be present and not `null` to count (a Go pointer to
/// a struct); its content is not read.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct Present {}

/// A volume's `hostPath` source; its `path` is a field error's value.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct HostPath {
    /// The path on the node.
    #[serde(default)]
    pub path: GoString,
}

/// `metadata` of a pod or pod template.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ObjectMeta {
    /// Annotations (values may be `null`, read as `""`).
    pub annotations: Option<BTreeMap<String, GoString>>,
}

impl ObjectMeta {
    /// The annotations, in key order.
    pub fn annotations(&self) -> impl Iterator<Item = (&str, &str)> {
        self.annotations
            .iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// One annotation's value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.as_ref()?.get(key).map(GoString::as_str)
    }
}

/// `spec` of a pod.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    /// Init containers, visited first.
    pub init_containers: List<Container>,
    /// Containers.
    pub containers: List<Container>,
    /// Ephemeral containers, visited last.
    pub ephemeral_containers: List<Container>,
    /// Volumes.
    pub volumes: List<Volume>,
    /// The pod-level security context.
    pub security_context: Option<PodSecurityContext>,
    /// `hostNetwork`.
    pub host_network: Option<bool>,
    /// `hostPID`.
    #[serde(rename = "hostPID")]
    pub host_pid: Option<bool>,
    /// `hostIPC`.
    #[serde(rename = "hostIPC")]
    pub host_ipc: Option<bool>,
    /// `hostUsers` (`false`: the pod runs in a user namespace).
    pub host_users: Option<bool>,
    /// `os`.
    pub os: Option<PodOs>,
    /// `runtimeClassName`.
    pub runtime_class_name: Option<String>,
}

/// `spec.os`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodOs {
    /// `linux` or `windows`.
    pub name: GoString,
}

/// A container (init, regular or ephemeral: the checks read the same fields).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    /// The container's name.
    pub name: GoString,
    /// Its image (read by Kyverno's exclusions, which name images).
    #[serde(default)]
    pub image: GoString,
    /// Its security context.
    pub security_context: Option<SecurityContext>,
    /// Its ports.
    pub ports: List<ContainerPort>,
    /// `livenessProbe`.
    pub liveness_probe: Option<Handler>,
    /// `readinessProbe`.
    pub readiness_probe: Option<Handler>,
    /// `startupProbe`.
    pub startup_probe: Option<Handler>,
    /// `lifecycle`.
    pub lifecycle: Option<Lifecycle>,
}

/// A container port.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPort {
    /// `hostPort` (an int32 in the API).
    pub host_port: Option<i32>,
}

/// A probe or lifecycle handler: only the parts that name a host.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Handler {
    /// `httpGet`.
    pub http_get: Option<HostAction>,
    /// `tcpSocket`.
    pub tcp_socket: Option<HostAction>,
}

/// `httpGet` or `tcpSocket` of a probe or handler.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct HostAction {
    /// `host`.
    pub host: GoString,
}

/// `lifecycle`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lifecycle {
    /// `postStart`.
    pub post_start: Option<Handler>,
    /// `preStop`.
    pub pre_stop: Option<Handler>,
}

/// A container's `securityContext`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecurityContext {
    /// `privileged`.
    pub privileged: Option<bool>,
    /// `allowPrivilegeEscalation`.
    pub allow_privilege_escalation: Option<bool>,
    /// `capabilities`.
    pub capabilities: Option<Capabilities>,
    /// `procMount`.
    pub proc_mount: Option<String>,
    /// `seLinuxOptions`.
    #[serde(rename = "seLinuxOptions")]
    pub se_linux_options: Option<SeLinuxOptions>,
    /// `seccompProfile`.
    pub seccomp_profile: Option<Profile>,
    /// `appArmorProfile`.
    pub app_armor_profile: Option<Profile>,
    /// `runAsNonRoot`.
    pub run_as_non_root: Option<bool>,
    /// `runAsUser`.
    pub run_as_user: Option<i64>,
    /// `windowsOptions`.
    pub windows_options: Option<WindowsOptions>,
}

/// The pod's `securityContext`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSecurityContext {
    /// `seLinuxOptions`.
    #[serde(rename = "seLinuxOptions")]
    pub se_linux_options: Option<SeLinuxOptions>,
    /// `seccompProfile`.
    pub seccomp_profile: Option<Profile>,
    /// `appArmorProfile`.
    pub app_armor_profile: Option<Profile>,
    /// `runAsNonRoot`.
    pub run_as_non_root: Option<bool>,
    /// `runAsUser`.
    pub run_as_user: Option<i64>,
    /// `windowsOptions`.
    pub windows_options: Option<WindowsOptions>,
    /// `sysctls`.
    pub sysctls: List<Sysctl>,
}

/// `capabilities`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Capabilities {
    /// `add`.
    pub add: List<GoString>,
    /// `drop`.
    pub drop: List<GoString>,
}

/// `seLinuxOptions`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SeLinuxOptions {
    /// `type`.
    #[serde(rename = "type")]
    pub type_: GoString,
    /// `user`.
    pub user: GoString,
    /// `role`.
    pub role: GoString,
}

/// `seccompProfile` or `appArmorProfile`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Profile {
    /// `type`.
    #[serde(rename = "type")]
    pub type_: GoString,
}

/// `windowsOptions`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WindowsOptions {
    /// `hostProcess`.
    pub host_process: Option<bool>,
}

/// One of `spec.securityContext.sysctls`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Sysctl {
    /// `name`.
    pub name: GoString,
}

/// A volume: its name and which sources it sets (present and not `null`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(missing_docs)] // one field per volume source, named as in the API
pub struct Volume {
    /// The volume's name.
    pub name: GoString,
    pub config_map: Option<Present>,
    pub csi: Option<Present>,
    #[serde(rename = "downwardAPI")]
    pub downward_api: Option<Present>,
    pub empty_dir: Option<Present>,
    pub ephemeral: Option<Present>,
    pub image: Option<Present>,
    pub persistent_volume_claim: Option<Present>,
    pub projected: Option<Present>,
    pub secret: Option<Present>,
    pub host_path: Option<HostPath>,
    pub gce_persistent_disk: Option<Present>,
    pub aws_elastic_block_store: Option<Present>,
    pub git_repo: Option<Present>,
    pub nfs: Option<Present>,
    pub iscsi: Option<Present>,
    pub glusterfs: Option<Present>,
    pub rbd: Option<Present>,
    pub flex_volume: Option<Present>,
    pub cinder: Option<Present>,
    pub cephfs: Option<Present>,
    pub flocker: Option<Present>,
    pub fc: Option<Present>,
    pub azure_file: Option<Present>,
    pub vsphere_volume: Option<Present>,
    pub quobyte: Option<Present>,
    pub azure_disk: Option<Present>,
    pub photon_persistent_disk: Option<Present>,
    pub portworx_volume: Option<Present>,
    #[serde(rename = "scaleIO")]
    pub scale_io: Option<Present>,
    pub storageos: Option<Present>,
}

/// A pod template (`metadata` and `spec`), or a Pod's own.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodTemplateSpec {
    /// `metadata`.
    pub metadata: Option<ObjectMeta>,
    /// `spec`.
    pub spec: Option<PodSpec>,
}

/// A container of a pod spec and where it is.
#[derive(Debug, Clone, Copy)]
pub struct ContainerAt<'a> {
    /// `initContainers`, `containers` or `ephemeralContainers`.
    pub list: &'static str,
    /// Index in that list.
    pub index: usize,
    /// The container.
    pub container: &'a Container,
}

impl<'a> ContainerAt<'a> {
    /// The container's name.
    pub fn name(&self) -> &'a str {
        self.container.name.as_str()
    }

    /// The container's security context, if set.
    pub fn security_context(&self) -> Option<&'a SecurityContext> {
        self.container.security_context.as_ref()
    }
}

impl PodSpec {
    /// Every container in Pod Security Admission's order: init containers,
    /// containers, ephemeral containers.
    pub fn containers(&self) -> impl Iterator<Item = ContainerAt<'_>> {
        [
            ("initContainers", &self.init_containers),
            ("containers", &self.containers),
            ("ephemeralContainers", &self.ephemeral_containers),
        ]
        .into_iter()
        .flat_map(|(list, containers)| {
            items(containers)
                .iter()
                .enumerate()
                .map(move |(index, container)| ContainerAt {
                    list,
                    index,
                    container,
                })
        })
    }

    /// Whether `spec.os.name` is `windows`.
    pub fn is_windows(&self) -> bool {
        self.os
            .as_ref()
            .is_some_and(|os| os.name.as_str() == "windows")
    }

    /// Whether the pod runs in a user namespace (`hostUsers: false`).
    pub fn in_user_namespace(&self) -> bool {
        self.host_users == Some(false)
    }
}
