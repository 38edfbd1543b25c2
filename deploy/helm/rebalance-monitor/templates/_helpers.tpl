{{/* The chart's name, at most 63 characters. */}}
{{- define "rebalance-monitor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: the objects' name prefix. */}}
{{- define "rebalance-monitor.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "rebalance-monitor.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "rebalance-monitor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rebalance-monitor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "rebalance-monitor.labels" -}}
helm.sh/chart: {{ include "rebalance-monitor.chart" . }}
{{ include "rebalance-monitor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
A component's names and labels. Call with (dict "root" $ "component" "job"), component one of
job, observe-rocketmq, observe-kafka. The scrape-job label is the job label Prometheus gives the
component's series (the monitors' jobLabel): the names the rules and dashboards expect, as in
dashboards/prometheus/prometheus.yml.
*/}}
{{- define "rebalance-monitor.componentName" -}}
{{- printf "%s-%s" (include "rebalance-monitor.fullname" .root) .component | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "rebalance-monitor.scrapeJob" -}}
{{- if eq .component "job" }}rebalance-monitor{{ else }}rebalance-{{ .component }}{{ end }}
{{- end }}

{{- define "rebalance-monitor.componentSelectorLabels" -}}
{{ include "rebalance-monitor.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "rebalance-monitor.componentLabels" -}}
{{ include "rebalance-monitor.labels" .root }}
app.kubernetes.io/component: {{ .component }}
rebalance-monitor/scrape-job: {{ include "rebalance-monitor.scrapeJob" . }}
{{- end }}

{{- define "rebalance-monitor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "rebalance-monitor.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "rebalance-monitor.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "rebalance-monitor.claimName" -}}
{{- default (printf "%s-checkpoint" (include "rebalance-monitor.fullname" .)) .Values.persistence.existingClaim }}
{{- end }}

{{/*
--kafka-option arguments: (dict "options" map "secretOptions" list "flag" "--kafka-option"
"prefix" "RM_KAFKA_SECRET"). Plain options in key order, then one per secret option, whose value
Kubernetes expands from the environment variable "kafkaSecretEnv" defines.
*/}}
{{- define "rebalance-monitor.kafkaOptionArgs" -}}
{{- $flag := .flag }}
{{- range $key := keys .options | sortAlpha }}
- {{ $flag }}
- {{ printf "%s=%v" $key (get $.options $key) | quote }}
{{- end }}
{{- range $index, $secret := .secretOptions }}
- {{ $flag }}
- {{ printf "%s=$(%s_%d)" $secret.option $.prefix $index | quote }}
{{- end }}
{{- end }}

{{- define "rebalance-monitor.kafkaSecretEnv" -}}
{{- range $index, $secret := .secretOptions }}
- name: {{ printf "%s_%d" $.prefix $index }}
  valueFrom:
    secretKeyRef:
      name: {{ required "each secretOptions entry needs secretName" $secret.secretName }}
      key: {{ required "each secretOptions entry needs secretKey" $secret.secretKey }}
{{- end }}
{{- end }}

{{/*
Secret Kafka options in the environment, never in the process arguments: (dict "secretOptions"
list "prefix" "RM_KAFKA_SECRET" "variable" "REBALANCE_MONITOR_KAFKA_OPTION"). Each secret in
its own variable ("kafkaSecretEnv"), then the option's variable, which the command reads as one
KEY=VALUE a line, with each value expanded by Kubernetes from its secret's variable.
*/}}
{{- define "rebalance-monitor.kafkaSecretOptionEnv" -}}
{{- if .secretOptions }}
{{- include "rebalance-monitor.kafkaSecretEnv" . }}
{{- $lines := list }}
{{- range $index, $secret := .secretOptions }}
{{- $lines = append $lines (printf "%s=$(%s_%d)" $secret.option $.prefix $index) }}
{{- end }}
- name: {{ .variable }}
  value: {{ join "\n" $lines | quote }}
{{- end }}
{{- end }}

{{/*
A component's pod scheduling: its own nodeSelector / tolerations / affinity, else the chart's.
Call with (dict "root" $ "values" .Values.job).
*/}}
{{- define "rebalance-monitor.scheduling" -}}
{{- with (default .root.Values.nodeSelector .values.nodeSelector) }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (default .root.Values.tolerations .values.tolerations) }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (default .root.Values.affinity .values.affinity) }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The pods' common spec fields (service account, pull secrets, security context). */}}
{{- define "rebalance-monitor.podCommon" -}}
serviceAccountName: {{ include "rebalance-monitor.serviceAccountName" . }}
automountServiceAccountToken: {{ .Values.serviceAccount.automountServiceAccountToken }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The metrics port's name everywhere: the container's, the Service's and the monitors'. */}}
{{- define "rebalance-monitor.metricsPortName" -}}metrics{{- end }}

{{/* The group pages' links: the runbook base is the one the alerts link to. */}}
{{- define "rebalance-monitor.pageLinkArgs" -}}
{{- with .Values.prometheusRule.runbookBaseUrl }}
- --runbook-base-url
- {{ . | quote }}
{{- end }}
{{- with .Values.job.dashboardBaseUrl }}
- --dashboard-base-url
- {{ . | quote }}
{{- end }}
{{- end }}
