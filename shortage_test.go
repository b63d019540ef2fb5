package hcloudscale_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/pool"
)

// A pool whose server type is sold out does not stop the Cluster: it
// starts with the offering marked unavailable, says so, fails fast, and
// works again once the type is back and the mark has expired.
func TestNewStartsInShortage(t *testing.T) {
	clock := hcloudtest.NewManualClock(faultEpoch)
	p := newProject(t, hcloudtest.WithClock(clock), hcloudtest.WithRateLimit(0, 0), hcloudtest.WithDefaultActionDuration(0))
	if err := p.api.SetServerTypeAvailable("ccx13", "hel1", false); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	c := newCluster(t, p.load(t, healthyClusterConfig(), nil, healthyNodes),
		hcloudscale.WithClock(hcloudtest.WallWaits(clock)), hcloudscale.WithRegisterer(reg))
	ctx := context.Background()

	want := `--nodes[2] (dedicated): server type "ccx13" is not available in location "hel1" (sold out)`
	if got := strings.Join(c.Warnings(), "\n"); !strings.Contains(got, want) {
		t.Errorf("Warnings() = %q; want one containing %q", c.Warnings(), want)
	}
	gauge := `
# HELP hcloudscale_unavailable_offerings 1 while a server type is remembered as unavailable in a location after a capacity error.
# TYPE hcloudscale_unavailable_offerings gauge
hcloudscale_unavailable_offerings{location="hel1",server_type="ccx13"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(gauge), "hcloudscale_unavailable_offerings"); err != nil {
		t.Errorf("metrics after start: %v", err)
	}

	dedicated := c.Pool("dedicated")
	if u := dedicated.Status().Unavailable; len(u) != 1 || u[0].ServerType != "ccx13" || u[0].Code != pool.CodeServerTypeUnavailable {
		t.Errorf("Status().Unavailable = %+v; want ccx13 with code %s", u, pool.CodeServerTypeUnavailable)
	}
	before := len(p.api.Requests())
	err := dedicated.IncreaseSize(ctx, 1)
	if !errors.Is(err, pool.ErrOfferingUnavailable) {
		t.Fatalf("IncreaseSize of the sold-out pool = %v; want ErrOfferingUnavailable", err)
	}
	if n := len(p.api.Requests()) - before; n != 0 {
		t.Errorf("IncreaseSize of the sold-out pool made %d requests; want none", n)
	}
	if got := dedicated.TargetSize(); got != 0 {
		t.Errorf("TargetSize of the sold-out pool = %d after the refused increase; want 0", got)
	}
	// The other pools scale.
	if err := c.Pool("workers").IncreaseSize(ctx, 1); err != nil {
		t.Errorf("IncreaseSize of another pool: %v", err)
	}

	// Hetzner offers the type again; the mark still holds until it expires.
	if err := p.api.SetServerTypeAvailable("ccx13", "hel1", true); err != nil {
		t.Fatal(err)
	}
	if err := dedicated.IncreaseSize(ctx, 1); !errors.Is(err, pool.ErrOfferingUnavailable) {
		t.Fatalf("IncreaseSize before the mark expired = %v; want ErrOfferingUnavailable", err)
	}
	clock.Advance(pool.DefaultUnavailableTTL + time.Second)
	typeFetches := p.api.Count("GET /server_types")
	if err := dedicated.IncreaseSize(ctx, 1); err != nil {
		t.Fatalf("IncreaseSize after the mark expired: %v", err)
	}
	// The create of that claim reads the catalogue anew (the one in memory
	// says sold out) and sends the request.
	sel := config.LabelNodeGroup + "=dedicated"
	deadline := time.Now().Add(20 * time.Second)
	for {
		servers, err := p.api.Servers(sel)
		if err != nil {
			t.Fatal(err)
		}
		if len(servers) == 1 {
			break
		}
		if in := dedicated.Instances(); len(in) == 1 && in[0].Error != nil {
			t.Fatalf("create after the type came back failed: %+v", in[0].Error)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no server of pool dedicated after the type came back; instances %+v", dedicated.Instances())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := p.api.Count("GET /server_types") - typeFetches; got != 1 {
		t.Errorf("server-type catalogue fetched %d times after the mark expired; want 1", got)
	}
	if u := dedicated.Status().Unavailable; len(u) != 0 {
		t.Errorf("Status().Unavailable = %+v after the mark expired; want none", u)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(""), "hcloudscale_unavailable_offerings"); err != nil {
		t.Errorf("metrics after the mark expired: %v", err)
	}
}

// A type still sold out when the mark expires fails the one create that
// tries it, as at runtime, and is marked again.
func TestShortageOutlastsTheMark(t *testing.T) {
	clock := hcloudtest.NewManualClock(faultEpoch)
	p := newProject(t, hcloudtest.WithClock(clock), hcloudtest.WithRateLimit(0, 0), hcloudtest.WithDefaultActionDuration(0))
	if err := p.api.SetServerTypeAvailable("ccx13", "hel1", false); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, p.load(t, healthyClusterConfig(), nil, healthyNodes), hcloudscale.WithClock(hcloudtest.WallWaits(clock)))
	ctx := context.Background()
	dedicated := c.Pool("dedicated")
	clock.Advance(pool.DefaultUnavailableTTL + time.Second)
	if err := dedicated.IncreaseSize(ctx, 1); err != nil {
		t.Fatalf("IncreaseSize after the mark expired: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		in := dedicated.Instances()
		if len(in) == 1 && in[0].Error != nil {
			if in[0].Error.Class != pool.OutOfResources {
				t.Errorf("placeholder error %+v; want OutOfResources", in[0].Error)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failed placeholder; instances %+v", in)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := p.api.Count("POST /servers"); n != 0 {
		t.Errorf("%d create requests for a sold-out type; want none", n)
	}
	if err := dedicated.IncreaseSize(ctx, 1); !errors.Is(err, pool.ErrOfferingUnavailable) {
		t.Errorf("IncreaseSize after the failed create = %v; want ErrOfferingUnavailable", err)
	}
}

// A placement group without room for the pools' max sizes (another tool's
// servers sit in it) is a warning at start: at runtime a full group is a
// capacity error like a sold-out type.
func TestNewWarnsAboutPlacementGroupRoom(t *testing.T) {
	p := newProject(t)
	for i := range 8 {
		if _, err := p.api.AddServer(hcloudtest.ServerInfo{Name: "db-" + itoa(int64(i)), ServerType: "cpx21", Location: "fsn1",
			Status: hcloud.ServerStatusRunning, PlacementGroup: placementGroupID(t, p.api)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, lenient := range []bool{false, true} {
		var opts []hcloudscale.Option
		if lenient {
			opts = append(opts, hcloudscale.WithLenientChecks())
		}
		c := newCluster(t, p.load(t, healthyClusterConfig(), nil, healthyNodes), opts...)
		want := `nodeConfigs.workers.placementGroup: placement group "spread" has room for 2 servers (8 of 10 taken by other servers) but pools workers may grow to 5`
		if got := strings.Join(c.Warnings(), "\n"); !strings.Contains(got, want) {
			t.Errorf("lenient %v: Warnings() = %q; want one containing %q", lenient, c.Warnings(), want)
		}
		if len(c.Pools()) != 3 {
			t.Errorf("lenient %v: %d pools; want 3", lenient, len(c.Pools()))
		}
	}
}

// A pool whose own imagesForArch leaves out its server type's
// architecture boots the global entry's image, where upstream booted the
// newest snapshot: New says so for that pool only.
func TestNewWarnsAboutInheritedImage(t *testing.T) {
	p := newProject(t)
	cc := healthyClusterConfig()
	nodeConfig(cc, "arm")["imagesForArch"] = map[string]string{"amd64": "ubuntu-24.04"}     // cax11: arm64
	nodeConfig(cc, "workers")["imagesForArch"] = map[string]string{"amd64": "ubuntu-24.04"} // cpx21: amd64
	c := newCluster(t, p.load(t, cc, nil, healthyNodes))
	got := strings.Join(c.Warnings(), "\n")
	want := `--nodes[1] (arm): the pool's imagesForArch has no arm64 entry: its servers boot "ubuntu-24.04" from the global imagesForArch, where upstream let the pool's object replace the global one and booted the newest arm64 snapshot`
	if !strings.Contains(got, want) {
		t.Errorf("Warnings() = %q; want one containing %q", c.Warnings(), want)
	}
	if strings.Contains(got, "(workers): the pool's imagesForArch") {
		t.Errorf("Warnings() = %q; want none for workers, whose amd64 servers have their own entry", c.Warnings())
	}
}
