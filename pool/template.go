package pool

import (
	"context"
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// Label keys of a template node, as the kubelet, the Hetzner cloud
// controller manager (HCCM) and the Hetzner CSI driver set them on real
// nodes.
const (
	labelHostname           = "kubernetes.io/hostname"
	labelInstanceType       = "node.kubernetes.io/instance-type"
	labelInstanceTypeBeta   = "beta.kubernetes.io/instance-type"
	labelRegion             = "topology.kubernetes.io/region"
	labelZone               = "topology.kubernetes.io/zone"
	labelRegionBeta         = "failure-domain.beta.kubernetes.io/region"
	labelZoneBeta           = "failure-domain.beta.kubernetes.io/zone"
	labelArch               = "kubernetes.io/arch"
	labelOS                 = "kubernetes.io/os"
	labelCSILocation        = "csi.hetzner.cloud/location"
	labelProvidedBy         = "instance.hetzner.cloud/provided-by"
	providedByCloud         = "cloud"
	templateNameSuffix      = "-template"
	gib                     = 1 << 30
	mib                     = 1 << 20
	evictionMemoryThreshold = 100 * mib
	// guestMemoryShare and guestMemoryFixed estimate how much of a
	// server's advertised memory the guest kernel does not report as
	// MemTotal (firmware, kernel image, crash-kernel reservation): 5% plus
	// 100 MiB. kubelet reports MemTotal as capacity, so this is memory a
	// real node never offers.
	guestMemoryShare = 0.05
	guestMemoryFixed = 100 * mib
	// evictionStorageShare is kubelet's default nodefs.available<10%.
	evictionStorageShare = 0.10
)

// Zone returns the topology.kubernetes.io/zone value HCCM sets for a
// location: the name of the location's datacenter that servers were
// placed in before datacenters were retired, and the location itself for
// locations that came later.
func Zone(location string) string {
	switch location {
	case "nbg1":
		return "nbg1-dc3"
	case "hel1":
		return "hel1-dc2"
	case "fsn1":
		return "fsn1-dc14"
	case "ash":
		return "ash-dc1"
	case "hil":
		return "hil-dc1"
	case "sin":
		return "sin-dc1"
	default:
		return location
	}
}

// TemplateNode returns a node as a server of the pool will register, for
// the autoscaler's scale-from-zero simulation: labels, taints, capacity
// from the server type in the catalogue, and a conservative allocatable
// (see the package documentation). ProviderID is empty; the name is
// "<pool>-template".
func (p *Pool) TemplateNode(ctx context.Context) (*corev1.Node, error) {
	cfg := p.current().cfg
	st, err := p.deps.Types.Lookup(ctx, cfg.ServerType)
	if err != nil {
		return nil, fmt.Errorf("pool %q: template node: %w", p.cfg.Name, err)
	}
	if st == nil {
		return nil, fmt.Errorf("pool %q: template node: server type %s does not exist", p.cfg.Name, cfg.ServerType)
	}
	return templateNode(&cfg, st)
}

func templateNode(cfg *config.Pool, st *servercache.ServerType) (*corev1.Node, error) {
	if st.Arch == "" {
		return nil, fmt.Errorf("pool %q: template node: server type %s has an unknown architecture", cfg.Name, st.Name)
	}
	// A later offering's group ID has an '@', which no node name has.
	name := strings.ReplaceAll(cfg.Name, config.GroupSeparator, "-") + templateNameSuffix
	labels := map[string]string{
		labelHostname:         name,
		labelInstanceType:     st.Name,
		labelInstanceTypeBeta: st.Name,
		labelRegion:           cfg.Location,
		labelZone:             Zone(cfg.Location),
		labelRegionBeta:       cfg.Location,
		labelZoneBeta:         Zone(cfg.Location),
		labelArch:             string(st.Arch),
		labelOS:               "linux",
		labelCSILocation:      cfg.Location,
		labelProvidedBy:       providedByCloud,
		config.LabelNodeGroup: cfg.FamilyName(),
	}
	for k, v := range cfg.Labels {
		labels[k] = v
	}
	capacity, allocatable := resources(cfg, st)
	node := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: append([]corev1.Taint(nil), cfg.Taints...)},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "template node"},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse},
			},
			NodeInfo: corev1.NodeSystemInfo{
				Architecture:    string(st.Arch),
				OperatingSystem: "linux",
			},
		},
	}
	return node, nil
}

