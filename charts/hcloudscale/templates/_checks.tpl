{{/* Every check of the values, all at once: one fail listing every
problem, each naming its values. deployment.yaml includes it. */}}
{{- define "hcloudscale.checks" -}}
{{- $v := .Values -}}
{{- $p := list -}}
{{- /* A pool is required: --nodes, or one the chart's cluster config
  declares (an own object, existingName, is left to serve). The include
  also fails on a clusterConfig.json that is not a JSON object. */ -}}
{{- if and (not $v.clusterConfig.existingName) (not (include "hcloudscale.declaresPools" .)) (not $v.nodes) -}}
{{- $p = append $p "nodes: no pools: set nodes (e.g. --set 'nodes[0]=0:10:cpx31:fsn1:workers') or declare pools in clusterConfig.json (nodeConfigs.<pool> with serverType, location and maxSize; minSize defaults to 0)" -}}
{{- end -}}
{{- if and $v.nodeLifecycle.dryRun (not $v.nodeLifecycle.enabled) -}}
{{- $p = append $p "nodeLifecycle.dryRun needs nodeLifecycle.enabled: the dry run is a mode of the node lifecycle, which is off" -}}
{{- end -}}
{{- if and (not $v.leaderElection.enabled) (gt (int $v.replicas) 1) -}}
{{- $p = append $p "replicas: more than one replica needs leaderElection.enabled: replicas without it would all create and delete servers" -}}
{{- end -}}
{{- if and (not $v.hcloud.token) (not $v.hcloud.existingSecret) -}}
{{- $p = append $p "hcloud.token or hcloud.existingSecret is required: the Hetzner Cloud API token" -}}
{{- else if and $v.hcloud.token $v.hcloud.existingSecret -}}
{{- $p = append $p "hcloud.token and hcloud.existingSecret are both set: set one (the chart would ignore one of them)" -}}
{{- end -}}
{{- if and (not $v.clusterConfig.json) (not $v.clusterConfig.existingName) -}}
{{- $p = append $p "clusterConfig.json or clusterConfig.existingName is required: the cluster config with a nodeConfigs entry per pool" -}}
{{- else if and $v.clusterConfig.json $v.clusterConfig.existingName -}}
{{- $p = append $p "clusterConfig.json and clusterConfig.existingName are both set: set one (the chart would ignore one of them)" -}}
{{- end -}}
{{- if $v.tls.certManager.enabled -}}
{{- range $key := list "serverSecret" "clientSecret" -}}
{{- if index $v.tls $key -}}
{{- $p = append $p (printf "tls.%s and tls.certManager.enabled are both set: a given Secret is used only with tls.certManager.enabled=false" $key) -}}
{{- end -}}
{{- end -}}
{{- if and (or .Release.IsInstall .Release.IsUpgrade) (not (.Capabilities.APIVersions.Has "cert-manager.io/v1/Certificate")) -}}
{{- $p = append $p "tls.certManager.enabled: the cluster has no cert-manager.io/v1 Certificate (cert-manager's CRDs are not installed): install cert-manager first, or set tls.certManager.enabled=false with tls.serverSecret and tls.clientSecret (helm template: pass --api-versions cert-manager.io/v1/Certificate)" -}}
{{- end -}}
{{- if and (ne (include "hcloudscale.autoscalerNamespace" .) .Release.Namespace) (ne (toString $v.tls.certManager.issuerRef.kind) "ClusterIssuer") -}}
{{- $p = append $p "autoscaler.namespace: a client certificate in another namespace needs tls.certManager.issuerRef of kind ClusterIssuer (a namespaced Issuer signs only in its own namespace)" -}}
{{- end -}}
{{- else if not $v.tls.serverSecret -}}
{{- $p = append $p "tls.serverSecret is required without tls.certManager.enabled: a Secret with tls.crt, tls.key and ca.crt" -}}
{{- end -}}
{{- if not $v.image.repository -}}
{{- $p = append $p "image.repository is required: your build of the Dockerfile (no public image is published)" -}}
{{- end -}}
{{- if and (contains "@" (toString $v.image.tag)) $v.image.digest -}}
{{- $p = append $p "image.tag carries a digest and image.digest is set: set one" -}}
{{- end -}}
{{- if $v.autoscalerCloudConfig.enabled -}}
{{- $rpc := include "hcloudscale.durationMillis" (default "4s" $v.serve.rpcTimeout) -}}
{{- $grpc := include "hcloudscale.durationMillis" $v.autoscalerCloudConfig.grpcTimeout -}}
{{- if not $rpc -}}
{{- $p = append $p (printf "serve.rpcTimeout: %q is not a duration such as 4s" $v.serve.rpcTimeout) -}}
{{- end -}}
{{- if not $grpc -}}
{{- $p = append $p (printf "autoscalerCloudConfig.grpcTimeout: %q is not a duration such as 5s" $v.autoscalerCloudConfig.grpcTimeout) -}}
{{- end -}}
{{- if and $rpc $grpc (ge (float64 $rpc) (float64 $grpc)) -}}
{{- $p = append $p (printf "serve.rpcTimeout (%s) must stay below autoscalerCloudConfig.grpcTimeout (%s): the autoscaler gives up on a call before serve's bound" (default "4s" $v.serve.rpcTimeout) $v.autoscalerCloudConfig.grpcTimeout) -}}
{{- end -}}
{{- end -}}
{{- $bundleDir := printf "%s/" (trimSuffix "/" $v.autoscalerCloudConfig.caBundleDir) -}}
{{- $certDir := printf "%s/" (trimSuffix "/" $v.autoscalerCloudConfig.certDir) -}}
{{- if and $v.tls.caBundle.configMap $v.autoscalerCloudConfig.enabled (or (hasPrefix $bundleDir $certDir) (hasPrefix $certDir $bundleDir)) -}}
{{- $p = append $p (printf "autoscalerCloudConfig.caBundleDir (%s) is autoscalerCloudConfig.certDir (%s) or in it, or holds it: the autoscaler mounts the tls.caBundle ConfigMap and the client Secret as two volumes, in two directories apart" $v.autoscalerCloudConfig.caBundleDir $v.autoscalerCloudConfig.certDir) -}}
{{- end -}}
{{- if and $v.tls.caBundle.configMap (not $v.tls.verifyClientName) -}}
{{- $p = append $p "tls.caBundle.configMap needs tls.verifyClientName: serve would accept a client certificate of any CA in the bundle, issued to anyone (a cluster-wide bundle or one with default CAs trusts public CAs); the bundle should hold only the CAs that sign this release's certificates" -}}
{{- end -}}
{{- $sel := $v.networkPolicy.clientPodSelector | default dict -}}
{{- if and $v.networkPolicy.enabled (not $sel.matchLabels) (not $sel.matchExpressions) -}}
{{- $p = append $p "networkPolicy.clientPodSelector: empty (no matchLabels or matchExpressions) would allow every pod: set the autoscaler's pod labels, e.g. matchLabels.\"app.kubernetes.io/name\"=externalgrpc-cluster-autoscaler (the official chart's)" -}}
{{- end -}}
{{- $p = concat $p (include "hcloudscale.checksMore" . | fromJsonArray) -}}
{{- $p = concat $p (include "hcloudscale.caBundleProblems" . | fromJsonArray) -}}
{{- with $p -}}
{{- fail (printf "\n- %s" (join "\n- " .)) -}}
{{- end -}}
{{- end -}}

