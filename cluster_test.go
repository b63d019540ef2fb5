package hcloudscale_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// project is a fake Hetzner project with the objects a healthy
// configuration refers to.
type project struct {
	api *hcloudtest.Server
}

func newProject(t *testing.T, opts ...hcloudtest.Option) *project {
	t.Helper()
	api := hcloudtest.NewServer(opts...)
	t.Cleanup(api.Close)
	must := func(_ int64, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(api.AddNetwork(hcloudtest.Network{Name: "k8s", IPRange: "10.0.0.0/8", Subnets: []hcloudtest.Subnet{
		{IPRange: "10.0.0.0/16"}, {IPRange: "10.1.0.0/16"},
	}}))
	must(api.AddFirewall(hcloudtest.Firewall{Name: "nodes"}))
	must(api.AddFirewall(hcloudtest.Firewall{Name: "ingress"}))
	must(api.AddSSHKey(hcloudtest.SSHKey{Name: "ops"}))
	must(api.AddPlacementGroup(hcloudtest.PlacementGroup{Name: "spread"}))
	return &project{api: api}
}

// clusterConfig is a cluster-config document; tests change it before
// loading.
type clusterConfig map[string]any

func healthyClusterConfig() clusterConfig {
	return clusterConfig{
		"clusterName":          "prod",
		"defaultSubnetIPRange": "10.0.0.0/16",

		"imagesForArch": map[string]string{"amd64": "ubuntu-24.04", "arm64": "ubuntu-24.04"},
		"nodeConfigs": map[string]any{
			"workers": map[string]any{
				"cloudInit":      "#cloud-config\n",
				"labels":         map[string]string{"role": "worker"},
				"firewalls":      []string{"ingress"},
				"placementGroup": "spread",
			},
			"arm": map[string]any{
				"cloudInit":     "#cloud-config\n",
				"subnetIPRange": "10.1.0.0/16",
			},
			"dedicated": map[string]any{"cloudInit": "#cloud-config\n"},
		},
	}
}

func (p *project) env(cc clusterConfig, extra map[string]string) config.Env {
	doc, err := json.Marshal(cc)
	if err != nil {
		panic(err)
	}
	vars := map[string]string{
		"HCLOUD_TOKEN":          p.api.Token(),
		"HCLOUD_ENDPOINT":       p.api.URL(),
		"HCLOUD_CLUSTER_CONFIG": base64.StdEncoding.EncodeToString(doc),
		"HCLOUD_NETWORK":        "k8s",
		"HCLOUD_FIREWALL":       "nodes",
		"HCLOUD_SSH_KEY":        "ops",
	}
	for k, v := range extra {
		vars[k] = v
	}
	return config.MapEnv(vars, nil)
}

var healthyNodes = []string{
	"0:5:cpx21:fsn1:workers",
	"1:3:cax11:nbg1:arm",
	"0:2:ccx13:hel1:dedicated",
}

func (p *project) load(t *testing.T, cc clusterConfig, extra map[string]string, nodes []string) *config.Config {
	t.Helper()
	cfg, err := config.Load(p.env(cc, extra), nodes)
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	return cfg
}

func fastClient() hcloudscale.Option {
	return hcloudscale.WithClientOptions(
		hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond), MaxRetries: 3}),
		hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond)}),
	)
}

