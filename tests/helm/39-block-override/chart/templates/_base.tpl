{{- define "footer" -}}overridden footer{{- end -}}
