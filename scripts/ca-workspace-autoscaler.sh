#!/usr/bin/env bash
# Writes a go.work that builds e2e/externalgrpc, the end-to-end suite of the
# autoscaler's externalgrpc client and built-in hetzner provider, against a
# checkout of kubernetes/autoscaler and a checkout of the core commit that
# checkout pins. Nothing it writes belongs in the repository.
#
#   scripts/ca-workspace-autoscaler.sh PINNED_CORE_DIR AUTOSCALER_DIR [OUT_DIR]
#
# PINNED_CORE_DIR  a checkout of kubernetes-sigs/cluster-autoscaler (the core) at
#                  the commit AUTOSCALER_DIR/cluster-autoscaler/go.mod requires
# AUTOSCALER_DIR   a checkout of kubernetes/autoscaler
# OUT_DIR          where go.work goes; a new temporary directory by default
#
# kubernetes/autoscaler's cluster-autoscaler module is used as a workspace
# module, so that its own replace directives (k8s.io staging modules at its
# Kubernetes release, its apis module) apply. Its providers do not compile
# against a newer core, and its generated externalgrpc protos clash with
# hcloudscale's in one binary, so this workspace is separate from the one
# scripts/ca-workspace.sh writes, and the suite runs `hcloudscale serve` as a
# subprocess. Use the result with GOWORK=OUT_DIR/go.work.
set -euo pipefail

usage() { echo "usage: $0 PINNED_CORE_DIR AUTOSCALER_DIR [OUT_DIR]" >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 3 ] || usage
core=$(cd "$1" && pwd) || usage
autoscaler=$(cd "$2" && pwd) || usage
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${3:-$(mktemp -d)}
mkdir -p "$out"
out=$(cd "$out" && pwd)

[ -f "$core/go.mod" ] && grep -q '^module sigs.k8s.io/cluster-autoscaler$' "$core/go.mod" ||
  { echo "$core is not a checkout of kubernetes-sigs/cluster-autoscaler" >&2; exit 1; }
ca=$autoscaler/cluster-autoscaler
[ -f "$ca/go.mod" ] && grep -q '^module k8s.io/autoscaler/cluster-autoscaler$' "$ca/go.mod" ||
  { echo "$autoscaler has no cluster-autoscaler module (not kubernetes/autoscaler?)" >&2; exit 1; }

# The core commit the autoscaler requires, from its pseudo-version.
want=$(sed -n 's/^[[:space:]]*sigs\.k8s\.io\/cluster-autoscaler v[^ ]*-\([0-9a-f]\{12\}\)$/\1/p' "$ca/go.mod" | head -1)
if [ -n "$want" ]; then
  have=$(git -C "$core" rev-parse HEAD 2>/dev/null || true)
  case $have in
    "$want"*) ;;
    *) echo "warning: $core is at ${have:-an unknown commit}; $ca/go.mod pins the core at $want" >&2 ;;
  esac
fi

{
  echo "go 1.26.0"
  echo
  echo "use ("
  echo "	$repo"
  echo "	$repo/e2e"
  [ -f "$repo/e2e/externalgrpc/go.mod" ] && echo "	$repo/e2e/externalgrpc"
  echo "	$ca"
  echo ")"
  echo
  echo "replace sigs.k8s.io/cluster-autoscaler => $core"
} >"$out/go.work"

echo "$out/go.work"
