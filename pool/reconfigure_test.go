package pool

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hcloudscale/hcloudscale/config"
)

// withOffering returns cfg with another server type, location and a
// server label that names them, so that a server shows which settings
// built it.
func withOffering(cfg config.Pool, serverType, location string) config.Pool {
	cfg.ServerType, cfg.Location = serverType, location
	cfg.ServerLabels = map[string]string{
		config.LabelNodeGroup: cfg.Name, config.LabelCluster: testCluster,
		"offering": serverType + "-" + location,
	}
	return cfg
}

func TestReconfigureAppliesToTheNextScaleUp(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	old := withOffering(poolConfig("workers", 1, 2), "cx23", "fsn1")
	p := e.newPool(old)
	if err := p.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	e.settle(p)

	next := withOffering(poolConfig("workers", 0, 5), "cx33", "nbg1")
	next.CloudInit = "#cloud-config\n# next\n"
	if err := p.Reconfigure(next, e.deps(next)); err != nil {
		t.Fatalf("Reconfigure: %v", err)
	}
	if p.MinSize() != 0 || p.MaxSize() != 5 {
		t.Errorf("sizes after Reconfigure = %d..%d; want 0..5", p.MinSize(), p.MaxSize())
	}
	if got := p.Config().ServerType; got != "cx33" {
		t.Errorf("Config().ServerType = %q; want cx33", got)
	}
	if err := p.IncreaseSize(ctx, 3); err != nil {
		t.Fatalf("IncreaseSize(3) under the new max 5: %v", err)
	}
	e.settle(p)
	byOffering := map[string]int{}
	for _, s := range e.servers("workers") {
		byOffering[s.ServerType+"/"+s.Location+"/"+s.Labels["offering"]+"/"+s.UserData]++
	}
	want := map[string]int{
		"cx23/fsn1/cx23-fsn1/" + testCloudInit:        2, // unchanged
		"cx33/nbg1/cx33-nbg1/#cloud-config\n# next\n": 3,
	}
	if diff := gocmp.Diff(want, byOffering); diff != "" {
		t.Errorf("servers by type/location/label/user data (-want +got):\n%s", diff)
	}
}

func TestReconfigureMaxBelowTheTargetDeletesNothing(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	cfg := poolConfig("workers", 0, 3)
	p := e.newPool(cfg)
	if err := p.IncreaseSize(ctx, 3); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	cfg.MaxSize = 1
	if err := p.Reconfigure(cfg, e.deps(cfg)); err != nil {
		t.Fatal(err)
	}
	if got := p.TargetSize(); got != 3 {
		t.Errorf("TargetSize() after max 3 -> 1 = %d; want 3", got)
	}
	if n := e.fake.Count("DELETE /servers/{id}"); n != 0 {
		t.Errorf("%d delete requests after lowering the max; want 0", n)
	}
	if err := p.IncreaseSize(ctx, 1); !errors.Is(err, ErrAboveMax) {
		t.Errorf("IncreaseSize(1) above the new max = %v; want ErrAboveMax", err)
	}
	in := p.Instances()
	if err := p.DeleteInstances(ctx, []string{in[0].ID}); err != nil {
		t.Errorf("DeleteInstances of one of three, min 0 = %v; want nil", err)
	}
	e.settle(p)
}

func TestReconfigureRefusesWithoutChange(t *testing.T) {
	e := newEnv(t, envOptions{})
	cfg := poolConfig("workers", 1, 3)
	p := e.newPool(cfg)

	renamed := poolConfig("other", 1, 3)
	if err := p.Reconfigure(renamed, e.deps(renamed)); err == nil {
		t.Error("Reconfigure with another name = nil; want an error")
	}
	bad := cfg
	bad.MinSize, bad.MaxSize, bad.ServerType = 4, 2, ""
	bad.ServerLabels = map[string]string{config.LabelNodeGroup: "x"}
	err := p.Reconfigure(bad, e.deps(bad))
	if err == nil {
		t.Fatal("Reconfigure with a bad config = nil; want an error")
	}
	for _, want := range []string{"max size 2 is below min size 4", "server type is empty", "want the pool name", "want the cluster name"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Reconfigure error %q does not report %q", err, want)
		}
	}
	if diff := gocmp.Diff(cfg, p.Config(), cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
		t.Errorf("Config() after a refused Reconfigure (-want +got):\n%s", diff)
	}
}

