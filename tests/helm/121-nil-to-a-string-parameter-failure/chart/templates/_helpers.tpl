{{- define "config.checksum" -}}
{{- tpl .Values.loki.config . | sha256sum }}
{{- end }}
