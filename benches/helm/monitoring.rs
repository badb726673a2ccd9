//! The monitoring chart's files (the project's own, on the model of the
//! public Prometheus charts' constructs; `Chart.yaml` and the vendored
//! `common` library are written by `charts::monitoring`).

/// (path in the chart, text) of every file but `Chart.yaml` and `charts/`.
pub const FILES: &[(&str, &str)] = &[
    ("values.yaml", VALUES),
    ("templates/_helpers.tpl", HELPERS),
    ("templates/NOTES.txt", NOTES),
    ("templates/server/configmap.yaml", SERVER_CONFIGMAP),
    ("templates/server/rules.yaml", SERVER_RULES),
    ("templates/server/deployment.yaml", SERVER_DEPLOYMENT),
    ("templates/server/service.yaml", COMPONENT_SERVICE),
    ("templates/server/serviceaccount.yaml", COMPONENT_SA),
    ("templates/server/clusterrole.yaml", SERVER_CLUSTERROLE),
    ("templates/server/clusterrolebinding.yaml", COMPONENT_CRB),
    ("templates/server/ingress.yaml", SERVER_INGRESS),
    ("templates/server/pdb.yaml", COMPONENT_PDB),
    ("templates/server/pvc.yaml", SERVER_PVC),
    ("templates/server/networkpolicy.yaml", SERVER_NETPOL),
    ("templates/alertmanager/configmap.yaml", AM_CONFIGMAP),
    ("templates/alertmanager/statefulset.yaml", AM_STATEFULSET),
    ("templates/alertmanager/service.yaml", COMPONENT_SERVICE),
    ("templates/alertmanager/serviceaccount.yaml", COMPONENT_SA),
    ("templates/alertmanager/pdb.yaml", COMPONENT_PDB),
    ("templates/node-exporter/daemonset.yaml", NE_DAEMONSET),
    ("templates/node-exporter/service.yaml", COMPONENT_SERVICE),
    ("templates/node-exporter/serviceaccount.yaml", COMPONENT_SA),
    (
        "templates/kube-state-metrics/deployment.yaml",
        KSM_DEPLOYMENT,
    ),
    (
        "templates/kube-state-metrics/service.yaml",
        COMPONENT_SERVICE,
    ),
    (
        "templates/kube-state-metrics/serviceaccount.yaml",
        COMPONENT_SA,
    ),
    (
        "templates/kube-state-metrics/clusterrole.yaml",
        KSM_CLUSTERROLE,
    ),
    (
        "templates/kube-state-metrics/clusterrolebinding.yaml",
        COMPONENT_CRB,
    ),
    ("templates/extra-list.yaml", EXTRA_LIST),
];

const HELPERS: &str = r#"{{/* The name of a component: FULLNAME-COMPONENT (the component is the template's folder). */}}
{{- define "monitoring.component" -}}
{{- base (dir .Template.Name) -}}
{{- end -}}

{{- define "monitoring.fullname" -}}
{{- printf "%s-%s" (include "common.names.fullname" .context) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The values of a component (a dict of component and context), as YAML. */}}
{{- define "monitoring.values" -}}
{{- $keys := dict "server" "server" "alertmanager" "alertmanager" "node-exporter" "nodeExporter" "kube-state-metrics" "kubeStateMetrics" -}}
{{- index .context.Values (index $keys .component) | toYaml -}}
{{- end -}}

{{- define "monitoring.labels" -}}
{{ include "common.labels.standard" (dict "customLabels" .context.Values.commonLabels "context" .context) }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: {{ include "common.names.name" .context }}
{{- end -}}

{{- define "monitoring.selector" -}}
{{ include "common.labels.matchLabels" .context }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "monitoring.serviceAccountName" -}}
{{- $values := include "monitoring.values" . | fromYaml -}}
{{- if ($values.serviceAccount).create -}}
{{ default (include "monitoring.fullname" .) ($values.serviceAccount).name }}
{{- else -}}
{{ default "default" ($values.serviceAccount).name }}
{{- end -}}
{{- end -}}

{{- define "monitoring.metadata" -}}
name: {{ include "monitoring.fullname" . }}
namespace: {{ include "common.names.namespace" .context | quote }}
labels: {{- include "monitoring.labels" . | nindent 2 }}
{{- with .context.Values.commonAnnotations }}
annotations: {{- include "common.tplvalues.render" (dict "value" . "context" $.context) | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "monitoring.container.common" -}}
imagePullPolicy: {{ .values.image.pullPolicy }}
{{- with .values.containerSecurityContext }}
{{- if .enabled }}
securityContext: {{- omit . "enabled" | toYaml | nindent 2 }}
{{- end }}
{{- end }}
{{- if .values.resources }}
resources: {{- toYaml .values.resources | nindent 2 }}
{{- end }}
{{- end -}}
"#;

