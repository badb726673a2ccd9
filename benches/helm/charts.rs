//! The bench's two charts, written from source into a temporary directory
//! (nothing generated is committed). Both depend on the `common` library
//! chart of the corpus case `tests/helm/60-common-library` (the project's
//! own, modelled on the helpers of bitnami's `common`: names, labels with
//! `tpl`-rendered custom labels, images, affinities, capabilities,
//! `tplvalues`), vendored in `charts/common` as a chart repository's
//! dependency would be after `helm dependency build`.
//!
//! - *fleet*: 100 services from `values.yaml`, five objects each (500):
//!   every template ranges over the services map and builds its objects
//!   from the library's helpers (`include`, `tpl`, `toYaml`, `sha256sum`,
//!   `omit`, `merge`, `default`).
//! - *monitoring*: a real-world-sized chart on the model of the public
//!   Prometheus charts (server, alertmanager, node exporter, kube-state
//!   metrics): 28 objects from 25 templates and a 340-line `values.yaml`,
//!   with the constructs such charts use (a config rendered with `tpl`, a
//!   checksum of another template, RBAC, `.Capabilities` gates, rule
//!   groups ranged into ConfigMaps, `extraDeploy` objects).

use std::fmt::Write as _;
use std::path::Path;

/// The number of services of the fleet chart (five objects each).
pub const FLEET_SERVICES: usize = 100;

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Copies the corpus's `common` library chart into `chart/charts/common`.
fn vendor_common(chart: &Path) {
    let library = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/helm/60-common-library/chart/charts/common");
    let mut stack = vec![library.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let relative = path.strip_prefix(&library).unwrap();
                let text = std::fs::read_to_string(&path).unwrap();
                write(
                    chart,
                    &format!("charts/common/{}", relative.display()),
                    &text,
                );
            }
        }
    }
}

const CHART_DEPENDENCY: &str = "dependencies:
  - name: common
    version: 2.x.x
    repository: oci://registry.example/charts
    tags: [platform-common]
";

const FLEET_HELPERS: &str = r#"{{/* The full name of one service: NAME-SERVICE. */}}
{{- define "fleet.service.fullname" -}}
{{- printf "%s-%s" (include "common.names.fullname" .context) .name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Standard labels of one service, its component label added. */}}
{{- define "fleet.service.labels" -}}
{{ include "common.labels.standard" (dict "customLabels" (merge (dict "app.kubernetes.io/component" .name) .context.Values.commonLabels) "context" .context) }}
{{- end -}}

{{- define "fleet.service.selector" -}}
{{ include "common.labels.matchLabels" .context }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}
"#;

const FLEET_DEPLOYMENTS: &str = r#"{{- range $name, $svc := .Values.services }}
{{- $ctx := dict "name" $name "context" $ }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "fleet.service.fullname" $ctx }}
  namespace: {{ include "common.names.namespace" $ | quote }}
  labels: {{- include "fleet.service.labels" $ctx | nindent 4 }}
  {{- if $.Values.commonAnnotations }}
  annotations: {{- include "common.tplvalues.render" (dict "value" $.Values.commonAnnotations "context" $) | nindent 4 }}
  {{- end }}