// resources computes capacity and allocatable. Capacity is what the
// server type advertises; allocatable subtracts what a real node keeps
// back (see the package documentation).
func resources(cfg *config.Pool, st *servercache.ServerType) (capacity, allocatable corev1.ResourceList) {
	maxPods := cfg.MaxPods
	if maxPods <= 0 {
		maxPods = config.DefaultMaxPods
	}
	cpuMilli := int64(st.Cores) * 1000
	memBytes := int64(math.Round(st.MemoryGB * gib))
	diskBytes := int64(st.DiskGB) * gib

	reservedCPU := defaultReservedCPU(st.Cores)
	if !cfg.Reserved.CPU.IsZero() {
		reservedCPU = cfg.Reserved.CPU.MilliValue()
	}
	reservedMem := defaultReservedMemory(memBytes)
	if !cfg.Reserved.Memory.IsZero() {
		reservedMem = cfg.Reserved.Memory.Value()
	}
	reservedMem += evictionMemoryThreshold + guestMemoryShortfall(memBytes)
	reservedDisk := int64(math.Ceil(float64(diskBytes) * evictionStorageShare))
	if !cfg.Reserved.EphemeralStorage.IsZero() {
		reservedDisk += cfg.Reserved.EphemeralStorage.Value()
	}

	capacity = corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(cpuMilli, resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memBytes, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(diskBytes, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
	allocatable = corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(max(cpuMilli-reservedCPU, 0), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(max(memBytes-reservedMem, 0), resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(max(diskBytes-reservedDisk, 0), resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
	return capacity, allocatable
}

// defaultReservedCPU is the kube-reserved CPU in millicores by the common
// managed-Kubernetes formula: 6% of the first core, 1% of the second,
// 0.5% of the third and fourth, 0.25% of every further core. Rounded up.
func defaultReservedCPU(cores int) int64 {
	tiers := []tier{{1, 0.06}, {1, 0.01}, {2, 0.005}, {math.Inf(1), 0.0025}}
	return int64(math.Ceil(tiered(float64(cores), 1000, tiers)))
}

// defaultReservedMemory is the kube-reserved memory in bytes by the same
// formula: 25% of the first 4 GiB, 20% of the next 4, 10% of the next 8,
// 6% of the next 112, 2% above 128 GiB. Rounded up to MiB.
func defaultReservedMemory(bytes int64) int64 {
	tiers := []tier{{4, 0.25}, {4, 0.20}, {8, 0.10}, {112, 0.06}, {math.Inf(1), 0.02}}
	r := tiered(float64(bytes)/gib, gib, tiers)
	return int64(math.Ceil(r/mib)) * mib
}

// guestMemoryShortfall is the advertised memory a guest does not see.
func guestMemoryShortfall(bytes int64) int64 {
	return int64(math.Ceil(float64(bytes)*guestMemoryShare/mib))*mib + guestMemoryFixed
}

// tier is a slice of a resource (in cores or GiB) and the share of it
// that is reserved.
type tier struct {
	size, share float64
}

// tiered applies shares to consecutive tiers of amount (in cores or GiB)
// and returns the sum multiplied by scale.
func tiered(amount, scale float64, tiers []tier) float64 {
	var sum float64
	for _, t := range tiers {
		if amount <= 0 {
			break
		}
		part := math.Min(amount, t.size)
		sum += part * scale * t.share
		amount -= part
	}
	return sum
}
