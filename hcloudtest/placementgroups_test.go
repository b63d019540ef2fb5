package hcloudtest_test

import (
	"fmt"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// TestPlacementGroupsCreateLimitAndDelete drives hcloud-go's placement
// group client: creates up to the project's limit, the error beyond it, a
// name used twice, and deletes that succeed only for an empty group.
func TestPlacementGroupsCreateLimitAndDelete(t *testing.T) {
	s, client, _ := newFake(t)
	ctx := t.Context()
	var first *hcloud.PlacementGroup
	for i := range hcloudtest.MaxPlacementGroups {
		res, _, err := client.PlacementGroup.Create(ctx, hcloud.PlacementGroupCreateOpts{
			Name: fmt.Sprintf("g%d", i), Type: hcloud.PlacementGroupTypeSpread,
			Labels: map[string]string{"hcloudscale/spread-pool": "workers"},
		})
		if err != nil {
			t.Fatalf("Create(g%d) error: %v", i, err)
		}
		if i == 0 {
			first = res.PlacementGroup
		}
	}
	if first.Name != "g0" || first.Type != hcloud.PlacementGroupTypeSpread || first.Labels["hcloudscale/spread-pool"] != "workers" {
		t.Errorf("created group = %+v; want g0, spread, labelled", first)
	}
	_, _, err := client.PlacementGroup.Create(ctx, hcloud.PlacementGroupCreateOpts{Name: "one-too-many", Type: hcloud.PlacementGroupTypeSpread})
	if !hcloud.IsError(err, hcloud.ErrorCodeResourceLimitExceeded) {
		t.Errorf("Create beyond %d groups error = %v; want resource_limit_exceeded", hcloudtest.MaxPlacementGroups, err)
	}

	if _, err := s.AddServer(hcloudtest.ServerInfo{Name: "member", PlacementGroup: first.ID, Status: hcloud.ServerStatusRunning}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.PlacementGroup.Delete(ctx, first); !hcloud.IsError(err, hcloudtest.ErrorCodeResourceInUse) {
		t.Errorf("Delete of a group with a server error = %v; want %s", err, hcloudtest.ErrorCodeResourceInUse)
	}
	second, _, err := client.PlacementGroup.GetByName(ctx, "g1")
	if err != nil || second == nil {
		t.Fatalf("GetByName(g1) = %v, %v", second, err)
	}
	if _, err := client.PlacementGroup.Delete(ctx, second); err != nil {
		t.Fatalf("Delete of an empty group error: %v", err)
	}
	if got, _, err := client.PlacementGroup.GetByID(ctx, second.ID); err != nil || got != nil {
		t.Errorf("GetByID after Delete = %v, %v; want nil, nil", got, err)
	}
	// A slot is free again; the name of a deleted group can be used.
	if _, _, err := client.PlacementGroup.Create(ctx, hcloud.PlacementGroupCreateOpts{Name: "g1", Type: hcloud.PlacementGroupTypeSpread}); err != nil {
		t.Errorf("Create after a Delete error: %v", err)
	}
	_, _, err = client.PlacementGroup.Create(ctx, hcloud.PlacementGroupCreateOpts{Name: "g2", Type: hcloud.PlacementGroupTypeSpread})
	if !hcloud.IsError(err, hcloud.ErrorCodeUniquenessError) {
		t.Errorf("Create of a used name error = %v; want uniqueness_error", err)
	}
}
