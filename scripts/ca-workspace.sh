#!/usr/bin/env bash
# Writes a go.work that builds this repository's nested modules (adapter/, e2e/)
# against checkouts of the Cluster Autoscaler sources, which the Go module proxy
# does not serve. Nothing it writes belongs in the repository.
#
#   scripts/ca-workspace.sh CORE_DIR AUTOSCALER_DIR [OUT_DIR]
#
# CORE_DIR        a checkout of kubernetes-sigs/cluster-autoscaler (the core)
# AUTOSCALER_DIR  a checkout of kubernetes/autoscaler (its cluster-autoscaler/apis
#                 module, and for the e2e comparison the built-in providers)
# OUT_DIR         where go.work goes; a new temporary directory by default
#
# The core pins Kubernetes release candidates that the module proxy refuses; every
# k8s.io staging module is replaced by the served v0.37.2 and k8s.io/kubernetes by
# v1.37.2. Use the result with GOWORK=OUT_DIR/go.work.
set -euo pipefail

usage() { echo "usage: $0 CORE_DIR AUTOSCALER_DIR [OUT_DIR]" >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 3 ] || usage
core=$(cd "$1" && pwd) || usage
autoscaler=$(cd "$2" && pwd) || usage
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${3:-$(mktemp -d)}
mkdir -p "$out"
out=$(cd "$out" && pwd)

[ -f "$core/go.mod" ] && grep -q '^module sigs.k8s.io/cluster-autoscaler$' "$core/go.mod" ||
  { echo "$core is not a checkout of kubernetes-sigs/cluster-autoscaler" >&2; exit 1; }
apis=$autoscaler/cluster-autoscaler/apis
[ -f "$apis/go.mod" ] ||
  { echo "$autoscaler has no cluster-autoscaler/apis module (not kubernetes/autoscaler?)" >&2; exit 1; }

k8s_version=${K8S_VERSION:-v0.37.2}
kubernetes_version=${KUBERNETES_VERSION:-v1.37.2}

{
  echo "go 1.26.0"
  echo
  echo "use ("
  echo "	$repo"
  for m in adapter e2e; do
    [ -f "$repo/$m/go.mod" ] && echo "	$repo/$m"
  done
  echo ")"
  echo
  # Whatever version the core and our modules require, build against the checkouts.
  echo "replace sigs.k8s.io/cluster-autoscaler => $core"
  echo "replace k8s.io/autoscaler/cluster-autoscaler/apis => $apis"
  echo "replace k8s.io/kubernetes => k8s.io/kubernetes $kubernetes_version"
  # Every staging module the core replaces, at the served release.
  sed -n 's/^replace \(k8s\.io\/[a-z0-9-]*\) => k8s\.io\/[a-z0-9-]* v.*/\1/p' "$core/go.mod" |
    sort -u | while read -r mod; do
      echo "replace $mod => $mod $k8s_version"
    done
} >"$out/go.work"

echo "$out/go.work"
