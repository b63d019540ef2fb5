package lifecycle

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/hcloudscale/hcloudscale/servercache"
)

// The annotations the lifecycle keeps its state in. Together with the
// replacement server's config.LabelReplaces they are the whole state of a
// replacement: a restart or a new leader reads them back.
const (
	// ReplacementAnnotation on a node being replaced holds a Mark (JSON):
	// its replacement's server name and the phase.
	ReplacementAnnotation = "hcloudscale.io/replacement"
	// StoppedAnnotation on a node holds a Stop (JSON): its last
	// replacement stopped, when and why. The node's pool starts no new
	// replacement for config.Replace.RetryAfter after it; removing the
	// annotation lets the pool go on at once.
	StoppedAnnotation = "hcloudscale.io/replacement-stopped"
	// ScaleDownDisabledAnnotation is the Cluster Autoscaler's: "true"
	// keeps it from removing the node. The lifecycle sets it on a
	// replacement's node until the node it replaces is gone.
	ScaleDownDisabledAnnotation = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
	// ProtectsAnnotation records that the lifecycle set
	// ScaleDownDisabledAnnotation (value: the ID of the server replaced),
	// so that it removes only what it set.
	ProtectsAnnotation = "hcloudscale.io/scale-down-disabled-for"
)

// Phase is where a replacement is.
type Phase string

// The phases of one replacement (see the package documentation).
const (
	PhaseSurging  Phase = "surging"  // the replacement is being created or is joining
	PhaseDraining Phase = "draining" // the old node is cordoned and drained
	PhaseDeleting Phase = "deleting" // the old server is being deleted
)

// Mark is the value of ReplacementAnnotation.
type Mark struct {
	// Replacement is the server name of the replacement; empty for a
	// node of a removed pool, which is drained out without one.
	Replacement string    `json:"replacement,omitempty"`
	Phase       Phase     `json:"phase"`
	Since       time.Time `json:"since"`
	// Repair is set on a node repaired: deleted without a drain, as it
	// was not Ready when its replacement was.
	Repair bool `json:"repair,omitempty"`
	// KeepCordon is set when the node was cordoned already (by someone
	// else) when the lifecycle took it out: a stop leaves it cordoned.
	KeepCordon bool `json:"keepCordon,omitempty"`
}

// Stop is the value of StoppedAnnotation.
type Stop struct {
	At          time.Time `json:"at"`
	Replacement string    `json:"replacement,omitempty"`
	Reason      string    `json:"reason"`
}

func markOf(n *corev1.Node) (Mark, bool) {
	var m Mark
	v, ok := n.Annotations[ReplacementAnnotation]
	if !ok || json.Unmarshal([]byte(v), &m) != nil || m.Phase == "" {
		return Mark{}, false
	}
	return m, true
}

func stopOf(n *corev1.Node) (Stop, bool) {
	var s Stop
	v, ok := n.Annotations[StoppedAnnotation]
	if !ok || json.Unmarshal([]byte(v), &s) != nil {
		return Stop{}, false
	}
	return s, true
}

func encode(v any) string {
	b, _ := json.Marshal(v) // Mark and Stop always marshal
	return string(b)
}

// replacesOf returns the server ID a server's config.LabelReplaces names.
func replacesOf(s *servercache.Server, label string) int64 {
	id, err := strconv.ParseInt(s.Labels[label], 10, 64)
	if err != nil || id <= 0 {
		return 0
	}
	return id
}

// serverIDOfNode returns the server ID of a node's provider ID
// "hcloud://<id>"; 0 for another or no provider ID.
func serverIDOfNode(n *corev1.Node) int64 {
	rest, ok := strings.CutPrefix(n.Spec.ProviderID, "hcloud://")
	if !ok {
		return 0
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || id <= 0 {
		return 0
	}
	return id
}

// notReadyTaints are the taints that keep a node from taking pods while
// it starts or fails; a replacement must have none of them.
var notReadyTaints = map[string]bool{
	"node.kubernetes.io/not-ready":                   true,
	"node.kubernetes.io/unreachable":                 true,
	"node.kubernetes.io/network-unavailable":         true,
	"node.cloudprovider.kubernetes.io/uninitialized": true,
}

// notReadySince returns since when n's Ready condition has not been True
// (from the condition's last transition, else the node's creation);
// false for a Ready node or none.
func notReadySince(n *corev1.Node) (time.Time, bool) {
	if n == nil {
		return time.Time{}, false
	}
	for _, c := range n.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return time.Time{}, false
		}
		if !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time, true
		}
		break
	}
	return n.CreationTimestamp.Time, true
}

// toBeDeletedTaint is the Cluster Autoscaler's taint on a node it is
// removing.
const toBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// ready reports whether a node is Ready and schedulable and not being
// deleted (by the API or the autoscaler): what a replacement must be
// before its old node is drained, and before each of its evictions.
func ready(n *corev1.Node) bool {
	if n == nil || n.Spec.Unschedulable || n.DeletionTimestamp != nil {
		return false
	}
	for _, t := range n.Spec.Taints {
		if notReadyTaints[t.Key] || t.Key == toBeDeletedTaint {
			return false
		}
	}
	return kubeletReady(n)
}

// kubeletReady reports whether n's Ready condition is True, whether or
// not it is cordoned.
func kubeletReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
