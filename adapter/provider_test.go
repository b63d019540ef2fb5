package adapter

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider"
	"sigs.k8s.io/cluster-autoscaler/pkg/clusterstate"
	"sigs.k8s.io/cluster-autoscaler/pkg/utils/gpu"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/internal/pricetest"
	"github.com/hcloudscale/hcloudscale/pool"
)

// TestNodeGroupForNode maps every kind of node the autoscaler asks about.
func TestNodeGroupForNode(t *testing.T) {
	e := newEnv(t)
	arm, _ := e.fake.ServerByID(e.armServer)
	withLabels := func(n *apiv1.Node, labels map[string]string) *apiv1.Node {
		n.Labels = labels
		return n
	}
	tests := []struct {
		name string
		node *apiv1.Node
		want string // "" for no node group
	}{
		{"server of a pool", node(arm), "arm"},
		{"server of a pool before the cloud controller set the provider ID",
			&apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: arm.Name}}, "arm"},
		{"fake node of a server", clusterstate.FakeNode(cloudprovider.Instance{Id: providerID(arm.ID)}, cloudprovider.FakeNodeUnregistered), "arm"},
		{"fake node of a create in flight",
			clusterstate.FakeNode(cloudprovider.Instance{Id: pool.ClaimID("workers", "workers-00000000000000ab")}, cloudprovider.FakeNodeUnregistered), "workers"},
		{"template copy",
			withLabels(&apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "template-node-for-batch-123"}},
				map[string]string{labelTemplateNode: "true", config.LabelNodeGroup: "batch"}), "batch"},
		{"control-plane server", node(mustServer(t, e, e.controlPlane)), ""},
		{"server that does not exist", &apiv1.Node{Spec: apiv1.NodeSpec{ProviderID: "hcloud://999999"}}, ""},
		{"pool label on a node of no server",
			withLabels(&apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "stray"}, Spec: apiv1.NodeSpec{ProviderID: "hcloud://999999"}},
				map[string]string{config.LabelNodeGroup: "workers"}), ""},
		{"Robot server", &apiv1.Node{Spec: apiv1.NodeSpec{ProviderID: "hrobot://123456"}}, ""},
		{"Robot server, legacy provider ID", &apiv1.Node{Spec: apiv1.NodeSpec{ProviderID: "hcloud://bm-123456"}}, ""},
		{"Robot server named like a pool server",
			&apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: arm.Name}, Spec: apiv1.NodeSpec{ProviderID: "hrobot://123456"}}, ""},
		{"another provider", &apiv1.Node{Spec: apiv1.NodeSpec{ProviderID: "aws:///eu-west-1a/i-0123"}}, ""},
		{"fake node of another pool's claim in an unknown pool",
			clusterstate.FakeNode(cloudprovider.Instance{Id: pool.ClaimID("gone", "gone-1")}, cloudprovider.FakeNodeUnregistered), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.provider.NodeGroupForNode(tt.node)
			if err != nil {
				t.Fatalf("NodeGroupForNode: %v", err)
			}
			if tt.want == "" {
				// A typed nil would pass got == nil only in the wrong way.
				if got != nil {
					t.Errorf("NodeGroupForNode = %v (%T); want an untyped nil", got, got)
				}
				return
			}
			if got == nil || got.Id() != tt.want {
				t.Errorf("NodeGroupForNode = %v; want %s", got, tt.want)
			}
		})
	}
}

func mustServer(t *testing.T, e *env, id int64) hcloudtest.ServerInfo {
	t.Helper()
	s, ok := e.fake.ServerByID(id)
	if !ok {
		t.Fatalf("no server %d", id)
	}
	return s
}

