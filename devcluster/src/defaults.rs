//! What the API server fills in and checks: defaults of built-in kinds (those
//! that matter for diffs), structural-schema pruning and defaulting of custom
//! resources, and validation with field-level causes.

use serde_json::{Map, Value, json};

use super::resources::ResourceType;

/// A `(field, message)` validation cause.
pub type Cause = (String, String);

fn obj(value: &mut Value) -> Option<&mut Map<String, Value>> {
    value.as_object_mut()
}

fn set_default(map: &mut Map<String, Value>, key: &str, value: Value) {
    map.entry(key.to_owned()).or_insert(value);
}

fn child<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    map.get_mut(key).and_then(Value::as_object_mut)
}

/// What defaulting allocates.
pub struct Allocator<'a> {
    /// A Service cluster IP.
    pub cluster_ip: &'a mut dyn FnMut() -> String,
    /// A Service node port (30000-32767).
    pub node_port: &'a mut dyn FnMut() -> u32,
}

/// Fills in the defaults of a built-in kind, as the API server's defaulting
/// functions do (`pkg/apis/*/v*/defaults.go` in Kubernetes 1.32): the ones
/// that show up in what the server returns.
pub fn builtin(kind: &str, object: &mut Value, alloc: &mut Allocator<'_>) {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let Some(root) = obj(object) else { return };
    match kind {
        "Namespace" => {
            let metadata = root.entry("metadata").or_insert_with(|| json!({}));
            if let Some(metadata) = obj(metadata) {
                let labels = metadata.entry("labels").or_insert_with(|| json!({}));
                if let Some(labels) = obj(labels) {
                    labels.insert("kubernetes.io/metadata.name".into(), name.into());
                }
            }
            let spec = root.entry("spec").or_insert_with(|| json!({}));
            if let Some(spec) = obj(spec) {
                set_default(spec, "finalizers", json!(["kubernetes"]));
            }
            let status = root.entry("status").or_insert_with(|| json!({}));
            if let Some(status) = obj(status) {
                set_default(status, "phase", "Active".into());
            }
        }
        "Secret" => {
            set_default(root, "type", "Opaque".into());
            // `stringData` is write-only: merged into `data`, base64-encoded.
            if let Some(Value::Object(strings)) = root.remove("stringData") {
                use base64::Engine as _;
                let data = root.entry("data").or_insert_with(|| json!({}));
                if let Some(data) = obj(data) {
                    for (key, value) in strings {
                        let text = value.as_str().unwrap_or_default();
                        data.insert(
                            key,
                            base64::engine::general_purpose::STANDARD
                                .encode(text)
                                .into(),
                        );
                    }
                }
            }
        }
        "Service" => {
            let Some(spec) = child(root, "spec") else {
                return;
            };
            set_default(spec, "type", "ClusterIP".into());
            set_default(spec, "sessionAffinity", "None".into());
            if spec.get("type").and_then(Value::as_str) != Some("ExternalName") {
                if !spec.contains_key("clusterIP") {
                    spec.insert("clusterIP".into(), (alloc.cluster_ip)().into());
                }
                let ip = spec["clusterIP"].clone();
                set_default(spec, "clusterIPs", json!([ip]));
                set_default(spec, "ipFamilies", json!(["IPv4"]));
                set_default(spec, "ipFamilyPolicy", "SingleStack".into());
                set_default(spec, "internalTrafficPolicy", "Cluster".into());
            }
            let service_type = spec
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let external = matches!(service_type.as_str(), "NodePort" | "LoadBalancer");
            if external {
                set_default(spec, "externalTrafficPolicy", "Cluster".into());
            }
            if service_type == "LoadBalancer" {
                set_default(spec, "allocateLoadBalancerNodePorts", true.into());
            }
            let node_ports = service_type == "NodePort"
                || service_type == "LoadBalancer"
                    && spec.get("allocateLoadBalancerNodePorts") != Some(&Value::Bool(false));
            match spec.get("sessionAffinity").and_then(Value::as_str) {
                Some("ClientIP") => {
                    let config = spec
                        .entry("sessionAffinityConfig")
                        .or_insert_with(|| json!({}));
                    if let Some(config) = obj(config) {
                        let client = config.entry("clientIP").or_insert_with(|| json!({}));
                        if let Some(client) = obj(client) {
                            set_default(client, "timeoutSeconds", 10800.into());
                        }
                    }
                }
                _ => {
                    spec.remove("sessionAffinityConfig");
                }
            }
            if let Some(Value::Array(ports)) = spec.get_mut("ports") {
                for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                    set_default(port, "protocol", "TCP".into());
                    let unset = matches!(port.get("targetPort"), None | Some(Value::Null))
                        || port.get("targetPort") == Some(&json!(0))
                        || port.get("targetPort") == Some(&json!(""));
                    if unset && let Some(number) = port.get("port").cloned() {
                        port.insert("targetPort".into(), number);
                    }
                    if node_ports && !port.get("nodePort").is_some_and(|p| p != &json!(0)) {
                        port.insert("nodePort".into(), (alloc.node_port)().into());
                    }
                }
            }
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            // SetDefaults_Subject / SetDefaults_*RoleBinding (rbac/v1).
            if let Some(role_ref) = child(root, "roleRef") {
                set_default(role_ref, "apiGroup", "rbac.authorization.k8s.io".into());
            }
            if let Some(Value::Array(subjects)) = root.get_mut("subjects") {
                for subject in subjects.iter_mut().filter_map(Value::as_object_mut) {
                    if matches!(
                        subject.get("kind").and_then(Value::as_str),
                        Some("User" | "Group")
                    ) {
                        set_default(subject, "apiGroup", "rbac.authorization.k8s.io".into());
                    }
                }
            }
        }
        "PriorityClass" => {
            set_default(root, "preemptionPolicy", "PreemptLowerPriority".into());
        }
        "StorageClass" => {
            set_default(root, "reclaimPolicy", "Delete".into());
            set_default(root, "volumeBindingMode", "Immediate".into());
        }
        "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
            let mutating = kind == "MutatingWebhookConfiguration";
            if let Some(Value::Array(webhooks)) = root.get_mut("webhooks") {
                for webhook in webhooks.iter_mut().filter_map(Value::as_object_mut) {
                    webhook_defaults(webhook, mutating);
                }
            }
        }
        "APIService" => {
            if let Some(service) = child(root, "spec").and_then(|s| child(s, "service")) {
                set_default(service, "port", 443.into());
            }
        }
        "HorizontalPodAutoscaler" => {
            let v2 = root.get("apiVersion").and_then(Value::as_str) == Some("autoscaling/v2");
            if let Some(spec) = child(root, "spec") {
                if v2 {
                    hpa_defaults(spec);
                } else {
                    set_default(spec, "minReplicas", 1.into());
                }
            }
        }
        "Pod" => {
            if let Some(spec) = child(root, "spec") {
                pod_spec(spec);
                pod_only(spec);
            }
            let status = root.entry("status").or_insert_with(|| json!({}));
            if let Some(status) = obj(status) {
                set_default(status, "phase", "Pending".into());
            }
        }
        "PersistentVolumeClaim" => {
            if let Some(spec) = child(root, "spec") {
                set_default(spec, "volumeMode", "Filesystem".into());
            }
            let status = root.entry("status").or_insert_with(|| json!({}));
            if let Some(status) = obj(status) {
                set_default(status, "phase", "Pending".into());
            }
        }
        "Deployment" => {
            let Some(spec) = child(root, "spec") else {
                return;
            };
            set_default(spec, "replicas", 1.into());
            set_default(spec, "revisionHistoryLimit", 10.into());
            set_default(spec, "progressDeadlineSeconds", 600.into());
            let strategy = spec.entry("strategy").or_insert_with(|| json!({}));
            if let Some(strategy) = obj(strategy) {
                set_default(strategy, "type", "RollingUpdate".into());
                if strategy["type"] == "RollingUpdate" {
                    let rolling = strategy.entry("rollingUpdate").or_insert_with(|| json!({}));
                    if let Some(rolling) = obj(rolling) {
                        set_default(rolling, "maxUnavailable", "25%".into());
                        set_default(rolling, "maxSurge", "25%".into());
                    }
                }
            }
            template(spec);
        }
        "StatefulSet" => {
            let Some(spec) = child(root, "spec") else {
                return;
            };
            set_default(spec, "replicas", 1.into());
            set_default(spec, "revisionHistoryLimit", 10.into());
            set_default(spec, "podManagementPolicy", "OrderedReady".into());
            set_default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            );
            set_default(
                spec,
                "persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
            // The claim templates are defaulted as claims (apps/v1
            // generated defaulters): volumeMode, and a Pending status.
            if let Some(Value::Array(claims)) = spec.get_mut("volumeClaimTemplates") {
                for claim in claims.iter_mut().filter_map(Value::as_object_mut) {
                    if let Some(claim_spec) = child(claim, "spec") {
                        set_default(claim_spec, "volumeMode", "Filesystem".into());
                    }
                    let status = claim.entry("status").or_insert_with(|| json!({}));
                    if let Some(status) = obj(status) {
                        set_default(status, "phase", "Pending".into());
                    }
                }
            }
            template(spec);
        }
        "DaemonSet" => {
            let Some(spec) = child(root, "spec") else {
                return;
            };
            set_default(spec, "revisionHistoryLimit", 10.into());
            set_default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            );
            template(spec);
        }
        "ReplicaSet" => {
            let Some(spec) = child(root, "spec") else {
                return;
            };
            set_default(spec, "replicas", 1.into());
            template(spec);
        }
        "Job" => {
            let Some(spec) = child(root, "spec") else {
                return;
            };
            job_spec(spec);
        }
        "CronJob" => {
            let Some(spec) = child(root, "spec") else {
                return;
            };
            set_default(spec, "concurrencyPolicy", "Allow".into());
            set_default(spec, "suspend", false.into());
            set_default(spec, "successfulJobsHistoryLimit", 3.into());
            set_default(spec, "failedJobsHistoryLimit", 1.into());
            if let Some(job) = child(spec, "jobTemplate").and_then(|t| child(t, "spec")) {
                job_spec(job);
            }
        }
        "NetworkPolicy" => {
            let Some(spec) = child(root, "spec") else {
                return;
            };
            // SetDefaults_NetworkPolicyPort: TCP.
            for direction in ["ingress", "egress"] {
                if let Some(Value::Array(rules)) = spec.get_mut(direction) {
                    for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                        if let Some(Value::Array(ports)) = rule.get_mut("ports") {
                            for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                                set_default(port, "protocol", "TCP".into());
                            }
                        }
                    }
                }
            }
            if !spec.contains_key("policyTypes") {
                let mut types = vec![json!("Ingress")];
                if spec.contains_key("egress") {
                    types.push(json!("Egress"));
                }
                spec.insert("policyTypes".into(), Value::Array(types));
            }
        }
        "CustomResourceDefinition" => {
            if let Some(Value::Array(versions)) =
                child(root, "spec").and_then(|s| s.get_mut("versions"))
            {
                for version in versions.iter_mut().filter_map(Value::as_object_mut) {
                    set_default(version, "served", true.into());
                }
            }
        }
        _ => {}
    }
}

