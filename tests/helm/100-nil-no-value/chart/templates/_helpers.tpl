{{- define "nil.fields" -}}[{{ .foo }}|{{ .foo.bar }}|{{ $.foo.bar }}]{{- end -}}

{{/* bitnami's common.secrets.lookup, as its charts write it */}}
{{- define "nil.secrets.lookup" -}}
{{- $value := "" -}}
{{- $secretData := (lookup "v1" "Secret" .namespace .secret).data -}}
{{- if and $secretData (hasKey $secretData .key) -}}
  {{- $value = index $secretData .key -}}
{{- else if .defaultValue -}}
  {{- $value = .defaultValue | toString | b64enc -}}
{{- end -}}
{{- if $value -}}
{{- printf "%s" $value -}}
{{- end -}}
{{- end -}}

{{- define "nil.exists" -}}
{{- $secret := (lookup "v1" "Secret" "ns" "name").data -}}
{{- if hasKey $secret "password" }}true{{ else }}false{{ end -}}
{{- end -}}