{{/* More checks, as a JSON list of problems: the rollout, the budget,
the certificates, the ports, the pools of nodes and rbac.extraRules. */}}
{{- define "hcloudscale.checksMore" -}}
{{- $v := .Values -}}
{{- $p := list -}}
{{- if and $v.leaderElection.enabled (eq (trimSuffix "%" (toString $v.rollingUpdate.maxSurge)) "0") (eq (trimSuffix "%" (toString $v.rollingUpdate.maxUnavailable)) "0") -}}
{{- $p = append $p "rollingUpdate.maxSurge and rollingUpdate.maxUnavailable are both 0: the Deployment would never roll out (Kubernetes refuses it); keep maxSurge: 1" -}}
{{- end -}}
{{- if $v.tls.certManager.enabled -}}
{{- $dur := include "hcloudscale.durationMillis" $v.tls.certManager.duration -}}
{{- $renew := include "hcloudscale.durationMillis" $v.tls.certManager.renewBefore -}}
{{- if and $dur (lt (float64 $dur) 3600000.0) -}}
{{- $p = append $p (printf "tls.certManager.duration: %s is under an hour, cert-manager's minimum; the autoscaler reads its certificate only at start, so keep it long (8760h)" $v.tls.certManager.duration) -}}
{{- end -}}
{{- if and $renew (lt (float64 $renew) 300000.0) -}}
{{- $p = append $p (printf "tls.certManager.renewBefore: %s is under 5m, cert-manager's minimum" $v.tls.certManager.renewBefore) -}}
{{- end -}}
{{- if and $dur $renew (ge (float64 $renew) (float64 $dur)) -}}
{{- $p = append $p (printf "tls.certManager.renewBefore (%s) must stay below tls.certManager.duration (%s): cert-manager refuses both Certificates" $v.tls.certManager.renewBefore $v.tls.certManager.duration) -}}
{{- end -}}
{{- end -}}
{{- $ports := dict -}}
{{- range $name := list "grpc" "health" "metrics" -}}
{{- $port := toString (index $v.ports $name) -}}
{{- if hasKey $ports $port -}}
{{- $p = append $p (printf "ports.%s and ports.%s are both %s: each listener needs a port of its own" (get $ports $port) $name $port) -}}
{{- else -}}
{{- $_ := set $ports $port $name -}}
{{- end -}}
{{- end -}}
{{- range $i, $spec := $v.nodes -}}
{{- $f := splitList ":" (toString $spec) -}}
{{- if and (ge (len $f) 2) (regexMatch "^[0-9]+$" (index $f 0)) (regexMatch "^[0-9]+$" (index $f 1)) (gt (atoi (index $f 0)) (atoi (index $f 1))) -}}
{{- $p = append $p (printf "nodes[%d]: %q has a min size (%s) above its max size (%s)" $i $spec (index $f 0) (index $f 1)) -}}
{{- end -}}
{{- end -}}
{{- if and $v.rbac.extraRules (not (and $v.rbac.create $v.leaderElection.enabled)) -}}
{{- $p = append $p "rbac.extraRules are added to the Lease's Role, which the chart makes only with rbac.create and leaderElection.enabled: they would be dropped" -}}
{{- end -}}
{{- toJson $p -}}
{{- end -}}