func newCluster(t *testing.T, cfg *config.Config, opts ...hcloudscale.Option) *hcloudscale.Cluster {
	t.Helper()
	c, err := hcloudscale.New(context.Background(), cfg, append([]hcloudscale.Option{fastClient(), hcloudscale.WithPollInterval(time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func TestNewHealthyMultiPool(t *testing.T) {
	p := newProject(t)
	// A server of this cluster left from an earlier run, one of another
	// cluster with the same pool name, and a control-plane server.
	ours, err := p.api.AddServer(hcloudtest.ServerInfo{Name: "workers-1", ServerType: "cpx21", Location: "fsn1", Status: hcloud.ServerStatusRunning,
		Labels: map[string]string{config.LabelNodeGroup: "workers", config.LabelCluster: "prod"}})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := p.api.AddServer(hcloudtest.ServerInfo{Name: "workers-2", ServerType: "cpx21", Location: "fsn1", Status: hcloud.ServerStatusRunning,
		Labels: map[string]string{config.LabelNodeGroup: "workers", config.LabelCluster: "staging"}})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := p.api.AddServer(hcloudtest.ServerInfo{Name: "control-plane-1", ServerType: "cpx21", Location: "fsn1", Status: hcloud.ServerStatusRunning})
	if err != nil {
		t.Fatal(err)
	}

	cfg := p.load(t, healthyClusterConfig(), nil, healthyNodes)
	p.api.ResetCounts()
	c := newCluster(t, cfg)

	var names []string
	for _, pl := range c.Pools() {
		names = append(names, pl.Name())
	}
	if diff := cmp.Diff([]string{"workers", "arm", "dedicated"}, names); diff != "" {
		t.Errorf("Pools() (-want +got):\n%s", diff)
	}
	if c.Pool("arm") == nil || c.Pool("nope") != nil {
		t.Errorf("Pool(arm) = %v, Pool(nope) = %v; want a pool and nil", c.Pool("arm"), c.Pool("nope"))
	}
	if len(c.Warnings()) != 0 {
		t.Errorf("Warnings() = %q; want none", c.Warnings())
	}

	for _, tc := range []struct {
		providerID, nodeName, want string
	}{
		{providerID: "hcloud://" + itoa(ours), want: "workers"},
		{nodeName: "workers-1", want: "workers"},
		{providerID: "hcloud://" + itoa(theirs), want: ""},
		{providerID: "hcloud://" + itoa(cp), want: ""},
		{providerID: "hrobot://1234", nodeName: "workers-1", want: ""},
		{providerID: "hcloud://bm-1234", want: ""},
		{providerID: "hcloudscale://arm/arm-0123456789abcdef", nodeName: "hcloudscale://arm/arm-0123456789abcdef", want: "arm"},
	} {
		got := ""
		if pl := c.PoolForNode(tc.providerID, tc.nodeName); pl != nil {
			got = pl.Name()
		}
		if got != tc.want {
			t.Errorf("PoolForNode(%q, %q) = %q; want %q", tc.providerID, tc.nodeName, got, tc.want)
		}
	}

	// One listing and one server-type listing, and a lookup per reference.
	counts := p.api.Counts()
	if counts["GET /servers"] != 1 || counts["GET /server_types"] != 1 {
		t.Errorf("start-up requests = %v; want one server listing and one server-type listing", counts)
	}

	ctx := context.Background()
	for _, tc := range []struct {
		id   int64
		want bool
	}{{ours, true}, {cp, true}, {999999, false}} {
		got, err := c.HasServer(ctx, "hcloud://"+itoa(tc.id))
		if err != nil || got != tc.want {
			t.Errorf("HasServer(%d) = %t, %v; want %t, nil", tc.id, got, err, tc.want)
		}
	}
	before := p.api.Count("GET /servers/{id}")
	if _, err := c.HasServer(ctx, "hcloud://"+itoa(cp)); err != nil {
		t.Fatal(err)
	}
	if after := p.api.Count("GET /servers/{id}"); after != before {
		t.Errorf("a second HasServer for the same server cost %d requests; want 0 (cached)", after-before)
	}
	if _, err := c.HasServer(ctx, "hrobot://1"); err == nil {
		t.Error("HasServer(hrobot://1) = nil error; want ErrNotHCloud")
	}
}

func TestNewReportsMissingReferences(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(cc clusterConfig, env map[string]string)
		wants []string
	}{
		{
			name:  "network",
			edit:  func(_ clusterConfig, env map[string]string) { env["HCLOUD_NETWORK"] = "nope" },
			wants: []string{`HCLOUD_NETWORK: network "nope" does not exist`},
		},
		{
			name:  "ssh key",
			edit:  func(_ clusterConfig, env map[string]string) { env["HCLOUD_SSH_KEY"] = "ops,missing" },
			wants: []string{`HCLOUD_SSH_KEY[1]: SSH key "missing" does not exist`},
		},
		{
			name:  "global firewall",
			edit:  func(_ clusterConfig, env map[string]string) { env["HCLOUD_FIREWALL"] = "nodes,gone" },
			wants: []string{`HCLOUD_FIREWALL[1]: firewall "gone" does not exist`},
		},
		{
			name: "pool firewall",
			edit: func(cc clusterConfig, _ map[string]string) {
				nodeConfig(cc, "workers")["firewalls"] = []string{"ingress", "egress"}
			},
			wants: []string{`nodeConfigs.workers.firewalls[`, `firewall "egress" does not exist`},
		},
		{
			name:  "placement group",
			edit:  func(cc clusterConfig, _ map[string]string) { nodeConfig(cc, "workers")["placementGroup"] = "nowhere" },
			wants: []string{`nodeConfigs.workers.placementGroup: placement group "nowhere" does not exist`},
		},
		{
			name:  "pool subnet",
			edit:  func(cc clusterConfig, _ map[string]string) { nodeConfig(cc, "arm")["subnetIPRange"] = "10.2.0.0/16" },
			wants: []string{`nodeConfigs.arm.subnetIPRange: 10.2.0.0/16 is not a subnet of network "k8s"`},
		},
		{
			name:  "default subnet",
			edit:  func(cc clusterConfig, _ map[string]string) { cc["defaultSubnetIPRange"] = "10.0.0.0/17" },
			wants: []string{`defaultSubnetIPRange: 10.0.0.0/17 is not a subnet of network "k8s"`},
		},
		{
			name: "all at once",
			edit: func(cc clusterConfig, env map[string]string) {
				env["HCLOUD_SSH_KEY"] = "missing"
				env["HCLOUD_FIREWALL"] = "gone"
				nodeConfig(cc, "workers")["placementGroup"] = "nowhere"
				nodeConfig(cc, "arm")["subnetIPRange"] = "10.2.0.0/16"
			},
			wants: []string{`HCLOUD_SSH_KEY[0]`, `HCLOUD_FIREWALL[0]`, `nodeConfigs.workers.placementGroup`, `nodeConfigs.arm.subnetIPRange`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProject(t)
			cc, env := healthyClusterConfig(), map[string]string{}
			tc.edit(cc, env)
			checkNewFails(t, p.load(t, cc, env, healthyNodes), tc.wants)
		})
	}
}

func TestNewReportsAvailabilityProblems(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, api *hcloudtest.Server)
		nodes []string
		edit  func(cc clusterConfig)
		wants []string
	}{
		{
			name:  "unknown server type",
			nodes: []string{"0:5:cx11:fsn1:workers", "1:3:cax11:nbg1:arm", "0:2:ccx13:hel1:dedicated"},
			wants: []string{`--nodes[0] (workers): server type "cx11" does not exist`},
		},
		{
			name:  "type not offered in the location",
			nodes: []string{"0:5:cpx21:fsn1:workers", "1:3:cax11:ash:arm", "0:2:ccx13:hel1:dedicated"},
			wants: []string{`--nodes[1] (arm): server type "cax11" is not offered in location "ash"`},
		},
		{
			name: "every offering checked",
			edit: func(cc clusterConfig) {
				cc["imagesForArch"] = map[string]string{"amd64": "ubuntu-24.04", "arm64": "no-such-image"}
				cc["nodeConfigs"].(map[string]any)["workers"].(map[string]any)["offerings"] = []map[string]string{
					{"serverType": "cx11", "location": "fsn1"}, {"serverType": "cax11", "location": "ash"},
					{"serverType": "cax21", "location": "nbg1"}, {"serverType": "cpx31", "location": "nbg1"},
				}
			},
			wants: []string{
				`nodeConfigs.workers.offerings[0].serverType: server type "cx11" does not exist`,
				`nodeConfigs.workers.offerings[1].location: server type "cax11" is not offered in location "ash"`,
				`nodeConfigs.workers.offerings[2]: image for server type "cax21" (arm64): pool "workers"`,
				`--nodes[1] (arm): image for server type "cax11" (arm64)`,
			},
		},
		{
			name: "no image for the architecture",
			edit: func(cc clusterConfig) {
				cc["imagesForArch"] = map[string]string{"amd64": "ubuntu-24.04", "arm64": "no-such-image"}
			},
			wants: []string{`--nodes[1] (arm): image for server type "cax11" (arm64)`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProject(t)
			if tc.setup != nil {
				tc.setup(t, p.api)
			}
			nodes := tc.nodes
			if nodes == nil {
				nodes = healthyNodes
			}
			cc := healthyClusterConfig()
			if tc.edit != nil {
				tc.edit(cc)
			}
			checkNewFails(t, p.load(t, cc, nil, nodes), tc.wants)
		})
	}
}

func TestNewWarnsAboutDeprecatedServerType(t *testing.T) {
	p := newProject(t)
	if err := p.api.DeprecateServerType("ccx13", "hel1", time.Now().Add(-time.Hour), time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, p.load(t, healthyClusterConfig(), nil, healthyNodes))
	want := []string{`--nodes[2] (dedicated): server type "ccx13" is deprecated in location "hel1" and can be ordered until 2031-01-01`}
	if diff := cmp.Diff(want, c.Warnings()); diff != "" {
		t.Errorf("Warnings() (-want +got):\n%s", diff)
	}
}

func checkNewFails(t *testing.T, cfg *config.Config, wants []string) {
	t.Helper()
	c, err := hcloudscale.New(context.Background(), cfg, fastClient())
	if err == nil {
		c.Close(context.Background())
		t.Fatalf("New succeeded; want an error containing %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("New error does not contain %q:\n%v", w, err)
		}
	}
	// Every problem names its setting the way config.Load does.
	fields := config.FieldErrors(err)
	if len(fields) == 0 {
		t.Fatalf("config.FieldErrors(New error) is empty; want one per problem:\n%v", err)
	}
	for _, fe := range fields {
		if fe.Path == "" || !strings.Contains(err.Error(), fe.Path+": ") {
			t.Errorf("FieldError %+v: want a path that prefixes its message", fe)
		}
	}
}

func nodeConfig(cc clusterConfig, pool string) map[string]any {
	return cc["nodeConfigs"].(map[string]any)[pool].(map[string]any)
}

func placementGroupID(t *testing.T, api *hcloudtest.Server) int64 {
	t.Helper()
	pg, _, err := api.Client().PlacementGroup.GetByName(context.Background(), "spread")
	if err != nil || pg == nil {
		t.Fatalf("placement group spread: %v, %v", pg, err)
	}
	return pg.ID
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestNewLenientChecks(t *testing.T) {
	p := newProject(t)
	if err := p.api.SetServerTypeAvailable("ccx13", "hel1", false); err != nil {
		t.Fatal(err)
	}
	cc := healthyClusterConfig()
	cc["imagesForArch"] = map[string]string{"amd64": "ubuntu-24.04", "arm64": "no-such-image"}
	c := newCluster(t, p.load(t, cc, nil, healthyNodes), hcloudscale.WithLenientChecks())
	got := strings.Join(c.Warnings(), "\n")
	for _, want := range []string{
		`--nodes[2] (dedicated): server type "ccx13" is not available in location "hel1"`,
		`--nodes[1] (arm): image for server type "cax11" (arm64)`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Warnings() = %q; want one containing %q", c.Warnings(), want)
		}
	}
	if len(c.Pools()) != 3 {
		t.Errorf("Pools() has %d pools; want all 3", len(c.Pools()))
	}

	// References stay errors even when lenient.
	bad := p.load(t, healthyClusterConfig(), map[string]string{"HCLOUD_FIREWALL": "gone"}, healthyNodes)
	if c, err := hcloudscale.New(context.Background(), bad, fastClient(), hcloudscale.WithLenientChecks()); err == nil {
		c.Close(context.Background())
		t.Fatal("New with a missing firewall succeeded under WithLenientChecks; want an error")
	}
}

// TestPoolForNodeMapsEveryInstance: whatever ID an instance carries (a
// claim ID before the create request returns, hcloud://<id> of a server
// still being created that no listing has shown yet, a listed server),
// PoolForNode maps it back to its pool, by provider ID and by node name;
// otherwise the autoscaler skips the node ("No node group for node") and
// cannot remove it when it never registers.
func TestPoolForNodeMapsEveryInstance(t *testing.T) {
	e := newFaultEnv(t, faultOptions{cluster: []hcloudscale.Option{hcloudscale.WithListTTL(time.Hour)}})
	ctx := context.Background()
	for _, name := range []string{"plain", "subnet"} {
		if err := e.c.Pool(name).IncreaseSize(ctx, 2); err != nil {
			t.Fatal(err)
		}
	}
	checkAll := func(when string, wantServers bool) {
		t.Helper()
		for _, p := range e.c.Pools() {
			for _, in := range p.Instances() {
				if wantServers && in.ServerID == 0 {
					t.Errorf("%s: instance %+v has no server yet", when, in)
				}
				for _, node := range [][2]string{{in.ID, in.ID}, {in.ID, in.Name}, {"", in.Name}} {
					got := e.c.PoolForNode(node[0], node[1])
					if got != p {
						t.Errorf("%s: PoolForNode(%q, %q) = %v; want pool %s", when, node[0], node[1], got, p.Name())
					}
				}
			}
		}
	}
	checkAll("claims", false)
	// The manual clock stands still: the create requests return, their
	// actions keep running, and no listing shows the servers.
	e.waitFor("four servers with IDs in Instances", func() bool {
		n := 0
		for _, p := range e.c.Pools() {
			for _, in := range p.Instances() {
				if strings.HasPrefix(in.ID, "hcloud://") {
					n++
				}
			}
		}
		return n == 4
	})
	checkAll("creating", true)
	if got := e.c.PoolForNode("hcloud://999999", "nobody"); got != nil {
		t.Errorf("PoolForNode(unknown server) = %s; want nil", got.Name())
	}
	if err := e.settle(); err != nil {
		t.Fatal(err)
	}
	checkAll("running", true)
}

// TestNewLogsWarningsWhenItFails: a configuration warning is logged even
// when New fails on a missing reference, since it may explain the failure.
func TestNewLogsWarningsWhenItFails(t *testing.T) {
	p := newProject(t)
	cfg := p.load(t, healthyClusterConfig(), map[string]string{
		config.EnvServerCreationTimeout: "0", // a warning: 0 means the default
		"HCLOUD_NETWORK":                "nope",
	}, healthyNodes)
	core, logs := observer.New(zapcore.WarnLevel)
	c, err := hcloudscale.New(context.Background(), cfg, fastClient(), hcloudscale.WithLogger(zap.New(core)))
	if err == nil {
		c.Close(context.Background())
		t.Fatal("New succeeded with a missing network")
	}
	if n := logs.FilterMessageSnippet(config.EnvServerCreationTimeout + ": 0 means the default").Len(); n != 1 {
		t.Errorf("the configuration's warning was logged %d times; want once. Logs: %v", n, logs.All())
	}
}
