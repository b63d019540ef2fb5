package pool

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/config"
)

// TestCreateAfterTheSnapshotRotated publishes snapshot v2 and deletes v1
// while v1 is still the resolver's cached answer: the next create is
// refused for its image, resolved again and sent once more with v2 and
// the same name, without waiting for the resolver's TTL, and the pool
// records no failure.
func TestCreateAfterTheSnapshotRotated(t *testing.T) {
	e := newEnv(t, envOptions{})
	labels := map[string]string{"role": "node"}
	v1, err := e.fake.AddSnapshot("v1", hcloud.ArchitectureX86, labels)
	if err != nil {
		t.Fatal(err)
	}
	cfg := poolConfig("workers", 0, 5)
	cfg.Images = config.ImagesForArch{AMD64: "role=node", ARM64: "role=node"}
	p := e.newPool(cfg)

	if err := p.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatalf("IncreaseSize(1): %v", err)
	}
	e.settle(p)
	if got := e.servers("workers"); len(got) != 1 || got[0].ImageID != v1 {
		t.Fatalf("servers after the first create = %+v; want one from image %d", got, v1)
	}

	e.clock.Step(time.Minute) // well within the resolver's 5-minute TTL
	v2, err := e.fake.AddSnapshot("v2", hcloud.ArchitectureX86, labels)
	if err != nil {
		t.Fatal(err)
	}
	if !e.fake.DeleteImage(v1) {
		t.Fatal("image v1 did not exist")
	}
	posts := e.fake.Count("POST /servers")

	if err := p.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatalf("IncreaseSize(1) after the rotation: %v", err)
	}
	e.settle(p)

	var images []int64
	for _, s := range e.servers("workers") {
		images = append(images, s.ImageID)
	}
	if diff := cmp.Diff([]int64{v1, v2}, images); diff != "" {
		t.Errorf("images of the pool's servers (-want +got):\n%s", diff)
	}
	if got := e.fake.Count("POST /servers") - posts; got != 2 {
		t.Errorf("create requests after the rotation = %d; want 2 (refused with v1, then v2)", got)
	}
	if diff := cmp.Diff(map[string]int{"running": 2}, countStates(p.Instances())); diff != "" {
		t.Errorf("instances (-want +got):\n%s", diff)
	}
	if p.TargetSize() != 2 {
		t.Errorf("TargetSize() = %d; want 2", p.TargetSize())
	}
	if err := p.IncreaseSize(t.Context(), 1); err != nil {
		t.Errorf("IncreaseSize(1) after the retried create: %v; want the pool not backed off", err)
	}
	e.settle(p)
}
