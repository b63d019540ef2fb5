package main

import (
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

func TestValidateExampleConfig(t *testing.T) {
	t.Parallel()
	p := newFakeProject(t)
	env := p.env(t, nil)

	for _, online := range []bool{false, true} {
		args := append([]string{"--output=json"}, exampleNodes...)
		if online {
			args = append(args, "--online")
		}
		r := runCmd(t, runValidate, env, args...)
		if r.code != exitOK {
			t.Fatalf("validate %q = %d, want %d; stdout:\n%s\nstderr:\n%s", args, r.code, exitOK, r.stdout, r.stderr)
		}
		res := decodeJSON[validateResult](t, r)
		if !res.Valid || res.Online != online || len(res.Problems) != 0 {
			t.Errorf("validate %q: valid %v, online %v, problems %v; want valid, online %v, no problems", args, res.Valid, res.Online, res.Problems, online)
		}
		var names []string
		for _, pp := range res.Pools {
			names = append(names, pp.Name)
		}
		if diff := cmp.Diff([]string{"workers", "arm-batch", "arm-batch-hel1"}, names); diff != "" {
			t.Errorf("validate %q pools (-want +got):\n%s", args, diff)
		}
		if !online {
			if res.Pools[1].Image != nil || res.Pools[1].PriceHourlyNet != nil {
				t.Errorf("validate offline resolved an image or price: %+v", res.Pools[1])
			}
			continue
		}
		for _, pp := range res.Pools {
			if pp.Image == nil || pp.PriceHourlyNet == nil || *pp.PriceHourlyNet <= 0 || pp.Currency != "EUR" {
				t.Errorf("validate --online pool %s: image %+v, price %v %q; want an image and a positive EUR price", pp.Name, pp.Image, pp.PriceHourlyNet, pp.Currency)
			}
		}
		arm := res.Pools[1]
		if arm.Arch != "arm64" || arm.Image == nil || arm.Image.ID != p.armSnapshot || arm.Image.Type != "snapshot" {
			t.Errorf("validate --online arm-batch: arch %q, image %+v; want arm64 and snapshot %d (picked by its labels)", arm.Arch, arm.Image, p.armSnapshot)
		}
		if workers := res.Pools[0]; workers.Arch != "amd64" || workers.Image == nil || workers.Image.Name != "ubuntu-24.04" {
			t.Errorf("validate --online workers: arch %q, image %+v; want amd64 and ubuntu-24.04", workers.Arch, workers.Image)
		}
	}

	// The table names what the JSON holds.
	r := runCmd(t, runValidate, env, append([]string{"--online"}, exampleNodes...)...)
	for _, want := range []string{
		"Pool arm-batch\n",
		"cax21 in nbg1 (arm64, ",
		`"k8s node v1.35 arm64" (snapshot) from spec k8s-node=true,kubernetes=v1.35`,
		"EUR per hour net",
		"workload=batch:NoSchedule",
		"cpu=200m, ephemeral-storage=2Gi, memory=1Gi",
		"The configuration is valid, checked against the API (3 pools, cluster config from HCLOUD_CLUSTER_CONFIG_FILE=/etc/hcloudscale/cluster-config.json, cluster \"prod\").",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("validate --online output lacks %q; output:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "echo joined") {
		t.Errorf("validate printed cloud-init user data:\n%s", r.stdout)
	}
}

func TestValidateProblems(t *testing.T) {
	t.Parallel()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

	for _, c := range []struct {
		name   string
		extra  map[string]string
		nodes  []string
		online bool
		strict bool
		// setup changes the fake project before an online check.
		setup func(t *testing.T, p *fakeProject)
		want  []problem
	}{
		{
			name:   "no token online, bad boolean, bad timeout: all at once",
			extra:  map[string]string{config.EnvToken: "", config.EnvPublicIPv4: "maybe", config.EnvServerCreationTimeout: "-5"},
			nodes:  []string{"--nodes=0:10:cpx31:fsn1:workers"},
			online: true,
			want: []problem{
				{"HCLOUD_TOKEN", "required (or HCLOUD_TOKEN_FILE)"},
				{"HCLOUD_PUBLIC_IPV4", `"maybe" is not a boolean (true, false, 1, 0, ...)`},
				{"HCLOUD_SERVER_CREATION_TIMEOUT", "-5 minutes is not positive"},
			},
		},
		{
			name:  "invalid pool name and sizes",
			nodes: []string{"--nodes=3:1:cpx31:fsn1:Workers_1"},
			want: []problem{
				{"--nodes[0] (Workers_1)", "min size 3 is greater than max size 1"},
				{"--nodes[0] (Workers_1)", `pool name "Workers_1" contains 'W', '_': only lower-case letters, digits and '-' are allowed`},
			},
		},
		{
			name:  "no pools",
			nodes: nil,
			want:  []problem{{"--nodes", "no pools: give at least one --nodes=" + config.NodeSpecFormat + ", or declare pools in the cluster config (nodeConfigs.<pool> with serverType, location and maxSize)"}},
		},
		{
			name: "unknown JSON key and bad taint effect",
			extra: map[string]string{config.EnvClusterConfig: b64(`{"nodeConfigs": {"workers": {
				"cloudInit": "#cloud-config\n", "taints:": [], "taints": [{"key": "a", "value": "b", "effect": "NoSchedul"}]}}}`)},
			nodes: []string{"--nodes=0:10:cpx31:fsn1:workers"},
			want: []problem{
				{`nodeConfigs.workers["taints:"]`, `unknown key, did you mean "taints"`},
				{"nodeConfigs.workers.taints[0].effect", `"NoSchedul" is not one of NoSchedule, PreferNoSchedule, NoExecute`},
			},
		},
		{
			name:   "missing firewall, SSH key and network",
			extra:  map[string]string{config.EnvFirewall: "nodes,nope", config.EnvSSHKey: "gone", config.EnvNetwork: "k9s"},
			nodes:  exampleNodes,
			online: true,
			want: []problem{
				{"HCLOUD_NETWORK", `network "k9s" does not exist`},
				{"HCLOUD_SSH_KEY[0]", `SSH key "gone" does not exist`},
				{"HCLOUD_FIREWALL[1]", `firewall "nope" does not exist`},
			},
		},
		{
			name:   "placement group taken by other servers, --strict",
			nodes:  exampleNodes,
			online: true,
			strict: true,
			setup: func(t *testing.T, p *fakeProject) {
				for range 3 {
					if _, err := p.api.AddServer(hcloudtest.ServerInfo{PlacementGroup: p.spread}); err != nil {
						t.Fatal(err)
					}
				}
			},
			want: []problem{{"nodeConfigs.workers.placementGroup",
				`placement group "workers-spread" has room for 7 servers (3 of 10 taken by other servers) but pools workers may grow to 10`}},
		},
		{
			name:   "server type not available in its location, --strict",
			nodes:  exampleNodes,
			online: true,
			strict: true,
			setup: func(t *testing.T, p *fakeProject) {
				if err := p.api.SetServerTypeAvailable("cax21", "nbg1", false); err != nil {
					t.Fatal(err)
				}
			},
			want: []problem{{"--nodes[1] (arm-batch)", `server type "cax21" is not available in location "nbg1" (sold out); scale-ups of the pool fail at once until the catalogue offers it again`}},
		},
		{
			// Each check of an offering names the key it was written at,
			// not the place it takes in the pool's offerings (the pool's
			// own type and location, left out here, are the first).
			name: "every offering named by its key, all at once",
			extra: map[string]string{config.EnvClusterConfigFile: "", config.EnvClusterConfig: b64(`{
				"imagesForArch": {"amd64": "ubuntu-24.04", "arm64": "no-such-image"},
				"nodeConfigs": {"workers": {"cloudInit": "#cloud-config\n", "offerings": [
					{"serverType": "cx11", "location": "fsn1"}, {"serverType": "cax11", "location": "ash"},
					{"serverType": "cax21", "location": "nbg1"}, {"serverType": "cx33", "location": "nbg1"},
					{"serverType": "cpx21", "location": "hel1"}]}}}`)},
			nodes:  []string{"--nodes=0:10:cpx31:fsn1:workers"},
			online: true,
			want: []problem{
				{"nodeConfigs.workers.offerings[0].serverType", `server type "cx11" does not exist`},
				{"nodeConfigs.workers.offerings[1].location", `server type "cax11" is not offered in location "ash"`},
				{"nodeConfigs.workers.offerings[2]", `image for server type "cax21" (arm64): pool "workers": image "no-such-image" for arch arm64: no image matches it as name or label selector`},
			},
		},
		{
			// The first offering written again names both settings.
			name: "an offering sold out, --strict",
			extra: map[string]string{config.EnvClusterConfigFile: "", config.EnvClusterConfig: b64(`{
				"imagesForArch": {"amd64": "ubuntu-24.04", "arm64": "ubuntu-24.04"},
				"nodeConfigs": {"workers": {"cloudInit": "#cloud-config\n", "offerings": [
					{"serverType": "cpx31", "location": "fsn1"}, {"serverType": "cx33", "location": "nbg1"}]}}}`)},
			nodes:  []string{"--nodes=0:10:cpx31:fsn1:workers"},
			online: true,
			strict: true,
			setup: func(t *testing.T, p *fakeProject) {
				for _, o := range []config.Offering{{ServerType: "cx33", Location: "nbg1"}, {ServerType: "cpx31", Location: "fsn1"}} {
					if err := p.api.SetServerTypeAvailable(o.ServerType, o.Location, false); err != nil {
						t.Fatal(err)
					}
				}
			},
			want: []problem{
				{"--nodes[0] (workers), nodeConfigs.workers.offerings[0]", `server type "cpx31" is not available in location "fsn1" (sold out); scale-ups of the pool fail at once until the catalogue offers it again`},
				{"nodeConfigs.workers.offerings[1]", `server type "cx33" is not available in location "nbg1" (sold out); scale-ups of this offering of pool "workers" fail at once until the catalogue offers it again`},
			},
		},
		{
			name: "a quote left open in a template action: position, not the join token",
			extra: map[string]string{config.EnvClusterConfigFile: "", config.EnvClusterConfig: b64(`{"cloudInitTemplate": true, "nodeConfigs": {"workers": {
				"cloudInit": "#cloud-config\nruncmd:\n- <% if eq .Arch 'arm64 %>arm<% end %> && kubeadm join --token abcdef.0123456789abcdef'\n"}}}`)},
			nodes: []string{"--nodes=0:10:cpx31:fsn1:workers"},
			want: []problem{{"nodeConfigs.workers.cloudInit",
				"template: line 3, column 18: a character constant (') opened in this action runs past its %>; close it before the %>"}},
		},
		{
			name:  "gzip-compressed legacy cloud-init",
			extra: map[string]string{config.EnvClusterConfigFile: "", config.EnvCloudInit: b64("\x1f\x8b\x08\x00gzip"), config.EnvImage: "ubuntu-24.04"},
			nodes: []string{"--nodes=0:10:cpx31:fsn1:workers"},
			want: []problem{{"HCLOUD_CLOUD_INIT",
				"cloud-init is gzip-compressed; Hetzner's API carries user data as text (a JSON string), so send it uncompressed"}},
		},
		{
			name:  "placement group too small",
			nodes: []string{"--nodes=0:11:cpx31:fsn1:workers", "--nodes=0:5:cax21:hel1:arm-batch-hel1"},
			want: []problem{{"nodeConfigs.workers.placementGroup",
				`placement group "workers-spread" would hold up to 11 servers (workers max 11), a spread placement group holds at most 10`}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := newFakeProject(t)
			if c.setup != nil {
				c.setup(t, p)
			}
			args := append([]string{"--output=json"}, c.nodes...)
			if c.online {
				args = append(args, "--online")
			}
			if c.strict {
				args = append(args, "--strict")
			}
			r := runCmd(t, runValidate, p.env(t, c.extra), args...)
			if r.code != exitFailure {
				t.Errorf("validate = %d, want %d; stderr:\n%s", r.code, exitFailure, r.stderr)
			}
			res := decodeJSON[validateResult](t, r)
			// The example's placeholders are TestValidatePlaceholders'.
			res.Problems = slices.DeleteFunc(res.Problems, func(p problem) bool { return strings.Contains(p.Message, "still has the placeholders") })
			if diff := cmp.Diff(c.want, res.Problems); diff != "" {
				t.Errorf("validate problems (-want +got):\n%s", diff)
			}
			if res.Valid {
				t.Error("validate: valid = true, want false")
			}

			// The table shows the same problems, one per line.
			r = runCmd(t, runValidate, p.env(t, c.extra), args[1:]...)
			for _, pr := range c.want {
				if !strings.Contains(r.stdout, "  "+pr.String()+"\n") {
					t.Errorf("validate table lacks the line %q; output:\n%s", pr.String(), r.stdout)
				}
			}
			if !strings.Contains(r.stdout, "The configuration is not valid") || r.code != exitFailure {
				t.Errorf("validate table = %d, %q; want %d and a verdict", r.code, r.stdout, exitFailure)
			}
		})
	}
}

// A shortage is what the autoscaler starts with too: without --strict it
// is a warning and validate succeeds.
func TestValidateShortageIsAWarning(t *testing.T) {
	t.Parallel()
	p := newFakeProject(t)
	if err := p.api.SetServerTypeAvailable("cax21", "nbg1", false); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := p.api.AddServer(hcloudtest.ServerInfo{PlacementGroup: p.spread}); err != nil {
			t.Fatal(err)
		}
	}
	r := runCmd(t, runValidate, p.env(t, nil), append([]string{"--output=json", "--online"}, exampleNodes...)...)
	if r.code != exitOK {
		t.Fatalf("validate --online = %d, want %d; stdout:\n%s\nstderr:\n%s", r.code, exitOK, r.stdout, r.stderr)
	}
	res := decodeJSON[validateResult](t, r)
	got := strings.Join(res.Warnings, "\n")
	for _, want := range []string{
		`--nodes[1] (arm-batch): server type "cax21" is not available in location "nbg1" (sold out)`,
		`nodeConfigs.workers.placementGroup: placement group "workers-spread" has room for 6 servers (4 of 10 taken by other servers)`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("validate warnings %q lack %q", res.Warnings, want)
		}
	}
	if !res.Valid || len(res.Problems) != 0 {
		t.Errorf("validate: valid %v, problems %v; want valid without problems", res.Valid, res.Problems)
	}
}

