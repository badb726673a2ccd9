//! Findings carry Pod Security Admission's exact wording (reason and
//! detail, pluralized and ordered as it prints them), the check id and the
//! first offending field. Expected texts are PSA's, for pods written here.

use kiln_pod_security::{Manifest, Settings, review};

/// (check id, first field path, PSA text) of each finding for `pod_spec`
/// (YAML of a Pod's `spec`, with optional `annotations`).
fn judge(level: &str, version: &str, yaml: &str) -> Vec<(String, String, String)> {
    let pod: serde_json::Value = serde_yaml::from_str(yaml).unwrap();
    let object = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "annotations": pod.get("annotations")}, "spec": pod.get("spec")});
    let settings = Settings::parse([("level", level), ("version", version)]).unwrap();
    let json = object.to_string();
    let prefix = format!("violates PodSecurity \"{level}:{version}\": ");
    review(
        &settings,
        "",
        &[Manifest {
            content: &json,
            source: None,
        }],
    )
    .unwrap()
    .into_iter()
    .map(|f| {
        let text = f.message.split_once(&prefix).unwrap().1;
        let text = text.split("; also at ").next().unwrap();
        assert!(f.message.starts_with(&format!("[{}] ", f.check)));
        (f.check.to_owned(), f.field_path.unwrap(), text.to_owned())
    })
    .collect()
}

fn one(level: &str, version: &str, yaml: &str) -> (String, String, String) {
    let mut findings = judge(level, version, yaml);
    assert_eq!(findings.len(), 1, "{findings:#?}");
    findings.remove(0)
}

fn assert_one(level: &str, version: &str, yaml: &str, check: &str, path: &str, text: &str) {
    assert_eq!(
        one(level, version, yaml),
        (check.into(), path.into(), text.into())
    );
}

#[test]
fn privileged_lists_containers_in_visiting_order() {
    assert_one(
        "baseline",
        "latest",
        "spec:
  containers: [{name: b, securityContext: {privileged: true}}]
  initContainers: [{name: a, securityContext: {privileged: true}}]",
        "privileged",
        "spec.initContainers[0].securityContext.privileged",
        r#"privileged (containers "a", "b" must not set securityContext.privileged=true)"#,
    );
}

#[test]
fn host_ports_are_sorted_as_text() {
    assert_one(
        "baseline",
        "latest",
        "spec:
  containers:
  - {name: a, ports: [{containerPort: 1, hostPort: 8080}, {containerPort: 2, hostPort: 80}]}",
        "hostPorts",
        "spec.containers[0].ports[0].hostPort",
        r#"hostPort (container "a" uses hostPorts 80, 8080)"#,
    );
}

#[test]
fn host_namespaces_and_volumes() {
    let findings = judge(
        "baseline",
        "v1.0",
        "spec:
  hostPID: true
  hostNetwork: true
  volumes: [{name: data, hostPath: {path: /}}, {name: x, emptyDir: {}}, {name: y, hostPath: {path: /y}}]",
    );
    assert_eq!(
        findings,
        [
            (
                "hostNamespaces".into(),
                "spec.hostNetwork".into(),
                "host namespaces (hostNetwork=true, hostPID=true)".into()
            ),
            (
                "hostPathVolumes".into(),
                "spec.volumes[0].hostPath".into(),
                r#"hostPath volumes (volumes "data", "y")"#.into()
            ),
        ]
    );
    assert_one(
        "restricted",
        "latest",
        "spec:
  securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
  volumes: [{name: data, hostPath: {path: /}}, {name: n, nfs: {server: s, path: /}}, {name: none}]",
        "restrictedVolumes",
        "spec.volumes[0].hostPath",
        r#"restricted volume types (volumes "data", "n" use restricted volume types "hostPath", "nfs")"#,
    );
}

