package nodedrain

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Cluster Autoscaler's annotations a drain reads besides
// SafeToEvictAnnotation (kubernetes-sigs/cluster-autoscaler, at 33c3f97:
// pkg/utils/drain/drain.go and pkg/utils/pod/pod.go).
const (
	// SafeToEvictLocalVolumesAnnotation lists, comma-separated, the
	// volumes of a pod whose loss is accepted: they do not make it a pod
	// with local storage.
	SafeToEvictLocalVolumesAnnotation = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
	// DaemonSetPodAnnotation "true" makes a pod count as a DaemonSet's:
	// it is not evicted, and goes with the node.
	DaemonSetPodAnnotation = "cluster-autoscaler.kubernetes.io/daemonset-pod"
	// safeToEvictOnCompletion is SafeToEvictAnnotation's value for a pod
	// that is left to finish: never evicted, waited for.
	safeToEvictOnCompletion = "on-completion"
)

// KubeSystemHold is how long after its creation a pod of kube-system that
// no PodDisruptionBudget covers holds a drain: the autoscaler's
// --blocking-system-pod-distruption-timeout default.
const KubeSystemHold = time.Hour

// Rule names why a pod holds a drain (Blocker.Rule).
type Rule string

// The rules, in the order a pod is checked against them; the first that
// applies is reported.
const (
	// RuleMarked: the pod is annotated not to be disrupted.
	RuleMarked Rule = "marked"
	// RuleUnreplicated: no controller owns the pod, so nothing would
	// recreate it (Policy.EvictUnreplicated).
	RuleUnreplicated Rule = "unreplicated"
	// RuleKubeSystem: a pod of kube-system that no PodDisruptionBudget
	// covers, younger than KubeSystemHold (Policy.EvictKubeSystem).
	RuleKubeSystem Rule = "kube_system"
	// RuleLocalStorage: the pod has a hostPath or a disk-backed emptyDir
	// volume, whose data would be lost (Policy.EvictLocalStorage).
	RuleLocalStorage Rule = "local_storage"
	// RuleBudget: a PodDisruptionBudget covering the pod allows no
	// disruption now (Blockers only: Drain retries such evictions).
	RuleBudget Rule = "pod_disruption_budget"
	// RuleLeft: a pod still there when Drain's timeout passed (its
	// eviction refused, or still terminating).
	RuleLeft Rule = "left"
)

// Policy says which of the pods the Cluster Autoscaler would not remove a
// node for a drain evicts all the same. The zero value is the
// autoscaler's defaults (--skip-nodes-with-local-storage and
// --skip-nodes-with-system-pods true): a pod without a controller, with
// local storage, or of kube-system without a PodDisruptionBudget (for
// KubeSystemHold after its creation) holds the drain. A pod annotated
// SafeToEvictAnnotation "true" is never held by these rules, as in the
// autoscaler; a PodDisruptionBudget still is.
type Policy struct {
	// EvictUnreplicated evicts pods no controller owns: they are gone
	// for good.
	EvictUnreplicated bool
	// EvictLocalStorage evicts pods with a hostPath or a disk-backed
	// emptyDir volume: the data in it is lost.
	EvictLocalStorage bool
	// EvictKubeSystem evicts pods of kube-system that no
	// PodDisruptionBudget covers, however young.
	EvictKubeSystem bool
}

// refusal returns the rule that keeps a drain from evicting p under pol,
// and why in words; "" when none does. covered reports whether a
// PodDisruptionBudget selects p (asked only for a pod of kube-system).
func (pol Policy) refusal(p *corev1.Pod, covered func() bool, now time.Time) (Rule, string) {
	if why := doNotDisrupt(p); why != "" {
		return RuleMarked, "marked " + why
	}
	switch p.Annotations[SafeToEvictAnnotation] {
	case "true", safeToEvictOnCompletion:
		return "", ""
	}
	if !pol.EvictUnreplicated && metav1.GetControllerOf(p) == nil {
		return RuleUnreplicated, "not replicated: no controller owns it, nothing would recreate it"
	}
	if !pol.EvictKubeSystem && p.Namespace == metav1.NamespaceSystem && !pol.heldLongEnough(p, now) && !covered() {
		return RuleKubeSystem, "in kube-system without a PodDisruptionBudget, created less than " + KubeSystemHold.String() + " ago"
	}
	if !pol.EvictLocalStorage {
		if v := localVolume(p); v != "" {
			return RuleLocalStorage, "has local storage (volume " + v + "), whose data would be lost"
		}
	}
	return "", ""
}

// heldLongEnough reports whether a pod of kube-system is past
// KubeSystemHold; a pod without a creation time never is, as in the
// autoscaler.
func (Policy) heldLongEnough(p *corev1.Pod, now time.Time) bool {
	return !p.CreationTimestamp.IsZero() && now.After(p.CreationTimestamp.Add(KubeSystemHold))
}

// localVolume returns the name of p's first volume on the node's disk (a
// hostPath, or an emptyDir not in memory) that
// SafeToEvictLocalVolumesAnnotation does not list; "" for none.
func localVolume(p *corev1.Pod) string {
	accepted := map[string]bool{}
	if v := p.Annotations[SafeToEvictLocalVolumesAnnotation]; v != "" {
		for name := range strings.SplitSeq(v, ",") {
			accepted[name] = true
		}
	}
	for _, v := range p.Spec.Volumes {
		local := v.HostPath != nil || (v.EmptyDir != nil && v.EmptyDir.Medium != corev1.StorageMediumMemory)
		if local && !accepted[v.Name] {
			return v.Name
		}
	}
	return ""
}

// waitsForCompletion reports whether p is left to finish by itself.
func waitsForCompletion(p *corev1.Pod) bool {
	return p.Annotations[SafeToEvictAnnotation] == safeToEvictOnCompletion
}
