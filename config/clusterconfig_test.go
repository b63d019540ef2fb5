package config

import (
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// problem is one expected field error: its exact path and a part of the
// message.
type problem struct{ path, msg string }

func checkProblems(t *testing.T, err error, want []problem) {
	t.Helper()
	fes := FieldErrors(err)
	if len(fes) != len(want) {
		t.Errorf("got %d problems; want %d:\n%v", len(fes), len(want), err)
	}
	for i := range min(len(fes), len(want)) {
		if fes[i].Path != want[i].path || !strings.Contains(fes[i].Err.Error(), want[i].msg) {
			t.Errorf("problem %d = %q; want path %q and a message containing %q", i, fes[i], want[i].path, want[i].msg)
		}
	}
}

func TestParseClusterConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []problem
	}{
		{"unknown top-level key", `{"nodeConfig": {}}`, []problem{{"nodeConfig", `unknown key, did you mean "nodeConfigs"`}}},
		{"unknown key without a near match", `{"foo": 1}`, []problem{{"foo", "unknown key, want one of cloudInitTemplate, clusterName, defaultSubnetIPRange"}}},
		{"typo with colon, the upstream issue", `{"nodeConfigs": {"p": {"taints:": []}}}`, []problem{{`nodeConfigs.p["taints:"]`, `did you mean "taints"`}}},
		{"two keys differing only in case", `{"nodeConfigs": {"p": {"taints": [], "Taints": []}}}`, []problem{{"nodeConfigs.p.Taints", `"taints" and "Taints" differ only in case and both mean "taints"; write it once`}}},
		{"duplicate key", `{"clusterName": "a", "clusterName": "b"}`, []problem{{"clusterName", "duplicate key"}}},
		{"wrong type", `{"nodeConfigs": {"p": {"labels": ["a"]}}}`, []problem{{"nodeConfigs.p.labels", "want an object, got an array"}}},
		{"null pool entry", `{"nodeConfigs": {"p": null}}`, []problem{{"nodeConfigs.p", "want an object, got null"}}},
		{"label value not a string", `{"nodeConfigs": {"p": {"labels": {"a": 1}}}}`, []problem{{"nodeConfigs.p.labels.a", "want a string, got a number"}}},
		{"bad label key", `{"nodeConfigs": {"p": {"labels": {"a b": "x"}}}}`, []problem{{`nodeConfigs.p.labels["a b"]`, "not a valid label key"}}},
		{"bad label value", `{"nodeConfigs": {"p": {"labels": {"a": "-x"}}}}`, []problem{{"nodeConfigs.p.labels.a", "not a valid label value"}}},
		{"server label reserved prefix", `{"nodeConfigs": {"p": {"serverLabels": {"hetzner.cloud/x": "y"}}}}`, []problem{{`nodeConfigs.p.serverLabels["hetzner.cloud/x"]`, "Hetzner reserves"}}},
		{"server label reserved subdomain prefix", `{"nodeConfigs": {"p": {"serverLabels": {"a.hetzner.cloud/x": "y"}}}}`, []problem{{`nodeConfigs.p.serverLabels["a.hetzner.cloud/x"]`, "Hetzner reserves"}}},
		{"server label node group", `{"nodeConfigs": {"p": {"serverLabels": {"hcloud/node-group": "other"}}}}`, []problem{{`nodeConfigs.p.serverLabels["hcloud/node-group"]`, "set by hcloudscale"}}},
		{"server label cluster", `{"nodeConfigs": {"p": {"serverLabels": {"hcloudscale/cluster": "c"}}}}`, []problem{{`nodeConfigs.p.serverLabels["hcloudscale/cluster"]`, "set by hcloudscale"}}},
		{"server label value too long", `{"nodeConfigs": {"p": {"serverLabels": {"k": "` + strings.Repeat("v", 64) + `"}}}}`, []problem{{"nodeConfigs.p.serverLabels.k", "not a valid Hetzner label value"}}},
		{"taint effect misspelt", `{"nodeConfigs": {"pool1": {"taints": [{"key": "k", "effect": "NoSchedul"}]}}}`, []problem{{"nodeConfigs.pool1.taints[0].effect", `"NoSchedul" is not one of NoSchedule, PreferNoSchedule, NoExecute`}}},
		{"taint effect wrong case", `{"nodeConfigs": {"p": {"taints": [{"key": "k", "effect": "noschedule"}]}}}`, []problem{{"nodeConfigs.p.taints[0].effect", `did you mean "NoSchedule"`}}},
		{"taint effect missing", `{"nodeConfigs": {"p": {"taints": [{"key": "k"}]}}}`, []problem{{"nodeConfigs.p.taints[0].effect", "missing"}}},
		{"taint key missing", `{"nodeConfigs": {"p": {"taints": [{"effect": "NoSchedule"}]}}}`, []problem{{"nodeConfigs.p.taints[0].key", "missing"}}},
		{"taint key invalid", `{"nodeConfigs": {"p": {"taints": [{"key": "a/b/c", "effect": "NoSchedule"}]}}}`, []problem{{"nodeConfigs.p.taints[0].key", "not a valid label key"}}},
		{"taint value invalid", `{"nodeConfigs": {"p": {"taints": [{"key": "k", "value": "a b", "effect": "NoSchedule"}]}}}`, []problem{{"nodeConfigs.p.taints[0].value", "not a valid label value"}}},
		{"taint unknown key", `{"nodeConfigs": {"p": {"taints": [{"key": "k", "effect": "NoSchedule", "timeAdded": "2024-01-01T00:00:00Z", "operator": "Exists"}]}}}`, []problem{{"nodeConfigs.p.taints[0].operator", "unknown key"}}},
		{"duplicate taint", `{"nodeConfigs": {"p": {"taints": [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "value": "v", "effect": "NoSchedule"}]}}}`, []problem{{"nodeConfigs.p.taints[1]", "duplicates taint [0]"}}},
		{"taints not an array", `{"nodeConfigs": {"p": {"taints": {}}}}`, []problem{{"nodeConfigs.p.taints", "want an array, got an object"}}},
		{"CIDR syntax", `{"defaultSubnetIPRange": "10.0.0.0/33"}`, []problem{{"defaultSubnetIPRange", "not a CIDR"}}},
		{"CIDR host bits", `{"nodeConfigs": {"p": {"subnetIPRange": "10.0.1.5/24"}}}`, []problem{{"nodeConfigs.p.subnetIPRange", `host bits set, did you mean "10.0.1.0/24"`}}},
		{"CIDR IPv6", `{"defaultSubnetIPRange": "fd00::/64"}`, []problem{{"defaultSubnetIPRange", "not an IPv4 range"}}},
		{"image spec with whitespace", `{"imagesForArch": {"amd64": "ubuntu 24.04"}}`, []problem{{"imagesForArch.amd64", "contains whitespace"}}},
		{"image selector malformed", `{"nodeConfigs": {"p": {"imagesForArch": {"arm64": "role=(x"}}}}`, []problem{{"nodeConfigs.p.imagesForArch.arm64", "not a valid label selector"}}},
		{"image arch unknown", `{"imagesForArch": {"x86": "ubuntu-24.04"}}`, []problem{{"imagesForArch.x86", "unknown key, want one of amd64, arm64"}}},
		{"cloud-init too large", `{"nodeConfigs": {"p": {"cloudInit": "` + strings.Repeat("x", MaxCloudInitBytes+1) + `"}}}`, []problem{{"nodeConfigs.p.cloudInit", "32769 bytes, Hetzner accepts at most 32768"}}},
		{"cloud-init not a string", `{"nodeConfigs": {"p": {"cloudInit": {"a": 1}}}}`, []problem{{"nodeConfigs.p.cloudInit", "want a string, got an object"}}},
		{"cluster name invalid", `{"clusterName": "my cluster"}`, []problem{{"clusterName", "valid Hetzner label value"}}},
		{"firewall empty", `{"nodeConfigs": {"p": {"firewalls": ["a", ""]}}}`, []problem{{"nodeConfigs.p.firewalls[1]", "empty ID or name"}}},
		{"firewall not a string", `{"nodeConfigs": {"p": {"firewalls": [1]}}}`, []problem{{"nodeConfigs.p.firewalls[0]", "want a string, got a number"}}},
		{"placement group padded", `{"nodeConfigs": {"p": {"placementGroup": " pg"}}}`, []problem{{"nodeConfigs.p.placementGroup", "leading or trailing spaces"}}},
		{"maxPods zero", `{"nodeConfigs": {"p": {"maxPods": 0}}}`, []problem{{"nodeConfigs.p.maxPods", "0 is out of range 1..1000"}}},
		{"maxPods too large", `{"nodeConfigs": {"p": {"maxPods": 1001}}}`, []problem{{"nodeConfigs.p.maxPods", "out of range"}}},
		{"maxPods fraction", `{"nodeConfigs": {"p": {"maxPods": 1.5}}}`, []problem{{"nodeConfigs.p.maxPods", "want an integer, got 1.5"}}},
		{"reserved negative", `{"nodeConfigs": {"p": {"reserved": {"cpu": "-100m"}}}}`, []problem{{"nodeConfigs.p.reserved.cpu", "negative"}}},
		{"reserved unparsable", `{"nodeConfigs": {"p": {"reserved": {"memory": "lots"}}}}`, []problem{{"nodeConfigs.p.reserved.memory", "not a quantity"}}},
		{"reserved camel case key", `{"nodeConfigs": {"p": {"reserved": {"ephemeralStorage": "1Gi"}}}}`, []problem{{"nodeConfigs.p.reserved.ephemeralStorage", `did you mean "ephemeral-storage"`}}},
		{"threshold above 1", `{"nodeConfigs": {"p": {"autoscaling": {"scaleDownUtilizationThreshold": 1.5}}}}`, []problem{{"nodeConfigs.p.autoscaling.scaleDownUtilizationThreshold", "out of range 0..1"}}},
		{"gpu threshold negative", `{"nodeConfigs": {"p": {"autoscaling": {"scaleDownGpuUtilizationThreshold": -0.1}}}}`, []problem{{"nodeConfigs.p.autoscaling.scaleDownGpuUtilizationThreshold", "out of range 0..1"}}},
		{"duration unparsable", `{"nodeConfigs": {"p": {"autoscaling": {"scaleDownUnneededTime": "10"}}}}`, []problem{{"nodeConfigs.p.autoscaling.scaleDownUnneededTime", "not a duration"}}},
		{"duration zero", `{"nodeConfigs": {"p": {"autoscaling": {"maxNodeProvisionTime": "0s"}}}}`, []problem{{"nodeConfigs.p.autoscaling.maxNodeProvisionTime", "not positive"}}},
		{"duration as number", `{"nodeConfigs": {"p": {"autoscaling": {"maxNodeStartupTime": 600}}}}`, []problem{{"nodeConfigs.p.autoscaling.maxNodeStartupTime", "want a string, got a number"}}},
		{"bool as string", `{"nodeConfigs": {"p": {"autoscaling": {"zeroOrMaxNodeScaling": "true"}}}}`, []problem{{"nodeConfigs.p.autoscaling.zeroOrMaxNodeScaling", "want true or false, got a string"}}},
		{"many problems in document order", `{"clusterName": "-", "nodeConfigs": {"p": {"maxPods": -1, "labels": {"a": "-"}}}}`, []problem{
			{"clusterName", "label value"}, {"nodeConfigs.p.maxPods", "out of range"}, {"nodeConfigs.p.labels.a", "label value"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc, err := ParseClusterConfig([]byte(tt.doc))
			if err == nil {
				t.Fatalf("ParseClusterConfig(%s) = %+v, nil; want errors", tt.doc, cc)
			}
			checkProblems(t, err, tt.want)
		})
	}
}

