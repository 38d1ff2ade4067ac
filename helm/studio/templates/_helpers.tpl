{{/* Names, labels and the pieces every pod of the chart shares. */}}

{{- define "studio.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "studio.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "studio.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "studio.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "studio.executorImage" -}}
{{- $repository := default .Values.image.repository .Values.executor.image.repository -}}
{{- $tag := default (default .Chart.AppVersion .Values.image.tag) .Values.executor.image.tag -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end -}}

{{- define "studio.workerServiceAccount" -}}
{{- default (printf "%s-worker" (include "studio.fullname" .)) .Values.serviceAccounts.worker.name -}}
{{- end -}}

{{- define "studio.apiServiceAccount" -}}
{{- default (printf "%s-api" (include "studio.fullname" .)) .Values.serviceAccounts.api.name -}}
{{- end -}}

{{- define "studio.executorServiceAccount" -}}
{{- default (printf "%s-executor" (include "studio.fullname" .)) .Values.serviceAccounts.executor.name -}}
{{- end -}}

{{/* Pod-level security: the "restricted" Pod Security Standard. */}}
{{- define "studio.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.podSecurity.runAsUser }}
runAsGroup: {{ .Values.podSecurity.runAsGroup }}
fsGroup: {{ .Values.podSecurity.fsGroup }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "studio.containerSecurityContext" -}}
runAsNonRoot: true
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Settings from the ConfigMap, secrets by reference from the existing Secret. */}}
{{- define "studio.env" -}}
envFrom:
  - configMapRef:
      name: {{ include "studio.fullname" . }}
env:
  - name: STUDIO_DATABASE_URL
    valueFrom:
      secretKeyRef: {name: {{ .Values.secrets.existingSecret }}, key: STUDIO_DATABASE_URL}
  - name: STUDIO_BROKER_URL
    valueFrom:
      secretKeyRef: {name: {{ .Values.secrets.existingSecret }}, key: STUDIO_BROKER_URL}
  - name: STUDIO_SECRET_KEY
    valueFrom:
      secretKeyRef: {name: {{ .Values.secrets.existingSecret }}, key: STUDIO_SECRET_KEY}
  - name: STUDIO_GITHUB_TOKEN
    valueFrom:
      secretKeyRef: {name: {{ .Values.secrets.existingSecret }}, key: STUDIO_GITHUB_TOKEN, optional: true}
{{- end -}}

{{/* Writable scratch on a read-only root filesystem. */}}
{{- define "studio.scratchMounts" -}}
volumeMounts:
  - {name: tmp, mountPath: /tmp}
  - {name: home, mountPath: /home/studio}
{{- end -}}

{{- define "studio.scratchVolumes" -}}
volumes:
  - name: tmp
    emptyDir: {sizeLimit: 1Gi}
  - name: home
    emptyDir: {sizeLimit: 512Mi}
{{- end -}}

{{/* Workers with executor.kind=local run `studio execute` in the pod: a workspace volume. */}}
{{- define "studio.workspaceMount" -}}
- {name: workspace, mountPath: /workspace}
{{- end -}}

{{- define "studio.workspaceVolume" -}}
- name: workspace
  emptyDir: {sizeLimit: 8Gi}
{{- end -}}

{{- define "studio.scheduling" -}}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- range . }}
  - name: {{ . }}
  {{- end }}
{{- end }}
{{- end -}}
