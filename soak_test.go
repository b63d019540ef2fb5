package hcloudscale_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/goleak"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/pool"
)

var soak = flag.Bool("soak", false, "run the soak test for up to 2 minutes (also HCLOUDSCALE_SOAK=1)")

// TestSoak runs random scale operations (IncreaseSize, DeleteInstances,
// DecreaseTargetSize, restarts, clock jumps) and lifecycle events of
// servers (power cycle, reset, shutdown, rebuild, migration, status
// flicker; see runLifecycleEvent) on three pools while random
// faults hit the API, and checks invariants (a) to (d) after every step.
// A normal run takes 25 steps of seed 1; -soak or HCLOUDSCALE_SOAK=1 runs
// up to 2000 steps of a random seed for at most 2 minutes.
// HCLOUDSCALE_SOAK_SEED replays a run; the seed is printed on failure.
//
//	go test -run TestSoak -soak -v .
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak test")
	}
	// The short run replays one seed, so that a failure in CI is a change
	// in behaviour, not a new random walk; the long run explores.
	steps, budget, seed := 25, 20*time.Second, uint64(1)
	if *soak || os.Getenv("HCLOUDSCALE_SOAK") == "1" {
		steps, budget, seed = 2000, 2*time.Minute, uint64(time.Now().UnixNano())
	}
	if s := os.Getenv("HCLOUDSCALE_SOAK_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("HCLOUDSCALE_SOAK_SEED: %v", err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay with HCLOUDSCALE_SOAK_SEED=%d", seed)
		}
	})
	rng := rand.New(rand.NewPCG(seed, seed))
	ignore := goleak.IgnoreCurrent()

	e := newFaultEnv(t, faultOptions{})
	defer e.stop()
	ctx := context.Background()
	start := time.Now()
	done := 0
	for ; done < steps && time.Since(start) < budget; done++ {
		var did []string
		if rng.IntN(10) < 4 {
			did = append(did, injectRandomFault(rng, e))
		}
		for range 1 + rng.IntN(2) {
			did = append(did, randomOperation(t, rng, e, ctx))
		}
		if err := e.settle(); err != nil {
			t.Fatalf("step %d (%v): %v", done, did, err)
		}
		v := observe(t, e.c, e.api())
		checkAccounted(t, v)
		checkTargets(t, v)
		checkErrorClasses(t, v)
		if t.Failed() {
			t.Fatalf("step %d (%v) broke an invariant", done, did)
		}
		t.Logf("step %d: %v", done, did)
	}

	// Scale everything down; nothing may remain.
	for _, p := range e.c.Pools() {
		if err := p.ForceDeleteInstances(ctx, ids(p)); err != nil {
			t.Logf("final delete of %s: %v", p.Name(), err)
		}
	}
	if err := e.settle(); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, observe(t, e.c, e.api()), nil)
	e.stop()
	checkNoLeaks(t, ignore)
	t.Logf("%d steps in %s (seed %d)", done, time.Since(start).Round(time.Millisecond), seed)
}

// soakFaults are the faults the soak test injects. A DELETE whose
// response is lost is left out: the pool then keeps a deleted server until
// the next listing (a known bug, see TestFaultMatrix).
var soakFaults = []struct {
	name   string
	inject func(api *hcloudtest.Server)
}{
	{"create resource_unavailable", func(api *hcloudtest.Server) {
		api.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Code: "resource_unavailable"})
	}},
	{"create resource_limit_exceeded", func(api *hcloudtest.Server) {
		api.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Code: "resource_limit_exceeded"})
	}},
	{"create placement_error", func(api *hcloudtest.Server) {
		api.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Code: "placement_error"})
	}},
	{"create invalid_input", func(api *hcloudtest.Server) {
		api.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Code: "invalid_input"})
	}},
	{"create server_error", func(api *hcloudtest.Server) {
		api.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Code: "server_error"})
	}},
	{"create 503", func(api *hcloudtest.Server) {
		api.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Status: http.StatusServiceUnavailable})
	}},
	{"create dropped", func(api *hcloudtest.Server) { api.DropConnection("POST /servers", 1, false) }},
	{"create response lost", func(api *hcloudtest.Server) { api.DropConnection("POST /servers", 1, true) }},
	{"create_server fails", func(api *hcloudtest.Server) { api.FailAction("create_server", "", "") }},
	{"start_server fails", func(api *hcloudtest.Server) { api.FailAction("start_server", "", "") }},
	{"attach fails", func(api *hcloudtest.Server) { api.FailAction("attach_to_network", "", "") }},
	{"poweron fails", func(api *hcloudtest.Server) { api.FailAction("start_server", "", "") }},
	{"delete_server fails", func(api *hcloudtest.Server) { api.FailAction("delete_server", "", "") }},
	{"delete server_error", func(api *hcloudtest.Server) {
		api.FailRequest("DELETE /servers/{id}", 1, hcloudtest.RequestFault{Code: "server_error"})
	}},
}