func TestParseClusterConfigSyntax(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"empty", ``, "unexpected end of input"},
		{"truncated", `{"nodeConfigs": {`, "unexpected end of input"},
		{"comment as in the upstream README", "{\n  \"imagesForArch\": { // images\n  }\n}", "invalid JSON at line 2, column 22"},
		{"trailing content", `{} {}`, "content after the document"},
		{"not JSON", `imagesForArch: {}`, "invalid JSON at line 1"},
		{"not an object", `[]`, "want a JSON object, got an array"},
		{"null", `null`, "want a JSON object, got null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseClusterConfig([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseClusterConfig(%q) error = %v; want it to contain %q", tt.doc, err, tt.want)
			}
		})
	}
}

func TestParseClusterConfigValues(t *testing.T) {
	doc := `{
	  "clusterName": "prod",
	  "imagesForArch": {"amd64": "ubuntu-24.04", "arm64": "k8s=arm,version in (1, 2)"},
	  "defaultSubnetIPRange": "10.0.0.0/16",
	  "isUsingNewFormat": true,
	  "legacyConfig": {"cloudInit": "x", "imageName": "y"},
	  "replace": {"maxInFlight": 3, "removedPools": true, "paused": false, "windows": [{"schedule": "0 2 * * 1-5", "duration": "3h", "timeZone": "Europe/Berlin"}]},
	  "nodeConfigs": {
	    "pool1": {
	      "cloudInit": "#cloud-config",
	      "labels": {"node.kubernetes.io/role": "worker", "plain": ""},
	      "serverLabels": {"env": "prod", "example.com/team": "a"},
	      "taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}, {"key": "gpu", "effect": "NoExecute"}],
	      "imagesForArch": {"amd64": "123456"},
	      "subnetIPRange": "10.0.1.0/24",
	      "firewalls": ["fw1", "42"],
	      "placementGroup": "spread-1",
	      "maxPods": 250,
	      "reserved": {"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "1Gi"},
	      "autoscaling": {
	        "scaleDownUtilizationThreshold": 0.4,
	        "scaleDownGpuUtilizationThreshold": 0.6,
	        "scaleDownUnneededTime": "5m",
	        "scaleDownUnreadyTime": "15m",
	        "maxNodeProvisionTime": "20m",
	        "maxNodeStartupTime": "25m",
	        "zeroOrMaxNodeScaling": true,
	        "allowNonAtomicScaleUpToMax": false,
	        "ignoreDaemonSetsUtilization": true
	      },
	      "replace": {
	        "drift": ["image", "user_data"],
	        "expireAfter": "720h",
	        "expireJitter": "24h",
	        "maxSurge": 0,
	        "maxInFlight": 2,
	        "joinTimeout": "20m",
	        "drainTimeout": "30m",
	        "retryAfter": "2h",
	        "windows": [{"schedule": "0 23 * * *", "duration": "2h"}],
	        "paused": true
	      }
	    },
	    "pool2": {"labels": null, "autoscaling": {}, "taints": [{"key": "k", "effect": "NoExecute", "timeAdded": "2024-01-01T00:00:00Z"}]}
	  }
	}`
	got, err := ParseClusterConfig([]byte(doc))
	if err != nil {
		t.Fatalf("ParseClusterConfig: %v", err)
	}
	f := func(v float64) *float64 { return &v }
	d := func(v time.Duration) *time.Duration { return &v }
	b := func(v bool) *bool { return &v }
	want := &ClusterConfig{
		ClusterName:          "prod",
		ImagesForArch:        &ImagesForArch{AMD64: "ubuntu-24.04", ARM64: "k8s=arm,version in (1, 2)"},
		DefaultSubnetIPRange: netip.MustParsePrefix("10.0.0.0/16"),
		Replace: &ClusterReplace{
			MaxInFlight: 3, RemovedPools: true,
			Windows:            []Window{{Schedule: "0 2 * * 1-5", Duration: 3 * time.Hour, TimeZone: "Europe/Berlin"}},
			RepairMaxUnhealthy: DefaultRepairMaxUnhealthy,
		},
		NodeConfigs: map[string]*NodeConfig{
			"pool1": {
				CloudInit:    "#cloud-config",
				Labels:       map[string]string{"node.kubernetes.io/role": "worker", "plain": ""},
				ServerLabels: map[string]string{"env": "prod", "example.com/team": "a"},
				Taints: []corev1.Taint{
					{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule},
					{Key: "gpu", Effect: corev1.TaintEffectNoExecute},
				},
				ImagesForArch:  &ImagesForArch{AMD64: "123456"},
				SubnetIPRange:  netip.MustParsePrefix("10.0.1.0/24"),
				Firewalls:      []string{"fw1", "42"},
				PlacementGroup: "spread-1",
				MaxPods:        250,
				Reserved: Reserved{
					CPU:              resource.MustParse("100m"),
					Memory:           resource.MustParse("512Mi"),
					EphemeralStorage: resource.MustParse("1Gi"),
				},
				Autoscaling: &Autoscaling{
					ScaleDownUtilizationThreshold:    f(0.4),
					ScaleDownGPUUtilizationThreshold: f(0.6),
					ScaleDownUnneededTime:            d(5 * time.Minute),
					ScaleDownUnreadyTime:             d(15 * time.Minute),
					MaxNodeProvisionTime:             d(20 * time.Minute),
					MaxNodeStartupTime:               d(25 * time.Minute),
					ZeroOrMaxNodeScaling:             b(true),
					AllowNonAtomicScaleUpToMax:       b(false),
					IgnoreDaemonSetsUtilization:      b(true),
				},
				Replace: &Replace{
					Drift:       []string{"image", "user_data"},
					ExpireAfter: 720 * time.Hour, ExpireJitter: 24 * time.Hour,
					MaxSurge: 0, MaxInFlight: 2,
					JoinTimeout: 20 * time.Minute, DrainTimeout: 30 * time.Minute, RetryAfter: 2 * time.Hour,
					Windows: []Window{{Schedule: "0 23 * * *", Duration: 2 * time.Hour}},
					Paused:  true,
				},
			},
			"pool2": {Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoExecute}}},
		},
		Warnings: []string{
			"isUsingNewFormat: ignored: an internal field of the upstream provider, which ignored it too",
			"legacyConfig: ignored: an internal field of the upstream provider, which ignored it too; use HCLOUD_CLOUD_INIT and HCLOUD_IMAGE for the legacy format",
			"nodeConfigs.pool2.taints[0].timeAdded: ignored: a template taint has no time",
		},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateComparable(netip.Prefix{}), cmp.Comparer(quantityEqual)); diff != "" {
		t.Errorf("ParseClusterConfig (-want +got):\n%s", diff)
	}
}

func quantityEqual(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }

// TestParseUpstreamREADMEExample parses the multi-pool example of the
// upstream provider's README, written as valid JSON (the README's copy has
// comments).
func TestParseUpstreamREADMEExample(t *testing.T) {
	data, err := os.ReadFile("testdata/upstream-readme.json")
	if err != nil {
		t.Fatal(err)
	}
	cc, err := ParseClusterConfig(data)
	if err != nil {
		t.Fatalf("ParseClusterConfig: %v", err)
	}
	if got := sortedKeys(cc.NodeConfigs); !cmp.Equal(got, []string{"pool1", "pool2"}) {
		t.Errorf("nodeConfigs = %q; want pool1, pool2", got)
	}
	wantWarnings := []string{
		"imagesForArch.arm64: empty image spec is treated as unset (upstream chose the newest snapshot of the project)",
		"imagesForArch.amd64: empty image spec is treated as unset (upstream chose the newest snapshot of the project)",
	}
	if diff := cmp.Diff(wantWarnings, cc.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if got := cc.NodeConfigs["pool1"].Taints; len(got) != 1 || got[0].Effect != corev1.TaintEffectNoExecute {
		t.Errorf("pool1 taints = %+v; want one NoExecute taint", got)
	}
}