const NOTES: &str = r#"Prometheus server: http://{{ include "common.names.fullname" . }}-server.{{ .Release.Namespace }}.svc:{{ .Values.server.service.port }}
{{- if .Values.alertmanager.enabled }}
Alertmanager: http://{{ include "common.names.fullname" . }}-alertmanager.{{ .Release.Namespace }}.svc:{{ .Values.alertmanager.service.port }}
{{- end }}
"#;

const SERVER_CONFIGMAP: &str = r#"{{- $ctx := dict "component" "server" "context" . }}
apiVersion: v1
kind: ConfigMap
metadata: {{- include "monitoring.metadata" $ctx | nindent 2 }}
data:
  prometheus.yml: |
    global:
      {{- toYaml .Values.server.global | nindent 6 }}
    {{- if .Values.alertmanager.enabled }}
    alerting:
      alertmanagers:
        - static_configs:
            - targets: [{{ printf "%s-alertmanager:%d" (include "common.names.fullname" .) (int .Values.alertmanager.service.port) | quote }}]
    {{- end }}
    rule_files:
      {{- range $group, $_ := .Values.server.alertingRules }}
      - /etc/config/rules/{{ $group }}.yaml
      {{- end }}
    scrape_configs:
      {{- range .Values.server.scrapeConfigs }}
      - job_name: {{ .job | quote }}
        {{- with .interval }}
        scrape_interval: {{ . }}
        {{- end }}
        {{- if .kubernetesRole }}
        kubernetes_sd_configs:
          - role: {{ .kubernetesRole }}
            {{- with .namespaces }}
            namespaces:
              names: {{- toYaml . | nindent 16 }}
            {{- end }}
        {{- else }}
        static_configs:
          - targets: {{- tpl (toYaml .targets) $ | nindent 14 }}
        {{- end }}
        {{- with .relabel }}
        relabel_configs: {{- toYaml . | nindent 10 }}
        {{- end }}
      {{- end }}
      {{- with .Values.server.extraScrapeConfigs }}
      {{- include "common.tplvalues.render" (dict "value" . "context" $) | nindent 6 }}
      {{- end }}
"#;

const SERVER_RULES: &str = r#"{{- range $group, $rules := .Values.server.alertingRules }}
{{- $ctx := dict "component" (printf "server-rules-%s" $group) "context" $ }}
---
apiVersion: v1
kind: ConfigMap
metadata: {{- include "monitoring.metadata" $ctx | nindent 2 }}
data:
  {{ $group }}.yaml: |
    groups:
      - name: {{ $group }}
        rules:
          {{- range $rules }}
          - alert: {{ .alert }}
            expr: {{ .expr | quote }}
            for: {{ .for | default "5m" }}
            labels:
              severity: {{ .severity | default "warning" }}
              {{- with $.Values.server.ruleLabels }}
              {{- toYaml . | nindent 14 }}
              {{- end }}
            annotations:
              summary: {{ tpl .summary $ | quote }}
          {{- end }}
{{- end }}
"#;

