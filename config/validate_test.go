package config

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// validConfig is a Config built in code, as a library user would.
func validConfig() Config {
	c := Defaults()
	c.Token = testToken
	c.Network = "k8s"
	c.DefaultSubnetIPRange = netip.MustParsePrefix("10.0.0.0/16")
	c.Pools = []Pool{{
		Name: "pool1", MinSize: 0, MaxSize: 5, ServerType: "cx22", Location: "fsn1",
		Images:       ImagesForArch{AMD64: DefaultImage, ARM64: DefaultImage},
		ServerLabels: map[string]string{LabelNodeGroup: "pool1"},
		Network:      "k8s",
		PublicIPv4:   true,
	}}
	return c
}

func TestValidate(t *testing.T) {
	neg := resource.MustParse("-1")
	zero := time.Duration(0)
	tooHigh := 2.0
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   []problem
	}{
		{"valid", func(c *Config) {}, nil},
		{"empty endpoint means the default", func(c *Config) { c.Endpoint = "" }, nil},
		{"token missing", func(c *Config) { c.Token = "" }, []problem{{"token", "required"}}},
		{"token with newline", func(c *Config) { c.Token = testToken + "\n" }, []problem{{"token", "whitespace"}}},
		{"endpoint http", func(c *Config) { c.Endpoint = "http://example.com" }, []problem{{"endpoint", "uses http"}}},
		{"creation timeout unset", func(c *Config) { c.CreationTimeout = 0 }, []problem{{"creationTimeout", "not positive"}}},
		{"cluster name invalid", func(c *Config) { c.ClusterName = "-x" }, []problem{{"clusterName", "label value"}, {`pools[0].serverLabels["hcloudscale/cluster"]`, `want the cluster name "-x"`}}},
		{"duplicate firewall", func(c *Config) { c.Firewalls = []string{"a", "a"} }, []problem{{"firewalls[1]", "listed twice"}}},
		{"default image malformed", func(c *Config) { c.DefaultImage = "a b" }, []problem{{"defaultImage", "whitespace"}}},
		{"default subnet not masked", func(c *Config) { c.DefaultSubnetIPRange = netip.MustParsePrefix("10.0.0.1/16") }, []problem{{"defaultSubnetIPRange", "host bits"}}},
		{"no pools", func(c *Config) { c.Pools = nil }, []problem{{"pools", "no pools"}}},
		{"duplicate pool name", func(c *Config) { c.Pools = append(c.Pools, c.Pools[0]) }, []problem{{"pools[1].name", `"pool1" is already used by pools[0]`}}},
		{"pool name invalid", func(c *Config) { c.Pools[0].Name = "Pool_1"; c.Pools[0].ServerLabels[LabelNodeGroup] = "Pool_1" }, []problem{{"pools[0].name", "contains"}}},
		{"min above max", func(c *Config) { c.Pools[0].MinSize = 6 }, []problem{{"pools[0]", "min size 6 is greater than max size 5"}}},
		{"server type upper case", func(c *Config) { c.Pools[0].ServerType = "CX22" }, []problem{{"pools[0].serverType", "not lower-case"}}},
		{"location missing", func(c *Config) { c.Pools[0].Location = "" }, []problem{{"pools[0].location", "required"}}},
		{"image missing", func(c *Config) { c.Pools[0].Images.ARM64 = "" }, []problem{{"pools[0].images.arm64", "required"}}},
		{"label invalid", func(c *Config) { c.Pools[0].Labels = map[string]string{"a": "b c"} }, []problem{{"pools[0].labels.a", "label value"}}},
		{"taint effect invalid", func(c *Config) { c.Pools[0].Taints = []corev1.Taint{{Key: "k", Effect: "Never"}} }, []problem{{"pools[0].taints[0].effect", "not one of"}}},
		{"server label reserved", func(c *Config) { c.Pools[0].ServerLabels["hetzner.cloud/x"] = "y" }, []problem{{`pools[0].serverLabels["hetzner.cloud/x"]`, "reserves"}}},
		{"node-group label wrong", func(c *Config) { c.Pools[0].ServerLabels[LabelNodeGroup] = "other" }, []problem{{`pools[0].serverLabels["hcloud/node-group"]`, `want the pool name "pool1"`}}},
		{"cluster label missing", func(c *Config) { c.ClusterName = "prod" }, []problem{{`pools[0].serverLabels["hcloudscale/cluster"]`, `want the cluster name "prod"`}}},
		{"cluster label without cluster name", func(c *Config) { c.Pools[0].ServerLabels[LabelCluster] = "prod" }, []problem{{`pools[0].serverLabels["hcloudscale/cluster"]`, `want the cluster name ""`}}},
		{"subnet without network", func(c *Config) {
			c.Pools[0].Network = ""
			c.Pools[0].SubnetIPRange = netip.MustParsePrefix("10.0.1.0/24")
		}, []problem{{"pools[0].subnetIPRange", "without a network"}}},
		{"unreachable pool", func(c *Config) { c.Pools[0].Network = ""; c.Pools[0].PublicIPv4 = false }, []problem{{"pools[0]", `pool "pool1" has no public IPv4, no public IPv6 and no network`}}},
		{"offerings not starting with the pool's own", func(c *Config) {
			c.Pools[0].Offerings = []Offering{{"cx32", "nbg1"}, {"CX22", "fsn1"}, {"cx32", "nbg1"}, {"", "fsn1"}}
		}, []problem{
			{"pools[0].offerings[0]", "want the pool's own serverType and location"},
			{"pools[0].offerings[1].serverType", "not lower-case"},
			{"pools[0].offerings[2]", "listed already at pools[0].offerings[0]"},
			{"pools[0].offerings[3].serverType", "required"},
		}},
		{"spread groups with a fixed group", func(c *Config) { c.Pools[0].SpreadGroups = true; c.Pools[0].PlacementGroup = "pg" }, []problem{{"pools[0].spreadGroups", `set together with placementGroup "pg"`}}},
		{"private pool with a subnet range", func(c *Config) {
			c.Pools[0].Network = "k8s"
			c.Pools[0].PublicIPv4 = false
			c.Pools[0].SubnetIPRange = netip.MustParsePrefix("10.0.1.0/24")
		}, []problem{{"pools[0].subnetIPRange", `pool "pool1" has no public IP`}}},
		{"maxPods out of range", func(c *Config) { c.Pools[0].MaxPods = 5000 }, []problem{{"pools[0].maxPods", "out of range"}}},
		{"reserved negative", func(c *Config) { c.Pools[0].Reserved.Memory = neg }, []problem{{"pools[0].reserved.memory", "negative"}}},
		{"autoscaling out of range", func(c *Config) {
			c.Pools[0].Autoscaling = &Autoscaling{ScaleDownUtilizationThreshold: &tooHigh, ScaleDownUnreadyTime: &zero}
		}, []problem{{"pools[0].autoscaling.scaleDownUtilizationThreshold", "out of range"}, {"pools[0].autoscaling.scaleDownUnreadyTime", "not positive"}}},
		{"cloud-init too large", func(c *Config) { c.Pools[0].CloudInit = Secret(make([]byte, MaxCloudInitBytes+1)) }, []problem{{"pools[0].cloudInit", "at most 32768"}}},
		{"placement group too full", func(c *Config) {
			c.Pools[0].PlacementGroup = "pg"
			p2 := c.Pools[0]
			p2.Name, p2.MaxSize = "pool2", 6
			p2.ServerLabels = map[string]string{LabelNodeGroup: "pool2"}
			c.Pools = append(c.Pools, p2)
		}, []problem{{"pools[0].placementGroup, pools[1].placementGroup", "11 servers"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(&c)
			err := c.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v; want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil; want %v", tt.want)
			}
			checkProblems(t, err, tt.want)
		})
	}
}