fn job_spec(spec: &mut Map<String, Value>) {
    set_default(spec, "parallelism", 1.into());
    set_default(spec, "completions", 1.into());
    set_default(spec, "backoffLimit", 6.into());
    set_default(spec, "completionMode", "NonIndexed".into());
    set_default(spec, "suspend", false.into());
    set_default(spec, "podReplacementPolicy", "TerminatingOrFailed".into());
    template(spec);
}

fn template(spec: &mut Map<String, Value>) {
    if let Some(pod) = child(spec, "template").and_then(|t| child(t, "spec")) {
        pod_spec(pod);
    }
}

fn pod_spec(spec: &mut Map<String, Value>) {
    if let Some(Value::Array(volumes)) = spec.get_mut("volumes") {
        for volume in volumes.iter_mut().filter_map(Value::as_object_mut) {
            volume_defaults(volume);
        }
    }
    set_default(spec, "restartPolicy", "Always".into());
    set_default(spec, "terminationGracePeriodSeconds", 30.into());
    set_default(spec, "dnsPolicy", "ClusterFirst".into());
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "schedulerName", "default-scheduler".into());
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(containers)) = spec.get_mut(list) {
            for container in containers.iter_mut().filter_map(Value::as_object_mut) {
                let image = container
                    .get("image")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                // Kubernetes pulls `:latest` (or untagged) images always.
                let last = image.rsplit('/').next().unwrap_or_default();
                let latest =
                    !last.contains(':') && !image.contains('@') || image.ends_with(":latest");
                set_default(
                    container,
                    "imagePullPolicy",
                    if latest { "Always" } else { "IfNotPresent" }.into(),
                );
                set_default(
                    container,
                    "terminationMessagePath",
                    "/dev/termination-log".into(),
                );
                set_default(container, "terminationMessagePolicy", "File".into());
                set_default(container, "resources", json!({}));
                for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
                    if let Some(probe) = child(container, probe) {
                        probe_defaults(probe);
                    }
                }
                if let Some(lifecycle) = child(container, "lifecycle") {
                    for hook in ["postStart", "preStop"] {
                        if let Some(get) = child(lifecycle, hook).and_then(|h| child(h, "httpGet"))
                        {
                            http_get_defaults(get);
                        }
                    }
                }
                if let Some(Value::Array(env)) = container.get_mut("env") {
                    for var in env.iter_mut().filter_map(Value::as_object_mut) {
                        if let Some(field) =
                            child(var, "valueFrom").and_then(|v| child(v, "fieldRef"))
                        {
                            set_default(field, "apiVersion", "v1".into());
                        }
                    }
                }
                if let Some(Value::Array(ports)) = container.get_mut("ports") {
                    for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                        set_default(port, "protocol", "TCP".into());
                    }
                }
            }
        }
    }
}