const SERVER_DEPLOYMENT: &str = r#"{{- $ctx := dict "component" "server" "context" . }}
{{- $values := .Values.server }}
apiVersion: apps/v1
kind: Deployment
metadata: {{- include "monitoring.metadata" $ctx | nindent 2 }}
spec:
  replicas: {{ $values.replicaCount }}
  revisionHistoryLimit: {{ $values.revisionHistoryLimit }}
  strategy: {{- toYaml $values.strategy | nindent 4 }}
  selector:
    matchLabels: {{- include "monitoring.selector" $ctx | nindent 6 }}
  template:
    metadata:
      labels: {{- include "monitoring.labels" $ctx | nindent 8 }}
      annotations:
        checksum/config: {{ include (print $.Template.BasePath "/server/configmap.yaml") . | sha256sum }}
        checksum/rules: {{ include (print $.Template.BasePath "/server/rules.yaml") . | sha256sum }}
        {{- with $values.podAnnotations }}
        {{- include "common.tplvalues.render" (dict "value" . "context" $) | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "monitoring.serviceAccountName" $ctx }}
      {{- with $values.priorityClassName }}
      priorityClassName: {{ . | quote }}
      {{- end }}
      affinity:
        podAntiAffinity: {{- include "common.affinities.pods" (dict "type" $values.podAntiAffinityPreset "extraMatchLabels" (dict "app.kubernetes.io/component" "server") "context" $) | nindent 10 }}
      {{- with $values.nodeSelector }}
      nodeSelector: {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if $values.podSecurityContext.enabled }}
      securityContext: {{- omit $values.podSecurityContext "enabled" | toYaml | nindent 8 }}
      {{- end }}
      containers:
        - name: config-reloader
          image: {{ include "common.images.image" (dict "imageRoot" $values.configReloader.image "global" .Values.global) }}
          args:
            - --watched-dir=/etc/config
            - --reload-url=http://127.0.0.1:{{ $values.containerPort }}/-/reload
          {{- include "monitoring.container.common" (dict "values" $values.configReloader) | nindent 10 }}
          volumeMounts:
            - name: config
              mountPath: /etc/config
              readOnly: true
        - name: server
          image: {{ include "common.images.image" (dict "imageRoot" $values.image "global" .Values.global) }}
          args:
            - --config.file=/etc/config/prometheus.yml
            - --storage.tsdb.path={{ $values.persistence.mountPath }}
            - --storage.tsdb.retention.time={{ $values.retention }}
            - --web.listen-address=:{{ $values.containerPort }}
            {{- range $key, $value := $values.extraArgs }}
            - --{{ $key }}={{ $value }}
            {{- end }}
            {{- if $values.enableAdminApi }}
            - --web.enable-admin-api
            {{- end }}
          ports:
            - name: http
              containerPort: {{ $values.containerPort }}
          {{- range $probe := list "livenessProbe" "readinessProbe" "startupProbe" }}
          {{- with index $values $probe }}
          {{- if .enabled }}
          {{ $probe }}:
            httpGet:
              path: {{ ternary "/-/healthy" "/-/ready" (eq $probe "livenessProbe") }}
              port: http
            {{- omit . "enabled" | toYaml | nindent 12 }}
          {{- end }}
          {{- end }}
          {{- end }}
          {{- include "monitoring.container.common" (dict "values" $values) | nindent 10 }}
          volumeMounts:
            - name: config
              mountPath: /etc/config
            - name: storage
              mountPath: {{ $values.persistence.mountPath }}
            {{- range $group, $_ := $values.alertingRules }}
            - name: rules-{{ $group }}
              mountPath: /etc/config/rules/{{ $group }}.yaml
              subPath: {{ $group }}.yaml
            {{- end }}
      volumes:
        - name: config
          configMap:
            name: {{ include "monitoring.fullname" $ctx }}
        - name: storage
          {{- if $values.persistence.enabled }}
          persistentVolumeClaim:
            claimName: {{ include "monitoring.fullname" $ctx }}
          {{- else }}
          emptyDir: {}
          {{- end }}
        {{- range $group, $_ := $values.alertingRules }}
        - name: rules-{{ $group }}
          configMap:
            name: {{ include "monitoring.fullname" (dict "component" (printf "server-rules-%s" $group) "context" $) }}
        {{- end }}
"#;

const COMPONENT_SERVICE: &str = r#"{{- $ctx := dict "component" (include "monitoring.component" .) "context" . }}
{{- $values := include "monitoring.values" $ctx | fromYaml }}
{{- if $values.enabled }}
apiVersion: v1
kind: Service
metadata: {{- include "monitoring.metadata" $ctx | nindent 2 }}
  {{- with $values.service.annotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
spec:
  type: {{ $values.service.type }}
  {{- if eq $values.service.type "ClusterIP" }}
  {{- with $values.service.clusterIP }}
  clusterIP: {{ . }}
  {{- end }}
  {{- end }}
  ports:
    - name: http
      port: {{ $values.service.port }}
      targetPort: {{ $values.containerPort }}
      protocol: TCP
  selector: {{- include "monitoring.selector" $ctx | nindent 4 }}
{{- end }}
"#;

const COMPONENT_SA: &str = r#"{{- $ctx := dict "component" (include "monitoring.component" .) "context" . }}
{{- $values := include "monitoring.values" $ctx | fromYaml }}
{{- if and $values.enabled $values.serviceAccount.create }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "monitoring.serviceAccountName" $ctx }}
  namespace: {{ include "common.names.namespace" . | quote }}
  labels: {{- include "monitoring.labels" $ctx | nindent 4 }}
  {{- with $values.serviceAccount.annotations }}
  annotations: {{- include "common.tplvalues.render" (dict "value" . "context" $) | nindent 4 }}
  {{- end }}
automountServiceAccountToken: {{ $values.serviceAccount.automount }}
{{- end }}
"#;

const COMPONENT_CRB: &str = r#"{{- $ctx := dict "component" (include "monitoring.component" .) "context" . }}
{{- $values := include "monitoring.values" $ctx | fromYaml }}
{{- if and $values.enabled .Values.rbac.create }}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ include "monitoring.fullname" $ctx }}
  labels: {{- include "monitoring.labels" $ctx | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ include "monitoring.fullname" $ctx }}
