package e2e

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// ServerLabelNodeGroup is the server label that names a server's pool, the
// one the built-in Hetzner provider and hcloudscale set.
const ServerLabelNodeGroup = "hcloud/node-group"

// Machine is what the kubelet of one server type reports: the hardware
// the guest sees, which is less than the type advertises.
type Machine struct {
	Cores    int
	MemoryGB float64
	DiskGB   int
	Arch     string // amd64 or arm64
}

// Machines are the server types the suite uses, with their advertised
// hardware. The kubelet derives capacity from them on its own (see
// [Kubelet]); it never reads a provider's template.
var Machines = map[string]Machine{
	"cx23":  {Cores: 2, MemoryGB: 4, DiskGB: 40, Arch: "amd64"},
	"cx33":  {Cores: 4, MemoryGB: 8, DiskGB: 80, Arch: "amd64"},
	"cx43":  {Cores: 8, MemoryGB: 16, DiskGB: 160, Arch: "amd64"},
	"cpx11": {Cores: 2, MemoryGB: 2, DiskGB: 40, Arch: "amd64"},
	"cpx21": {Cores: 3, MemoryGB: 4, DiskGB: 80, Arch: "amd64"},
	"cpx31": {Cores: 4, MemoryGB: 8, DiskGB: 160, Arch: "amd64"},
	"cax11": {Cores: 2, MemoryGB: 4, DiskGB: 40, Arch: "arm64"},
	"cax21": {Cores: 4, MemoryGB: 8, DiskGB: 80, Arch: "arm64"},
}

// KubeletPool is how the servers of one pool are set up to join the
// cluster: what their cloud-init passes to the kubelet.
type KubeletPool struct {
	// NodeLabels are the kubelet's --node-labels.
	NodeLabels map[string]string
	// Taints are the kubelet's --register-with-taints.
	Taints []corev1.Taint
}

// Kubelet stands in for the kubelets of every server of the cluster and
// for the parts of the control plane that keep Node objects in step with
// servers (the Hetzner cloud controller manager and the node lifecycle
// controller). Every [Kubelet.Step] it lists the servers of the fake API
// directly, without API requests, and:
//
//   - registers a Node for each running server of a known pool that has
//     none: name = server name, spec.providerID = hcloud://<id>, Ready;
//     labels as a real node has them (kubelet: hostname, arch, os; cloud
//     controller manager: instance type, region, zone, provided-by; CSI
//     driver: location; the pool's --node-labels) and taints from the
//     pool's --register-with-taints;
//   - marks a registered node NotReady while its server is not running
//     (power-cycled, stopped) and Ready again when it runs;
//   - deletes the Node of a server that is gone.
//
// Capacity is what the guest reports: cores; MemTotal, which is the
// advertised memory less 5% and 100 MiB kept by firmware and kernel; the
// disk. Allocatable keeps back kubelet's default hard eviction threshold
// (memory.available<100Mi) and nothing else, as a kubelet without
// --kube-reserved does; 110 pods.
//
// A test can make servers of a pool never register ([Kubelet.Withhold])
// or register late ([Kubelet.SetRegisterDelay]).
type Kubelet struct {
	fake     *hcloudtest.Server
	client   kubernetes.Interface
	selector string

	mu        sync.Mutex // guards the fields below
	pools     map[string]KubeletPool
	delay     map[string]time.Duration // by pool
	withhold  map[string]int           // by pool: how many new servers to withhold
	withheld  map[int64]bool
	firstSeen map[int64]time.Time // when a server was first seen running
	nodes     map[int64]string    // registered nodes by server ID
	ready     map[int64]bool      // the Ready condition last written, by server ID
}

// NewKubelet returns a kubelet for the servers of fake that match
// selector (a label selector; empty selects every server) and belong to
// one of pools, registering nodes through client.
func NewKubelet(fake *hcloudtest.Server, client kubernetes.Interface, selector string, pools map[string]KubeletPool) *Kubelet {
	return &Kubelet{
		fake: fake, client: client, selector: selector, pools: pools,
		delay: map[string]time.Duration{}, withhold: map[string]int{},
		withheld: map[int64]bool{}, firstSeen: map[int64]time.Time{}, nodes: map[int64]string{},
		ready: map[int64]bool{},
	}
}

// Withhold makes the next n servers of pool that start running never
// register a node, as if their cloud-init failed.
func (k *Kubelet) Withhold(pool string, n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.withhold[pool] += n
}

// Withheld returns the IDs of the servers that were withheld.
func (k *Kubelet) Withheld() []int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	var ids []int64
	for id := range k.withheld {
		ids = append(ids, id)
	}
	return ids
}

// SetRegisterDelay makes servers of pool register d after they were first
// seen running.
func (k *Kubelet) SetRegisterDelay(pool string, d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.delay[pool] = d
}