/// SetDefaults_Probe and the HTTPGetAction in it.
fn probe_defaults(probe: &mut Map<String, Value>) {
    set_default(probe, "timeoutSeconds", 1.into());
    set_default(probe, "periodSeconds", 10.into());
    set_default(probe, "successThreshold", 1.into());
    set_default(probe, "failureThreshold", 3.into());
    if let Some(get) = child(probe, "httpGet") {
        http_get_defaults(get);
    }
}

/// SetDefaults_HTTPGetAction.
fn http_get_defaults(get: &mut Map<String, Value>) {
    set_default(get, "path", "/".into());
    set_default(get, "scheme", "HTTP".into());
}

/// The file mode Secret, ConfigMap, downward API and projected volumes get
/// (0644).
const DEFAULT_MODE: u32 = 0o644;

/// SetDefaults_Volume and the volume sources' defaulters.
fn volume_defaults(volume: &mut Map<String, Value>) {
    const SOURCES: [&str; 29] = [
        "hostPath",
        "emptyDir",
        "gcePersistentDisk",
        "awsElasticBlockStore",
        "gitRepo",
        "secret",
        "nfs",
        "iscsi",
        "glusterfs",
        "persistentVolumeClaim",
        "rbd",
        "flexVolume",
        "cinder",
        "cephfs",
        "flocker",
        "downwardAPI",
        "fc",
        "azureFile",
        "configMap",
        "vsphereVolume",
        "quobyte",
        "azureDisk",
        "photonPersistentDisk",
        "projected",
        "portworxVolume",
        "scaleIO",
        "storageos",
        "csi",
        "ephemeral",
    ];
    if !SOURCES.iter().any(|s| volume.contains_key(*s)) && !volume.contains_key("image") {
        volume.insert("emptyDir".into(), json!({}));
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(source) = child(volume, source) {
            set_default(source, "defaultMode", DEFAULT_MODE.into());
        }
    }
    if let Some(host_path) = child(volume, "hostPath") {
        set_default(host_path, "type", "".into());
    }
    let field_refs = |items: &mut Value| {
        if let Value::Array(items) = items {
            for item in items.iter_mut().filter_map(Value::as_object_mut) {
                if let Some(field) = child(item, "fieldRef") {
                    set_default(field, "apiVersion", "v1".into());
                }
            }
        }
    };
    if let Some(items) = child(volume, "downwardAPI").and_then(|d| d.get_mut("items")) {
        field_refs(items);
    }
    if let Some(Value::Array(sources)) =
        child(volume, "projected").and_then(|p| p.get_mut("sources"))
    {
        for source in sources.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(token) = child(source, "serviceAccountToken") {
                set_default(token, "expirationSeconds", 3600.into());
            }
            if let Some(items) = child(source, "downwardAPI").and_then(|d| d.get_mut("items")) {
                field_refs(items);
            }
        }
    }
    if let Some(claim) = child(volume, "ephemeral")
        .and_then(|e| child(e, "volumeClaimTemplate"))
        .and_then(|t| child(t, "spec"))
    {
        set_default(claim, "volumeMode", "Filesystem".into());
    }
}