subjects:
  - kind: ServiceAccount
    name: {{ include "monitoring.serviceAccountName" $ctx }}
    namespace: {{ include "common.names.namespace" . | quote }}
{{- end }}
"#;

const COMPONENT_PDB: &str = r#"{{- $ctx := dict "component" (include "monitoring.component" .) "context" . }}
{{- $values := include "monitoring.values" $ctx | fromYaml }}
{{- if and $values.enabled $values.pdb.create }}
apiVersion: {{ include "common.capabilities.policy.apiVersion" . }}
kind: PodDisruptionBudget
metadata: {{- include "monitoring.metadata" $ctx | nindent 2 }}
spec:
  {{- if $values.pdb.minAvailable }}
  minAvailable: {{ $values.pdb.minAvailable }}
  {{- end }}
  {{- if or $values.pdb.maxUnavailable (not $values.pdb.minAvailable) }}
  maxUnavailable: {{ $values.pdb.maxUnavailable | default 1 }}
  {{- end }}
  selector:
    matchLabels: {{- include "monitoring.selector" $ctx | nindent 6 }}
{{- end }}
"#;

const SERVER_CLUSTERROLE: &str = r#"{{- if .Values.rbac.create }}
{{- $ctx := dict "component" "server" "context" . }}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ include "monitoring.fullname" $ctx }}
  labels: {{- include "monitoring.labels" $ctx | nindent 4 }}
rules:
  - apiGroups: [""]
    resources: [nodes, nodes/proxy, nodes/metrics, services, endpoints, pods, ingresses, configmaps]
    verbs: [get, list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [get, list, watch]
  - nonResourceURLs: [/metrics]
    verbs: [get]
  {{- with .Values.rbac.extraClusterRoleRules }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}
"#;

const SERVER_INGRESS: &str = r#"{{- if .Values.server.ingress.enabled }}
{{- $ctx := dict "component" "server" "context" . }}
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{- include "monitoring.metadata" $ctx | nindent 2 }}
spec:
  {{- with .Values.server.ingress.ingressClassName }}
  ingressClassName: {{ . }}
  {{- end }}
  rules:
    {{- range .Values.server.ingress.hosts }}
    - host: {{ tpl . $ | quote }}
      http:
        paths:
          - path: {{ $.Values.server.ingress.path }}
            pathType: Prefix
            backend:
              service:
                name: {{ include "monitoring.fullname" $ctx }}
                port:
                  name: http
    {{- end }}
  {{- if .Values.server.ingress.tls }}
  tls:
    - hosts: {{- range .Values.server.ingress.hosts }}
        - {{ tpl . $ | quote }}
        {{- end }}
      secretName: {{ printf "%s-tls" (include "monitoring.fullname" $ctx) }}
  {{- end }}
{{- end }}
"#;

const SERVER_PVC: &str = r#"{{- if .Values.server.persistence.enabled }}
{{- $ctx := dict "component" "server" "context" . }}
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{- include "monitoring.metadata" $ctx | nindent 2 }}
spec:
  accessModes: {{- toYaml .Values.server.persistence.accessModes | nindent 4 }}
  {{- include "common.storage.class" (dict "persistence" .Values.server.persistence "global" .Values.global) | nindent 2 }}
  resources:
    requests:
      storage: {{ .Values.server.persistence.size | quote }}
{{- end }}
"#;

