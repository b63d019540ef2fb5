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
{{- if and $v.networkPolicy.enabled (not $v.networkPolicy.clientPodSelector) -}}
{{- $p = append $p "networkPolicy.clientPodSelector: empty would allow every pod: set the autoscaler's pod labels (matchLabels)" -}}
{{- end -}}
{{- with $p -}}
{{- fail (printf "\n- %s" (join "\n- " .)) -}}
{{- end -}}
{{- end -}}