func TestRemovedPoolOnlyShrinks(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	cfg := poolConfig("workers", 2, 3)
	p := e.newPool(cfg)
	if err := p.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	e.settle(p)

	p.Remove()
	if !p.Removed() || p.MinSize() != 0 || p.MaxSize() != 0 {
		t.Errorf("after Remove: removed %t, sizes %d..%d; want true, 0..0", p.Removed(), p.MinSize(), p.MaxSize())
	}
	if got := p.TargetSize(); got != 2 {
		t.Errorf("TargetSize() after Remove = %d; want 2: removing a pool deletes nothing", got)
	}
	if n := e.fake.Count("DELETE /servers/{id}"); n != 0 {
		t.Errorf("%d delete requests after Remove; want 0", n)
	}
	for _, inc := range []func() error{
		func() error { return p.IncreaseSize(ctx, 1) },
		func() error { return p.AtomicIncreaseSize(ctx, 1) },
	} {
		if err := inc(); !errors.Is(err, ErrRemoved) {
			t.Errorf("increase of a removed pool = %v; want ErrRemoved", err)
		}
	}
	if st := p.Status(); !st.Removed || st.MaxSize != 0 {
		t.Errorf("Status() = removed %t, max %d; want true, 0", st.Removed, st.MaxSize)
	}
	if p.Empty() {
		t.Error("Empty() with two servers = true")
	}
	// Below the old min 2: a removed pool's min is 0.
	var ids []string
	for _, in := range p.Instances() {
		ids = append(ids, in.ID)
	}
	if err := p.DeleteInstances(ctx, ids); err != nil {
		t.Fatalf("DeleteInstances of every server of a removed pool: %v", err)
	}
	e.settle(p)
	if !p.Empty() {
		t.Errorf("Empty() after deleting every server = false; instances %v", p.Instances())
	}

	// Configured again, it scales up again.
	if err := p.Reconfigure(cfg, e.deps(cfg)); err != nil {
		t.Fatal(err)
	}
	if p.Removed() || p.MinSize() != 2 {
		t.Errorf("after Reconfigure: removed %t, min %d; want false, 2", p.Removed(), p.MinSize())
	}
	if err := p.IncreaseSize(ctx, 1); err != nil {
		t.Errorf("IncreaseSize after configuring the pool again: %v", err)
	}
	e.settle(p)
}

// TestReconfigureUnderConcurrency changes the settings back and forth
// while scale-ups, deletes and reads run. Every server must come out of
// one settings value whole: its type, location and label agree.
func TestReconfigureUnderConcurrency(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	a := withOffering(poolConfig("workers", 0, 40), "cx23", "fsn1")
	b := withOffering(poolConfig("workers", 0, 40), "cx33", "nbg1")
	p := e.newPool(a)
	deps := e.deps(a)

	// The scale-ups go on while the pool is reconfigured and removed:
	// each may land in a removed pool (refused), so they keep coming
	// until the reconfiguring ends, and one more after it must land.
	var wg sync.WaitGroup
	stopped := make(chan struct{}) // closed when the reconfiguring ends
	for i := range 4 {
		wg.Go(func() {
			for j := 0; ; j++ {
				select {
				case <-stopped:
					return
				default:
				}
				err := p.IncreaseSize(ctx, 1+((i+j)%2))
				if err != nil && !errors.Is(err, ErrRemoved) && !errors.Is(err, ErrAboveMax) {
					t.Errorf("IncreaseSize: %v", err)
				}
			}
		})
	}
	wg.Go(func() {
		defer close(stopped)
		for i := range 50 {
			cfg := a
			if i%2 == 1 {
				cfg = b
			}
			if i%7 == 3 {
				p.Remove()
				continue
			}
			if err := p.Reconfigure(cfg, deps); err != nil {
				t.Errorf("Reconfigure: %v", err)
			}
		}
	})
	wg.Go(func() {
		for range 100 {
			st := p.Status()
			if st.Target > 40 {
				t.Errorf("target %d above every max", st.Target)
			}
			_ = p.MaxSize()
			_ = p.Config()
			_ = p.Instances()
		}
	})
	wg.Wait()
	if err := p.Reconfigure(a, deps); err != nil {
		t.Fatal(err)
	}
	if err := p.IncreaseSize(ctx, 1); err != nil && !errors.Is(err, ErrAboveMax) {
		t.Fatalf("IncreaseSize of a configured pool: %v", err)
	}
	e.settle(p)
	servers := e.servers("workers")
	if len(servers) == 0 {
		t.Fatal("no server created")
	}
	for _, s := range servers {
		if want := s.ServerType + "-" + s.Location; s.Labels["offering"] != want {
			t.Errorf("server %s: type %s in %s carries label %q: the create mixed two settings", s.Name, s.ServerType, s.Location, s.Labels["offering"])
		}
	}
	t.Logf("%d servers: %v", len(servers), fmt.Sprint(countStates(p.Instances())))
}