const SERVER_NETPOL: &str = r#"{{- if .Values.networkPolicy.enabled }}
{{- $ctx := dict "component" "server" "context" . }}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {{- include "monitoring.metadata" $ctx | nindent 2 }}
spec:
  podSelector:
    matchLabels: {{- include "monitoring.selector" $ctx | nindent 6 }}
  policyTypes: [Ingress, Egress]
  egress:
    - {}
  ingress:
    - ports:
        - port: {{ .Values.server.containerPort }}
      {{- if not .Values.networkPolicy.allowExternal }}
      from:
        - podSelector:
            matchLabels:
              {{ include "common.names.fullname" . }}-client: "true"
        {{- range $namespace := .Values.networkPolicy.allowedNamespaces }}
        - namespaceSelector:
            matchLabels:
              kubernetes.io/metadata.name: {{ $namespace }}
        {{- end }}
      {{- end }}
{{- end }}
"#;

const AM_CONFIGMAP: &str = r#"{{- if .Values.alertmanager.enabled }}
{{- $ctx := dict "component" "alertmanager" "context" . }}
apiVersion: v1
kind: ConfigMap
metadata: {{- include "monitoring.metadata" $ctx | nindent 2 }}
data:
  alertmanager.yml: |
    {{- include "common.tplvalues.render" (dict "value" .Values.alertmanager.config "context" $) | nindent 4 }}
  {{- range $name, $text := .Values.alertmanager.templates }}
  {{ $name }}: {{ $text | quote }}
  {{- end }}
{{- end }}
"#;

const AM_STATEFULSET: &str = r#"{{- if .Values.alertmanager.enabled }}
{{- $ctx := dict "component" "alertmanager" "context" . }}
{{- $values := .Values.alertmanager }}
apiVersion: apps/v1
kind: StatefulSet
metadata: {{- include "monitoring.metadata" $ctx | nindent 2 }}
spec:
  replicas: {{ $values.replicaCount }}
  serviceName: {{ include "monitoring.fullname" $ctx }}
  podManagementPolicy: Parallel
  selector:
    matchLabels: {{- include "monitoring.selector" $ctx | nindent 6 }}
  template:
    metadata:
      labels: {{- include "monitoring.labels" $ctx | nindent 8 }}
      annotations:
        checksum/config: {{ include (print $.Template.BasePath "/alertmanager/configmap.yaml") . | sha256sum }}
    spec:
      serviceAccountName: {{ include "monitoring.serviceAccountName" $ctx }}
      affinity:
        podAntiAffinity: {{- include "common.affinities.pods" (dict "type" $values.podAntiAffinityPreset "context" $) | nindent 10 }}
      containers:
        - name: alertmanager
          image: {{ include "common.images.image" (dict "imageRoot" $values.image "global" .Values.global) }}
          args:
            - --config.file=/etc/alertmanager/alertmanager.yml
            - --storage.path=/alertmanager
            {{- if gt (int $values.replicaCount) 1 }}
            {{- $fullname := include "monitoring.fullname" $ctx }}
            {{- range $i := until (int $values.replicaCount) }}
            - --cluster.peer={{ $fullname }}-{{ $i }}.{{ $fullname }}:9094
            {{- end }}
            {{- end }}
          env:
            - name: POD_IP
              valueFrom:
                fieldRef:
                  fieldPath: status.podIP
          ports:
            - name: http
              containerPort: {{ $values.containerPort }}
          {{- include "monitoring.container.common" (dict "values" $values) | nindent 10 }}
          volumeMounts:
            - name: config
              mountPath: /etc/alertmanager
            - name: storage
              mountPath: /alertmanager
      volumes:
        - name: config
          configMap:
            name: {{ include "monitoring.fullname" $ctx }}
  volumeClaimTemplates:
    - metadata:
        name: storage
      spec:
        accessModes: [ReadWriteOnce]
        {{- include "common.storage.class" (dict "persistence" $values.persistence "global" .Values.global) | nindent 8 }}
        resources:
          requests:
            storage: {{ $values.persistence.size | quote }}
{{- end }}
"#;

