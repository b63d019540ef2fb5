package hcloudtest_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

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
// server created into one with its Primary IPs, server actions, and the
// removed datacenter endpoint refused as the API refuses it.
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
		{args: []string{"datacenter", "list"}, fail: true, want: []string{"deprecated_api_endpoint"}},
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
	if ips, err := fake.Client().PrimaryIP.All(t.Context()); err != nil || len(ips) != 0 {
		t.Errorf("Primary IPs left after the server was deleted: %d (%v); want none (auto_delete)", len(ips), err)
	}
}
