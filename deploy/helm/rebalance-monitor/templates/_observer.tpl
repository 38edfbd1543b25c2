{{/*
An observer's Deployment: (dict "root" $ "component" "observe-kafka" "values" .Values.observers.kafka
"args" list "env" list). One replica, Recreate: one poller per cluster at any time.
*/}}
{{- define "rebalance-monitor.observerDeployment" -}}
{{- $root := .root }}
{{- $values := .values }}
{{- $ctx := dict "root" $root "component" .component }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "rebalance-monitor.componentName" $ctx }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "rebalance-monitor.componentLabels" $ctx | nindent 4 }}
spec:
  replicas: 1
  strategy:
    type: Recreate
  selector:
    matchLabels:
      {{- include "rebalance-monitor.componentSelectorLabels" $ctx | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "rebalance-monitor.componentLabels" $ctx | nindent 8 }}
        {{- with $root.Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with (merge (dict) $values.podAnnotations $root.Values.podAnnotations) }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      {{- include "rebalance-monitor.podCommon" $root | nindent 6 }}
      {{- with (include "rebalance-monitor.scheduling" (dict "root" $root "values" $values) | trim) }}{{ . | nindent 6 }}{{ end }}
      containers:
        - name: {{ .component }}
          image: {{ include "rebalance-monitor.image" $root | quote }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args:
            - {{ .component }}
            {{- .args | trim | nindent 12 }}
            - --interval-seconds
            - {{ $values.intervalSeconds | quote }}
            - --metrics-host
            - 0.0.0.0
            - --metrics-port
            - {{ $values.metricsPort | quote }}
            {{- with $values.extraArgs }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- if or (trim .env) $root.Values.extraEnv $values.extraEnv }}
          env:
            {{- with (trim .env) }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- with $root.Values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
            {{- with $values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- end }}
          ports:
            - name: {{ include "rebalance-monitor.metricsPortName" $root }}
              containerPort: {{ $values.metricsPort }}
              protocol: TCP
          {{- with $values.readinessProbe }}
          readinessProbe:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with $root.Values.securityContext }}
          securityContext:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with $values.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
{{- end }}
