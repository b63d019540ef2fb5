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
name: tls.clientName; else, with the chart's private CA alone, which signs
for this release only, <fullname>-autoscaler; else (a shared issuerRef, or
a tls.caBundle whose CAs may sign for others) a random name of this
release that nobody else can guess, made once and kept in the Secret
<fullname>-client-name (read back on upgrades), so that a Certificate
someone else gets from such a CA does not name it.
Computed once per render; call it with the root context. */}}
{{- define "hcloudscale.clientName" -}}
{{- /* Kept in the render's root, not in .Values, which Helm may store
  with the release. */ -}}
{{- if not (hasKey $ "hcloudscaleClientName") -}}
{{- $name := .Values.tls.clientName -}}
{{- $prefix := printf "%s-autoscaler" (include "hcloudscale.fullname" . | trunc 52 | trimSuffix "-") -}}
{{- if and (not $name) (include "hcloudscale.randomClientName" .) -}}
{{- $kept := lookup "v1" "Secret" .Release.Namespace (include "hcloudscale.clientNameSecret" .) -}}
{{- $name = dig "data" "name" "" $kept | b64dec -}}
{{- if not $name -}}
{{- $name = printf "%s-autoscaler-%s" (include "hcloudscale.fullname" . | trunc 29 | trimSuffix "-") (randAlphaNum 22 | lower) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $ "hcloudscaleClientName" (default $prefix $name) -}}
{{- end -}}
{{- index $ "hcloudscaleClientName" -}}
{{- end -}}

{{/* Non-empty when the client name is random and kept in a Secret: the
chart's client Certificate signed by a CA that may sign for others too
(tls.certManager.issuerRef), or trusted beside other CAs
(tls.caBundle), and no tls.clientName. */}}
{{- define "hcloudscale.randomClientName" -}}
{{- if and .Values.tls.certManager.enabled (or .Values.tls.certManager.issuerRef .Values.tls.caBundle.configMap) (not .Values.tls.clientName) }}true{{ end -}}
{{- end -}}

{{- define "hcloudscale.clientNameSecret" -}}
{{- printf "%s-client-name" (include "hcloudscale.fullname" .) -}}
{{- end -}}

{{/* The client certificates serve accepts as they are, whatever names
they carry (--tls-client-pinned), PEM: those pinned before (kept in the
Secret <fullname>-pinned-clients) and, when the client Certificate in the
cluster does not carry the client name (an upgrade that changes the
autoscaler's identity, e.g. from a chart whose certificate had only
CN=cluster-autoscaler), the certificate the autoscaler holds now. It keeps
calling with that one until it restarts; serve refuses it once it expires.
Empty without access to the cluster (helm template). */}}
{{- define "hcloudscale.pinnedClients" -}}
{{- $pins := "" -}}
{{- if and .Values.tls.certManager.enabled .Values.tls.verifyClientName (.Capabilities.APIVersions.Has "cert-manager.io/v1/Certificate") -}}
{{- $fullname := include "hcloudscale.fullname" . -}}
{{- $ns := include "hcloudscale.autoscalerNamespace" . -}}
{{- $own := lookup "v1" "Secret" .Release.Namespace (printf "%s-pinned-clients" $fullname) -}}
{{- $pins = dig "data" "clients.pem" "" $own | b64dec -}}
{{- $cert := lookup "cert-manager.io/v1" "Certificate" $ns (printf "%s-client" $fullname) -}}
{{- if and $cert (not (has (include "hcloudscale.clientName" .) (dig "spec" "dnsNames" list $cert))) -}}
{{- $crt := dig "data" "tls.crt" "" (lookup "v1" "Secret" $ns (include "hcloudscale.clientTLSSecret" .)) | b64dec -}}
{{- if and $crt (not (contains (trim $crt) $pins)) -}}
{{- $pins = printf "%s%s\n" $pins (trim $crt) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $pins -}}
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

{{/* The Lease's name (--leader-elect-resource-name): leaderElection.leaseName;
empty, the name the release's Deployment already passes, so that an upgrade
keeps the Lease the running pods hold (old and new pods of a rollout must
compete for one Lease); else the full name, one Lease per release. Without
access to the cluster (helm template) the full name. */}}
{{- define "hcloudscale.leaseName" -}}
{{- $name := .Values.leaderElection.leaseName -}}
{{- if not $name -}}
{{- $dep := lookup "apps/v1" "Deployment" .Release.Namespace (include "hcloudscale.fullname" .) -}}
{{- range $c := dig "spec" "template" "spec" "containers" list $dep -}}
{{- range $a := (get $c "args" | default list) -}}
{{- if hasPrefix "--leader-elect-resource-name=" (toString $a) -}}
{{- $name = trimPrefix "--leader-elect-resource-name=" (toString $a) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- default (include "hcloudscale.fullname" .) $name -}}
{{- end -}}

{{/* The name of a cluster-scoped object (ClusterRole, ClusterRoleBinding):
the full name and the namespace, so that releases of one name in two
namespaces do not collide. */}}
{{- define "hcloudscale.clusterScopedName" -}}
{{- printf "%s-%s-%s" (include "hcloudscale.fullname" .root) .root.Release.Namespace .suffix -}}
{{- end -}}
