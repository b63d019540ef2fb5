{{/* The name of the objects: the release name when it contains the chart name. */}}
{{- define "hcloudscale.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "hcloudscale.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hcloudscale.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hcloudscale.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "hcloudscale.labels" -}}
{{ include "hcloudscale.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "hcloudscale.serviceAccountName" -}}
{{- default (include "hcloudscale.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The Lease's namespace: --leader-elect-resource-namespace. */}}
{{- define "hcloudscale.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.leaseNamespace -}}
{{- end -}}

{{- define "hcloudscale.tokenSecret" -}}
{{- default (printf "%s-token" (include "hcloudscale.fullname" .)) .Values.hcloud.existingSecret -}}
{{- end -}}

{{- define "hcloudscale.clusterConfigName" -}}
{{- default (printf "%s-cluster-config" (include "hcloudscale.fullname" .)) .Values.clusterConfig.existingName -}}
{{- end -}}

{{/* The Secrets of the certificates: cert-manager's, or the given ones. */}}
{{- define "hcloudscale.serverTLSSecret" -}}
{{- if .Values.tls.certManager.enabled -}}
{{- printf "%s-server-tls" (include "hcloudscale.fullname" .) -}}
{{- else -}}
{{- required "tls.serverSecret is required without tls.certManager.enabled" .Values.tls.serverSecret -}}
{{- end -}}
{{- end -}}

{{- define "hcloudscale.clientTLSSecret" -}}
{{- if .Values.tls.certManager.enabled -}}
{{- printf "%s-client-tls" (include "hcloudscale.fullname" .) -}}
{{- else -}}
{{- .Values.tls.clientSecret -}}
{{- end -}}
{{- end -}}

{{/* The DNS name the autoscaler dials and verifies the server certificate with. */}}
{{- define "hcloudscale.serviceHost" -}}
{{- printf "%s.%s.svc" (include "hcloudscale.fullname" .) .Release.Namespace -}}
{{- end -}}