const NE_DAEMONSET: &str = r#"{{- if .Values.nodeExporter.enabled }}
{{- $ctx := dict "component" "node-exporter" "context" . }}
{{- $values := .Values.nodeExporter }}
apiVersion: apps/v1
kind: DaemonSet
metadata: {{- include "monitoring.metadata" $ctx | nindent 2 }}
spec:
  selector:
    matchLabels: {{- include "monitoring.selector" $ctx | nindent 6 }}
  updateStrategy: {{- toYaml $values.updateStrategy | nindent 4 }}
  template:
    metadata:
      labels: {{- include "monitoring.labels" $ctx | nindent 8 }}
    spec:
      serviceAccountName: {{ include "monitoring.serviceAccountName" $ctx }}
      hostNetwork: {{ $values.hostNetwork }}
      hostPID: true
      {{- with $values.tolerations }}
      tolerations: {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: node-exporter
          image: {{ include "common.images.image" (dict "imageRoot" $values.image "global" .Values.global) }}
          args:
            - --path.procfs=/host/proc
            - --path.sysfs=/host/sys
            - --path.rootfs=/host/root
            - --web.listen-address=:{{ $values.containerPort }}
            {{- range $values.collectors }}
            - --collector.{{ . }}
            {{- end }}
          ports:
            - name: metrics
              containerPort: {{ $values.containerPort }}
          {{- include "monitoring.container.common" (dict "values" $values) | nindent 10 }}
          volumeMounts:
            {{- range $name, $path := $values.hostPaths }}
            - name: {{ $name }}
              mountPath: /host/{{ $name }}
              readOnly: true
            {{- end }}
      volumes:
        {{- range $name, $path := $values.hostPaths }}
        - name: {{ $name }}
          hostPath:
            path: {{ $path }}
        {{- end }}
{{- end }}
"#;

const KSM_DEPLOYMENT: &str = r#"{{- if .Values.kubeStateMetrics.enabled }}
{{- $ctx := dict "component" "kube-state-metrics" "context" . }}
{{- $values := .Values.kubeStateMetrics }}
apiVersion: apps/v1
kind: Deployment
metadata: {{- include "monitoring.metadata" $ctx | nindent 2 }}
spec:
  replicas: 1
  selector:
    matchLabels: {{- include "monitoring.selector" $ctx | nindent 6 }}
  template:
    metadata:
      labels: {{- include "monitoring.labels" $ctx | nindent 8 }}
    spec:
      serviceAccountName: {{ include "monitoring.serviceAccountName" $ctx }}
      containers:
        - name: kube-state-metrics
          image: {{ include "common.images.image" (dict "imageRoot" $values.image "global" .Values.global) }}
          args:
            - --port={{ $values.containerPort }}
            - --resources={{ $values.collectResources | join "," }}
            {{- with $values.metricLabelsAllowlist }}
            - --metric-labels-allowlist={{ . | join "," }}
            {{- end }}
          ports:
            - name: http
              containerPort: {{ $values.containerPort }}
          {{- include "monitoring.container.common" (dict "values" $values) | nindent 10 }}
{{- end }}
"#;

const KSM_CLUSTERROLE: &str = r#"{{- if and .Values.kubeStateMetrics.enabled .Values.rbac.create }}
{{- $ctx := dict "component" "kube-state-metrics" "context" . }}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ include "monitoring.fullname" $ctx }}
  labels: {{- include "monitoring.labels" $ctx | nindent 4 }}
rules:
  {{- $groups := dict "" (list) }}
  {{- range .Values.kubeStateMetrics.collectResources }}
  {{- $group := get $.Values.kubeStateMetrics.apiGroups . | default "" }}
  {{- $_ := set $groups $group (append (get $groups $group | default list) .) }}
  {{- end }}
  {{- range $group, $resources := $groups }}
  - apiGroups: [{{ $group | quote }}]
    resources: {{- toYaml $resources | nindent 6 }}
    verbs: [list, watch]
  {{- end }}
{{- end }}
"#;

const EXTRA_LIST: &str = r#"{{- range .Values.extraDeploy }}
---
{{ include "common.tplvalues.render" (dict "value" . "context" $) }}
{{- end }}
"#;

const VALUES: &str = r#"## Global parameters
global:
  imageRegistry: ""
  storageClass: ""
kubeVersion: ""
nameOverride: ""
fullnameOverride: ""
namespaceOverride: ""
commonLabels:
  team: observability
  cost-center: "{{ .Release.Namespace }}-ops"
commonAnnotations:
  docs.example.com/runbook: "https://runbooks.example.com/{{ .Release.Name }}"

rbac:
  create: true
  extraClusterRoleRules:
    - apiGroups: [networking.k8s.io]
      resources: [ingresses]
      verbs: [get, list, watch]

networkPolicy:
  enabled: true
  allowExternal: false
  allowedNamespaces: [ingress, grafana, kube-system]