spec:
  replicas: {{ $svc.replicas | default $.Values.defaults.replicas }}
  selector:
    matchLabels: {{- include "fleet.service.selector" $ctx | nindent 6 }}
  template:
    metadata:
      labels: {{- include "fleet.service.labels" $ctx | nindent 8 }}
      annotations:
        checksum/config: {{ toYaml $svc.config | sha256sum }}
    spec:
      serviceAccountName: {{ include "fleet.service.fullname" $ctx }}
      affinity:
        podAntiAffinity: {{- include "common.affinities.pods" (dict "type" $.Values.defaults.antiAffinity "extraMatchLabels" (dict "app.kubernetes.io/component" $name) "context" $) | nindent 10 }}
      {{- with $.Values.defaults.tolerations }}
      tolerations: {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: {{ $name }}
          image: {{ include "common.images.image" (dict "imageRoot" $svc.image "global" $.Values.global) }}
          imagePullPolicy: {{ $svc.image.pullPolicy | default "IfNotPresent" }}
          {{- with $svc.args }}
          args: {{- toYaml . | nindent 12 }}
          {{- end }}
          ports:
            - name: http
              containerPort: {{ $svc.port }}
              protocol: TCP
          env:
            - name: SERVICE_NAME
              value: {{ $name | quote }}
            {{- range $key, $value := $svc.env }}
            - name: {{ $key | upper | replace "-" "_" }}
              value: {{ $value | quote }}
            {{- end }}
          envFrom:
            - configMapRef:
                name: {{ include "fleet.service.fullname" $ctx }}
          resources: {{- toYaml ($svc.resources | default $.Values.defaults.resources) | nindent 12 }}
          livenessProbe: {{- include "common.tplvalues.render" (dict "value" $.Values.defaults.probe "context" $) | nindent 12 }}
          {{- if $.Values.defaults.securityContext.enabled }}
          securityContext: {{- omit $.Values.defaults.securityContext "enabled" | toYaml | nindent 12 }}
          {{- end }}
{{- end }}
"#;

const FLEET_SERVICES_TPL: &str = r#"{{- range $name, $svc := .Values.services }}
{{- $ctx := dict "name" $name "context" $ }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ include "fleet.service.fullname" $ctx }}
  namespace: {{ include "common.names.namespace" $ | quote }}
  labels: {{- include "fleet.service.labels" $ctx | nindent 4 }}
spec:
  type: {{ $svc.serviceType | default "ClusterIP" }}
  ports:
    - name: http
      port: {{ $svc.servicePort | default 80 }}
      targetPort: http
  selector: {{- include "fleet.service.selector" $ctx | nindent 4 }}
{{- end }}
"#;

const FLEET_CONFIGMAPS: &str = r#"{{- range $name, $svc := .Values.services }}
{{- $ctx := dict "name" $name "context" $ }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "fleet.service.fullname" $ctx }}
  namespace: {{ include "common.names.namespace" $ | quote }}
  labels: {{- include "fleet.service.labels" $ctx | nindent 4 }}
data:
  {{- toYaml $svc.config | nindent 2 }}
  application.properties: |
    {{- range $key, $value := $svc.config }}
    {{ $key | lower }}={{ $value }}
    {{- end }}
    service.name={{ $name }}
{{- end }}
"#;

const FLEET_SERVICEACCOUNTS: &str = r#"{{- range $name, $svc := .Values.services }}
{{- $ctx := dict "name" $name "context" $ }}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "fleet.service.fullname" $ctx }}
  namespace: {{ include "common.names.namespace" $ | quote }}
  labels: {{- include "fleet.service.labels" $ctx | nindent 4 }}
  {{- with $svc.serviceAccountAnnotations }}
  annotations: {{- include "common.tplvalues.render" (dict "value" . "context" $) | nindent 4 }}
  {{- end }}
automountServiceAccountToken: {{ $svc.automountToken | default false }}
{{- end }}
"#;

const FLEET_PDBS: &str = r#"{{- range $name, $svc := .Values.services }}
{{- $ctx := dict "name" $name "context" $ }}
---
apiVersion: {{ include "common.capabilities.policy.apiVersion" $ }}
kind: PodDisruptionBudget
metadata:
  name: {{ include "fleet.service.fullname" $ctx }}
  namespace: {{ include "common.names.namespace" $ | quote }}
  labels: {{- include "fleet.service.labels" $ctx | nindent 4 }}
spec:
  {{- if gt (int ($svc.replicas | default $.Values.defaults.replicas)) 1 }}
  minAvailable: {{ $svc.minAvailable | default 1 }}
  {{- else }}
  maxUnavailable: 1
  {{- end }}
  selector:
    matchLabels: {{- include "fleet.service.selector" $ctx | nindent 6 }}
{{- end }}
"#;

const FLEET_VALUES_HEAD: &str = r#"global:
  imageRegistry: ""
nameOverride: ""
fullnameOverride: ""
commonLabels:
  team: "{{ .Release.Namespace }}-platform"
  tier: backend
commonAnnotations:
  owner: "platform@example.com"
  release: "{{ .Release.Name }}"
