package nodecache_test

import (
	"context"
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/hcloudscale/hcloudscale/nodecache"
)

// BenchmarkHeap measures the live heap of serve's Node caches at 1,000,
// 5,000 and 10,000 Nodes of 13.5 KB of JSON each (50 images, four
// managed-field entries): the shared, stripped cache of package nodecache
// against the two full informer caches the node labeller and the node
// lifecycle kept before. Reported as MiB of live heap (after a full
// collection) over the fake API's own copies.
//
//	go test -run '^$' -bench BenchmarkHeap -benchtime 1x ./nodecache/
func BenchmarkHeap(b *testing.B) {
	for _, n := range []int{1000, 5000, 10000} {
		for _, mode := range []string{"shared-stripped", "two-full"} {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, mode), func(b *testing.B) {
				for b.Loop() {
					b.ReportMetric(heapOfCaches(b, n, mode == "shared-stripped"), "MiB-heap")
				}
			})
		}
	}
}

func heapOfCaches(b *testing.B, n int, shared bool) float64 {
	b.Helper()
	objs := make([]runtime.Object, n)
	for i := range objs {
		objs[i] = bigNode(i)
	}
	// The simple tracker: the field-managing one of NewClientset takes
	// minutes to load 10,000 Nodes.
	client := fake.NewSimpleClientset(objs...) //nolint:staticcheck // deprecated for apply, which this does not use
	objs = nil
	before := liveHeap()
	ctx, cancel := context.WithCancel(context.Background())
	var synced []cache.InformerSynced
	var stops []func()
	if shared {
		c := nodecache.New(client, 0)
		c.Start(ctx)
		stops = append(stops, c.Shutdown)
		synced = append(synced, c.Informer().HasSynced)
	} else {
		for range 2 {
			f := informers.NewSharedInformerFactory(client, 0)
			inf := f.Core().V1().Nodes().Informer()
			f.Start(ctx.Done())
			stops = append(stops, f.Shutdown)
			synced = append(synced, inf.HasSynced)
		}
	}
	defer func() {
		cancel()
		for _, stop := range stops {
			stop()
		}
	}()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		b.Fatal("caches not synced")
	}
	time.Sleep(100 * time.Millisecond) // the list's buffers are garbage
	return float64(liveHeap()-before) / (1 << 20)
}

func liveHeap() int64 {
	goruntime.GC()
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// bigNode is a worker Node as a kubelet reports it, 13.5 KB of JSON.
func bigNode(i int) *corev1.Node {
	name := fmt.Sprintf("prod-workers-%06d", i)
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"node.kubernetes.io/instance-type": "cpx31", "topology.kubernetes.io/region": "fsn1",
				"topology.kubernetes.io/zone": "fsn1-dc14", "hcloud/node-group": "workers",
				"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
			},
			Annotations: map[string]string{
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
				"hcloudscale.io/pool":                                    "workers",
			},
		},
		Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("hcloud://%d", 10000000+i), PodCIDR: "10.244.0.0/24", PodCIDRs: []string{"10.244.0.0/24"}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3800m"), corev1.ResourceMemory: resource.MustParse("7Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.12"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.12"}, {Type: corev1.NodeHostName, Address: name}},
			NodeInfo: corev1.NodeSystemInfo{MachineID: fmt.Sprintf("%032x", i), SystemUUID: fmt.Sprintf("%036x", i), BootID: fmt.Sprintf("%036x", i),
				KernelVersion: "6.8.0-45-generic", OSImage: "Ubuntu 24.04.1 LTS", ContainerRuntimeVersion: "containerd://1.7.22",
				KubeletVersion: "v1.31.2", OperatingSystem: "linux", Architecture: "amd64"},
		},
	}
	for _, c := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeReady} {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: c, Status: corev1.ConditionFalse,
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletHasSufficient" + string(c), Message: "kubelet has sufficient resources available"})
	}
	for j := range 50 {
		img := fmt.Sprintf("registry.example.com/platform/service-%02d", j)
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{
			Names:     []string{img + "@sha256:" + fmt.Sprintf("%064x", j), img + fmt.Sprintf(":v1.%d.0", j)},
			SizeBytes: int64(20000000 + j)})
	}
	for _, m := range []string{"kubelet", "kube-controller-manager", "hcloudscale", "kubectl"} {
		fields, _ := json.Marshal(map[string]any{"f:metadata": map[string]any{"f:labels": map[string]any{"f:kubernetes.io/hostname": map[string]any{}, "f:topology.kubernetes.io/zone": map[string]any{}}},
			"f:status": map[string]any{"f:conditions": map[string]any{"k:{\"type\":\"Ready\"}": map[string]any{"f:lastHeartbeatTime": map[string]any{}, "f:message": map[string]any{}, "f:reason": map[string]any{}}}}})
		n.ManagedFields = append(n.ManagedFields, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "v1", Time: &metav1.Time{Time: time.Now()}, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: fields}})
	}
	return n
}

// TestBigNodeSize keeps the benchmark's Node at the size it claims.
func TestBigNodeSize(t *testing.T) {
	b, err := json.Marshal(bigNode(1))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 10000 || len(b) > 14000 {
		t.Errorf("the benchmark's Node is %d bytes of JSON; want about 13.5 KB", len(b))
	}
	t.Logf("%d bytes", len(b))
}