func TestValidateWrongToken(t *testing.T) {
	t.Parallel()
	p := newFakeProject(t, hcloudtest.WithToken("right"))
	r := runCmd(t, runValidate, p.env(t, map[string]string{config.EnvToken: "wrong"}), append([]string{"--online"}, exampleNodes...)...)
	want := "1 problem:\n  HCLOUD_TOKEN: the API refused the token (unable to authenticate, unauthorized): check HCLOUD_TOKEN (or HCLOUD_TOKEN_FILE) and that the token is of this project\n"
	if r.code != exitFailure || !strings.Contains(r.stdout, want) || strings.Contains(r.stdout, "listing server types: listing server types") {
		t.Errorf("validate --online with a wrong token = %d, stdout %q; want %d and one problem %q", r.code, r.stdout, exitFailure, want)
	}
	for name, cmd := range map[string]subcommand{"status": runStatus, "cleanup": runCleanup} {
		r := runCmd(t, cmd, p.env(t, map[string]string{config.EnvToken: "wrong"}), exampleNodes...)
		if r.code != exitFailure || !strings.Contains(r.stderr, "HCLOUD_TOKEN: the API refused the token") || strings.Count(r.stderr, "unauthorized") != 1 {
			t.Errorf("%s with a wrong token = %d, stderr %q; want %d and one problem naming HCLOUD_TOKEN", name, r.code, r.stderr, exitFailure)
		}
	}
	if strings.Contains(r.stdout+r.stderr, "wrong") {
		t.Errorf("validate printed the token:\n%s%s", r.stdout, r.stderr)
	}
}

func TestValidateUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"help", []string{"--help"}, exitOK, "Usage: hcloudscale validate", ""},
		{"bad output", []string{"--output=yaml"}, exitUsage, "", `--output "yaml": want table or json`},
		{"argument", []string{"workers"}, exitUsage, "", `unexpected arguments ["workers"]`},
		{"unknown flag", []string{"--onlien"}, exitUsage, "", "flag provided but not defined: -onlien"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runCmd(t, runValidate, config.MapEnv(nil, nil), c.args...)
			if r.code != c.wantCode || !strings.Contains(r.stdout, c.wantStdout) || !strings.Contains(r.stderr, c.wantStderr) {
				t.Errorf("validate %q = %d, stdout %q, stderr %q; want %d, stdout containing %q, stderr containing %q",
					c.args, r.code, r.stdout, r.stderr, c.wantCode, c.wantStdout, c.wantStderr)
			}
		})
	}
}

// The request cost validate --help states: a fixed part for the
// configuration and one listing page per 50 of the cluster's servers.
func TestValidateOnlineCost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		servers, max int
	}{{0, 13}, {1000, 13 + 20}} {
		p := newFakeProject(t)
		for i := range c.servers {
			if _, err := p.api.AddServer(hcloudtest.ServerInfo{Name: "workers-" + strconv.Itoa(i),
				Labels: map[string]string{config.LabelNodeGroup: "workers", config.LabelCluster: "prod"}}); err != nil {
				t.Fatal(err)
			}
		}
		p.api.ResetCounts()
		r := runCmd(t, runValidate, p.env(t, nil), append([]string{"--online"}, exampleNodes...)...)
		if r.code != exitOK {
			t.Fatalf("validate --online = %d; stdout:\n%s", r.code, r.stdout)
		}
		n := 0
		for _, k := range p.api.Counts() {
			n += k
		}
		t.Logf("validate --online with %d servers: %d requests", c.servers, n)
		if n > c.max {
			t.Errorf("validate --online with %d servers made %d requests; the help promises about %d", c.servers, n, c.max)
		}
		if w := p.api.Count("POST /servers") + p.api.Count("DELETE /servers/{id}"); w != 0 {
			t.Errorf("validate --online wrote %d times", w)
		}
	}
}

