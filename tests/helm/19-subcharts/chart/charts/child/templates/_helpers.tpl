{{- define "child.name" -}}child-helper{{- end -}}
