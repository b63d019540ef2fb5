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

{{/* Non-empty when clusterConfig.json (JSON text, or YAML the chart
writes as JSON) declares a pool as serve reads it: a nodeConfigs entry
with minSize, maxSize, serverType or location set (not null, not ""),
keys in any case. Fails on text that is not a JSON object. */}}
{{- define "hcloudscale.declaresPools" -}}
{{- $cc := .Values.clusterConfig.json -}}
{{- if and (kindIs "string" $cc) $cc -}}
{{- if not (hasPrefix "{" (trim $cc)) -}}
{{- fail "clusterConfig.json: not a JSON object: it must start with {" -}}
{{- end -}}
{{- $cc = fromJson $cc -}}
{{- if hasKey $cc "Error" -}}
{{- fail (printf "clusterConfig.json: not a JSON object: %s" (get $cc "Error")) -}}
{{- end -}}
{{- end -}}
{{- $fields := list "minsize" "maxsize" "servertype" "location" -}}
{{- range $key, $ncs := ternary $cc dict (kindIs "map" $cc) -}}
{{- if and (eq (lower $key) "nodeconfigs") (kindIs "map" $ncs) -}}
{{- range $nc := values $ncs -}}
{{- range $field, $v := ternary $nc dict (kindIs "map" $nc) -}}
{{- if and (has (lower $field) $fields) (not (kindIs "invalid" $v)) (ne (toString $v) "") }}true{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
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