// A change to serve's reloaded cluster-config file can be checked before
// it is applied: --cluster-config names the file, the rest comes from the
// environment.
func TestValidateClusterConfigFlag(t *testing.T) {
	t.Parallel()
	p := newFakeProject(t)
	base := p.env(t, nil)
	files := map[string]string{
		"broken.json": `{"clusterName": "prod", "nodeConfigs": {"workers": {"maxPods": 0}}}`,
		"good.json":   `{"clusterName": "prod", "imagesForArch": {"amd64": "ubuntu-24.04", "arm64": "ubuntu-24.04"}, "nodeConfigs": {"workers": {"cloudInit": "#cloud-config\n"}}}`,
	}
	env := base
	env.ReadFile = func(path string) ([]byte, error) {
		if c, ok := files[path]; ok {
			return []byte(c), nil
		}
		return base.ReadFile(path)
	}
	r := runCmd(t, runValidate, env, "--output=json", "--cluster-config", "broken.json", "--nodes=0:10:cpx31:fsn1:workers")
	res := decodeJSON[validateResult](t, r)
	if r.code == exitOK || res.Valid || !slices.ContainsFunc(res.Problems, func(p problem) bool { return strings.Contains(p.Setting+p.Message, "maxPods") }) {
		t.Errorf("validate --cluster-config broken.json = %d, problems %+v; want the file's maxPods problem", r.code, res.Problems)
	}
	r = runCmd(t, runValidate, env, "--output=json", "--online", "--cluster-config", "good.json", "--nodes=0:10:cpx31:fsn1:workers")
	res = decodeJSON[validateResult](t, r)
	if r.code != exitOK || !res.Valid || len(res.Pools) != 1 {
		t.Errorf("validate --cluster-config good.json = %d, valid %v, problems %+v, %d pools; want valid with one pool", r.code, res.Valid, res.Problems, len(res.Pools))
	}
}
