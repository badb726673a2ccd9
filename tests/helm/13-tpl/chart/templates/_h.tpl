{{- define "tpl.label" -}}label-{{ .Release.Name }}{{- end -}}
