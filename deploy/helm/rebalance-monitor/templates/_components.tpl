{{/*
The components this release runs, each with its metrics port, as a YAML list of
{component, port, sparkDriver}: what the Services and the monitors iterate over.
*/}}
{{- define "rebalance-monitor.components" -}}
{{- $list := list }}
{{- if .Values.job.enabled }}
{{- $list = append $list (dict "component" "job" "port" .Values.job.metricsPort "sparkDriver" (eq .Values.job.mode "sparkApplication")) }}
{{- end }}
{{- if .Values.observers.rocketmq.enabled }}
{{- $list = append $list (dict "component" "observe-rocketmq" "port" .Values.observers.rocketmq.metricsPort "sparkDriver" false) }}
{{- end }}
{{- if .Values.observers.kafka.enabled }}
{{- $list = append $list (dict "component" "observe-kafka" "port" .Values.observers.kafka.metricsPort "sparkDriver" false) }}
{{- end }}
{{- toYaml $list }}
{{- end }}