{{/* Problems of tls.caBundle found in the cluster, as a JSON list: on an
upgrade (the autoscaler's client Secret exists with a ca.crt), the
ConfigMap must exist in the release's namespace, have the key, and hold
every CA certificate of that ca.crt: else serve's new pods, ready with
the bundle, would refuse the client certificate the autoscaler holds.
Nothing without access to the cluster (helm template) or on an install. */}}
{{- define "hcloudscale.caBundleProblems" -}}
{{- $p := list -}}
{{- $v := .Values -}}
{{- $secret := include "hcloudscale.clientTLSSecret" . -}}
{{- if and $v.tls.caBundle.configMap $secret -}}
{{- $ns := include "hcloudscale.autoscalerNamespace" . -}}
{{- $ca := dig "data" "ca.crt" "" (lookup "v1" "Secret" $ns $secret) | b64dec -}}
{{- if $ca -}}
{{- $name := $v.tls.caBundle.configMap -}}
{{- $cm := lookup "v1" "ConfigMap" .Release.Namespace $name -}}
{{- $bundle := regexReplaceAll "\\s+" (dig "data" $v.tls.caBundle.key "" $cm) "" -}}
{{- if not $cm -}}
{{- $p = append $p (printf "tls.caBundle.configMap: no ConfigMap %q in namespace %s (make the bundle before the upgrade)" $name .Release.Namespace) -}}
{{- else if not $bundle -}}
{{- $p = append $p (printf "tls.caBundle.configMap: ConfigMap %q has no key %q (tls.caBundle.key)" $name $v.tls.caBundle.key) -}}
{{- else -}}
{{- $lacks := false -}}
{{- range regexFindAll "-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----" $ca -1 -}}
{{- if not (contains (regexReplaceAll "\\s+" . "") $bundle) -}}
{{- $lacks = true -}}
{{- end -}}
{{- end -}}
{{- if $lacks -}}
{{- $p = append $p (printf "tls.caBundle.configMap: ConfigMap %q (%s) lacks the CA of the autoscaler's client certificate (ca.crt of Secret %s/%s): serve would refuse the certificate the autoscaler holds" $name $v.tls.caBundle.key $ns $secret) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $p -}}
{{- end -}}