/// SetDefaults_Pod: what only Pods (not templates) get.
fn pod_only(spec: &mut Map<String, Value>) {
    set_default(spec, "enableServiceLinks", true.into());
    let host_network = spec.get("hostNetwork") == Some(&Value::Bool(true));
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(containers)) = spec.get_mut(list) {
            for container in containers.iter_mut().filter_map(Value::as_object_mut) {
                // Requests default to the limits.
                let limits = container
                    .get("resources")
                    .and_then(|r| r.get("limits"))
                    .and_then(Value::as_object)
                    .cloned();
                if let (Some(limits), Some(resources)) = (limits, child(container, "resources")) {
                    let requests = resources.entry("requests").or_insert_with(|| json!({}));
                    if let Some(requests) = obj(requests) {
                        for (name, value) in limits {
                            requests.entry(name).or_insert(value);
                        }
                    }
                }
                if host_network && let Some(Value::Array(ports)) = container.get_mut("ports") {
                    for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                        if let Some(number) = port.get("containerPort").cloned()
                            && port.get("hostPort").is_none_or(|p| p == &json!(0))
                        {
                            port.insert("hostPort".into(), number);
                        }
                    }
                }
            }
        }
    }
}

/// SetDefaults_ValidatingWebhook / SetDefaults_MutatingWebhook, the rules'
/// scope and the service port (admissionregistration/v1).
fn webhook_defaults(webhook: &mut Map<String, Value>, mutating: bool) {
    set_default(webhook, "failurePolicy", "Fail".into());
    set_default(webhook, "matchPolicy", "Equivalent".into());
    set_default(webhook, "namespaceSelector", json!({}));
    set_default(webhook, "objectSelector", json!({}));
    set_default(webhook, "timeoutSeconds", 10.into());
    if mutating {
        set_default(webhook, "reinvocationPolicy", "Never".into());
    }
    if let Some(Value::Array(rules)) = webhook.get_mut("rules") {
        for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
            set_default(rule, "scope", "*".into());
        }
    }
    if let Some(service) = child(webhook, "clientConfig").and_then(|c| child(c, "service")) {
        set_default(service, "port", 443.into());
    }
}

/// SetDefaults_HorizontalPodAutoscaler (autoscaling/v2): one replica at
/// least, 80% CPU when no metric is given, and a behavior's unset rules.
fn hpa_defaults(spec: &mut Map<String, Value>) {
    set_default(spec, "minReplicas", 1.into());
    if spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
    if let Some(behavior) = child(spec, "behavior") {
        let up = behavior.entry("scaleUp").or_insert_with(|| json!({}));
        if let Some(up) = obj(up) {
            set_default(up, "stabilizationWindowSeconds", 0.into());
            set_default(up, "selectPolicy", "Max".into());
            set_default(
                up,
                "policies",
                json!([{"type": "Pods", "value": 4, "periodSeconds": 15},
                    {"type": "Percent", "value": 100, "periodSeconds": 15}]),
            );
        }
        let down = behavior.entry("scaleDown").or_insert_with(|| json!({}));
        if let Some(down) = obj(down) {
            set_default(down, "selectPolicy", "Max".into());
            set_default(
                down,
                "policies",
                json!([{"type": "Percent", "value": 100, "periodSeconds": 15}]),
            );
        }
    }
}

const DNS_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn is_label(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 63
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

fn is_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(is_label)
}

/// Checks an object name for its kind: RFC 1123 labels for namespaces and
/// services, subdomains otherwise.
pub fn name_problem(kind: &str, name: &str) -> Option<String> {
    if matches!(
        kind,
        "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding"
    ) {
        // RBAC names are path segments (`system:metrics-server`):
        // apimachinery `path.IsValidPathSegmentName`.
        let problem = match name {
            "." => Some("may not be '.'"),
            ".." => Some("may not be '..'"),
            _ if name.contains('/') => Some("may not contain '/'"),
            _ if name.contains('%') => Some("may not contain '%'"),
            _ => None,
        };
        return problem.map(|p| format!("Invalid value: {name:?}: {p}"));
    }
    let label = matches!(kind, "Namespace" | "Service");
    let ok = if label {
        is_label(name)
    } else {
        is_subdomain(name)
    };
    (!ok).then(|| {
        format!(
            "Invalid value: {name:?}: {}",
            if label { DNS_LABEL } else { DNS_SUBDOMAIN }
        )
    })
}

fn label_value_ok(value: &str) -> bool {
    value.len() <= 63
        && (value.is_empty()
            || value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
                && value.as_bytes()[0].is_ascii_alphanumeric()
                && value.as_bytes()[value.len() - 1].is_ascii_alphanumeric())
}

