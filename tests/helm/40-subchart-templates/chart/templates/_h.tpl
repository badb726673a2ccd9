{{- define "outer.shared" -}}outer-{{ .Chart.Name }}{{- end -}}
