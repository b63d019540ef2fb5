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

{{/* The version label: the tag without a digest ("v1@sha256:..."), in
the characters and length a label value allows. */}}
{{- define "hcloudscale.labels" -}}
{{ include "hcloudscale.selectorLabels" . }}
{{- $version := .Values.image.tag | default .Chart.AppVersion | splitList "@" | first }}
{{- $version = regexReplaceAll "[^A-Za-z0-9_.-]" $version "_" | trunc 63 | trimAll "_.-" }}
{{- with $version }}
app.kubernetes.io/version: {{ . | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The image reference: repository, then tag (default appVersion), then
image.digest when set. */}}
{{- define "hcloudscale.image" -}}
{{- $ref := printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- if .Values.image.digest -}}
{{- $ref = printf "%s@%s" $ref .Values.image.digest -}}
{{- end -}}
{{- $ref -}}
{{- end -}}

{{/* A Go duration ("1m30s", "500ms", "5s") in milliseconds, for
comparisons; empty for text it does not understand. */}}
{{- define "hcloudscale.durationMillis" -}}
{{- $d := toString . -}}
{{- if regexMatch "^([0-9]+(\\.[0-9]+)?(h|m|s|ms|us|ns))+$" $d -}}
{{- $units := dict "h" 3600000.0 "m" 60000.0 "s" 1000.0 "ms" 1.0 "us" 0.001 "ns" 0.000001 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9.]+(h|ms|m|s|us|ns)" $d -1 -}}
{{- $n := regexFind "^[0-9.]+" . -}}
{{- $total = addf $total (mulf (float64 $n) (get $units (trimPrefix $n .))) -}}
{{- end -}}
{{- $total -}}
{{- end -}}
{{- end -}}

{{- define "hcloudscale.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "hcloudscale.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The name serve requires in the autoscaler's client certificate
(--tls-client-name), which the chart's client Certificate carries as a DNS
name. */}}
{{- define "hcloudscale.clientName" -}}
{{- default (printf "%s-autoscaler" (include "hcloudscale.fullname" . | trunc 52 | trimSuffix "-")) .Values.tls.clientName -}}
{{- end -}}

{{/* The namespace the autoscaler runs in: its client certificate and
cloud-config are made there. */}}
{{- define "hcloudscale.autoscalerNamespace" -}}
{{- default .Release.Namespace .Values.autoscaler.namespace -}}
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
{{- .Values.tls.serverSecret -}}
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
