package hcloudscale_test

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/pool"
)

// offeringsConfig is the healthy configuration with workers (min 1, max
// 6) on the --nodes type and location first, then offerings.
func offeringsConfig(t *testing.T, p *project, first string, offerings ...config.Offering) *config.Config {
	t.Helper()
	cc := healthyClusterConfig()
	workers := nodeConfig(cc, "workers")
	delete(workers, "placementGroup")
	if len(offerings) > 0 {
		var list []map[string]string
		for _, o := range offerings {
			list = append(list, map[string]string{"serverType": o.ServerType, "location": o.Location})
		}
		workers["offerings"] = list
	}
	return p.load(t, cc, nil, []string{"1:6:" + first + ":workers", "1:3:cax11:nbg1:arm", "0:2:ccx13:hel1:dedicated"})
}

// withoutWorkers is the healthy configuration without pool workers.
func withoutWorkers(t *testing.T, p *project) *config.Config {
	t.Helper()
	cc := healthyClusterConfig()
	delete(cc["nodeConfigs"].(map[string]any), "workers")
	return p.load(t, cc, nil, []string{"1:3:cax11:nbg1:arm", "0:2:ccx13:hel1:dedicated"})
}

// groupRow is what the autoscaler sees of one node group of workers.
type groupRow struct {
	Name             string
	Removed          bool
	Target, Min, Max int
}

