package lifecycle

import (
	"github.com/hcloudscale/hcloudscale/nodedrain"
)

// policy returns what the drains of pv evict beyond the Cluster
// Autoscaler's rules: the pool's evict settings over the cluster's; a
// removed pool's are the cluster's.
func (w *world) policy(pv *poolView) nodedrain.Policy {
	e := w.cluster.EvictPods
	if pv != nil && pv.replace != nil && !pv.removed {
		e = pv.replace.EvictPods.Over(e)
	}
	return nodedrain.Policy{EvictUnreplicated: e.Unreplicated, EvictLocalStorage: e.LocalStorage, EvictKubeSystem: e.KubeSystem}
}

// blockerSettings names the setting that lifts each rule of package
// nodedrain a person may lift.
var blockerSettings = map[nodedrain.Rule]string{
	nodedrain.RuleUnreplicated: "evictUnreplicatedPods",
	nodedrain.RuleLocalStorage: "evictLocalStoragePods",
	nodedrain.RuleKubeSystem:   "evictKubeSystemPods",
}

// blockedBy says in words why a pod holds a node, and how to accept its
// loss when a setting can.
func blockedBy(b nodedrain.Blocker) string {
	s := "pod " + b.String()
	if key, ok := blockerSettings[b.Rule]; ok {
		s += " (replace." + key + " accepts its loss)"
	}
	return s
}
