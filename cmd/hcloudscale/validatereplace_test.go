package main

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hcloudscale/hcloudscale/config"
)

// migratingConfig is a cluster config as the upstream provider took it:
// an empty arm64 image (there: the newest snapshot), with the node
// lifecycle turned on.
const migratingConfig = `{
  "imagesForArch": {"amd64": "ubuntu-24.04", "arm64": ""},
  "replace": {"removedPools": true, "windows": [{"schedule": "0 2 * * *", "duration": "3h", "timeZone": "Europe/Berlin"}]},
  "nodeConfigs": {
    "workers": {"cloudInit": "#cloud-config\n", "replace": {"drift": ["user_data"], "expireAfter": "720h", "maxSurge": 2}},
    "arm": {"cloudInit": "#cloud-config\n", "replace": {"drift": ["image"], "repairAfter": "15m", "windows": [{"schedule": "30 22 * * *", "duration": "1h"}]}}
  }
}`

// TestValidateShowsTheNodeLifecycle checks what validate says about the
// replace settings, offline and without a token, when the old
// environment's HCLOUD_CLUSTER_CONFIG is still set beside --cluster-config.
func TestValidateShowsTheNodeLifecycle(t *testing.T) {
	t.Parallel()
	file := "/etc/new/cluster-config.json"
	env := config.MapEnv(map[string]string{
		config.EnvClusterConfig: base64.StdEncoding.EncodeToString([]byte(`{"nodeConfigs": {"workers": {}, "arm": {}}}`)),
	}, map[string]string{file: migratingConfig})
	nodes := []string{"--nodes=0:3:cpx22:fsn1:workers", "--nodes=0:3:cax21:fsn1:arm", "--cluster-config", file}

	r := runCmd(t, runValidate, env, append([]string{"-o", "json"}, nodes...)...)
	if r.code != exitOK {
		t.Fatalf("validate = %d; want %d (no token is needed offline); stdout:\n%s\nstderr:\n%s", r.code, exitOK, r.stdout, r.stderr)
	}
	res := decodeJSON[validateResult](t, r)
	if res.Source != string(config.SourceClusterConfigFile) || res.SourceFile != file {
		t.Errorf("source %q, file %q; want %s and %s", res.Source, res.SourceFile, config.SourceClusterConfigFile, file)
	}
	if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "HCLOUD_TOKEN is not set: an offline check needs none") {
		t.Errorf("notes %q; want one saying that the token is not needed offline", res.Notes)
	}
	if diff := cmp.Diff([]string{"arm"}, res.AdoptedImageDrift); diff != "" {
		t.Errorf("adoptedImageDrift (-want +got):\n%s", diff)
	}
	if len(res.Warnings) == 0 || !strings.HasPrefix(res.Warnings[0], `nodeConfigs.arm.replace.drift: drift "image" replaces every server adopted from the upstream provider, for arm64 (if the pool's server type is`) {
		t.Errorf("first warning %q; want the arm pool's image drift", res.Warnings)
	}

	if res.Replace == nil || res.Replace.MaxInFlight != 1 || !res.Replace.RemovedPools || res.Replace.RepairMaxUnhealthy != "20%" || res.Replace.WindowsFrom != "cluster" {
		t.Errorf("top-level replace %+v; want the defaults, removedPools and the cluster's window", res.Replace)
	}
	workers, arm := res.Pools[0].Replace, res.Pools[1].Replace
	if workers == nil || arm == nil {
		t.Fatalf("replace of workers %+v, arm %+v; want both", workers, arm)
	}
	wantWorkers := replacePlan{Drift: []string{"user_data"}, ExpireAfter: "720h", ExpireJitter: "72h", MaxSurge: 2, MaxInFlight: 1,
		JoinTimeout: "10m", DrainTimeout: "15m", RetryAfter: "1h",
		windowsPlan: windowsPlan{WindowsFrom: "cluster", Windows: []windowPlan{{Schedule: "0 2 * * *", Duration: "3h", TimeZone: "Europe/Berlin"}}}}
	if diff := cmp.Diff(wantWorkers, *workers, cmp.FilterPath(func(p cmp.Path) bool {
		return p.Last().String() == ".OpenNow" || p.Last().String() == ".NextOpen"
	}, cmp.Ignore()), cmp.AllowUnexported(replacePlan{})); diff != "" {
		t.Errorf("workers' replace (-want +got):\n%s", diff)
	}
	if arm.RepairAfter != "15m" || arm.WindowsFrom != "pool" || arm.Windows[0].TimeZone != "UTC" || len(arm.AdoptedImageDrift) != 1 {
		t.Errorf("arm's replace %+v; want repairAfter 15m, its own window in UTC and the adopted image drift", arm)
	}
	// When a window is closed, it says when it opens: within a day for a
	// daily window.
	now := time.Now()
	for _, w := range []*replacePlan{workers, arm} {
		if !w.OpenNow && (w.NextOpen == nil || !w.NextOpen.After(now) || w.NextOpen.Sub(now) > 24*time.Hour) {
			t.Errorf("windows %+v: closed, next opening %v; want one within a day", w.Windows, w.NextOpen)
		}
	}

	r = runCmd(t, runValidate, env, nodes...)
	for _, want := range []string{
		"  replace          drift user_data; expired after 720h (+ up to 72h per server)\n",
		"  budgets          maxSurge 2, maxInFlight 1; joinTimeout 10m, drainTimeout 15m, retryAfter 1h\n",
		`"0 2 * * *" for 3h in Europe/Berlin (cluster's): `,
		"  replace          drift image; repair:not_ready after 15m\n",
		"  WARNING          drift \"image\" replaces every server adopted from the upstream provider, for arm64",
		"cluster config from HCLOUD_CLUSTER_CONFIG_FILE=" + file,
		"But read the first warning: image drift in arm replaces every server adopted from the upstream provider.\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("validate table lacks %q; output:\n%s", want, r.stdout)
		}
	}

	// Naming the stock image on purpose takes the warning away; --strict
	// turned it into a problem before.
	r = runCmd(t, runValidate, env, append([]string{"--strict", "-o", "json"}, nodes...)...)
	if res := decodeJSON[validateResult](t, r); r.code != exitFailure || !slices.ContainsFunc(res.Problems, func(p problem) bool { return p.Setting == "nodeConfigs.arm.replace.drift" }) {
		t.Errorf("validate --strict = %d, %v; want the adopted image drift as a problem", r.code, res.Problems)
	}
	explicit := strings.Replace(migratingConfig, `"arm64": ""`, `"arm64": "ubuntu-24.04"`, 1)
	env2 := config.MapEnv(map[string]string{}, map[string]string{file: explicit})
	res = decodeJSON[validateResult](t, runCmd(t, runValidate, env2, append([]string{"-o", "json"}, nodes...)...))
	if len(res.AdoptedImageDrift) != 0 || res.Pools[1].Replace.Warning != "" {
		t.Errorf("with imagesForArch.arm64 set: adoptedImageDrift %v, warning %q; want none", res.AdoptedImageDrift, res.Pools[1].Replace.Warning)
	}
}