// TestHasInstance checks the answers for servers that exist, servers that
// do not, and nodes that are not Hetzner Cloud servers, for which the
// autoscaler falls back to the ToBeDeleted taint.
func TestHasInstance(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name       string
		providerID string
		want       bool
		wantErr    error // compared by identity
	}{
		{"server of a pool", providerID(e.armServer), true, nil},
		{"control-plane server", providerID(e.controlPlane), true, nil},
		{"deleted server", "hcloud://999999", false, nil},
		{"Robot server", "hrobot://123456", true, cloudprovider.ErrNotImplemented},
		{"Robot server, legacy provider ID", "hcloud://bm-123456", true, cloudprovider.ErrNotImplemented},
		{"another provider", "aws:///eu-west-1a/i-0123", true, cloudprovider.ErrNotImplemented},
		{"no provider ID yet", "", true, cloudprovider.ErrNotImplemented},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.provider.HasInstance(&apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: apiv1.NodeSpec{ProviderID: tt.providerID}})
			if got != tt.want || err != tt.wantErr {
				t.Errorf("HasInstance(%q) = %t, %v; want %t, %v", tt.providerID, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestPricing checks node prices against the catalogue and pod prices
// against the cluster's rate, which the cheapest pool per core and per
// GiB sets.
func TestPricing(t *testing.T) {
	e := newEnv(t)
	model, aerr := e.provider.Pricing()
	if aerr != nil {
		t.Fatalf("Pricing: %v", aerr)
	}
	types, err := e.provider.Cluster().ServerTypes(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	hourly := map[string]float64{} // pool -> hourly net price
	perCore, perGiB := math.Inf(1), math.Inf(1)
	for _, p := range e.provider.Cluster().Pools() {
		for _, st := range types {
			if st.Name == p.Config().ServerType {
				price := st.Locations[p.Config().Location].PriceHourlyNet
				hourly[p.Name()] = price
				perCore = min(perCore, price/2/float64(st.Cores))
				perGiB = min(perGiB, price/2/st.MemoryGB)
			}
		}
	}
	if len(hourly) != 3 || hourly["workers"] <= 0 {
		t.Fatalf("catalogue prices of the pools = %v; want three positive prices", hourly)
	}
	start := epoch
	end := epoch.Add(2 * time.Hour)
	template, err := e.group("workers").TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	templateCopy := template.Node().DeepCopy()
	templateCopy.Name = "template-node-for-workers-42"

	t.Run("NodePrice", func(t *testing.T) {
		tests := []struct {
			name    string
			node    *apiv1.Node
			want    float64
			wantErr error
		}{
			{"template node", templateCopy, 2 * hourly["workers"], nil},
			{"server of a pool", node(mustServer(t, e, e.armServer)), 2 * hourly["arm"], nil},
			{"node of no pool", node(mustServer(t, e, e.controlPlane)), 0, errNoPool},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := model.NodePrice(tt.node, start, end)
				if !errors.Is(err, tt.wantErr) || math.Abs(got-tt.want) > 1e-9 {
					t.Errorf("NodePrice = %v, %v; want %v, %v", got, err, tt.want, tt.wantErr)
				}
			})
		}
		if _, err := model.NodePrice(templateCopy, end, start); err == nil {
			t.Error("NodePrice with end before start succeeded; want an error")
		}
	})

	t.Run("PodPrice", func(t *testing.T) {
		// The table externalgrpc's pod prices are checked against too.
		rate := hcloudscale.PodRate{PerCore: perCore, PerGiB: perGiB}
		for _, tt := range pricetest.Pods() {
			t.Run(tt.Name, func(t *testing.T) {
				got, err := model.PodPrice(tt.Pod, start, end)
				if want := tt.Price(rate, end.Sub(start)); err != nil || math.Abs(got-want) > 1e-9 {
					t.Errorf("PodPrice = %v, %v; want %v (%v cores, %v GiB)", got, err, want, tt.Cores, tt.GiB)
				}
			})
		}
		if _, err := model.PodPrice(&apiv1.Pod{}, end, start); err == nil {
			t.Error("PodPrice with end before start succeeded; want an error")
		}
	})
}

// TestFixedAnswers checks the calls whose answers do not depend on the
// project's state.
func TestFixedAnswers(t *testing.T) {
	e := newEnv(t)
	if got := e.provider.Name(); got != DefaultName {
		t.Errorf("Name() = %q; want %q", got, DefaultName)
	}
	if got := e.provider.GPULabel(); got != "hcloud/gpu-node" {
		t.Errorf("GPULabel() = %q; want hcloud/gpu-node", got)
	}
	if got := e.provider.GetAvailableGPUTypes(); len(got) != 0 {
		t.Errorf("GetAvailableGPUTypes() = %v; want none", got)
	}
	rl, err := e.provider.GetResourceLimiter()
	if err != nil || rl != e.limiter {
		t.Errorf("GetResourceLimiter() = %v, %v; want the limiter given to New", rl, err)
	}
	var ids []string
	for _, g := range e.provider.NodeGroups() {
		ids = append(ids, g.Id())
	}
	if diff := cmp.Diff([]string{"workers", "batch", "arm"}, ids); diff != "" {
		t.Errorf("NodeGroups() ids in --nodes order (-want +got):\n%s", diff)
	}
	g := e.group("arm")
	if g.MinSize() != 1 || g.MaxSize() != 3 {
		t.Errorf("arm MinSize, MaxSize = %d, %d; want 1, 3", g.MinSize(), g.MaxSize())
	}
	if got, want := g.Debug(), "arm (cax11 in hel1, min 1, max 3, target 1)"; got != want {
		t.Errorf("Debug() = %q; want %q", got, want)
	}
}

// TestGetAvailableMachineTypes checks that every server type of the
// catalogue is listed once, sorted, and that no entry is empty (the
// built-in provider returned half a slice of empty strings).
func TestGetAvailableMachineTypes(t *testing.T) {
	e := newEnv(t)
	got, err := e.provider.GetAvailableMachineTypes()
	if err != nil {
		t.Fatalf("GetAvailableMachineTypes: %v", err)
	}
	types, err := e.provider.Cluster().ServerTypes(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, st := range types {
		want = append(want, st.Name)
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetAvailableMachineTypes (-want +got):\n%s", diff)
	}
	if slices.Contains(got, "") || !slices.Contains(got, "cpx21") || !slices.Contains(got, "cax11") {
		t.Errorf("GetAvailableMachineTypes = %v; want cpx21 and cax11 and no empty name", got)
	}
}

// TestGetNodeGpuConfig checks the generic GPU detection by GPULabel.
func TestGetNodeGpuConfig(t *testing.T) {
	e := newEnv(t)
	plain := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}
	if got := e.provider.GetNodeGpuConfig(plain); got != nil {
		t.Errorf("GetNodeGpuConfig(node without GPU) = %+v; want nil", got)
	}
	withGPU := &apiv1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu", Labels: map[string]string{GPULabel: "true"}},
		Status:     apiv1.NodeStatus{Allocatable: apiv1.ResourceList{gpu.ResourceNvidiaGPU: resource.MustParse("1")}},
	}
	got := e.provider.GetNodeGpuConfig(withGPU)
	if got == nil || got.Label != GPULabel || got.ExtendedResourceName != gpu.ResourceNvidiaGPU {
		t.Errorf("GetNodeGpuConfig(node with GPU) = %+v; want label %s and resource %s", got, GPULabel, gpu.ResourceNvidiaGPU)
	}
}

