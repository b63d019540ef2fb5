package hcloudscale_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/goleak"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/pool"
)

// The invariants that must hold whenever a Cluster has settled, whatever
// failed on the way:
//
//	(a) every server of the cluster in the API is accounted for by the
//	    pool its label names: no server leaks;
//	(b) each pool's target size is what the API holds for it (servers not
//	    being deleted) plus its claims that have no server yet, and every
//	    server a pool reports exists;
//	(c) every failure is visible in Instances, with the class its code
//	    implies;
//	(d) no goroutine outlives the Cluster.
//
// The checks work on a view (a copy of what the Cluster and the fake said
// at one moment), so that the tests in TestInvariantChecksCatchViolations
// can also feed them views that break an invariant on purpose.

// view is what a Cluster and the fake API report at one moment.
type view struct {
	cluster string // the cluster label value; "" for none
	pools   []poolView
	api     []hcloudtest.ServerInfo // every server with the pool label
}

type poolView struct {
	name      string
	target    int
	instances []pool.Instance
}

// observe takes a view of c and api. Call it when the Cluster has settled
// (see settled): while work is in flight the two sides legitimately differ
// for a moment.
func observe(tb testing.TB, c *hcloudscale.Cluster, api *hcloudtest.Server) view {
	tb.Helper()
	v := view{cluster: c.Config().ClusterName}
	for _, p := range c.Pools() {
		v.pools = append(v.pools, poolView{name: p.Name(), target: p.TargetSize(), instances: p.Instances()})
	}
	servers, err := api.Servers(config.LabelNodeGroup)
	if err != nil {
		tb.Fatalf("listing the fake's servers: %v", err)
	}
	v.api = servers
	return v
}

// ours returns the API servers that belong to the view's cluster.
func (v view) ours() []hcloudtest.ServerInfo {
	var out []hcloudtest.ServerInfo
	for _, s := range v.api {
		if v.cluster == "" || s.Labels[config.LabelCluster] == v.cluster {
			out = append(out, s)
		}
	}
	return out
}

