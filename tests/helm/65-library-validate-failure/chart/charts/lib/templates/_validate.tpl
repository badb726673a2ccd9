{{/* Collects messages from validators and fails with all of them. */}}
{{- define "lib.validateValues.multiple" -}}
{{- $messages := list -}}
{{- range .validators -}}
{{- $messages = append $messages (include . $.context) -}}
{{- end -}}
{{- $messages = without $messages "" -}}
{{- $message := join "\n" $messages -}}
{{- if $message -}}
{{- printf "\nVALUES VALIDATION:\n%s" $message | fail -}}
{{- end -}}
{{- end -}}
