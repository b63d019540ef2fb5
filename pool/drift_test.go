package pool

import (
	"regexp"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

func TestUserDataHashFitsALabelValue(t *testing.T) {
	for _, userData := range []string{"", testCloudInit, string(make([]byte, config.MaxCloudInitBytes))} {
		h := UserDataHash(userData)
		if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(h) {
			t.Errorf("UserDataHash = %q; want 32 hex digits", h)
		}
		if err := config.CheckServerLabel("x", h); err != nil {
			t.Errorf("UserDataHash %q is not a valid label value: %v", h, err)
		}
	}
	if UserDataHash("a") == UserDataHash("b") {
		t.Error("two user data, one hash")
	}
}

// TestDriftPerReason changes one setting at a time: Drift names that
// setting for the server built before, and nothing is replaced.
func TestDriftPerReason(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.addReferences()
	ctx := t.Context()
	base := poolConfig("workers", 0, 3)
	base.Network = "net"
	base.Firewalls = []string{"fw"}
	base.PlacementGroup = "pg"
	base.ServerLabels["team"] = "a"
	p := e.newPool(base)
	if err := p.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	server := e.servers("workers")[0]
	if got := server.Labels[config.LabelUserDataHash]; got != UserDataHash(testCloudInit) {
		t.Fatalf("server label %s = %q; want the hash of its user data", config.LabelUserDataHash, got)
	}
	check := func(name string, want []DriftReason) {
		t.Helper()
		drift, err := p.Drift(ctx)
		if err != nil {
			t.Fatalf("%s: Drift: %v", name, err)
		}
		var got []DriftReason
		for _, d := range drift {
			if d.ServerID != server.ID || d.UserDataUnknown || len(d.Details) != len(d.Reasons) {
				t.Errorf("%s: drift entry %+v", name, d)
			}
			got = append(got, d.Reasons...)
		}
		if diff := gocmp.Diff(want, got); diff != "" {
			t.Errorf("%s: reasons (-want +got):\n%s", name, diff)
		}
	}
	check("unchanged", nil)

	for _, tt := range []struct {
		reason DriftReason
		change func(*config.Pool)
	}{
		{DriftServerType, func(c *config.Pool) { c.ServerType = "cx33" }},
		{DriftLocation, func(c *config.Pool) { c.Location = "nbg1" }},
		{DriftImage, func(c *config.Pool) { c.Images = config.ImagesForArch{AMD64: "debian-12", ARM64: "debian-12"} }},
		{DriftPlacementGroup, func(c *config.Pool) { c.PlacementGroup = "" }},
		{DriftNetwork, func(c *config.Pool) { c.Network = "" }},
		{DriftFirewalls, func(c *config.Pool) { c.Firewalls = []string{"fw", "fw2"} }},
		{DriftLabels, func(c *config.Pool) { c.ServerLabels["team"] = "b" }},
		{DriftUserData, func(c *config.Pool) { c.CloudInit = "#cloud-config\n# changed\n" }},
	} {
		cfg := base
		cfg.ServerLabels = map[string]string{}
		for k, v := range base.ServerLabels {
			cfg.ServerLabels[k] = v
		}
		tt.change(&cfg)
		if err := p.Reconfigure(cfg, e.deps(cfg)); err != nil {
			t.Fatalf("%s: Reconfigure: %v", tt.reason, err)
		}
		check(string(tt.reason), []DriftReason{tt.reason})
	}
	if err := p.Reconfigure(base, e.deps(base)); err != nil {
		t.Fatal(err)
	}
	check("back to the base", nil)
	if n := e.fake.Count("DELETE /servers/{id}"); n != 0 {
		t.Errorf("%d delete requests; drift replaces nothing", n)
	}
}

// A server without the user-data hash (created before it was recorded)
// is unknown, not drifted; a template rendered per server is compared as
// rendered for that server.
func TestDriftUserDataUnknownAndTemplates(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := t.Context()
	cfg := poolConfig("workers", 0, 3)
	cfg.CloudInit = "#cloud-config\nhostname: <% .ServerName %>\n"
	cfg.CloudInitTemplate = true
	p := e.newPool(cfg)
	if err := p.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	old, err := e.fake.AddServer(hcloudtest.ServerInfo{Name: "workers-00000000000000aa", Status: hcloud.ServerStatusRunning,
		Labels: map[string]string{config.LabelNodeGroup: "workers", config.LabelCluster: testCluster}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cache.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	drift, err := p.Drift(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(drift) != 1 || drift[0].ServerID != old || !drift[0].UserDataUnknown || drift[0].Drifted() {
		t.Errorf("Drift = %+v; want only the server without a hash, unknown and not drifted", drift)
	}
}

// TestDriftLeavesOutServersInACreateFlow: a subnet pool's server is off
// and not on the network between its create and its attach. Listed then,
// it is not drift (no "network" reason while every scale-up runs); once it
// runs attached, a change of the pool's network is.
func TestDriftLeavesOutServersInACreateFlow(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.addReferences()
	ctx := t.Context()
	p := e.newPool(subnetPoolConfig("workers"))
	attach := e.fake.HoldRequest("POST /servers/{id}/actions/attach_to_network", 1)
	defer attach.Release()
	if err := p.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	e.eventually("the attach request", 100*time.Millisecond, func() bool {
		select {
		case <-attach.Arrived():
			return true
		default:
			return false
		}
	})
	if _, err := e.cache.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	listed := e.cache.Current().Pool("workers")
	if len(listed) != 1 || listed[0].Status != hcloud.ServerStatusOff || len(listed[0].NetworkIDs) != 0 {
		t.Fatalf("listed servers = %+v; want one off, not on the network", *listed[0])
	}
	drift, err := p.Drift(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range drift {
		if d.Drifted() {
			t.Errorf("Drift() during the create flow = %+v; want no drift", d)
		}
	}

	attach.Release()
	e.settle(p)
	if drift, err := p.Drift(ctx); err != nil || len(drift) != 0 {
		t.Errorf("Drift() of the running server = %+v, %v; want none", drift, err)
	}
	if _, err := e.fake.AddNetwork(hcloudtest.Network{
		Name: "net2", IPRange: "10.1.0.0/16", Subnets: []hcloudtest.Subnet{{IPRange: "10.1.1.0/24"}},
	}); err != nil {
		t.Fatal(err)
	}
	cfg := subnetPoolConfig("workers")
	cfg.Network = "net2"
	cfg.SubnetIPRange = mustPrefix("10.1.1.0/24")
	if err := p.Reconfigure(cfg, e.deps(cfg)); err != nil {
		t.Fatal(err)
	}
	drift, err = p.Drift(ctx)
	if err != nil || len(drift) != 1 || !slices.Contains(drift[0].Reasons, DriftNetwork) {
		t.Errorf("Drift() after the network changed = %+v, %v; want the server drifted on network", drift, err)
	}
}

// TestDriftLeavesOutAnotherProcesssCreateFlow: a pool that does not resume
// (a standby replica, the status command) lists a subnet pool's server that
// the leader has created and not attached yet: off, on no network, young.
// It is no drift; one off the network for longer than the creation timeout
// is (someone detached it, or its flow was left long ago).
func TestDriftLeavesOutAnotherProcesssCreateFlow(t *testing.T) {
	for _, tc := range []struct {
		age     time.Duration
		drifted bool
	}{{age: time.Minute}, {age: time.Hour, drifted: true}} {
		t.Run(tc.age.String(), func(t *testing.T) {
			e := newEnv(t, envOptions{})
			e.addReferences()
			e.addLeftover("workers", hcloud.ServerStatusOff, tc.age)
			p := e.newPool(subnetPoolConfig("workers"))
			if _, err := e.cache.Get(t.Context()); err != nil {
				t.Fatal(err)
			}
			drift, err := p.Drift(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			got := len(drift) == 1 && slices.Equal(drift[0].Reasons, []DriftReason{DriftNetwork})
			if got != tc.drifted || (!tc.drifted && len(drift) != 0) {
				t.Errorf("Drift() = %+v; want drifted on network: %v", drift, tc.drifted)
			}
		})
	}
}
