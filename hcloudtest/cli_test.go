package hcloudtest_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// hcloudCLI runs the official hcloud command-line client against fake
// and returns what it printed; the test is skipped when no hcloud binary
// is on the PATH (.ci/run installs Debian's hcloud-cli).
func hcloudCLI(t *testing.T, fake *hcloudtest.Server, args ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("hcloud")
	if err != nil {
		t.Skip("no hcloud command on the PATH (Debian package hcloud-cli)")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HCLOUD_TOKEN="+fake.Token(), "HCLOUD_ENDPOINT="+fake.URL(),
		"HCLOUD_CONFIG="+t.TempDir()+"/cli.toml")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestOfficialCLI drives the routes a user's tooling reaches with the
// official hcloud client: placement groups created, listed and deleted, a
// server created into one with its Primary IPs, server actions, a server
// created on an existing Primary IP without a location, and the removed
// datacenter endpoint and property refused.
func TestOfficialCLI(t *testing.T) {
	fake := hcloudtest.NewServer(hcloudtest.WithDefaultActionDuration(0))
	defer fake.Close()
	steps := []struct {
		args []string
		fail bool     // the command must exit non-zero
		want []string // what its output must contain
	}{
		{args: []string{"server-type", "list"}, want: []string{"cpx21", "cax21", "dedicated"}},
		{args: []string{"placement-group", "create", "--name", "spread-1", "--type", "spread"}, want: []string{"created"}},
		{args: []string{"placement-group", "list"}, want: []string{"spread-1", "0 servers"}},
		{args: []string{"server", "create", "--name", "web-1", "--type", "cpx21", "--image", "ubuntu-24.04", "--location", "fsn1", "--placement-group", "spread-1"}, want: []string{"created", "IPv4:", "IPv6:"}},
		{args: []string{"placement-group", "list"}, want: []string{"spread-1", "1 server"}},
		{args: []string{"placement-group", "delete", "spread-1"}, fail: true, want: []string{"resource_in_use"}},
		{args: []string{"primary-ip", "list"}, want: []string{"ipv4", "ipv6", "web-1"}},
		{args: []string{"server", "poweroff", "web-1"}, want: []string{"stopped"}},
		{args: []string{"server", "list"}, want: []string{"web-1", "off"}},
		{args: []string{"server", "delete", "web-1"}, want: []string{"deleted"}},
		{args: []string{"primary-ip", "list"}, want: []string{"ID"}},
		{args: []string{"placement-group", "delete", "spread-1"}, want: []string{"deleted"}},
		{args: []string{"primary-ip", "create", "--type", "ipv4", "--name", "old", "--datacenter", "hel1-dc2"}, fail: true, want: []string{"invalid_input", "datacenter"}},
		{args: []string{"server", "create", "--name", "edge", "--type", "cpx21", "--image", "ubuntu-24.04", "--primary-ipv4", "spare"}, want: []string{"created"}},
		{args: []string{"server", "describe", "edge"}, want: []string{"100.64.0.1"}},
		{args: []string{"datacenter", "list"}, fail: true, want: []string{"deprecated_api_endpoint"}},
	}
	if _, _, err := fake.Client().PrimaryIP.Create(t.Context(), hcloud.PrimaryIPCreateOpts{Name: "spare", Type: hcloud.PrimaryIPTypeIPv4, Location: "hel1"}); err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		out, err := hcloudCLI(t, fake, st.args...)
		cmd := "hcloud " + strings.Join(st.args, " ")
		if (err != nil) != st.fail {
			t.Fatalf("%s: error %v, want failure %t\n%s", cmd, err, st.fail, out)
		}
		for _, w := range st.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s printed no %q:\n%s", cmd, w, out)
			}
		}
	}
	ips, err := fake.Client().PrimaryIP.All(t.Context())
	if err != nil || len(ips) != 2 {
		t.Errorf("Primary IPs: %d (%v); want edge's two and none of web-1's (auto_delete)", len(ips), err)
	}
	// The Debian CLI shows the removed datacenter, not the location.
	if edge, _ := fake.Servers(""); len(edge) != 1 || edge[0].Location != "hel1" || edge[0].PublicIPv4 != "100.64.0.1" {
		t.Errorf("servers = %+v; want edge in hel1, where its Primary IP spare is", edge)
	}
}