#[test]
fn capabilities_baseline_and_restricted() {
    assert_one(
        "baseline",
        "latest",
        "spec:
  containers: [{name: a, securityContext: {capabilities: {add: [NET_RAW, CHOWN, SYS_ADMIN]}}}]",
        "capabilities_baseline",
        "spec.containers[0].securityContext.capabilities.add[0]",
        r#"non-default capabilities (container "a" must not include "NET_RAW", "SYS_ADMIN" in securityContext.capabilities.add)"#,
    );
    let findings = judge(
        "restricted",
        "latest",
        "spec:
  securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
  containers:
  - {name: a, securityContext: {allowPrivilegeEscalation: false}}
  - {name: b, securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL], add: [NET_BIND_SERVICE, CHOWN]}}}",
    );
    assert_eq!(
        findings,
        [(
            "capabilities_restricted".into(),
            "spec.containers[0].securityContext.capabilities.drop".into(),
            r#"unrestricted capabilities (container "a" must set securityContext.capabilities.drop=["ALL"]; container "b" must not include "CHOWN" in securityContext.capabilities.add)"#.into()
        )]
    );
}

#[test]
fn restricted_identity_checks() {
    let findings = judge(
        "restricted",
        "v1.30",
        "spec:
  securityContext: {runAsUser: 0, seccompProfile: {type: RuntimeDefault}}
  containers:
  - {name: a, securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}, runAsNonRoot: false}}
  - {name: b, securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}, runAsUser: 0}}",
    );
    assert_eq!(
        findings,
        [
            (
                "runAsNonRoot".into(),
                "spec.containers[0].securityContext.runAsNonRoot".into(),
                r#"runAsNonRoot != true (container "a" must not set securityContext.runAsNonRoot=false)"#.into()
            ),
            (
                "runAsUser".into(),
                "spec.securityContext.runAsUser".into(),
                r#"runAsUser=0 (pod and container "b" must not set runAsUser=0)"#.into()
            ),
        ]
    );
    // From v1.35, a pod in a user namespace may run as root.
    assert!(judge(
        "restricted",
        "v1.35",
        "spec:
  hostUsers: false
  securityContext: {runAsUser: 0, seccompProfile: {type: RuntimeDefault}}
  containers: [{name: a, securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}}]"
    )
    .is_empty());
}

#[test]
fn implicit_restricted_requirements() {
    let findings = judge(
        "restricted",
        "latest",
        "spec:\n  containers: [{name: a}]\n  ephemeralContainers: [{name: e}]",
    );
    let texts: Vec<_> = findings.iter().map(|f| f.2.as_str()).collect();
    assert_eq!(
        texts,
        [
            r#"allowPrivilegeEscalation != false (containers "a", "e" must set securityContext.allowPrivilegeEscalation=false)"#,
            r#"unrestricted capabilities (containers "a", "e" must set securityContext.capabilities.drop=["ALL"])"#,
            r#"runAsNonRoot != true (pod or containers "a", "e" must set securityContext.runAsNonRoot=true)"#,
            r#"seccompProfile (pod or containers "a", "e" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#,
        ]
    );
    assert_eq!(
        findings[0].1,
        "spec.containers[0].securityContext.allowPrivilegeEscalation"
    );
    // Windows pods are exempt from these from v1.25 on.
    let windows = "spec:\n  os: {name: windows}\n  securityContext: {runAsNonRoot: true}\n  containers: [{name: a}]";
    assert!(judge("restricted", "v1.25", windows).is_empty());
    assert_eq!(judge("restricted", "v1.24", windows).len(), 3);
}

#[test]
fn se_linux_options() {
    assert_one(
        "baseline",
        "v1.30",
        "spec:
  securityContext: {seLinuxOptions: {type: foo, user: u}}
  containers:
  - {name: d, securityContext: {seLinuxOptions: {type: container_engine_t}}}
  - {name: e, securityContext: {seLinuxOptions: {type: bar}}}
  - {name: g, securityContext: {seLinuxOptions: {role: r}}}",
        "seLinuxOptions",
        "spec.securityContext.seLinuxOptions",
        r#"seLinuxOptions (pod and containers "d", "e", "g" set forbidden securityContext.seLinuxOptions: types "bar", "container_engine_t", "foo"; user may not be set; role may not be set)"#,
    );
    // container_engine_t is allowed from v1.31.
    let engine = "spec:\n  containers: [{name: d, securityContext: {seLinuxOptions: {type: container_engine_t}}}]";
    assert!(judge("baseline", "v1.31", engine).is_empty());
}