## Prometheus server
server:
  enabled: true
  image:
    registry: quay.io
    repository: prometheus/prometheus
    tag: v3.1.0
    digest: ""
    pullPolicy: IfNotPresent
  configReloader:
    image:
      registry: quay.io
      repository: prometheus-operator/prometheus-config-reloader
      tag: v0.79.2
      pullPolicy: IfNotPresent
    containerSecurityContext:
      enabled: true
      runAsNonRoot: true
      readOnlyRootFilesystem: true
    resources:
      requests: {cpu: 10m, memory: 32Mi}
      limits: {memory: 64Mi}
  replicaCount: 1
  revisionHistoryLimit: 10
  strategy:
    type: Recreate
  priorityClassName: system-cluster-critical
  podAntiAffinityPreset: soft
  nodeSelector:
    kubernetes.io/os: linux
  podAnnotations:
    prometheus.io/scrape: "true"
    prometheus.io/port: "9090"
    rollme: "{{ .Release.Revision }}"
  podSecurityContext:
    enabled: true
    fsGroup: 65534
    runAsGroup: 65534
    runAsNonRoot: true
    runAsUser: 65534
  containerSecurityContext:
    enabled: true
    allowPrivilegeEscalation: false
    capabilities:
      drop: [ALL]
    readOnlyRootFilesystem: true
  containerPort: 9090
  retention: 15d
  enableAdminApi: false
  extraArgs:
    query.max-concurrency: 20
    query.timeout: 2m
    storage.tsdb.wal-compression: true
  livenessProbe:
    enabled: true
    initialDelaySeconds: 30
    periodSeconds: 15
    timeoutSeconds: 10
    failureThreshold: 3
  readinessProbe:
    enabled: true
    initialDelaySeconds: 30
    periodSeconds: 5
    timeoutSeconds: 4
    failureThreshold: 3
  startupProbe:
    enabled: false
    periodSeconds: 5
    failureThreshold: 30
  resources:
    requests: {cpu: 500m, memory: 2Gi}
    limits: {memory: 4Gi}
  serviceAccount:
    create: true
    name: ""
    automount: true
    annotations:
      eks.amazonaws.com/role-arn: "arn:aws:iam::123456789012:role/{{ .Release.Name }}-prometheus"
  service:
    type: ClusterIP
    clusterIP: ""
    port: 80
    annotations: {}
  pdb:
    create: true
    minAvailable: ""
    maxUnavailable: ""
  persistence:
    enabled: true
    mountPath: /data
    storageClass: fast-ssd
    accessModes: [ReadWriteOnce]
    size: 50Gi
  ingress:
    enabled: true
    ingressClassName: nginx
    path: /
    hosts:
      - "prometheus.{{ .Release.Namespace }}.example.com"
      - prometheus.internal.example.com
    tls: true
  global:
    scrape_interval: 30s
    scrape_timeout: 10s
    evaluation_interval: 30s
    external_labels:
      cluster: prod-eu-1
  scrapeConfigs:
    - job: prometheus
      targets: ["localhost:9090"]
    - job: kubernetes-apiservers
      kubernetesRole: endpoints
      namespaces: [default]
      relabel:
        - source_labels: [__meta_kubernetes_namespace, __meta_kubernetes_service_name, __meta_kubernetes_endpoint_port_name]
          action: keep
          regex: default;kubernetes;https
    - job: kubernetes-nodes
      kubernetesRole: node
      interval: 1m
      relabel:
        - action: labelmap
          regex: __meta_kubernetes_node_label_(.+)
    - job: kubernetes-pods
      kubernetesRole: pod
      relabel:
        - source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_scrape]
          action: keep
          regex: "true"
        - source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_path]
          action: replace
          target_label: __metrics_path__
          regex: (.+)
    - job: alertmanager
      targets: ['{{ include "common.names.fullname" . }}-alertmanager:9093']
  extraScrapeConfigs:
    - job_name: blackbox
      metrics_path: /probe
      static_configs:
        - targets: ["https://{{ .Release.Name }}.example.com"]
  ruleLabels:
    cluster: prod-eu-1
  alertingRules:
    node:
      - alert: NodeDown
        expr: up{job="kubernetes-nodes"} == 0
        severity: critical
        summary: "Node down in {{ .Release.Namespace }}"
      - alert: NodeDiskFull
        expr: node_filesystem_avail_bytes / node_filesystem_size_bytes < 0.1
        for: 15m
        summary: "Disk almost full"
      - alert: NodeMemoryPressure
        expr: node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes < 0.05
        summary: "Memory pressure"
    workloads:
      - alert: PodCrashLooping
        expr: rate(kube_pod_container_status_restarts_total[15m]) > 0
        for: 1h
        summary: "A pod of {{ .Release.Name }} restarts"
      - alert: DeploymentReplicasMismatch
        expr: kube_deployment_spec_replicas != kube_deployment_status_replicas_available
        for: 30m
        summary: "Replicas mismatch"
    prometheus:
      - alert: PrometheusConfigReloadFailed
        expr: prometheus_config_last_reload_successful == 0
        severity: critical
        summary: "Reload failed"
      - alert: PrometheusTSDBCompactionsFailing
        expr: increase(prometheus_tsdb_compactions_failed_total[3h]) > 0
        summary: "Compactions failing"