// Step brings the Node objects in step with the servers once.
func (k *Kubelet) Step(ctx context.Context) error {
	servers, err := k.fake.Servers(k.selector)
	if err != nil {
		return err
	}
	now := time.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	present := map[int64]bool{}
	for _, s := range servers {
		present[s.ID] = true
		pool, ok := k.pools[s.Labels[ServerLabelNodeGroup]]
		if !ok {
			continue
		}
		name, registered := k.nodes[s.ID]
		running := s.Status == hcloud.ServerStatusRunning
		switch {
		case registered:
			if k.ready[s.ID] == running {
				continue
			}
			if err := k.setReady(ctx, name, running); err != nil {
				return err
			}
			k.ready[s.ID] = running
		case !running || k.withheld[s.ID]:
		default:
			poolName := s.Labels[ServerLabelNodeGroup]
			first, seen := k.firstSeen[s.ID]
			if !seen {
				first = now
				k.firstSeen[s.ID] = now
				if k.withhold[poolName] > 0 {
					k.withhold[poolName]--
					k.withheld[s.ID] = true
					continue
				}
			}
			if now.Sub(first) < k.delay[poolName] {
				continue
			}
			node, err := realNode(s, pool, now)
			if err != nil {
				return err
			}
			if _, err := k.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("register node %s: %w", node.Name, err)
			}
			k.nodes[s.ID] = node.Name
			k.ready[s.ID] = true
		}
	}
	for id, name := range k.nodes {
		if present[id] {
			continue
		}
		if err := k.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete node %s: %w", name, err)
		}
		delete(k.nodes, id)
		delete(k.firstSeen, id)
		delete(k.ready, id)
	}
	return nil
}

// setReady sets the Ready condition of node, keeping everything else
// (the autoscaler's taints among it) as it is.
func (k *Kubelet) setReady(ctx context.Context, name string, ready bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := k.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		want := corev1.ConditionFalse
		if ready {
			want = corev1.ConditionTrue
		}
		for i, c := range node.Status.Conditions {
			if c.Type != corev1.NodeReady {
				continue
			}
			if c.Status == want {
				return nil
			}
			node.Status.Conditions[i] = readyCondition(ready, time.Now())
			_, err = k.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
			return err
		}
		return nil
	})
}

func readyCondition(ready bool, now time.Time) corev1.NodeCondition {
	c := corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
	}
	if !ready {
		c.Status, c.Reason = corev1.ConditionUnknown, "NodeStatusUnknown"
	}
	return c
}

// realNode is the Node a server of pool registers.
func realNode(s hcloudtest.ServerInfo, pool KubeletPool, now time.Time) (*corev1.Node, error) {
	m, ok := Machines[s.ServerType]
	if !ok {
		return nil, fmt.Errorf("server %s: no machine for server type %s", s.Name, s.ServerType)
	}
	labels := map[string]string{
		// kubelet
		"kubernetes.io/hostname":  s.Name,
		"kubernetes.io/arch":      m.Arch,
		"kubernetes.io/os":        "linux",
		"beta.kubernetes.io/arch": m.Arch,
		"beta.kubernetes.io/os":   "linux",
		// cloud controller manager
		"node.kubernetes.io/instance-type":         s.ServerType,
		"beta.kubernetes.io/instance-type":         s.ServerType,
		"topology.kubernetes.io/region":            s.Location,
		"topology.kubernetes.io/zone":              datacenter(s.Location),
		"failure-domain.beta.kubernetes.io/region": s.Location,
		"failure-domain.beta.kubernetes.io/zone":   datacenter(s.Location),
		"instance.hetzner.cloud/provided-by":       "cloud",
		// CSI driver
		"csi.hetzner.cloud/location": s.Location,
	}
	for k, v := range pool.NodeLabels {
		labels[k] = v
	}
	const mib = 1 << 20
	advertised := m.MemoryGB * (1 << 30)
	memTotal := int64(math.Round(advertised*0.95)) - 100*mib
	memTotal -= memTotal % 1024
	disk := int64(m.DiskGB) << 30
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(m.Cores), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memTotal, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(disk, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(110, resource.DecimalSI),
	}
	allocatable := capacity.DeepCopy()
	allocatable[corev1.ResourceMemory] = *resource.NewQuantity(memTotal-100*mib, resource.BinarySI)
	allocatable[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(disk-disk/10, resource.BinarySI)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Labels: labels, CreationTimestamp: metav1.NewTime(now)},
		Spec: corev1.NodeSpec{
			ProviderID: "hcloud://" + strconv.FormatInt(s.ID, 10),
			Taints:     append([]corev1.Taint(nil), pool.Taints...),
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			Phase:       corev1.NodeRunning,
			Conditions:  []corev1.NodeCondition{readyCondition(true, now)},
			NodeInfo:    corev1.NodeSystemInfo{Architecture: m.Arch, OperatingSystem: "linux", KubeletVersion: "v1.37.2"},
		},
	}, nil
}

// datacenter is the zone label the Hetzner cloud controller manager sets
// for a location.
func datacenter(location string) string {
	switch location {
	case "nbg1":
		return "nbg1-dc3"
	case "hel1":
		return "hel1-dc2"
	case "fsn1":
		return "fsn1-dc14"
	default:
		return location
	}
}
