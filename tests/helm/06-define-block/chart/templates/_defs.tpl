{{- define "greet" -}}hello {{ . }}{{- end -}}
{{- define "override.me" -}}from-defs{{- end -}}