## Alertmanager
alertmanager:
  enabled: true
  image:
    registry: quay.io
    repository: prometheus/alertmanager
    tag: v0.28.0
    pullPolicy: IfNotPresent
  replicaCount: 3
  podAntiAffinityPreset: hard
  containerPort: 9093
  containerSecurityContext:
    enabled: true
    runAsNonRoot: true
    readOnlyRootFilesystem: true
  resources:
    requests: {cpu: 10m, memory: 32Mi}
  serviceAccount:
    create: true
    name: ""
    automount: false
  service:
    type: ClusterIP
    clusterIP: None
    port: 9093
  pdb:
    create: true
    minAvailable: 2
  persistence:
    size: 2Gi
    storageClass: "-"
  config:
    global:
      resolve_timeout: 5m
    route:
      receiver: default
      group_by: [alertname, namespace]
      group_wait: 30s
      routes:
        - matchers: ['severity="critical"']
          receiver: pager
    receivers:
      - name: default
        webhook_configs:
          - url: "http://{{ .Release.Name }}-relay.{{ .Release.Namespace }}.svc/alerts"
      - name: pager
        webhook_configs:
          - url: https://pager.example.com/hooks/prometheus
  templates:
    default.tmpl: '{{ "{{" }} define "slack.title" {{ "}}" }}[{{ "{{" }} .Status {{ "}}" }}]{{ "{{" }} end {{ "}}" }}'

## Node exporter
nodeExporter:
  enabled: true
  image:
    registry: quay.io
    repository: prometheus/node-exporter
    tag: v1.8.2
    pullPolicy: IfNotPresent
  containerPort: 9100
  hostNetwork: true
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 1
  tolerations:
    - operator: Exists
      effect: NoSchedule
  collectors: [systemd, processes, filesystem.mount-points-exclude=^/(dev|proc|sys)($|/)]
  hostPaths:
    proc: /proc
    sys: /sys
    root: /
  resources:
    requests: {cpu: 20m, memory: 30Mi}
    limits: {memory: 60Mi}
  serviceAccount:
    create: true
    name: ""
    automount: false
  service:
    type: ClusterIP
    clusterIP: ""
    port: 9100
    annotations:
      prometheus.io/scrape: "true"

## kube-state-metrics
kubeStateMetrics:
  enabled: true
  image:
    registry: registry.k8s.io
    repository: kube-state-metrics/kube-state-metrics
    tag: v2.14.0
    pullPolicy: IfNotPresent
  containerPort: 8080
  collectResources: [configmaps, cronjobs, daemonsets, deployments, jobs, namespaces, nodes, pods, services, statefulsets, ingresses, horizontalpodautoscalers]
  apiGroups:
    cronjobs: batch
    jobs: batch
    daemonsets: apps
    deployments: apps
    statefulsets: apps
    ingresses: networking.k8s.io
    horizontalpodautoscalers: autoscaling
  metricLabelsAllowlist: ["pods=[app.kubernetes.io/name]", "deployments=[*]"]
  containerSecurityContext:
    enabled: true
    runAsNonRoot: true
  resources:
    requests: {cpu: 10m, memory: 64Mi}
  serviceAccount:
    create: true
    name: ""
    automount: true
  service:
    type: ClusterIP
    clusterIP: ""
    port: 8080

extraDeploy:
  - apiVersion: v1
    kind: ConfigMap
    metadata:
      name: "{{ include \"common.names.fullname\" . }}-dashboards"
      labels:
        grafana_dashboard: "1"
    data:
      overview.json: '{"title": "{{ .Release.Name }} overview", "panels": []}'
  - apiVersion: monitoring.example.com/v1
    kind: Probe
    metadata:
      name: "{{ .Release.Name }}-blackbox"
    spec:
      interval: 60s
      targets:
        staticConfig:
          static: ["https://{{ .Release.Name }}.example.com"]
"#;
