{{- define "x" }}chart{{ end -}}