func (v view) String() string {
	var b strings.Builder
	for _, p := range v.pools {
		fmt.Fprintf(&b, "pool %s: target %d\n", p.name, p.target)
		for _, in := range p.instances {
			fmt.Fprintf(&b, "  %s %s server=%d status=%q", in.ID, in.State, in.ServerID, in.Status)
			if in.Error != nil {
				fmt.Fprintf(&b, " error=%s/%s", in.Error.Class, in.Error.Code)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("api:\n")
	for _, s := range v.api {
		fmt.Fprintf(&b, "  %d %s %s pool=%q cluster=%q\n", s.ID, s.Name, s.Status, s.Labels[config.LabelNodeGroup], s.Labels[config.LabelCluster])
	}
	return b.String()
}

// checkAccounted is invariant (a): every server of the cluster that the
// API holds appears, by ID, in the Instances of the pool its
// hcloud/node-group label names.
func checkAccounted(tb testing.TB, v view) {
	tb.Helper()
	byPool := map[string]map[int64]bool{}
	for _, p := range v.pools {
		ids := map[int64]bool{}
		for _, in := range p.instances {
			if in.ServerID != 0 {
				ids[in.ServerID] = true
			}
		}
		byPool[p.name] = ids
	}
	for _, s := range v.ours() {
		name := s.Labels[config.LabelNodeGroup]
		ids, ok := byPool[name]
		switch {
		case !ok:
			tb.Errorf("invariant (a): server %d (%s, %s) carries pool label %q, which no pool has\n%v", s.ID, s.Name, s.Status, name, v)
		case !ids[s.ID]:
			tb.Errorf("invariant (a): server %d (%s, %s) of pool %s is in no pool's Instances: it leaked\n%v", s.ID, s.Name, s.Status, name, v)
		}
	}
}

// checkTargets is invariant (b): for each pool, TargetSize equals the
// servers the API holds for it that are not being deleted plus the
// instances without a server (pending claims and placeholders of failed
// ones); and every server a pool reports exists in the API under that
// pool's label.
func checkTargets(tb testing.TB, v view) {
	tb.Helper()
	held := map[string]int{}
	exists := map[int64]hcloudtest.ServerInfo{}
	for _, s := range v.ours() {
		exists[s.ID] = s
		if s.Status != hcloud.ServerStatusDeleting {
			held[s.Labels[config.LabelNodeGroup]]++
		}
	}
	for _, p := range v.pools {
		claims := 0
		for _, in := range p.instances {
			if in.ServerID == 0 {
				if in.State != pool.Deleting {
					claims++
				}
				continue
			}
			s, ok := exists[in.ServerID]
			switch {
			case !ok:
				tb.Errorf("invariant (b): pool %s reports server %d (%s, %s), which the API does not hold\n%v", p.name, in.ServerID, in.Name, in.State, v)
			case s.Labels[config.LabelNodeGroup] != p.name:
				tb.Errorf("invariant (b): pool %s reports server %d, which the API labels for pool %q\n%v", p.name, in.ServerID, s.Labels[config.LabelNodeGroup], v)
			}
		}
		if want := held[p.name] + claims; p.target != want {
			tb.Errorf("invariant (b): pool %s TargetSize() = %d; want %d (%d servers in the API not being deleted + %d claims without a server)\n%v",
				p.name, p.target, want, held[p.name], claims, v)
		}
	}
}

// failure is one failed instance as the autoscaler sees it.
type failure struct {
	Pool  string
	Class pool.ErrorClass
	Code  string
}

// capacityCodes are the codes that must come with OutOfResources, so the
// autoscaler backs the pool off and tries another.
var capacityCodes = []string{
	string(hcloud.ErrorCodeResourceUnavailable),
	string(hcloud.ErrorCodeResourceLimitExceeded),
	string(hcloud.ErrorCodePlacementError),
	string(hcloudtest.ErrorCodePlacementGroupMemberLimitReached),
	string(hcloudtest.ErrorCodeUnavailable),
	pool.CodeServerTypeUnavailable,
}

// checkErrorClasses is the part of invariant (c) that holds for any run:
// every instance with an error has a code, a message and the class its
// code implies, and a failed claim (no server) is Creating, the only state
// in which the autoscaler acts on error info.
func checkErrorClasses(tb testing.TB, v view) {
	tb.Helper()
	for _, p := range v.pools {
		for _, in := range p.instances {
			if in.Error == nil {
				continue
			}
			e := in.Error
			wantClass := pool.Other
			if slices.Contains(capacityCodes, e.Code) {
				wantClass = pool.OutOfResources
			}
			if e.Class != wantClass || e.Code == "" || e.Message == "" {
				tb.Errorf("invariant (c): pool %s instance %s has error %s/%q %q; want class %s for that code, a code and a message",
					p.name, in.ID, e.Class, e.Code, e.Message, wantClass)
			}
			if in.ServerID == 0 && in.State != pool.Creating {
				tb.Errorf("invariant (c): pool %s failed claim %s is %s; want %s, or the autoscaler never sees the failure", p.name, in.ID, in.State, pool.Creating)
			}
		}
	}
}

// checkFailures is invariant (c) for a run whose failures are known: the
// failed instances are exactly want (in any order), each with a consistent
// class (checkErrorClasses).
func checkFailures(tb testing.TB, v view, want []failure) {
	tb.Helper()
	checkErrorClasses(tb, v)
	var got []failure
	for _, p := range v.pools {
		for _, in := range p.instances {
			if in.Error != nil {
				got = append(got, failure{Pool: p.name, Class: in.Error.Class, Code: in.Error.Code})
			}
		}
	}
	less := func(a, b failure) bool { return fmt.Sprint(a) < fmt.Sprint(b) }
	if diff := cmp.Diff(want, got, cmpopts.SortSlices(less), cmpopts.EquateEmpty()); diff != "" {
		tb.Errorf("invariant (c): failed instances (-want +got):\n%s\n%v", diff, v)
	}
}

// checkInvariants runs (a), (b) and (c).
func checkInvariants(tb testing.TB, v view, want []failure) {
	tb.Helper()
	checkAccounted(tb, v)
	checkTargets(tb, v)
	checkFailures(tb, v, want)
}

// checkNoLeaks is invariant (d): no goroutine is left but those in
// ignore (goleak.IgnoreCurrent taken before the Cluster started). It
// retries for a while, so goroutines that are just ending pass.
func checkNoLeaks(tb goleak.TestingT, ignore ...goleak.Option) {
	goleak.VerifyNone(tb, ignore...)
}

// recorder is a testing.TB that records failures instead of failing the
// test, to show that a check fails.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Error(args ...any) { r.errs = append(r.errs, fmt.Sprint(args...)) }

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.TB.Helper()
	r.TB.Fatalf("check called Fatalf: "+format, args...)
}

func (r *recorder) Failed() bool { return len(r.errs) > 0 }

// TestInvariantChecksCatchViolations breaks each invariant on purpose and
// shows that its check reports it, so that a passing fault matrix means
// something.
func TestInvariantChecksCatchViolations(t *testing.T) {
	// healthy runs a scale-up of two servers and a failed claim in pool
	// plain and returns the settled environment; the checks pass on it.
	healthy := func(t *testing.T) *faultEnv {
		t.Helper()
		e := newFaultEnv(t, faultOptions{cluster: []hcloudscale.Option{hcloudscale.WithListTTL(time.Hour)}})
		e.api().FailRequest("POST /servers", 1, hcloudtest.RequestFault{Code: "invalid_input"})
		if err := e.c.Pool("plain").IncreaseSize(context.Background(), 3); err != nil {
			t.Fatal(err)
		}
		if err := e.settle(); err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, observe(t, e.c, e.api()), []failure{{"plain", pool.Other, "invalid_input"}})
		return e
	}
	// mustFail runs check on a recorder and fails t unless it reported a
	// violation mentioning want.
	mustFail := func(t *testing.T, want string, check func(tb testing.TB)) {
		t.Helper()
		rec := &recorder{TB: t}
		check(rec)
		if !rec.Failed() {
			t.Fatalf("the check passed; want it to report %q", want)
		}
		if all := strings.Join(rec.errs, "\n"); !strings.Contains(all, want) {
			t.Errorf("the check reported:\n%s\nwant a report containing %q", all, want)
		}
	}

	observeHealthy := func(t *testing.T, healthy func(*testing.T) *faultEnv) view {
		e := healthy(t)
		return observe(t, e.c, e.api())
	}

	t.Run("a: a server behind the pools' back", func(t *testing.T) {
		e := healthy(t)
		// Another process (or a bug) made a server with the pool's labels
		// that the Cluster never listed; its status is one the API never
		// reports.
		if _, err := e.api().AddServer(hcloudtest.ServerInfo{
			Name: "plain-stray", ServerType: "cpx21", Location: "fsn1", Status: "bogus",
			Labels: map[string]string{config.LabelNodeGroup: "plain", config.LabelCluster: "prod"},
		}); err != nil {
			t.Fatal(err)
		}
		mustFail(t, "plain-stray", func(tb testing.TB) { checkAccounted(tb, observe(t, e.c, e.api())) })
	})
	t.Run("a: a server of a pool that does not exist", func(t *testing.T) {
		v := observeHealthy(t, healthy)
		v.api = append(v.api, hcloudtest.ServerInfo{ID: 4711, Name: "gone-1", Status: hcloud.ServerStatusRunning,
			Labels: map[string]string{config.LabelNodeGroup: "gone", config.LabelCluster: "prod"}})
		mustFail(t, `pool label "gone"`, func(tb testing.TB) { checkAccounted(tb, v) })
	})
	t.Run("a: servers of other clusters are not ours", func(t *testing.T) {
		e := healthy(t)
		if _, err := e.api().AddServer(hcloudtest.ServerInfo{
			Name: "plain-staging", ServerType: "cpx21", Location: "fsn1",
			Labels: map[string]string{config.LabelNodeGroup: "plain", config.LabelCluster: "staging"},
		}); err != nil {
			t.Fatal(err)
		}
		checkAccounted(t, observe(t, e.c, e.api()))
	})
	t.Run("b: a server deleted behind the pool's back", func(t *testing.T) {
		e := healthy(t)
		servers := poolServers(t, e.api(), "plain")
		if !e.api().DeleteServerNow(servers[0].ID) {
			t.Fatalf("server %d did not exist", servers[0].ID)
		}
		mustFail(t, "TargetSize() = 3; want 2", func(tb testing.TB) { checkTargets(tb, observe(t, e.c, e.api())) })
		mustFail(t, "which the API does not hold", func(tb testing.TB) { checkTargets(tb, observe(t, e.c, e.api())) })
	})
	t.Run("b: a target that counts a claim twice", func(t *testing.T) {
		v := observeHealthy(t, healthy)
		v.pools[0].target++
		mustFail(t, "TargetSize() = 4; want 3", func(tb testing.TB) { checkTargets(tb, v) })
	})
	t.Run("b: a server relabelled for another pool", func(t *testing.T) {
		e := healthy(t)
		s := poolServers(t, e.api(), "plain")[0]
		if err := e.api().SetServerLabels(s.ID, map[string]string{config.LabelNodeGroup: "subnet", config.LabelCluster: "prod"}); err != nil {
			t.Fatal(err)
		}
		mustFail(t, `which the API labels for pool "subnet"`, func(tb testing.TB) { checkTargets(tb, observe(t, e.c, e.api())) })
	})
	t.Run("c: a failure with the wrong class", func(t *testing.T) {
		e := healthy(t)
		mustFail(t, "invariant (c)", func(tb testing.TB) {
			checkFailures(tb, observe(t, e.c, e.api()), []failure{{"plain", pool.OutOfResources, "invalid_input"}})
		})
	})
	t.Run("c: a capacity code classed as other", func(t *testing.T) {
		v := observeHealthy(t, healthy)
		in := &v.pools[0].instances[len(v.pools[0].instances)-1]
		in.Error = &pool.ErrorInfo{Class: pool.Other, Code: "resource_unavailable", Message: "sold out"}
		mustFail(t, "want class OutOfResources", func(tb testing.TB) { checkErrorClasses(tb, v) })
	})
	t.Run("c: a failure that vanished", func(t *testing.T) {
		v := observeHealthy(t, healthy)
		v.pools[0].instances = slices.DeleteFunc(v.pools[0].instances, func(in pool.Instance) bool { return in.Error != nil })
		mustFail(t, "invariant (c)", func(tb testing.TB) {
			checkFailures(tb, v, []failure{{"plain", pool.Other, "invalid_input"}})
		})
	})
	t.Run("c: a failed claim the autoscaler cannot see", func(t *testing.T) {
		v := observeHealthy(t, healthy)
		for i := range v.pools[0].instances {
			if v.pools[0].instances[i].Error != nil {
				v.pools[0].instances[i].State = pool.Running
			}
		}
		mustFail(t, "want creating", func(tb testing.TB) { checkErrorClasses(tb, v) })
	})
	t.Run("d: a goroutine left running", func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		stop := make(chan struct{})
		go func() { <-stop }()
		rec := &recorder{TB: t}
		checkNoLeaks(rec, ignore)
		close(stop)
		if !rec.Failed() {
			t.Fatal("checkNoLeaks passed with a goroutine left running")
		}
		checkNoLeaks(t, ignore)
	})
}
