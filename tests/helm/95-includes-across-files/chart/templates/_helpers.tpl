{{- define "h.plain" -}}{{ .Chart.Name }}-{{ .Values.x }}{{- end -}}
{{- define "h.name" -}}{{ .Template.Name }}{{- end -}}
{{- define "h.base" -}}{{ $.Template.BasePath }}{{- end -}}
{{- define "h.ctx" -}}{{ .ctx.Template.Name }}/{{ .n }}{{- end -}}
{{- define "h.ctx.plain" -}}{{ .ctx.Release.Name }}/{{ .n }}{{- end -}}
{{- define "h.outer" -}}[{{ include "h.name" . }}]{{- end -}}
{{- define "h.keys" -}}{{ keys . | sortAlpha | join "," }}{{- end -}}
{{- define "h.index" -}}{{ index . "Template" "Name" }}{{- end -}}
{{- define "h.get" -}}{{ (get . "Template").Name }}{{- end -}}
{{- define "h.with" -}}{{ with .Template }}{{ .Name }}{{ end }}{{- end -}}
{{- define "h.range" -}}{{ range $k, $v := . }}{{ if eq $k "Template" }}{{ $v.Name }}{{ end }}{{ end }}{{- end -}}
{{- define "h.pluck" -}}{{ pluck "Template" . | first | toJson }}{{- end -}}
{{- define "h.tpl" -}}{{ tpl "{{ .Template.Name }}" . }}{{- end -}}
{{- define "h.deepcopy" -}}{{ (deepCopy .).Template.Name }}{{- end -}}
{{- define "h.merge" -}}{{ (merge (dict) .).Template.Name }}{{- end -}}
{{- define "h.omit" -}}{{ (omit . "Values").Template.Name }}{{- end -}}
{{- define "h.haskey" -}}{{ hasKey . "Template" }}/{{ hasKey . "Values" }}/{{ hasKey . "Nope" }}{{- end -}}
{{- define "h.sub.haskey" -}}{{ hasKey .Subcharts.sub "Template" }}{{- end -}}
{{- define "h.hasvalues" -}}{{ hasKey .Values "changed" }}{{- end -}}
{{- define "h.all" -}}
plain: {{ include "h.plain" . | quote }}
name: {{ include "h.name" . | quote }}
base: {{ include "h.base" . | quote }}
outer: {{ include "h.outer" . | quote }}
keys: {{ include "h.keys" . | quote }}
index: {{ include "h.index" . | quote }}
get: {{ include "h.get" . | quote }}
with: {{ include "h.with" . | quote }}
range: {{ include "h.range" . | quote }}
pluck: {{ include "h.pluck" . | quote }}
tpl: {{ include "h.tpl" . | quote }}
deepcopy: {{ include "h.deepcopy" . | quote }}
merge: {{ include "h.merge" . | quote }}
omit: {{ include "h.omit" . | quote }}
haskey: {{ include "h.haskey" . | quote }}
{{- end -}}
