{{- define "override.me" -}}from-z{{- end -}}
