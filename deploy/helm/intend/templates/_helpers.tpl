{{/* The chart's names and labels. */}}
{{- define "intend.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "intend.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "intend.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "intend.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "intend.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "intend.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels; "component" is server, executor or migrations. */}}
{{- define "intend.selectorLabels" -}}
app.kubernetes.io/name: {{ include "intend.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "intend.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "intend.serverScheme" -}}
{{ if .Values.server.tls.existingSecret }}HTTPS{{ else }}HTTP{{ end }}
{{- end -}}

{{/* The image's user, and nothing it does not need. */}}
{{- define "intend.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "intend.securityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/* Environment shared by servers, executors and the migration job. */}}
{{- define "intend.commonEnv" -}}
- name: INTEND_LOG_FORMAT
  value: json
{{- end -}}

{{- define "intend.databaseEnv" -}}
- name: INTEND_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ required "database.existingSecret: the Secret holding intend's PostgreSQL URL" .Values.database.existingSecret }}
      key: {{ .Values.database.key }}
{{- end -}}

{{- define "intend.temporalEnv" -}}
- name: INTEND_TEMPORAL_ADDRESS
  value: {{ required "temporal.address" .Values.temporal.address | quote }}
- name: INTEND_TEMPORAL_NAMESPACE
  value: {{ .Values.temporal.namespace | quote }}
{{- with .Values.temporal.tls }}
{{- if .enabled }}
- name: INTEND_TEMPORAL_TLS
  value: "true"
{{- end }}
{{- if .existingSecret }}
- name: INTEND_TEMPORAL_TLS_CA
  value: /etc/intend/temporal-tls/ca.crt
- name: INTEND_TEMPORAL_TLS_CERT
  value: /etc/intend/temporal-tls/tls.crt
- name: INTEND_TEMPORAL_TLS_KEY
  value: /etc/intend/temporal-tls/tls.key
{{- end }}
{{- if .serverName }}
- name: INTEND_TEMPORAL_TLS_SERVER_NAME
  value: {{ .serverName | quote }}
{{- end }}
{{- end }}
{{- if .Values.temporal.apiKey.existingSecret }}
- name: INTEND_TEMPORAL_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.temporal.apiKey.existingSecret }}
      key: {{ .Values.temporal.apiKey.key }}
{{- end }}
{{- end -}}

{{- define "intend.temporalVolumeMounts" -}}
{{- if .Values.temporal.tls.existingSecret }}
- name: temporal-tls
  mountPath: /etc/intend/temporal-tls
  readOnly: true
{{- end }}
{{- end -}}

{{- define "intend.temporalVolumes" -}}
{{- if .Values.temporal.tls.existingSecret }}
- name: temporal-tls
  secret:
    secretName: {{ .Values.temporal.tls.existingSecret }}
{{- end }}
{{- end -}}
