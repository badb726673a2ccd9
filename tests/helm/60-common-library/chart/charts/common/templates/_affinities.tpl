{{- define "common.affinities.pods.soft" -}}
{{- $extraMatchLabels := default (dict) .extraMatchLabels -}}
preferredDuringSchedulingIgnoredDuringExecution:
  - podAffinityTerm:
      labelSelector:
        matchLabels: {{- (include "common.labels.matchLabels" .context) | nindent 10 }}
          {{- range $key, $value := $extraMatchLabels }}
          {{ $key }}: {{ $value | quote }}
          {{- end }}
      topologyKey: kubernetes.io/hostname
    weight: 1
{{- end -}}

{{- define "common.affinities.pods.hard" -}}
requiredDuringSchedulingIgnoredDuringExecution:
  - labelSelector:
      matchLabels: {{- (include "common.labels.matchLabels" .context) | nindent 8 }}
    topologyKey: kubernetes.io/hostname
{{- end -}}

{{- define "common.affinities.pods" -}}
{{- if eq .type "soft" }}
  {{- include "common.affinities.pods.soft" . -}}
{{- else if eq .type "hard" -}}
  {{- include "common.affinities.pods.hard" . -}}
{{- end -}}
{{- end -}}