// TestRefresh checks that Refresh lists the servers again once the TTL
// has passed and picks up a server another tool created.
func TestRefresh(t *testing.T) {
	e := newEnv(t)
	if err := e.provider.Refresh(); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if _, err := e.fake.AddServer(armServer("arm-0000000000000002")); err != nil {
		t.Fatal(err)
	}
	g := e.group("arm")
	if got := e.targetSize(g); got != 1 {
		t.Errorf("TargetSize before the TTL passed = %d; want 1 (answered from the listing)", got)
	}
	e.clock.Advance(time.Hour)
	if err := e.provider.Refresh(); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if got := e.targetSize(g); got != 2 {
		t.Errorf("TargetSize after Refresh = %d; want 2", got)
	}
}

// TestCleanup checks that Cleanup can be called twice and that calls
// after it fail instead of starting work.
func TestCleanup(t *testing.T) {
	e := newEnv(t)
	e.cleanup()
	if err := e.provider.Cleanup(); err != nil {
		t.Errorf("second Cleanup: %v", err)
	}
	if err := e.group("workers").IncreaseSize(1); err == nil {
		t.Error("IncreaseSize after Cleanup succeeded; want an error")
	}
	if err := e.group("workers").AtomicIncreaseSize(1); err == nil {
		t.Error("AtomicIncreaseSize after Cleanup succeeded; want an error")
	}
	if n := len(e.servers("workers")); n != 0 {
		t.Errorf("servers after scale-ups past Cleanup = %d; want 0", n)
	}
}
