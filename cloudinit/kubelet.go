package cloudinit

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// kubeletLabels are the labels under kubernetes.io and k8s.io that a
// kubelet sets on its own node and the NodeRestriction admission plugin
// lets it set.
var kubeletLabels = map[string]bool{
	corev1.LabelHostname:                true,
	corev1.LabelTopologyZone:            true,
	corev1.LabelTopologyRegion:          true,
	corev1.LabelFailureDomainBetaZone:   true,
	corev1.LabelFailureDomainBetaRegion: true,
	corev1.LabelInstanceType:            true,
	corev1.LabelInstanceTypeStable:      true,
	corev1.LabelOSStable:                true,
	corev1.LabelArchStable:              true,
	"beta.kubernetes.io/os":             true,
	"beta.kubernetes.io/arch":           true,
}

// KubeletMaySet reports whether a kubelet may set a label on its own node:
// whether --node-labels (and k3s's --node-label, kubeadm's node-labels,
// Talos's machine.nodeLabels, which all end up there) accepts it.
//
// The NodeRestriction admission plugin, and the kubelet itself at start,
// refuse labels in the kubernetes.io and k8s.io namespaces (the domain or
// any subdomain) except those under kubelet.kubernetes.io and
// node.kubernetes.io (and their subdomains) and a fixed set of well-known
// ones (hostname, zone, region, instance type, os, arch). So
// node-role.kubernetes.io/worker and anything under
// node-restriction.kubernetes.io are refused; such labels need the node
// labeller.
func KubeletMaySet(key string) bool {
	if kubeletLabels[key] {
		return true
	}
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return true // no prefix: not a restricted namespace
	}
	ns = strings.ToLower(ns)
	inNS := func(domain string) bool { return ns == domain || strings.HasSuffix(ns, "."+domain) }
	if inNS(corev1.LabelNamespaceSuffixKubelet) || inNS(corev1.LabelNamespaceSuffixNode) {
		return true
	}
	return !inNS("kubernetes.io") && !inNS("k8s.io")
}