// workersGroups returns the node groups of pool workers in c: the
// configured ones in order, then the removed ones by name (a reload keeps
// them in the order of the old configuration, which a restart cannot
// know).
func workersGroups(c *hcloudscale.Cluster) []groupRow {
	var out []groupRow
	for _, g := range c.Pools() {
		if config.PoolOfGroup(g.Name()) != "workers" {
			continue
		}
		out = append(out, groupRow{g.Name(), g.Removed(), g.TargetSize(), g.MinSize(), g.MaxSize()})
	}
	slices.SortStableFunc(out, func(a, b groupRow) int {
		switch {
		case a.Removed != b.Removed:
			return cmp.Compare(b2i(a.Removed), b2i(b.Removed))
		case a.Removed:
			return strings.Compare(a.Name, b.Name)
		}
		return 0
	})
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

var (
	offA = config.Offering{ServerType: "cpx21", Location: "fsn1"}
	offB = config.Offering{ServerType: "cx33", Location: "nbg1"}
	offC = config.Offering{ServerType: "cpx31", Location: "hel1"}
)

// startOfferings runs workers on A, then B and C, with 1 server in A, 2 in
// B and 1 in C.
func startOfferings(t *testing.T, p *project) *hcloudscale.Cluster {
	t.Helper()
	ctx := context.Background()
	c := newCluster(t, offeringsConfig(t, p, "cpx21:fsn1", offB, offC), hcloudscale.WithListTTL(time.Millisecond))
	for name, n := range map[string]int{"workers": 1, "workers@cx33-nbg1": 2, "workers@cpx31-hel1": 1} {
		if err := c.Pool(name).IncreaseSize(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	waitSettled(t, c, p)
	// A later offering's servers are labelled with it, the first's not.
	servers, err := p.api.Client().Server.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if s.Labels[config.LabelNodeGroup] != "workers" {
			continue
		}
		want := s.ServerType.Name + "-" + s.Location.Name
		if s.ServerType.Name == offA.ServerType {
			want = ""
		}
		if got := s.Labels[config.LabelOffering]; got != want {
			t.Errorf("server %s (%s in %s): label %s=%q; want %q", s.Name, s.ServerType.Name, s.Location.Name, config.LabelOffering, got, want)
		}
	}
	return c
}

// offeringsChange is how the configuration changes to the next one: by a
// reload of the running Cluster, or by a restart (a new Cluster on the
// project).
var offeringsChange = []struct {
	name  string
	apply func(t *testing.T, p *project, c *hcloudscale.Cluster, next *config.Config) *hcloudscale.Cluster
}{
	{"reload", func(t *testing.T, p *project, c *hcloudscale.Cluster, next *config.Config) *hcloudscale.Cluster {
		if err := c.Reconfigure(context.Background(), next); err != nil {
			t.Fatal(err)
		}
		return c
	}},
	{"restart", func(t *testing.T, p *project, c *hcloudscale.Cluster, next *config.Config) *hcloudscale.Cluster {
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		return newCluster(t, next, hcloudscale.WithListTTL(time.Millisecond))
	}},
}

// TestOfferingsRestartAgreesWithReload changes the offerings of a pool
// with servers in three offerings, once by a reload and once by a
// restart, and checks that both leave the same node groups with the same
// sizes and bounds: the servers created for a later offering the pool no
// longer lists sit in that offering's removed group, counted against the
// pool's max; those of a first offering that changed stay with the first
// group.
func TestOfferingsRestartAgreesWithReload(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first string
		offs  []config.Offering
		want  []groupRow // Name, Removed and Target; the bounds are compared between the paths
	}{
		{"a later offering taken out", "cpx21:fsn1", []config.Offering{offC},
			[]groupRow{{Name: "workers", Target: 1}, {Name: "workers@cpx31-hel1", Target: 1}, {Name: "workers@cx33-nbg1", Removed: true, Target: 2}}},
		{"every later offering taken out", "cpx21:fsn1", nil,
			[]groupRow{{Name: "workers", Target: 1}, {Name: "workers@cpx31-hel1", Removed: true, Target: 1}, {Name: "workers@cx33-nbg1", Removed: true, Target: 2}}},
		{"offerings reordered", "cpx21:fsn1", []config.Offering{offC, offB},
			[]groupRow{{Name: "workers", Target: 1}, {Name: "workers@cpx31-hel1", Target: 1}, {Name: "workers@cx33-nbg1", Target: 2}}},
		// The first offering's server is on no offering now: it stays
		// with the first group, where drift reports it.
		{"a later offering made the first", "cx33:nbg1", []config.Offering{offC},
			[]groupRow{{Name: "workers", Target: 3}, {Name: "workers@cpx31-hel1", Target: 1}}},
		{"the first offering replaced", "cpx31:nbg1", []config.Offering{offB, offC},
			[]groupRow{{Name: "workers", Target: 1}, {Name: "workers@cx33-nbg1", Target: 2}, {Name: "workers@cpx31-hel1", Target: 1}}},
		// No first: the pool is taken out of the configuration.
		{"the pool removed", "", nil,
			[]groupRow{{Name: "workers", Removed: true, Target: 1}, {Name: "workers@cpx31-hel1", Removed: true, Target: 1}, {Name: "workers@cx33-nbg1", Removed: true, Target: 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string][]groupRow{}
			for _, path := range offeringsChange {
				p := newProject(t, fastActions())
				c := startOfferings(t, p)
				next := withoutWorkers(t, p)
				if tc.first != "" {
					next = offeringsConfig(t, p, tc.first, tc.offs...)
				}
				c = path.apply(t, p, c, next)
				// Refresh drops removed groups that are empty.
				waitSettled(t, c, p)
				got[path.name] = workersGroups(c)
				var names []groupRow
				total := 0
				for _, g := range got[path.name] {
					names = append(names, groupRow{Name: g.Name, Removed: g.Removed, Target: g.Target})
					total += g.Target
					if g.Max > 6-(4-g.Target) {
						t.Errorf("%s: %s reports max %d with %d servers in the pool's other groups; want at most the pool's 6 less those", path.name, g.Name, g.Max, 4-g.Target)
					}
				}
				if diff := gocmp.Diff(tc.want, names); diff != "" {
					t.Errorf("%s: groups (-want +got):\n%s", path.name, diff)
				}
				if total != 4 {
					t.Errorf("%s: %d servers in the groups; want all 4", path.name, total)
				}
			}
			if diff := gocmp.Diff(got["reload"], got["restart"]); diff != "" {
				t.Errorf("groups after the reload and after the restart differ (-reload +restart):\n%s", diff)
			}
		})
	}
}

// TestOfferingsRemovedAfterRestart checks a removed offering's group that a
// restart found: it refuses scale-ups, its servers count against the
// pool's max, it lets the autoscaler delete them below any min, and it
// is gone once they are; a server created for the first offering is never
// put in such a group.
func TestOfferingsRemovedAfterRestart(t *testing.T) {
	p := newProject(t, fastActions())
	ctx := context.Background()
	c := startOfferings(t, p)
	c = offeringsChange[1].apply(t, p, c, offeringsConfig(t, p, "cpx21:fsn1", offC))
	removed := c.Pool("workers@cx33-nbg1")
	if removed == nil || !removed.Removed() || removed.TargetSize() != 2 {
		t.Fatalf("after the restart: %v; want workers@cx33-nbg1 removed with 2 servers", workersGroups(c))
	}
	if err := removed.IncreaseSize(ctx, 1); !errors.Is(err, pool.ErrRemoved) {
		t.Errorf("IncreaseSize of the removed group = %v; want ErrRemoved", err)
	}
	// 6 less the removed group's 2 and the third offering's 1.
	first := c.Pool("workers")
	if got := first.MaxSize(); got != 3 {
		t.Errorf("max of the first group = %d; want 3", got)
	}
	if err := first.IncreaseSize(ctx, 3); !errors.Is(err, pool.ErrAboveMax) {
		t.Errorf("IncreaseSize(3) of the first group = %v; want ErrAboveMax (the removed group's servers count)", err)
	}
	if err := first.IncreaseSize(ctx, 2); err != nil {
		t.Fatalf("IncreaseSize(2) of the first group = %v; want the pool's max reached", err)
	}
	waitSettled(t, c, p)
	if err := removed.DeleteInstances(ctx, instanceIDs(removed)); err != nil {
		t.Fatalf("deleting the removed group's servers: %v", err)
	}
	waitSettled(t, c, p)
	if g := c.Pool("workers@cx33-nbg1"); g != nil {
		t.Errorf("the removed group is still there with %d servers; want it gone once empty", g.TargetSize())
	}
	if got := first.MaxSize(); got != 5 {
		t.Errorf("max of the first group with the removed servers gone = %d; want 5", got)
	}
	for _, g := range workersGroups(c) {
		if g.Removed {
			t.Errorf("group %s still removed", g.Name)
		}
	}
}

// TestOfferingsRemovedPoolFirstGroupEmptiedFirst removes a pool of several
// offerings (by a reload and by a restart) and deletes the server of its
// first offering first: the servers of its later offerings must still
// belong to their removed groups (PoolForNode finds them, so that the
// autoscaler can delete them), and every group goes once they are gone.
func TestOfferingsRemovedPoolFirstGroupEmptiedFirst(t *testing.T) {
	ctx := context.Background()
	for _, path := range offeringsChange {
		t.Run(path.name, func(t *testing.T) {
			p := newProject(t, fastActions())
			c := path.apply(t, p, startOfferings(t, p), withoutWorkers(t, p))
			waitSettled(t, c, p)
			first := c.Pool("workers")
			if first == nil || !first.Removed() || first.TargetSize() != 1 {
				t.Fatalf("groups %v; want workers removed with its 1 server", workersGroups(c))
			}
			if err := first.DeleteInstances(ctx, instanceIDs(first)); err != nil {
				t.Fatal(err)
			}
			waitSettled(t, c, p)
			for _, name := range []string{"workers@cx33-nbg1", "workers@cpx31-hel1"} {
				g := c.Pool(name)
				if g == nil {
					t.Fatalf("%s: gone with servers left; groups %v", name, workersGroups(c))
				}
				for _, in := range g.Instances() {
					if got := c.PoolForNode(in.ID, ""); got != g {
						t.Errorf("PoolForNode(%s) = %s; want %s", in.ID, poolName(got), name)
					}
				}
				if err := g.DeleteInstances(ctx, instanceIDs(g)); err != nil {
					t.Errorf("deleting the servers of %s: %v", name, err)
				}
			}
			waitSettled(t, c, p)
			if got := workersGroups(c); len(got) != 0 {
				t.Errorf("groups left with every server deleted: %v", got)
			}
		})
	}
}

// TestOfferingsFormerFirstTakenOut runs 2 servers on a later offering,
// makes that offering the first by a reload, then takes it out by a
// reload or a restart: both put the servers created for it (labelled
// while it was a later offering) in its removed group, as a restart
// cannot know that the offering was the first for a while.
func TestOfferingsFormerFirstTakenOut(t *testing.T) {
	want := []groupRow{{Name: "workers", Target: 0, Min: 1, Max: 4}, {Name: "workers@cx33-nbg1", Removed: true, Target: 2, Max: 2}}
	for _, path := range offeringsChange {
		t.Run(path.name, func(t *testing.T) {
			p := newProject(t, fastActions())
			ctx := context.Background()
			c := newCluster(t, offeringsConfig(t, p, "cpx21:fsn1", offB), hcloudscale.WithListTTL(time.Millisecond))
			if err := c.Pool("workers@cx33-nbg1").IncreaseSize(ctx, 2); err != nil {
				t.Fatal(err)
			}
			waitSettled(t, c, p)
			if err := c.Reconfigure(ctx, offeringsConfig(t, p, "cx33:nbg1", offA)); err != nil {
				t.Fatal(err)
			}
			waitSettled(t, c, p)
			c = path.apply(t, p, c, offeringsConfig(t, p, "cpx31:hel1"))
			waitSettled(t, c, p)
			if diff := gocmp.Diff(want, workersGroups(c)); diff != "" {
				t.Errorf("groups (-want +got):\n%s", diff)
			}
		})
	}
}
