package pool

import (
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// expectedToRegister is the autoscaler's rule (clusterstate.go, core at
// 33c3f97bf2) for an instance without a node that counts as an
// unregistered node: not deleting and without error info.
func expectedToRegister(in Instance) bool {
	return in.State != Deleting && in.Error == nil
}

// TestNoIncorrectSizeForTheAutoscaler plays one autoscaler loop over a
// pool whose servers are in every status Hetzner reports, young and old,
// none with a node, plus a failed claim: deleteCreatedNodesWithErrors
// deletes the failed creations, then updateIncorrectNodeGroupSizes
// compares the target with the registered nodes (none) plus the
// instances expected to register. Any difference would make
// fixNodeGroupSize call DecreaseTargetSize every loop, which can remove
// only claims without a server, and skip every iteration of the whole
// autoscaler. So every unit of the target must be expected to register,
// and a DecreaseTargetSize that cannot remove anything answers nil and
// leaves the servers alone.
func TestNoIncorrectSizeForTheAutoscaler(t *testing.T) {
	statuses := []hcloud.ServerStatus{
		hcloud.ServerStatusInitializing, hcloud.ServerStatusStarting, hcloud.ServerStatusRunning,
		hcloud.ServerStatusOff, hcloud.ServerStatusStopping, hcloud.ServerStatusMigrating,
		hcloud.ServerStatusRebuilding, hcloud.ServerStatusUnknown, "hibernating",
	}
	for _, subnet := range []bool{false, true} {
		name := "plain"
		if subnet {
			name = "subnet"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			cfg := poolConfig("workers", 0, 40)
			if subnet {
				e.addReferences()
				cfg = subnetPoolConfig("workers")
				cfg.MaxSize = 40
			}
			labels := map[string]string{config.LabelNodeGroup: "workers", config.LabelCluster: testCluster}
			for _, status := range statuses {
				for _, age := range []time.Duration{time.Minute, 24 * time.Hour} {
					if _, err := e.fake.AddServer(hcloudtest.ServerInfo{
						Name: "workers-" + string(status) + "-" + age.String(), Status: status,
						Created: e.clock.Now().Add(-age), Labels: labels,
					}); err != nil {
						t.Fatal(err)
					}
				}
			}
			p := e.newPool(cfg)
			if _, err := e.cache.Get(t.Context()); err != nil {
				t.Fatal(err)
			}
			e.fake.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Code: "invalid_input"})
			if err := p.IncreaseSize(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			e.settle(p)

			// deleteCreatedNodesWithErrors: every Creating instance with
			// error info goes, without a min-size cap.
			var failed []string
			for _, in := range p.Instances() {
				if in.State == Creating && in.Error != nil {
					failed = append(failed, in.ID)
				}
			}
			if len(failed) == 0 {
				t.Fatal("no failed creation; want at least the failed claim")
			}
			if err := p.DeleteInstances(t.Context(), failed); err != nil {
				t.Fatalf("DeleteInstances(failed creations): %v", err)
			}
			e.settle(p)

			// updateIncorrectNodeGroupSizes with no registered node.
			target, unregistered := p.TargetSize(), 0
			for _, in := range p.Instances() {
				if expectedToRegister(in) {
					unregistered++
				} else if in.State != Deleting {
					t.Errorf("instance %s (%s, status %s, error %+v) is in the target but neither a node nor expected to register", in.Name, in.State, in.Status, in.Error)
				}
			}
			if target != unregistered {
				t.Errorf("TargetSize() = %d, instances expected to register = %d; want equal, or the autoscaler sees an incorrect size it cannot fix", target, unregistered)
			}

			// fixNodeGroupSize, should it still ask: nothing removable,
			// nil, no server touched.
			if err := p.DecreaseTargetSize(t.Context(), -target); err != nil {
				t.Errorf("DecreaseTargetSize(-%d) = %v; want nil", target, err)
			}
			if got := p.TargetSize(); got != target {
				t.Errorf("TargetSize() after DecreaseTargetSize = %d; want %d: servers are not removed by it", got, target)
			}
		})
	}
}
