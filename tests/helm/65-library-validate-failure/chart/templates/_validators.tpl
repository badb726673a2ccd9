{{- define "queue.validateValues.architecture" -}}
{{- if not (has .Values.architecture (list "standalone" "replicaset")) -}}
queue: architecture
    Invalid architecture {{ .Values.architecture | quote }}; use standalone or replicaset
{{- end -}}
{{- end -}}
{{- define "queue.validateValues.replicas" -}}
{{- if and (eq .Values.architecture "standalone") (gt (int .Values.replicaCount) 1) -}}
queue: replicaCount
    standalone runs one replica
{{- end -}}
{{- end -}}