/// Validates a built-in object (with `old` for updates); returns the causes.
pub fn validate(rt: &ResourceType, object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(labels) = object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
    {
        for (key, value) in labels {
            match value.as_str() {
                Some(text) if label_value_ok(text) => {}
                _ => causes.push((
                    "metadata.labels".into(),
                    format!("Invalid value: {value}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (label {key:?})"),
                )),
            }
        }
    }
    if rt.is_custom() {
        if let Some(schema) = &rt.openapi {
            validate_schema(schema, object, "", &mut causes);
        }
        return causes;
    }
    let workload = matches!(
        rt.kind.as_str(),
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet"
    );
    if workload {
        match object.pointer("/spec/selector") {
            None => causes.push(("spec.selector".into(), "Required value".into())),
            Some(selector) => {
                let labels = object
                    .pointer("/spec/template/metadata/labels")
                    .and_then(Value::as_object);
                let wanted = selector.get("matchLabels").and_then(Value::as_object);
                if let Some(wanted) = wanted {
                    let matched = wanted
                        .iter()
                        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
                    if !matched {
                        causes.push((
                            "spec.template.metadata.labels".into(),
                            "Invalid value: `selector` does not match template `labels`".into(),
                        ));
                    }
                }
                if let Some(old) = old.and_then(|o| o.pointer("/spec/selector"))
                    && old != selector
                {
                    causes.push((
                        "spec.selector".into(),
                        "Invalid value: field is immutable".into(),
                    ));
                }
            }
        }
    }
    let pod = match rt.kind.as_str() {
        "Pod" => object.get("spec"),
        "Job" => object.pointer("/spec/template/spec"),
        "CronJob" => object.pointer("/spec/jobTemplate/spec/template/spec"),
        _ if workload => object.pointer("/spec/template/spec"),
        _ => None,
    };
    let prefix = match rt.kind.as_str() {
        "Pod" => "spec",
        "CronJob" => "spec.jobTemplate.spec.template.spec",
        _ => "spec.template.spec",
    };
    if workload || matches!(rt.kind.as_str(), "Pod" | "Job" | "CronJob") {
        let containers = pod
            .and_then(|p| p.get("containers"))
            .and_then(Value::as_array);
        match containers {
            None => causes.push((format!("{prefix}.containers"), "Required value".into())),
            Some(list) if list.is_empty() => {
                causes.push((format!("{prefix}.containers"), "Required value".into()))
            }
            Some(list) => {
                for (i, container) in list.iter().enumerate() {
                    match container.get("name").and_then(Value::as_str) {
                        Some(name) if is_label(name) => {}
                        _ => causes.push((
                            format!("{prefix}.containers[{i}].name"),
                            "Required value".into(),
                        )),
                    }
                    if container
                        .get("image")
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
                    {
                        causes.push((
                            format!("{prefix}.containers[{i}].image"),
                            "Required value".into(),
                        ));
                    }
                }
            }
        }
    }
    if matches!(rt.kind.as_str(), "Job" | "CronJob") {
        let policy = pod
            .and_then(|p| p.get("restartPolicy"))
            .and_then(Value::as_str);
        if !matches!(policy, Some("Never" | "OnFailure")) {
            causes.push((
                format!("{prefix}.restartPolicy"),
                format!(
                    "Unsupported value: {:?}: supported values: \"OnFailure\", \"Never\"",
                    policy.unwrap_or("Always")
                ),
            ));
        }
    }
    if rt.kind == "Service"
        && let (Some(old), Some(new)) = (
            old.and_then(|o| o.pointer("/spec/clusterIP")),
            object.pointer("/spec/clusterIP"),
        )
        && old != new
    {
        causes.push((
            "spec.clusterIP".into(),
            "Invalid value: field is immutable".into(),
        ));
    }
    if let Some(pod) = pod {
        container_ports(pod, prefix, &mut causes);
    }
    if rt.kind == "Service" {
        service_ports(object, &mut causes);
    }
    if let Some(old) = old {
        immutable_specs(&rt.kind, object, old, &mut causes);
    }
    causes
}

/// The valid port numbers (apimachinery `validation.IsValidPortNum`).
const PORT_RANGE: &str = "must be between 1 and 65535, inclusive";

fn port_in_range(value: &Value) -> bool {
    value.as_i64().is_some_and(|p| (1..=65535).contains(&p))
}

/// Container ports: `containerPort` 1-65535, `hostPort` 0-65535
/// (`validateContainerPorts`).
fn container_ports(pod: &Value, prefix: &str, causes: &mut Vec<Cause>) {
    for list in ["containers", "initContainers"] {
        let Some(containers) = pod.get(list).and_then(Value::as_array) else {
            continue;
        };
        for (i, container) in containers.iter().enumerate() {
            let Some(ports) = container.get("ports").and_then(Value::as_array) else {
                continue;
            };
            for (j, port) in ports.iter().enumerate() {
                let field = format!("{prefix}.{list}[{i}].ports[{j}]");
                match port.get("containerPort") {
                    None => {
                        causes.push((format!("{field}.containerPort"), "Required value".into()))
                    }
                    Some(number) if !port_in_range(number) => causes.push((
                        format!("{field}.containerPort"),
                        format!("Invalid value: {number}: {PORT_RANGE}"),
                    )),
                    Some(_) => {}
                }
                if let Some(host) = port.get("hostPort")
                    && host != &json!(0)
                    && !port_in_range(host)
                {
                    causes.push((
                        format!("{field}.hostPort"),
                        format!("Invalid value: {host}: {PORT_RANGE}"),
                    ));
                }
            }
        }
    }
}

/// Service ports: `port` and a numeric `targetPort` 1-65535, `nodePort` in
/// the node port range (`ValidateService`, and the allocator's message).
fn service_ports(object: &Value, causes: &mut Vec<Cause>) {
    let Some(ports) = object.pointer("/spec/ports").and_then(Value::as_array) else {
        return;
    };
    for (i, port) in ports.iter().enumerate() {
        let field = format!("spec.ports[{i}]");
        match port.get("port") {
            Some(number) if !port_in_range(number) => causes.push((
                format!("{field}.port"),
                format!("Invalid value: {number}: {PORT_RANGE}"),
            )),
            None => causes.push((format!("{field}.port"), "Required value".into())),
            Some(_) => {}
        }
        if let Some(target) = port.get("targetPort")
            && target.is_number()
            && !port_in_range(target)
        {
            causes.push((
                format!("{field}.targetPort"),
                format!("Invalid value: {target}: {PORT_RANGE}"),
            ));
        }
        if let Some(node_port) = port.get("nodePort")
            && !node_port
                .as_i64()
                .is_some_and(|p| (30000..=32767).contains(&p))
        {
            causes.push((
                format!("{field}.nodePort"),
                format!("Invalid value: {node_port}: provided port is not in the valid range. The range of valid ports is 30000-32767"),
            ));
        }
    }
}