func injectRandomFault(rng *rand.Rand, e *faultEnv) string {
	f := soakFaults[rng.IntN(len(soakFaults))]
	f.inject(e.api())
	return "fault " + f.name
}

// randomOperation does what the autoscaler (or the operator) might do next
// and returns what it did. Errors that the operation may legitimately
// return are logged; others fail the test.
func randomOperation(t *testing.T, rng *rand.Rand, e *faultEnv, ctx context.Context) string {
	pools := e.c.Pools()
	p := pools[rng.IntN(len(pools))]
	switch op := rng.IntN(22); {
	case op < 8:
		room := p.MaxSize() - p.TargetSize()
		if room <= 0 {
			return p.Name() + " full"
		}
		n := 1 + rng.IntN(min(room, 3))
		err := p.IncreaseSize(ctx, n)
		if err != nil && !errors.Is(err, pool.ErrOfferingUnavailable) {
			t.Errorf("%s.IncreaseSize(%d) = %v; want nil or ErrOfferingUnavailable", p.Name(), n, err)
		}
		return fmt.Sprintf("%s.IncreaseSize(%d): %v", p.Name(), n, err)
	case op < 14:
		all := ids(p)
		if len(all) == 0 {
			return p.Name() + " empty"
		}
		rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		some := all[:1+rng.IntN(len(all))]
		err := p.DeleteInstances(ctx, some)
		return fmt.Sprintf("%s.DeleteInstances(%d of %d): %v", p.Name(), len(some), len(all), err)
	case op < 17:
		// A scale-up the autoscaler takes back before the creates went out.
		room := p.MaxSize() - p.TargetSize()
		if room <= 0 {
			return p.Name() + " full"
		}
		n := 1 + rng.IntN(room)
		up := p.IncreaseSize(ctx, n)
		delta := -(1 + rng.IntN(n+1))
		if err := p.DecreaseTargetSize(ctx, delta); err != nil {
			t.Errorf("%s.DecreaseTargetSize(%d) = %v; want nil (it clamps)", p.Name(), delta, err)
		}
		return fmt.Sprintf("%s.IncreaseSize(%d): %v, DecreaseTargetSize(%d)", p.Name(), n, up, delta)
	case op < 19:
		d := time.Duration(1+rng.IntN(10)) * time.Minute
		e.clock.Advance(d)
		return "clock +" + d.String()
	case op < 21:
		// Someone power-cycles, resets, shuts down, rebuilds or migrates
		// a node of any age, or its status flickers; the simulated
		// autoscaler deletes failed creations after every listing.
		var running []int64
		for _, s := range poolServers(t, e.api(), p.Name()) {
			if s.Status == hcloud.ServerStatusRunning {
				running = append(running, s.ID)
			}
		}
		if len(running) == 0 {
			return p.Name() + " has no running server"
		}
		id := running[rng.IntN(len(running))]
		ev := lifecycleEvents[rng.IntN(len(lifecycleEvents))]
		runLifecycleEvent(t, e, id, ev.name, ev.steps)
		return fmt.Sprintf("%s: %s of server %d", p.Name(), ev.name, id)
	default:
		e.restart()
		return "restart"
	}
}