defaults:
  replicas: 2
  antiAffinity: soft
  tolerations:
    - key: dedicated
      operator: Equal
      value: backend
      effect: NoSchedule
  resources:
    requests: {cpu: 50m, memory: 64Mi}
    limits: {cpu: 500m, memory: 256Mi}
  probe:
    httpGet:
      path: /healthz
      port: http
    initialDelaySeconds: 10
    periodSeconds: 15
  securityContext:
    enabled: true
    runAsNonRoot: true
    runAsUser: 1001
    readOnlyRootFilesystem: true
    allowPrivilegeEscalation: false
    capabilities:
      drop: [ALL]
services:
"#;

/// Writes the fleet chart (500 objects) under `root/fleet` and returns its
/// directory name.
pub fn fleet(root: &Path) -> &'static str {
    let chart = root.join("fleet");
    write(
        &chart,
        "Chart.yaml",
        &format!(
            "apiVersion: v2\nname: fleet\nversion: 1.4.0\nappVersion: \"3.2.1\"\n{CHART_DEPENDENCY}"
        ),
    );
    vendor_common(&chart);
    let mut values = String::from(FLEET_VALUES_HEAD);
    for i in 0..FLEET_SERVICES {
        let _ = writeln!(
            values,
            "  svc-{i:03}:\n    port: {port}\n    image:\n      registry: registry.example.com\n      repository: shop/svc-{i:03}\n      tag: \"1.{minor}.{i}\"",
            port = 8000 + i,
            minor = i % 7,
        );
        if i % 3 == 0 {
            let _ = writeln!(values, "    replicas: {}\n    minAvailable: 2", 3 + i % 4);
        }
        if i % 5 == 0 {
            values.push_str("    args: [--log-level=info, --metrics]\n    resources:\n      requests: {cpu: 100m, memory: 128Mi}\n      limits: {memory: 512Mi}\n");
        }
        if i % 10 == 0 {
            let _ = writeln!(
                values,
                "    serviceAccountAnnotations:\n      iam.example.com/role: \"{{{{ .Release.Name }}}}-svc-{i:03}\""
            );
        }
        let _ = writeln!(
            values,
            "    env:\n      log-level: info\n      region: eu-west-{r}\n      upstream: http://svc-{up:03}:80\n    config:\n      CACHE_TTL: \"{ttl}\"\n      FEATURE_FLAGS: checkout,search\n      MAX_CONNECTIONS: \"{conns}\"\n      DATABASE_HOST: db-{db}.internal",
            r = 1 + i % 3,
            up = (i + 1) % FLEET_SERVICES,
            ttl = 30 + i,
            conns = 100 + 10 * (i % 9),
            db = i % 4,
        );
    }
    write(&chart, "values.yaml", &values);
    write(&chart, "templates/_helpers.tpl", FLEET_HELPERS);
    write(&chart, "templates/deployments.yaml", FLEET_DEPLOYMENTS);
    write(&chart, "templates/services.yaml", FLEET_SERVICES_TPL);
    write(&chart, "templates/configmaps.yaml", FLEET_CONFIGMAPS);
    write(
        &chart,
        "templates/serviceaccounts.yaml",
        FLEET_SERVICEACCOUNTS,
    );
    write(&chart, "templates/pdbs.yaml", FLEET_PDBS);
    write(
        &chart,
        "templates/NOTES.txt",
        "{{ len .Values.services }} services of {{ include \"common.names.fullname\" . }} are deployed.\n",
    );
    "fleet"
}

/// Writes the monitoring chart under `root/monitoring` and returns its
/// directory name.
pub fn monitoring(root: &Path) -> &'static str {
    let chart = root.join("monitoring");
    vendor_common(&chart);
    for (path, text) in super::monitoring::FILES {
        write(&chart, path, text);
    }
    write(
        &chart,
        "Chart.yaml",
        &format!(
            "apiVersion: v2\nname: monitoring\nversion: 27.3.0\nappVersion: \"v3.1.0\"\nkubeVersion: \">=1.19.0-0\"\n{CHART_DEPENDENCY}"
        ),
    );
    "monitoring"
}