/// What an update may not change: a Job's template and selector
/// (`ValidateJobUpdate`), a StatefulSet's spec beyond the fields the API
/// server lets change (`ValidateStatefulSetUpdate`).
fn immutable_specs(kind: &str, object: &Value, old: &Value, causes: &mut Vec<Cause>) {
    match kind {
        "Job" => {
            for field in ["template", "selector", "completionMode"] {
                let pointer = format!("/spec/{field}");
                if old.pointer(&pointer) != object.pointer(&pointer) {
                    causes.push((
                        format!("spec.{field}"),
                        "Invalid value: field is immutable".into(),
                    ));
                }
            }
        }
        "StatefulSet" => {
            let rest = |o: &Value| {
                let mut spec = o.get("spec").cloned().unwrap_or_default();
                if let Some(spec) = spec.as_object_mut() {
                    for field in [
                        "replicas",
                        "ordinals",
                        "template",
                        "updateStrategy",
                        "persistentVolumeClaimRetentionPolicy",
                        "minReadySeconds",
                    ] {
                        spec.remove(field);
                    }
                }
                spec
            };
            if rest(old) != rest(object) {
                causes.push((
                    "spec".into(),
                    "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden".into(),
                ));
            }
        }
        _ => {}
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn validate_schema(schema: &Value, value: &Value, path: &str, causes: &mut Vec<Cause>) {
    let field = if path.is_empty() {
        "<root>".to_owned()
    } else {
        path.to_owned()
    };
    if path == ".metadata" || path == ".apiVersion" || path == ".kind" {
        return;
    }
    if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        if !matches!(type_name(value), "integer" | "string") {
            causes.push((
                field.trim_start_matches('.').into(),
                format!("Invalid value: {value}: must be an integer or a string"),
            ));
        }
        return;
    }
    if let Some(expected) = schema.get("type").and_then(Value::as_str) {
        let actual = type_name(value);
        let fits = actual == expected || expected == "number" && actual == "integer";
        let allowed_null = value.is_null() && schema.get("nullable") == Some(&Value::Bool(true));
        if !(fits || allowed_null) {
            causes.push((
                field.trim_start_matches('.').into(),
                format!("Invalid value: \"{actual}\": {} in body must be of type {expected}: \"{actual}\"", field.trim_start_matches('.')),
            ));
            return;
        }
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.contains(value)
    {
        let allowed: Vec<String> = options.iter().map(Value::to_string).collect();
        causes.push((
            field.trim_start_matches('.').into(),
            format!(
                "Unsupported value: {value}: supported values: {}",
                allowed.join(", ")
            ),
        ));
    }
    match value {
        Value::Object(map) => {
            if let Some(Value::Array(required)) = schema.get("required") {
                for name in required.iter().filter_map(Value::as_str) {
                    if !map.contains_key(name) {
                        causes.push((
                            format!("{path}.{name}").trim_start_matches('.').into(),
                            "Required value".into(),
                        ));
                    }
                }
            }
            let properties = schema.get("properties").and_then(Value::as_object);
            for (name, child) in map {
                let child_schema = properties
                    .and_then(|p| p.get(name))
                    .or_else(|| schema.get("additionalProperties").filter(|s| s.is_object()));
                if let Some(child_schema) = child_schema {
                    validate_schema(child_schema, child, &format!("{path}.{name}"), causes);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    validate_schema(item_schema, item, &format!("{path}[{i}]"), causes);
                }
            }
        }
        _ => {}
    }
}

/// Structural-schema processing of a custom resource: drops fields the schema
/// does not know (unless it preserves unknown fields) and, when `fill` is
/// set, fills `default`s. Returns the dropped fields (`spec.bogus`).
pub fn custom(schema: &Value, object: &mut Value, fill: bool) -> Vec<String> {
    let mut dropped = Vec::new();
    if let Some(map) = object.as_object_mut() {
        let properties = schema.get("properties").and_then(Value::as_object);
        let preserve =
            schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
        drop_non_nullable_nulls(map, properties, None);
        for (name, child) in map.iter_mut() {
            if matches!(name.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(child_schema) = properties.and_then(|p| p.get(name)) {
                structural(child_schema, child, fill, name, &mut dropped);
            }
        }
        if !preserve {
            map.retain(|name, _| {
                let keep = matches!(name.as_str(), "apiVersion" | "kind" | "metadata")
                    || properties.is_some_and(|p| p.contains_key(name));
                if !keep {
                    dropped.push(name.clone());
                }
                keep
            });
        }
        if fill {
            apply_defaults(schema, map);
        }
    }
    dropped
}

/// Drops the `null` values of fields whose schema is not `nullable: true`,
/// as the API server does before defaulting (apiextensions-apiserver
/// `pkg/apiserver/schema/defaulting/prunenulls.go`). Fields without a
/// schema (preserved unknown fields) keep their nulls. Not reported as
/// unknown fields: a null is no field at all.
fn drop_non_nullable_nulls(
    map: &mut Map<String, Value>,
    properties: Option<&Map<String, Value>>,
    additional: Option<&Value>,
) {
    map.retain(|name, value| {
        let schema = properties.and_then(|p| p.get(name)).or(additional);
        !(value.is_null() && schema.is_some_and(|s| s.get("nullable") != Some(&Value::Bool(true))))
    });
}

fn apply_defaults(schema: &Value, map: &mut Map<String, Value>) {
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            if let Some(default) = property.get("default")
                && !map.contains_key(name)
            {
                map.insert(name.clone(), default.clone());
            }
        }
    }
}

fn structural(
    schema: &Value,
    value: &mut Value,
    fill: bool,
    path: &str,
    dropped: &mut Vec<String>,
) {
    let preserve = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|s| s.is_object());
            drop_non_nullable_nulls(map, properties, additional);
            for (name, child) in map.iter_mut() {
                if let Some(child_schema) = properties.and_then(|p| p.get(name)).or(additional) {
                    structural(
                        child_schema,
                        child,
                        fill,
                        &format!("{path}.{name}"),
                        dropped,
                    );
                }
            }
            let open = preserve
                || additional.is_some()
                || schema.get("additionalProperties") == Some(&Value::Bool(true));
            if !open {
                map.retain(|name, _| {
                    let keep = properties.is_some_and(|p| p.contains_key(name));
                    if !keep {
                        dropped.push(format!("{path}.{name}"));
                    }
                    keep
                });
            }
            if fill {
                apply_defaults(schema, map);
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    structural(item_schema, item, fill, &format!("{path}[{i}]"), dropped);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_defaults_match_the_api_server() {
        let d = defaulted(
            "Deployment",
            json!({"metadata": {"name": "web"}, "spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}, {"name": "b", "image": "busybox"}]}}}}),
        );
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        let containers = &d["spec"]["template"]["spec"]["containers"];
        assert_eq!(containers[0]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(containers[1]["imagePullPolicy"], "Always");
        assert_eq!(containers[0]["ports"][0]["protocol"], "TCP");
        assert_eq!(
            containers[0]["terminationMessagePath"],
            "/dev/termination-log"
        );
    }

    fn defaulted(kind: &str, mut object: Value) -> Value {
        let mut ip = || "10.96.0.10".to_owned();
        let mut port = || 30080;
        builtin(
            kind,
            &mut object,
            &mut Allocator {
                cluster_ip: &mut ip,
                node_port: &mut port,
            },
        );
        object
    }

    fn pod_template(pod: Value) -> Value {
        json!({"metadata": {"name": "w"}, "spec": {"template": {"spec": pod}}})
    }

    #[test]
    fn probes_and_their_http_gets_are_defaulted() {
        let d = defaulted(
            "DaemonSet",
            pod_template(json!({"containers": [{"name": "a", "image": "a:1",
                "livenessProbe": {"httpGet": {"port": 9100}},
                "readinessProbe": {"tcpSocket": {"port": 9100}, "periodSeconds": 5},
                "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/stop"}}}}]})),
        );
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            c["livenessProbe"],
            json!({"httpGet": {"port": 9100, "path": "/", "scheme": "HTTP"},
                "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(c["readinessProbe"]["periodSeconds"], 5);
        assert_eq!(
            c["lifecycle"]["preStop"]["httpGet"],
            json!({"port": 80, "path": "/stop", "scheme": "HTTP"})
        );
    }

    #[test]
    fn volumes_field_refs_and_token_projections_are_defaulted() {
        let d = defaulted(
            "Deployment",
            pod_template(json!({"containers": [{"name": "a", "image": "a:1",
                "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}],
                "volumes": [
                    {"name": "s", "secret": {"secretName": "x"}},
                    {"name": "c", "configMap": {"name": "x", "defaultMode": 493}},
                    {"name": "h", "hostPath": {"path": "/proc"}},
                    {"name": "e"},
                    {"name": "p", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}},
                        {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}}]})),
        );
        let pod = &d["spec"]["template"]["spec"];
        assert_eq!(
            pod["containers"][0]["env"][0]["valueFrom"]["fieldRef"]["apiVersion"],
            "v1"
        );
        let volumes = &pod["volumes"];
        assert_eq!(volumes[0]["secret"]["defaultMode"], 420);
        assert_eq!(volumes[1]["configMap"]["defaultMode"], 493);
        assert_eq!(volumes[2]["hostPath"]["type"], "");
        assert_eq!(volumes[3]["emptyDir"], json!({}));
        assert_eq!(volumes[4]["projected"]["defaultMode"], 420);
        let sources = &volumes[4]["projected"]["sources"];
        assert_eq!(sources[0]["serviceAccountToken"]["expirationSeconds"], 3600);
        assert_eq!(
            sources[1]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"],
            "v1"
        );
    }

    #[test]
    fn pods_get_service_links_requests_from_limits_and_host_ports() {
        let d = defaulted(
            "Pod",
            json!({"metadata": {"name": "p"}, "spec": {"hostNetwork": true, "containers": [{"name": "a", "image": "a:1",
                "ports": [{"containerPort": 9100}],
                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "100m"}}}]}}),
        );
        assert_eq!(d["spec"]["enableServiceLinks"], true);
        let c = &d["spec"]["containers"][0];
        assert_eq!(
            c["resources"]["requests"],
            json!({"cpu": "100m", "memory": "1Gi"})
        );
        assert_eq!(c["ports"][0]["hostPort"], 9100);
        // Templates get none of that.
        let t = defaulted(
            "Deployment",
            pod_template(
                json!({"containers": [{"name": "a", "image": "a:1", "resources": {"limits": {"cpu": "1"}}}]}),
            ),
        );
        assert!(
            t["spec"]["template"]["spec"]
                .get("enableServiceLinks")
                .is_none()
        );
        assert!(
            t["spec"]["template"]["spec"]["containers"][0]["resources"]
                .get("requests")
                .is_none()
        );
    }

    #[test]
    fn services_get_traffic_policies_node_ports_and_affinity_timeouts() {
        let lb = defaulted(
            "Service",
            json!({"metadata": {"name": "s"}, "spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP",
                "ports": [{"port": 80, "targetPort": "http"}, {"port": 443, "nodePort": 31443}]}}),
        );
        let spec = &lb["spec"];
        assert_eq!(spec["externalTrafficPolicy"], "Cluster");
        assert_eq!(spec["allocateLoadBalancerNodePorts"], true);
        assert_eq!(spec["ports"][0]["nodePort"], 30080);
        assert_eq!(spec["ports"][1]["nodePort"], 31443);
        assert_eq!(spec["ports"][1]["targetPort"], 443);
        assert_eq!(
            spec["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"],
            10800
        );
        let plain = defaulted(
            "Service",
            json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}],
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 5}}}}),
        );
        assert!(plain["spec"].get("externalTrafficPolicy").is_none());
        assert!(plain["spec"]["ports"][0].get("nodePort").is_none());
        assert!(plain["spec"].get("sessionAffinityConfig").is_none());
    }

    #[test]
    fn statefulset_claim_templates_are_defaulted_as_claims() {
        let d = defaulted(
            "StatefulSet",
            json!({"metadata": {"name": "db"}, "spec": {"template": {"spec": {"containers": []}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]}}),
        );
        let claim = &d["spec"]["volumeClaimTemplates"][0];
        assert_eq!(claim["spec"]["volumeMode"], "Filesystem");
        assert_eq!(claim["status"]["phase"], "Pending");
    }

    #[test]
    fn webhooks_api_services_and_cluster_kinds_are_defaulted() {
        let d = defaulted(
            "MutatingWebhookConfiguration",
            json!({"metadata": {"name": "w"}, "webhooks": [{"name": "a.example.com", "sideEffects": "None",
                "admissionReviewVersions": ["v1"], "clientConfig": {"service": {"name": "s", "namespace": "n"}},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]}]}),
        );
        let webhook = &d["webhooks"][0];
        assert_eq!(webhook["failurePolicy"], "Fail");
        assert_eq!(webhook["matchPolicy"], "Equivalent");
        assert_eq!(webhook["namespaceSelector"], json!({}));
        assert_eq!(webhook["objectSelector"], json!({}));
        assert_eq!(webhook["timeoutSeconds"], 10);
        assert_eq!(webhook["reinvocationPolicy"], "Never");
        assert_eq!(webhook["rules"][0]["scope"], "*");
        assert_eq!(webhook["clientConfig"]["service"]["port"], 443);
        let v = defaulted(
            "ValidatingWebhookConfiguration",
            json!({"webhooks": [{"name": "b"}]}),
        );
        assert!(v["webhooks"][0].get("reinvocationPolicy").is_none());
        let api = defaulted(
            "APIService",
            json!({"spec": {"service": {"name": "metrics-server", "namespace": "kube-system"}}}),
        );
        assert_eq!(api["spec"]["service"]["port"], 443);
        assert_eq!(
            defaulted("PriorityClass", json!({"value": 1}))["preemptionPolicy"],
            "PreemptLowerPriority"
        );
        let sc = defaulted("StorageClass", json!({"provisioner": "x"}));
        assert_eq!(
            (
                sc["reclaimPolicy"].as_str(),
                sc["volumeBindingMode"].as_str()
            ),
            (Some("Delete"), Some("Immediate"))
        );
        let rb = defaulted(
            "ClusterRoleBinding",
            json!({"roleRef": {"kind": "ClusterRole", "name": "x"},
                "subjects": [{"kind": "ServiceAccount", "name": "a", "namespace": "n"}, {"kind": "Group", "name": "g"}]}),
        );
        assert_eq!(rb["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
        assert!(rb["subjects"][0].get("apiGroup").is_none());
        assert_eq!(rb["subjects"][1]["apiGroup"], "rbac.authorization.k8s.io");
        let np = defaulted(
            "NetworkPolicy",
            json!({"spec": {"podSelector": {}, "ingress": [{"ports": [{"port": 80}]}]}}),
        );
        assert_eq!(np["spec"]["ingress"][0]["ports"][0]["protocol"], "TCP");
    }

    #[test]
    fn hpas_get_a_cpu_target_and_full_behaviors() {
        let d = defaulted(
            "HorizontalPodAutoscaler",
            json!({"apiVersion": "autoscaling/v2", "spec": {"maxReplicas": 5, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}}),
        );
        let spec = &d["spec"];
        assert_eq!(spec["minReplicas"], 1);
        assert_eq!(
            spec["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
        assert_eq!(
            spec["behavior"]["scaleUp"]["policies"][0],
            json!({"type": "Pods", "value": 4, "periodSeconds": 15})
        );
        assert_eq!(
            spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
            60
        );
        assert_eq!(spec["behavior"]["scaleDown"]["selectPolicy"], "Max");
        let plain = defaulted(
            "HorizontalPodAutoscaler",
            json!({"apiVersion": "autoscaling/v2", "spec": {"maxReplicas": 5}}),
        );
        assert!(plain["spec"].get("behavior").is_none());
        let v1 = defaulted(
            "HorizontalPodAutoscaler",
            json!({"apiVersion": "autoscaling/v1", "spec": {}}),
        );
        assert_eq!(v1["spec"], json!({"minReplicas": 1}));
    }

    #[test]
    fn custom_resources_are_pruned_and_defaulted() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "size": {"type": "integer", "default": 3}, "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}});
        let mut cr = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"}, "spec": {"unknown": 1, "extra": {"any": true}}, "bogus": 1});
        assert_eq!(
            custom(&schema, &mut cr, true),
            vec!["spec.unknown", "bogus"]
        );
        assert_eq!(
            cr,
            json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"}, "spec": {"extra": {"any": true}, "size": 3}})
        );
    }

    #[test]
    fn custom_resources_lose_nulls_unless_nullable() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "a": {"type": "string"}, "b": {"type": "string", "nullable": true},
            "c": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}});
        let mut cr = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"},
            "spec": {"a": null, "b": null, "c": {"free": null}}});
        assert!(custom(&schema, &mut cr, true).is_empty());
        assert_eq!(cr["spec"], json!({"b": null, "c": {"free": null}}));
    }

    #[test]
    fn names() {
        assert!(name_problem("ConfigMap", "a.b-c").is_none());
        assert!(name_problem("Namespace", "a.b").is_some());
        assert!(name_problem("ConfigMap", "Upper").is_some());
        assert!(name_problem("ClusterRole", "system:metrics-server").is_none());
        assert!(name_problem("ClusterRoleBinding", "a/b").is_some());
        assert!(name_problem("Role", "..").is_some());
        assert!(name_problem("ConfigMap", "system:x").is_some());
    }
}