#[test]
fn seccomp_and_apparmor() {
    assert_one(
        "baseline",
        "v1.18",
        "annotations:
  seccomp.security.alpha.kubernetes.io/pod: unconfined
  container.seccomp.security.alpha.kubernetes.io/a: 'runtime/default'
  container.seccomp.security.alpha.kubernetes.io/b: 'bad\"'
spec:
  containers: [{name: a}, {name: b}]",
        "seccompProfile_baseline",
        "metadata.annotations.seccomp.security.alpha.kubernetes.io/pod",
        r#"seccompProfile (forbidden annotations container.seccomp.security.alpha.kubernetes.io/b="bad\"", seccomp.security.alpha.kubernetes.io/pod="unconfined")"#,
    );
    assert_one(
        "baseline",
        "latest",
        "spec:
  securityContext: {seccompProfile: {type: Unconfined}}
  containers: [{name: a, securityContext: {seccompProfile: {type: Bogus}}}]",
        "seccompProfile_baseline",
        "spec.securityContext.seccompProfile.type",
        r#"seccompProfile (pod and container "a" must not set securityContext.seccompProfile.type to "Bogus", "Unconfined")"#,
    );
    assert_one(
        "baseline",
        "latest",
        "annotations:
  container.apparmor.security.beta.kubernetes.io/a: unconfined
  container.apparmor.security.beta.kubernetes.io/b: localhost/x
spec:
  securityContext: {appArmorProfile: {type: Unconfined}}
  containers: [{name: a}]",
        "appArmorProfile",
        "spec.securityContext.appArmorProfile.type",
        r#"forbidden AppArmor profiles (pod and annotation must not set AppArmor profile type to "Unconfined", "container.apparmor.security.beta.kubernetes.io/a="unconfined"")"#,
    );
}

#[test]
fn sysctls_follow_the_version() {
    let yaml = "spec:
  securityContext:
    sysctls: [{name: net.ipv4.tcp_rmem, value: x}, {name: kernel.msgmax, value: y}, {name: net.ipv4.tcp_slow_start_after_idle, value: z}]";
    assert_eq!(
        one("baseline", "v1.31", yaml).2,
        "forbidden sysctls (net.ipv4.tcp_rmem, kernel.msgmax, net.ipv4.tcp_slow_start_after_idle)"
    );
    assert_eq!(
        one("baseline", "v1.32", yaml).2,
        "forbidden sysctls (kernel.msgmax, net.ipv4.tcp_slow_start_after_idle)"
    );
    assert_eq!(
        one("baseline", "latest", yaml),
        (
            "sysctls".into(),
            "spec.securityContext.sysctls[1].name".into(),
            "forbidden sysctls (kernel.msgmax)".into()
        )
    );
}

#[test]
fn probes_proc_mount_and_host_process() {
    let yaml = "spec:
  securityContext: {windowsOptions: {hostProcess: true}}
  containers:
  - name: b
    livenessProbe: {httpGet: {host: 10.0.0.1, port: 80}}
    lifecycle: {preStop: {tcpSocket: {host: example.com, port: 1}}}
    securityContext: {procMount: Unmasked, windowsOptions: {hostProcess: true}}
  - name: a
    readinessProbe: {tcpSocket: {host: 10.0.0.1, port: 80}}";
    let findings = judge("baseline", "latest", yaml);
    let texts: Vec<_> = findings
        .iter()
        .map(|f| (f.0.as_str(), f.1.as_str(), f.2.as_str()))
        .collect();
    assert_eq!(
        texts,
        [
            (
                "hostProbesAndHostLifecycle",
                "spec.containers[0].livenessProbe.httpGet.host",
                r#"probe or lifecycle host (containers "a", "b" use probe or lifecycle hosts "10.0.0.1", "example.com")"#
            ),
            (
                "procMount",
                "spec.containers[0].securityContext.procMount",
                r#"procMount (container "b" must not set securityContext.procMount to "Unmasked")"#
            ),
            (
                "windowsHostProcess",
                "spec.securityContext.windowsOptions.hostProcess",
                r#"hostProcess (pod and container "b" must not set securityContext.windowsOptions.hostProcess=true)"#
            ),
        ]
    );
    // Probe hosts are only checked from v1.34.
    assert_eq!(judge("baseline", "v1.33", yaml).len(), 2);
}
