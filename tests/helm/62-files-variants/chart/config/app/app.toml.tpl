level = {{ .Values.logLevel }}
name = {{ .Values.appName | upper }}
