package config

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
)

const testToken = "0123456789abcdefABCDEF"

// baseEnv is a minimal valid environment for the pool "1:3:cx22:fsn1:pool1".
func baseEnv() map[string]string {
	return map[string]string{
		EnvToken:         testToken,
		EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {}}}`),
	}
}

var baseSpecs = []string{"1:3:cx22:fsn1:pool1"}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string // merged over baseEnv; "" deletes
		files map[string]string
		specs []string // nil: baseSpecs
		want  []problem
	}{
		{name: "token missing", env: map[string]string{EnvToken: ""}, want: []problem{{EnvToken, "required (or HCLOUD_TOKEN_FILE)"}}},
		{name: "token whitespace only counts as unset", env: map[string]string{EnvToken: " \n"}, want: []problem{{EnvToken, "required"}}},
		{name: "token with inner whitespace", env: map[string]string{EnvToken: "abc def"}, want: []problem{{EnvToken, "contains whitespace or control characters"}}},
		{name: "token file missing", env: map[string]string{EnvToken: "", EnvTokenFile: "/secret/token"}, want: []problem{{EnvTokenFile, "open /secret/token: file does not exist"}}},
		{name: "token file empty", env: map[string]string{EnvToken: "", EnvTokenFile: "/t"}, files: map[string]string{"/t": "\n"}, want: []problem{{EnvTokenFile, `file "/t" is empty`}}},
		{name: "token and token file differ", env: map[string]string{EnvTokenFile: "/t"}, files: map[string]string{"/t": "other"}, want: []problem{{EnvToken + ", " + EnvTokenFile, "different tokens"}}},
		{name: "endpoint http on a public host", env: map[string]string{EnvEndpoint: "http://api.hetzner.cloud/v1"}, want: []problem{{EnvEndpoint, "uses http"}}},
		{name: "endpoint http on a private address", env: map[string]string{EnvEndpoint: "http://10.0.0.1/v1"}, want: []problem{{EnvEndpoint, "uses http"}}},
		{name: "endpoint other scheme", env: map[string]string{EnvEndpoint: "ftp://example.com"}, want: []problem{{EnvEndpoint, "scheme must be https"}}},
		{name: "endpoint not absolute", env: map[string]string{EnvEndpoint: "api.hetzner.cloud/v1"}, want: []problem{{EnvEndpoint, "not an absolute URL"}}},
		{name: "endpoint with credentials", env: map[string]string{EnvEndpoint: "https://user:pw@example.com"}, want: []problem{{EnvEndpoint, "may not have user info"}}},
		{name: "network with control character", env: map[string]string{EnvNetwork: "a\x01b"}, want: []problem{{EnvNetwork, "control characters"}}},
		{name: "firewall entry with control character", env: map[string]string{EnvFirewall: "a,b\x01"}, want: []problem{{EnvFirewall + "[1]", "control characters"}}},
		{name: "ssh key entry with control character", env: map[string]string{EnvSSHKey: "k\x7f"}, want: []problem{{EnvSSHKey + "[0]", "control characters"}}},
		{name: "public IPv4 not a boolean", env: map[string]string{EnvPublicIPv4: "yes"}, want: []problem{{EnvPublicIPv4, `"yes" is not a boolean`}}},
		{name: "public IPv6 not a boolean", env: map[string]string{EnvPublicIPv6: "enabled"}, want: []problem{{EnvPublicIPv6, `"enabled" is not a boolean`}}},
		{name: "no public address and no network", env: map[string]string{EnvPublicIPv4: "false", EnvPublicIPv6: "0"}, want: []problem{{EnvPublicIPv4 + ", " + EnvPublicIPv6, "no network at all"}}},
		{name: "pool without public addresses and no network", env: map[string]string{EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {"publicIPv4": false, "publicIPv6": false}}}`)}, want: []problem{{"nodeConfigs.pool1", `pool "pool1" has no public IPv4 and no public IPv6`}}},
		{name: "pool turns off the one address the environment left", env: map[string]string{EnvPublicIPv4: "false", EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {"publicIPv6": false}}}`)}, want: []problem{{"nodeConfigs.pool1", "its servers would have no network at all"}}},
		{name: "environment off names every pool that inherits it", env: map[string]string{EnvPublicIPv4: "false", EnvPublicIPv6: "false", EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {}, "pool2": {}, "pool3": {"publicIPv6": true}}}`)}, specs: []string{"1:3:cx22:fsn1:pool1", "0:3:cx22:fsn1:pool2", "0:3:cx22:fsn1:pool3"}, want: []problem{{EnvPublicIPv4 + ", " + EnvPublicIPv6, `servers would have no network at all (pool "pool1", "pool2")`}}},
		{name: "pool without public addresses with a subnet range", env: map[string]string{EnvNetwork: "k8s", EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {"publicIPv4": false, "publicIPv6": false, "subnetIPRange": "10.0.1.0/24"}}}`)}, want: []problem{{"nodeConfigs.pool1.subnetIPRange", `pool "pool1" has no public IP`}}},
		{name: "pool without public addresses under a default subnet range", env: map[string]string{EnvNetwork: "k8s", EnvClusterConfig: b64(`{"defaultSubnetIPRange": "10.0.0.0/16", "nodeConfigs": {"pool1": {"publicIPv4": false, "publicIPv6": false}}}`)}, want: []problem{{"defaultSubnetIPRange", `pool "pool1" has no public IP`}}},
		{name: "spread groups and a fixed placement group", env: map[string]string{EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {"spreadGroups": true, "placementGroup": "pg"}}}`)}, want: []problem{{"nodeConfigs.pool1.spreadGroups", `true together with placementGroup "pg"`}}},
		{name: "spread groups not a boolean", env: map[string]string{EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {"spreadGroups": 1}}}`)}, want: []problem{{"nodeConfigs.pool1.spreadGroups", "want true or false, got a number"}}},
		{name: "offerings wrong", env: map[string]string{EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {"offerings": [{"serverType": "cx32", "location": "nbg1"}, {"serverType": "cx22", "location": "fsn1"}, {"serverType": "cx32", "location": "nbg1"}, {"serverType": "cx42"}, {"serverType": "a b", "location": "fsn1"}, {"serverType": "cx42", "location": "fsn1", "zone": "x"}, 3]}}}`)}, want: []problem{
			{"nodeConfigs.pool1.offerings[3].location", "required"},
			{"nodeConfigs.pool1.offerings[4].serverType", "whitespace"},
			{"nodeConfigs.pool1.offerings[5].zone", "unknown"},
			{"nodeConfigs.pool1.offerings[6]", "want an object"},
			{"nodeConfigs.pool1.offerings[1]", "cx22-fsn1 is the pool's own serverType and location, which are always the first offering"},
			{"nodeConfigs.pool1.offerings[2]", "cx32-nbg1 is listed already at nodeConfigs.pool1.offerings[0]"},
		}},
		{name: "offerings empty", env: map[string]string{EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {"offerings": []}}}`)}, want: []problem{{"nodeConfigs.pool1.offerings", "empty"}}},
		{name: "offerings with spread groups", env: map[string]string{EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {"spreadGroups": true, "offerings": [{"serverType": "cx32", "location": "nbg1"}]}}}`)}, want: []problem{{"nodeConfigs.pool1.offerings", "together with spreadGroups"}}},
		{name: "public IPv4 of a pool not a boolean", env: map[string]string{EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {"publicIPv4": "no", "publicIPv6": 0}}}`)}, want: []problem{{"nodeConfigs.pool1.publicIPv4", "want true or false, got a string"}, {"nodeConfigs.pool1.publicIPv6", "want true or false, got a number"}}},
		{name: "timeout negative minutes", env: map[string]string{EnvServerCreationTimeout: "-3"}, want: []problem{{EnvServerCreationTimeout, "-3 minutes is not positive"}}},
		{name: "timeout negative minutes", env: map[string]string{EnvServerCreationTimeout: "-3"}, want: []problem{{EnvServerCreationTimeout, "not positive"}}},
		{name: "timeout more than a day", env: map[string]string{EnvServerCreationTimeout: "1441"}, want: []problem{{EnvServerCreationTimeout, "1441 minutes is more than 24h0m0s"}}},
		{name: "timeout duration more than a day", env: map[string]string{EnvServerCreationTimeout: "25h"}, want: []problem{{EnvServerCreationTimeout, `"25h" is more than 24h0m0s`}}},
		{name: "timeout garbage", env: map[string]string{EnvServerCreationTimeout: "five"}, want: []problem{{EnvServerCreationTimeout, "neither whole minutes"}}},
		{name: "timeout negative duration", env: map[string]string{EnvServerCreationTimeout: "-5s"}, want: []problem{{EnvServerCreationTimeout, "not positive"}}},
		{name: "image malformed", env: map[string]string{EnvImage: "ubuntu 24.04"}, want: []problem{{EnvImage, "contains whitespace"}}},
		{name: "cluster name invalid", env: map[string]string{EnvClusterName: "a b"}, want: []problem{{EnvClusterName, "valid Hetzner label value"}}},
		{name: "cluster name env and JSON differ", env: map[string]string{EnvClusterName: "a", EnvClusterConfig: b64(`{"clusterName": "b", "nodeConfigs": {"pool1": {}}}`)}, want: []problem{{"clusterName", `"b" differs from HCLOUD_CLUSTER_NAME="a"`}}},
		{name: "no --nodes", specs: []string{}, want: []problem{{"--nodes", "no pools"}}},
		{name: "bad --nodes spec", specs: []string{"1:3:cx22:fsn1:pool1", "1:x:cx22:fsn1:p2"}, want: []problem{{"--nodes[1] (p2)", `max size "x"`}}},
		{name: "duplicate pool name", specs: []string{"1:3:cx22:fsn1:pool1", "0:1:cx32:nbg1:pool1"}, want: []problem{{"--nodes[1] (pool1)", `pool name "pool1" is already used by --nodes[0]`}}},
		{name: "no source", env: map[string]string{EnvClusterConfig: ""}, want: []problem{{EnvClusterConfig, "none of HCLOUD_CLUSTER_CONFIG, HCLOUD_CLUSTER_CONFIG_FILE or HCLOUD_CLOUD_INIT is set"}}},
		{name: "cluster config plain JSON", env: map[string]string{EnvClusterConfig: `{"nodeConfigs": {}}`}, want: []problem{{EnvClusterConfig, "looks like plain JSON"}}},
		{name: "cluster config not base64", env: map[string]string{EnvClusterConfig: "%%%"}, want: []problem{{EnvClusterConfig, "not base64: illegal base64 data"}}},
		{name: "cluster config invalid JSON", env: map[string]string{EnvClusterConfig: b64(`{"nodeConfigs": }`)}, want: []problem{{EnvClusterConfig, "invalid JSON at line 1, column 17"}}},
		{name: "cluster config not an object", env: map[string]string{EnvClusterConfig: b64(`"x"`)}, want: []problem{{EnvClusterConfig, "want a JSON object, got a string"}}},
		{name: "cluster config file missing", env: map[string]string{EnvClusterConfig: "", EnvClusterConfigFile: "/cc.json"}, want: []problem{{EnvClusterConfigFile, "file does not exist"}}},
		{name: "cluster config file invalid JSON", env: map[string]string{EnvClusterConfig: "", EnvClusterConfigFile: "/cc.json"}, files: map[string]string{"/cc.json": "{"}, want: []problem{{EnvClusterConfigFile, "unexpected end of input"}}},
		{name: "legacy cloud-init not base64", env: map[string]string{EnvClusterConfig: "", EnvCloudInit: "#cloud-config"}, want: []problem{{EnvCloudInit, "not base64"}}},
		{name: "legacy cloud-init too large", env: map[string]string{EnvClusterConfig: "", EnvCloudInit: b64(strings.Repeat("x", MaxCloudInitBytes+1))}, want: []problem{{EnvCloudInit, "Hetzner accepts at most 32768"}}},
		{name: "legacy cloud-init gzip-compressed", env: map[string]string{EnvClusterConfig: "", EnvCloudInit: b64("\x1f\x8b\x08\x00\x00\x00")}, want: []problem{{EnvCloudInit, "cloud-init is gzip-compressed; Hetzner's API carries user data as text"}}},
		{name: "legacy cloud-init not UTF-8", env: map[string]string{EnvClusterConfig: "", EnvCloudInit: b64("#cloud-config\n\xff")}, want: []problem{{EnvCloudInit, "cloud-init is not valid UTF-8 (byte 14)"}}},
		{name: "cloudInit not UTF-8", env: map[string]string{EnvClusterConfig: b64("{\"nodeConfigs\": {\"pool1\": {\"cloudInit\": \"#x\xc3\"}}}")}, want: []problem{{"nodeConfigs.pool1.cloudInit", "cloud-init is not valid UTF-8 (byte 2)"}}},
		{name: "cloudInit template not UTF-8", env: map[string]string{EnvClusterConfig: b64("{\"cloudInitTemplate\": true, \"nodeConfigs\": {\"pool1\": {\"cloudInit\": \"<% .Pool %>\x8b\"}}}")}, want: []problem{{"nodeConfigs.pool1.cloudInit", "not valid UTF-8 (byte 11)"}}},
		{name: "cluster config file with a BOM", env: map[string]string{EnvClusterConfig: "", EnvClusterConfigFile: "/cc.json"}, files: map[string]string{"/cc.json": "\ufeff{\"nodeConfigs\": {\"pool1\": {}}}"}, want: []problem{{EnvClusterConfigFile, "starts with a UTF-8 byte order mark (BOM), which JSON does not allow: save the file as UTF-8 without BOM"}}},
		{name: "cluster config file in base64", env: map[string]string{EnvClusterConfig: "", EnvClusterConfigFile: "/cc.json"}, files: map[string]string{"/cc.json": b64(`{"nodeConfigs": {"pool1": {}}}`) + "\n"}, want: []problem{{EnvClusterConfigFile, `file "/cc.json" holds base64 text, not JSON: the file takes plain JSON, so decode it (base64 -d), or pass the base64 text in HCLOUD_CLUSTER_CONFIG`}}},
		{name: "cluster config file too large", env: map[string]string{EnvClusterConfig: "", EnvClusterConfigFile: "/cc.json"}, files: map[string]string{"/cc.json": "{" + strings.Repeat(" ", MaxFileBytes) + "}"}, want: []problem{{EnvClusterConfigFile, `file "/cc.json" is larger than 4 MiB, far more than a cluster config or a token needs: check the path`}}},
		{name: "null pool entry", env: map[string]string{EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": null}}`)}, want: []problem{{"nodeConfigs.pool1", "want an object, got null: write {} for a pool that takes every default"}}},
		{name: "pool entry differs in case", env: map[string]string{EnvClusterConfig: b64(`{"nodeConfigs": {"Pool1": {}}}`)}, want: []problem{{"nodeConfigs.pool1", `missing: the cluster config needs an entry for every --nodes pool; the entry "Pool1" differs only in case`}}},
		{name: "unknown key lists no upstream internals", env: map[string]string{EnvClusterConfig: b64(`{"zzz": 1, "nodeConfigs": {"pool1": {}}}`)}, want: []problem{{"zzz", "unknown key, want one of cloudInitTemplate, clusterName, defaultSubnetIPRange, imagesForArch, nodeConfigs"}}},
		{name: "pool without nodeConfigs entry", specs: []string{"1:3:cx22:fsn1:pool1", "0:2:cx22:fsn1:pool2"}, want: []problem{{"nodeConfigs.pool2", "missing: the cluster config needs an entry for every --nodes pool"}}},
		{name: "JSON errors keep their paths", env: map[string]string{EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {"taints": [{"key": "k", "effect": "NoSchedul"}]}}}`)}, want: []problem{{"nodeConfigs.pool1.taints[0].effect", `"NoSchedul" is not one of`}}},
		{name: "pool subnet without network", env: map[string]string{EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {"subnetIPRange": "10.0.1.0/24"}}}`)}, want: []problem{{"nodeConfigs.pool1.subnetIPRange", "HCLOUD_NETWORK is not"}}},
		{name: "default subnet without network", env: map[string]string{EnvClusterConfig: b64(`{"defaultSubnetIPRange": "10.0.0.0/16", "nodeConfigs": {"pool1": {}}}`)}, want: []problem{{"defaultSubnetIPRange", "HCLOUD_NETWORK is not"}}},
		{
			name:  "placement group over 10 servers",
			env:   map[string]string{EnvClusterConfig: b64(`{"nodeConfigs": {"a": {"placementGroup": "pg"}, "b": {"placementGroup": "pg"}, "c": {"placementGroup": "other"}}}`)},
			specs: []string{"0:6:cx22:fsn1:a", "0:5:cx22:fsn1:b", "0:10:cx22:fsn1:c"},
			want:  []problem{{"nodeConfigs.a.placementGroup, nodeConfigs.b.placementGroup", `placement group "pg" would hold up to 11 servers (a max 6, b max 5)`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := baseEnv()
			for k, v := range tt.env {
				if v == "" {
					delete(env, k)
				} else {
					env[k] = v
				}
			}
			specs := tt.specs
			if specs == nil {
				specs = baseSpecs
			}
			cfg, err := Load(MapEnv(env, tt.files), specs)
			if err == nil {
				t.Fatalf("Load = %+v, nil; want errors", cfg)
			}
			if cfg != nil {
				t.Errorf("Load returned a Config with an error")
			}
			checkProblems(t, err, tt.want)
		})
	}
}

func TestLoad(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name  string
		env   map[string]string // merged over baseEnv; "" deletes
		files map[string]string
		specs []string
		check func(t *testing.T, c *Config)
	}{
		{name: "defaults", check: func(t *testing.T, c *Config) {
			want := Defaults()
			want.Token = testToken
			want.Source = SourceClusterConfig
			want.Pools = []Pool{{
				Name: "pool1", MinSize: 1, MaxSize: 3, ServerType: "cx22", Location: "fsn1", Origin: "--nodes[0] (pool1)",
				Images:         ImagesForArch{AMD64: DefaultImage, ARM64: DefaultImage},
				SnapshotImages: []Arch{ArchAMD64, ArchARM64},
				ServerLabels:   map[string]string{LabelNodeGroup: "pool1"},
				PublicIPv4:     true, PublicIPv6: true,
			}}
			want.Warnings = []string{`imagesForArch: no amd64 or arm64 entry for pools pool1: their servers boot "ubuntu-24.04" from the default, where upstream sent no image name and booted the newest snapshot of the architecture; set imagesForArch to choose`}
			if diff := cmp.Diff(&want, c, cmpopts.EquateEmpty(), cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
				t.Errorf("Load (-want +got):\n%s", diff)
			}
		}},
		{name: "upstream: type and location lower-cased, name kept", specs: []string{"1:10:CPX51:FSN1:pool1"}, check: func(t *testing.T, c *Config) {
			if p := c.Pools[0]; p.ServerType != "cpx51" || p.Location != "fsn1" || p.Name != "pool1" {
				t.Errorf("pool = %s/%s/%s; want cpx51/fsn1/pool1", p.ServerType, p.Location, p.Name)
			}
		}},
		{name: "token trimmed", env: map[string]string{EnvToken: "  " + testToken + "\n"}, check: func(t *testing.T, c *Config) {
			if c.Token.Reveal() != testToken {
				t.Errorf("token = %q; want %q", c.Token.Reveal(), testToken)
			}
		}},
		{name: "token from file, trimmed", env: map[string]string{EnvToken: "", EnvTokenFile: "/t"}, files: map[string]string{"/t": testToken + "\n"}, check: func(t *testing.T, c *Config) {
			if c.Token.Reveal() != testToken {
				t.Errorf("token = %q; want %q", c.Token.Reveal(), testToken)
			}
		}},
		{name: "token and equal token file", env: map[string]string{EnvTokenFile: "/t"}, files: map[string]string{"/t": testToken}, check: func(t *testing.T, c *Config) {
			if c.Token.Reveal() != testToken {
				t.Errorf("token = %q; want %q", c.Token.Reveal(), testToken)
			}
		}},
		{name: "endpoint https, trailing slash dropped", env: map[string]string{EnvEndpoint: "https://api.example.com/v1/"}, check: wantEndpoint("https://api.example.com/v1")},
		{name: "endpoint http on 127.0.0.1", env: map[string]string{EnvEndpoint: "http://127.0.0.1:8080/v1"}, check: wantEndpoint("http://127.0.0.1:8080/v1")},
		{name: "endpoint http on 127.1.2.3", env: map[string]string{EnvEndpoint: "http://127.1.2.3/v1"}, check: wantEndpoint("http://127.1.2.3/v1")},
		{name: "endpoint http on ::1", env: map[string]string{EnvEndpoint: "http://[::1]:9000"}, check: wantEndpoint("http://[::1]:9000")},
		{name: "endpoint http on localhost", env: map[string]string{EnvEndpoint: "http://localhost:9000/v1"}, check: wantEndpoint("http://localhost:9000/v1")},
		{name: "timeout in minutes as upstream", env: map[string]string{EnvServerCreationTimeout: "10"}, check: wantTimeout(10 * time.Minute)},
		{name: "timeout as a duration", env: map[string]string{EnvServerCreationTimeout: "90s"}, check: wantTimeout(90 * time.Second)},
		{name: "public addresses off with a network", env: map[string]string{EnvPublicIPv4: "false", EnvPublicIPv6: "FALSE", EnvNetwork: "k8s"}, check: func(t *testing.T, c *Config) {
			p := c.Pools[0]
			if c.PublicIPv4 || c.PublicIPv6 || p.PublicIPv4 || p.PublicIPv6 || p.Network != "k8s" {
				t.Errorf("config %v/%v, pool %v/%v network %q; want no public addresses and network k8s", c.PublicIPv4, c.PublicIPv6, p.PublicIPv4, p.PublicIPv6, p.Network)
			}
		}},
		{name: "pool overrides the environment's public addresses", env: map[string]string{EnvPublicIPv4: "false", EnvPublicIPv6: "false", EnvNetwork: "k8s", EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {"publicIPv4": true}, "pool2": {}, "pool3": {"publicIPv6": true, "publicIPv4": false}}}`)}, specs: []string{"1:3:cx22:fsn1:pool1", "0:3:cx22:fsn1:pool2", "0:3:cx22:fsn1:pool3"}, check: func(t *testing.T, c *Config) {
			type ips struct{ V4, V6 bool }
			var got []ips
			for _, p := range c.Pools {
				got = append(got, ips{p.PublicIPv4, p.PublicIPv6})
			}
			if diff := cmp.Diff([]ips{{true, false}, {false, false}, {false, true}}, got); diff != "" {
				t.Errorf("pools' public IPs (-want +got):\n%s", diff)
			}
		}},
		{name: "offerings after the --nodes type and location", env: map[string]string{EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {"offerings": [{"serverType": "CPX31", "location": "nbg1"}, {"serverType": "cx22", "location": "hel1"}]}}}`)}, check: func(t *testing.T, c *Config) {
			want := []Offering{{"cx22", "fsn1"}, {"cpx31", "nbg1"}, {"cx22", "hel1"}}
			if diff := cmp.Diff(want, c.Pools[0].Offerings); diff != "" {
				t.Errorf("offerings (-want +got):\n%s", diff)
			}
			var ids []string
			for _, g := range c.NodeGroups() {
				ids = append(ids, g.Name+"/"+g.ServerType+"/"+g.Location+"/"+g.FamilyName())
			}
			if diff := cmp.Diff([]string{"pool1/cx22/fsn1/pool1", "pool1@cpx31-nbg1/cpx31/nbg1/pool1", "pool1@cx22-hel1/cx22/hel1/pool1"}, ids); diff != "" {
				t.Errorf("node groups (-want +got):\n%s", diff)
			}
			// Messages name each offering by the key it was written at.
			wantOrigins := []string{"--nodes[0] (pool1)", "nodeConfigs.pool1.offerings[0]", "nodeConfigs.pool1.offerings[1]"}
			if diff := cmp.Diff(wantOrigins, groupOrigins(c)); diff != "" {
				t.Errorf("node groups' origins (-want +got):\n%s", diff)
			}
		}},
		{name: "offerings repeating the --nodes type and location first", env: map[string]string{EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {"offerings": [{"serverType": "cx22", "location": "fsn1"}, {"serverType": "cx22", "location": "hel1"}]}}}`)}, check: func(t *testing.T, c *Config) {
			want := []string{"--nodes[0] (pool1), nodeConfigs.pool1.offerings[0]", "nodeConfigs.pool1.offerings[1]"}
			got := []string{c.Pools[0].OfferingSetting(0), c.Pools[0].OfferingSetting(1)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("offering settings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"--nodes[0] (pool1)", "nodeConfigs.pool1.offerings[1]"}, groupOrigins(c)); diff != "" {
				t.Errorf("node groups' origins (-want +got):\n%s", diff)
			}
		}},
		{name: "offerings naming only the pool's own", env: map[string]string{EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {"offerings": [{"serverType": "cx22", "location": "fsn1"}]}}}`)}, check: func(t *testing.T, c *Config) {
			if p := c.Pools[0]; p.Offerings != nil || len(c.NodeGroups()) != 1 {
				t.Errorf("offerings %v, %d node groups; want none and 1", p.Offerings, len(c.NodeGroups()))
			}
		}},
		{name: "spread groups", env: map[string]string{EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {"spreadGroups": true}}}`)}, check: func(t *testing.T, c *Config) {
			if p := c.Pools[0]; !p.SpreadGroups || p.PlacementGroup != "" {
				t.Errorf("pool SpreadGroups %v, PlacementGroup %q; want true and none", p.SpreadGroups, p.PlacementGroup)
			}
		}},
		{name: "a private pool beside the default ones", env: map[string]string{EnvNetwork: "k8s", EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {"publicIPv4": false, "publicIPv6": false}}}`)}, check: func(t *testing.T, c *Config) {
			if p := c.Pools[0]; p.PublicIPv4 || p.PublicIPv6 || !c.PublicIPv4 || !c.PublicIPv6 {
				t.Errorf("config %v/%v, pool %v/%v; want the defaults true/true and the pool false/false", c.PublicIPv4, c.PublicIPv6, p.PublicIPv4, p.PublicIPv6)
			}
		}},
		{name: "only IPv6", env: map[string]string{EnvPublicIPv4: "0", EnvPublicIPv6: "1"}, check: func(t *testing.T, c *Config) {
			if c.PublicIPv4 || !c.PublicIPv6 {
				t.Errorf("PublicIPv4, PublicIPv6 = %v, %v; want false, true", c.PublicIPv4, c.PublicIPv6)
			}
		}},
		{name: "lists trimmed, empties dropped, repeats removed", env: map[string]string{EnvFirewall: " fw-a, ,fw-b,fw-a,", EnvSSHKey: "key1,key2 , key1"}, check: func(t *testing.T, c *Config) {
			if diff := cmp.Diff([]string{"fw-a", "fw-b"}, c.Firewalls); diff != "" {
				t.Errorf("Firewalls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"key1", "key2"}, c.Pools[0].SSHKeys); diff != "" {
				t.Errorf("pool SSHKeys (-want +got):\n%s", diff)
			}
		}},
		{name: "pool firewalls follow the global ones, repeats removed", env: map[string]string{EnvFirewall: "base,shared", EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {"firewalls": ["shared", "extra", "extra"]}}}`)}, check: func(t *testing.T, c *Config) {
			if diff := cmp.Diff([]string{"base", "shared", "extra"}, c.Pools[0].Firewalls); diff != "" {
				t.Errorf("pool Firewalls (-want +got):\n%s", diff)
			}
		}},
		{name: "cluster config file", env: map[string]string{EnvClusterConfig: "", EnvClusterConfigFile: "/cc.json"}, files: map[string]string{"/cc.json": `{"nodeConfigs": {"pool1": {"cloudInit": "file"}}}`}, check: func(t *testing.T, c *Config) {
			if c.Source != SourceClusterConfigFile || c.Pools[0].CloudInit.Reveal() != "file" {
				t.Errorf("source %s, cloud-init %q; want HCLOUD_CLUSTER_CONFIG_FILE, file", c.Source, c.Pools[0].CloudInit.Reveal())
			}
		}},
		{name: "cluster config beats file and cloud-init, with a warning", env: map[string]string{EnvClusterConfigFile: "/cc.json", EnvCloudInit: b64("legacy")}, check: func(t *testing.T, c *Config) {
			wantSourceAndWarnings(t, c, SourceClusterConfig, "HCLOUD_CLUSTER_CONFIG: used; HCLOUD_CLUSTER_CONFIG_FILE and HCLOUD_CLOUD_INIT set but ignored")
		}},
		{name: "cluster config file beats cloud-init, with a warning", env: map[string]string{EnvClusterConfig: "", EnvClusterConfigFile: "/cc.json", EnvCloudInit: b64("legacy")}, files: map[string]string{"/cc.json": `{"nodeConfigs": {"pool1": {}}}`}, check: func(t *testing.T, c *Config) {
			wantSourceAndWarnings(t, c, SourceClusterConfigFile, "HCLOUD_CLUSTER_CONFIG_FILE: used; HCLOUD_CLOUD_INIT set but ignored")
		}},
		{name: "legacy format", env: map[string]string{EnvClusterConfig: "", EnvCloudInit: b64("#cloud-config\n"), EnvImage: "debian-12", EnvClusterName: "prod"}, specs: []string{"1:3:cx22:fsn1:pool1", "0:2:cax11:hel1:arm"}, check: func(t *testing.T, c *Config) {
			wantSourceAndWarnings(t, c, SourceLegacyCloudInit)
			for i, p := range c.Pools {
				want := Pool{
					Name: p.Name, MinSize: p.MinSize, MaxSize: p.MaxSize, ServerType: p.ServerType, Location: p.Location, Origin: PoolSetting(i, p.Name),
					CloudInit:    "#cloud-config\n",
					Images:       ImagesForArch{AMD64: "debian-12", ARM64: "debian-12"},
					ServerLabels: map[string]string{LabelNodeGroup: p.Name, LabelCluster: "prod"},
					PublicIPv4:   true, PublicIPv6: true,
				}
				if diff := cmp.Diff(want, p, cmpopts.EquateEmpty(), cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
					t.Errorf("pool %s (-want +got):\n%s", p.Name, diff)
				}
			}
		}},
		{name: "cluster name from JSON labels servers", env: map[string]string{EnvClusterConfig: b64(`{"clusterName": "prod", "nodeConfigs": {"pool1": {"serverLabels": {"team": "a"}}}}`)}, check: func(t *testing.T, c *Config) {
			want := map[string]string{"team": "a", LabelNodeGroup: "pool1", LabelCluster: "prod"}
			if c.ClusterName != "prod" {
				t.Errorf("ClusterName = %q; want prod", c.ClusterName)
			}
			if diff := cmp.Diff(want, c.Pools[0].ServerLabels); diff != "" {
				t.Errorf("ServerLabels (-want +got):\n%s", diff)
			}
		}},
		{name: "cluster name in env and JSON agreeing", env: map[string]string{EnvClusterName: "prod", EnvClusterConfig: b64(`{"clusterName": "prod", "nodeConfigs": {"pool1": {}}}`)}, check: func(t *testing.T, c *Config) {
			if c.ClusterName != "prod" {
				t.Errorf("ClusterName = %q; want prod", c.ClusterName)
			}
		}},
		{name: "unused nodeConfigs entry is a warning", env: map[string]string{EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {}, "pool11": {}}}`)}, check: func(t *testing.T, c *Config) {
			wantSourceAndWarnings(t, c, SourceClusterConfig, `nodeConfigs.pool11: no --nodes pool has this name, entry ignored (did you mean "pool1"?)`)
		}},
		{name: "subnets: pools inherit the default range or use a separate subnet", env: map[string]string{EnvNetwork: "k8s", EnvClusterConfig: b64(`{"defaultSubnetIPRange": "10.0.0.0/16", "nodeConfigs": {"pool1": {}, "pool2": {"subnetIPRange": "10.1.2.0/24"}}}`)}, specs: []string{"1:3:cx22:fsn1:pool1", "0:1:cx22:fsn1:pool2"}, check: func(t *testing.T, c *Config) {
			got := []string{c.Pools[0].SubnetIPRange.String(), c.Pools[1].SubnetIPRange.String()}
			if diff := cmp.Diff([]string{"10.0.0.0/16", "10.1.2.0/24"}, got); diff != "" {
				t.Errorf("subnets (-want +got):\n%s", diff)
			}
		}},
		{name: "pool subnet inside the default range is a warning", env: map[string]string{EnvNetwork: "k8s", EnvClusterConfig: b64(`{"defaultSubnetIPRange": "10.0.0.0/16", "nodeConfigs": {"pool1": {"subnetIPRange": "10.0.1.0/24"}}}`)}, check: func(t *testing.T, c *Config) {
			wantSourceAndWarnings(t, c, SourceClusterConfig, "nodeConfigs.pool1.subnetIPRange: 10.0.1.0/24 overlaps defaultSubnetIPRange 10.0.0.0/16: subnets of one network cannot overlap, so at most one of them can be a subnet of HCLOUD_NETWORK (hcloudscale.New checks which)")
		}},
		{name: "pool subnet around the default range is a warning", env: map[string]string{EnvNetwork: "k8s", EnvClusterConfig: b64(`{"defaultSubnetIPRange": "10.0.0.0/16", "nodeConfigs": {"pool1": {"subnetIPRange": "10.0.0.0/8"}}}`)}, check: func(t *testing.T, c *Config) {
			wantSourceAndWarnings(t, c, SourceClusterConfig, "nodeConfigs.pool1.subnetIPRange: 10.0.0.0/8 overlaps defaultSubnetIPRange 10.0.0.0/16: subnets of one network cannot overlap, so at most one of them can be a subnet of HCLOUD_NETWORK (hcloudscale.New checks which)")
		}},
		{name: "subnet equal to the default range", env: map[string]string{EnvNetwork: "k8s", EnvClusterConfig: b64(`{"defaultSubnetIPRange": "10.0.0.0/16", "nodeConfigs": {"pool1": {"subnetIPRange": "10.0.0.0/16"}}}`)}, check: func(t *testing.T, c *Config) {
			if got := c.Pools[0].SubnetIPRange.String(); got != "10.0.0.0/16" {
				t.Errorf("subnet = %s; want 10.0.0.0/16", got)
			}
		}},
		{name: "placement group of exactly 10 servers", env: map[string]string{EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {"placementGroup": "pg"}, "pool2": {"placementGroup": "pg"}}}`)}, specs: []string{"0:4:cx22:fsn1:pool1", "0:6:cx22:fsn1:pool2"}, check: func(t *testing.T, c *Config) {
			if c.Pools[0].PlacementGroup != "pg" || c.Pools[1].PlacementGroup != "pg" {
				t.Errorf("placement groups %q, %q; want pg, pg", c.Pools[0].PlacementGroup, c.Pools[1].PlacementGroup)
			}
		}},
		{name: "template settings carried to the pool", env: map[string]string{EnvClusterConfig: b64(`{"nodeConfigs": {"pool1": {"labels": {"role": "w"}, "taints": [{"key": "k", "effect": "NoSchedule"}], "maxPods": 64, "reserved": {"cpu": "250m"}, "autoscaling": {"scaleDownUtilizationThreshold": 0.3}}}}`)}, check: func(t *testing.T, c *Config) {
			p := c.Pools[0]
			if diff := cmp.Diff(map[string]string{"role": "w"}, p.Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}, p.Taints); diff != "" {
				t.Errorf("taints (-want +got):\n%s", diff)
			}
			if p.MaxPods != 64 || p.Reserved.CPU.MilliValue() != 250 {
				t.Errorf("maxPods %d, reserved cpu %s; want 64, 250m", p.MaxPods, &p.Reserved.CPU)
			}
			if diff := cmp.Diff(&Autoscaling{ScaleDownUtilizationThreshold: f(0.3)}, p.Autoscaling); diff != "" {
				t.Errorf("autoscaling (-want +got):\n%s", diff)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := baseEnv()
			for k, v := range tt.env {
				if v == "" {
					delete(env, k)
				} else {
					env[k] = v
				}
			}
			specs := tt.specs
			if specs == nil {
				specs = baseSpecs
			}
			cfg, err := Load(MapEnv(env, tt.files), specs)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			tt.check(t, cfg)
		})
	}
}

func wantEndpoint(want string) func(*testing.T, *Config) {
	return func(t *testing.T, c *Config) {
		if c.Endpoint != want {
			t.Errorf("Endpoint = %q; want %q", c.Endpoint, want)
		}
	}
}

func wantTimeout(want time.Duration) func(*testing.T, *Config) {
	return func(t *testing.T, c *Config) {
		if c.CreationTimeout != want {
			t.Errorf("CreationTimeout = %v; want %v", c.CreationTimeout, want)
		}
	}
}

func wantSourceAndWarnings(t *testing.T, c *Config, source Source, warnings ...string) {
	t.Helper()
	if c.Source != source {
		t.Errorf("Source = %s; want %s", c.Source, source)
	}
	// The base config has no imagesForArch, which TestUpstreamConfigurations
	// covers; these tests are about the other warnings.
	got := slices.DeleteFunc(slices.Clone(c.Warnings), func(w string) bool { return strings.HasPrefix(w, "imagesForArch: ") })
	if diff := cmp.Diff(warnings, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Warnings (-want +got):\n%s", diff)
	}
}

// TestLoadImagePrecedence covers pool imagesForArch > global imagesForArch >
// HCLOUD_IMAGE > DefaultImage, per architecture.
func TestLoadImagePrecedence(t *testing.T) {
	tests := []struct {
		name     string
		global   string // imagesForArch JSON or ""
		pool     string
		envImage string
		want     ImagesForArch
	}{
		{"nothing set: DefaultImage", "", "", "", ImagesForArch{AMD64: DefaultImage, ARM64: DefaultImage}},
		{"HCLOUD_IMAGE is the fallback in the JSON format too", "", "", "debian-12", ImagesForArch{AMD64: "debian-12", ARM64: "debian-12"}},
		{"global beats HCLOUD_IMAGE", `{"amd64": "g-amd", "arm64": "g-arm"}`, "", "debian-12", ImagesForArch{AMD64: "g-amd", ARM64: "g-arm"}},
		{"pool beats global", `{"amd64": "g-amd", "arm64": "g-arm"}`, `{"amd64": "p-amd", "arm64": "p-arm"}`, "", ImagesForArch{AMD64: "p-amd", ARM64: "p-arm"}},
		{"an arch the pool leaves out falls through to global", `{"amd64": "g-amd", "arm64": "g-arm"}`, `{"amd64": "p-amd"}`, "", ImagesForArch{AMD64: "p-amd", ARM64: "g-arm"}},
		{"and on to HCLOUD_IMAGE", `{"amd64": "g-amd"}`, `{"amd64": "p-amd"}`, "debian-12", ImagesForArch{AMD64: "p-amd", ARM64: "debian-12"}},
		{"empty specs are unset", `{"amd64": "", "arm64": ""}`, `{"arm64": ""}`, "", ImagesForArch{AMD64: DefaultImage, ARM64: DefaultImage}},
		{"IDs and selectors pass through", "", `{"amd64": "123456", "arm64": "role=k8s,arch in (arm)"}`, "", ImagesForArch{AMD64: "123456", ARM64: "role=k8s,arch in (arm)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := `{"nodeConfigs": {"pool1": {` + keyIf("imagesForArch", tt.pool) + `}}` + prefixComma(keyIf("imagesForArch", tt.global)) + `}`
			env := baseEnv()
			env[EnvClusterConfig] = b64(doc)
			if tt.envImage != "" {
				env[EnvImage] = tt.envImage
			}
			cfg, err := Load(MapEnv(env, nil), baseSpecs)
			if err != nil {
				t.Fatalf("Load(%s): %v", doc, err)
			}
			if diff := cmp.Diff(tt.want, cfg.Pools[0].Images); diff != "" {
				t.Errorf("images of %s (-want +got):\n%s", doc, diff)
			}
		})
	}
}

func keyIf(key, value string) string {
	if value == "" {
		return ""
	}
	return `"` + key + `": ` + value
}

func prefixComma(s string) string {
	if s == "" {
		return ""
	}
	return ", " + s
}

// TestLoadFiveMistakes is the acceptance check: one error names all five.
func TestLoadFiveMistakes(t *testing.T) {
	env := map[string]string{
		EnvToken:                 testToken,
		EnvPublicIPv4:            "maybe",
		EnvServerCreationTimeout: "-1",
		EnvClusterConfig: b64(`{
		  "nodeConfigs": {
		    "pool1": {"taints": [{"key": "dedicated", "effect": "NoSchedul"}]},
		    "pool2": {"serverLabels": {"hcloud/node-group": "other"}}
		  }
		}`),
	}
	specs := []string{"1:3:cx22:fsn1:pool1", "0:2:cx22:fsn1:pool2", "3:1:cx22:fsn1:pool3"}
	_, err := Load(MapEnv(env, nil), specs)
	want := []string{
		EnvPublicIPv4,
		EnvServerCreationTimeout,
		"--nodes[2] (pool3)",
		"nodeConfigs.pool1.taints[0].effect",
		`nodeConfigs.pool2.serverLabels["hcloud/node-group"]`,
	}
	if diff := cmp.Diff(want, paths(err)); diff != "" {
		t.Errorf("paths of %v (-want +got):\n%s", err, diff)
	}
	for _, p := range want {
		if !strings.Contains(err.Error(), p+": ") {
			t.Errorf("error text lacks %q:\n%v", p, err)
		}
	}
}

func TestLoadUpstreamREADMEExample(t *testing.T) {
	data, err := os.ReadFile("testdata/upstream-readme.json")
	if err != nil {
		t.Fatal(err)
	}
	env := MapEnv(map[string]string{
		EnvToken:             testToken,
		EnvClusterConfigFile: "/etc/hcloudscale/cluster-config.json",
		EnvNetwork:           "k8s",
		EnvFirewall:          "workers",
	}, map[string]string{"/etc/hcloudscale/cluster-config.json": string(data)})
	cfg, err := Load(env, []string{"1:10:CPX51:FSN1:pool1", "1:10:CPX51:NBG1:pool2"})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	p1, p2 := cfg.Pool("pool1"), cfg.Pool("pool2")
	if p1 == nil || p2 == nil {
		t.Fatalf("pools = %+v; want pool1 and pool2", cfg.Pools)
	}
	type view struct {
		Images         ImagesForArch
		Subnet         string
		Firewalls      []string
		PlacementGroup string
		ServerLabels   map[string]string
	}
	got := []view{
		{p1.Images, p1.SubnetIPRange.String(), p1.Firewalls, p1.PlacementGroup, p1.ServerLabels},
		{p2.Images, p2.SubnetIPRange.String(), p2.Firewalls, p2.PlacementGroup, p2.ServerLabels},
	}
	want := []view{
		{ImagesForArch{AMD64: DefaultImage, ARM64: DefaultImage}, "10.0.1.0/24", []string{"workers"}, "pool1-spread", map[string]string{"environment": "production", LabelNodeGroup: "pool1"}},
		{ImagesForArch{AMD64: "debian-12", ARM64: "debian-12"}, "10.0.0.0/16", []string{"workers", "12345"}, "", map[string]string{LabelNodeGroup: "pool2"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
	if cfg.Pool("pool3") != nil {
		t.Errorf("Pool(pool3) = %+v; want nil", cfg.Pool("pool3"))
	}
}

func TestLoadNilEnv(t *testing.T) {
	_, err := Load(Env{}, baseSpecs)
	want := []string{EnvToken, EnvClusterConfig}
	if diff := cmp.Diff(want, paths(err)); diff != "" {
		t.Errorf("Load(Env{}) paths (-want +got):\n%s\n%v", diff, err)
	}
	env := baseEnv()
	delete(env, EnvClusterConfig)
	env[EnvClusterConfigFile] = "/cc.json"
	e := MapEnv(env, nil)
	e.ReadFile = nil
	_, err = Load(e, baseSpecs)
	if fes := FieldErrors(err); len(fes) != 1 || fes[0].Path != EnvClusterConfigFile || !strings.Contains(fes[0].Error(), "Env.ReadFile is nil") {
		t.Errorf("Load with nil ReadFile = %v; want one HCLOUD_CLUSTER_CONFIG_FILE error about Env.ReadFile", err)
	}
}

func TestLoadFromOS(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/cluster-config.json"
	if err := os.WriteFile(path, []byte(`{"nodeConfigs": {"pool1": {}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{EnvClusterConfig, EnvCloudInit, EnvTokenFile, EnvEndpoint, EnvImage, EnvNetwork, EnvFirewall, EnvSSHKey, EnvPublicIPv4, EnvPublicIPv6, EnvServerCreationTimeout, EnvClusterName} {
		t.Setenv(k, "")
	}
	t.Setenv(EnvToken, testToken)
	t.Setenv(EnvClusterConfigFile, path)
	cfg, err := LoadFromOS(baseSpecs)
	if err != nil {
		t.Fatalf("LoadFromOS: %v", err)
	}
	if cfg.Source != SourceClusterConfigFile || cfg.Pool("pool1") == nil {
		t.Errorf("LoadFromOS = source %s, pools %+v; want the file and pool1", cfg.Source, cfg.Pools)
	}
}

func TestFieldErrors(t *testing.T) {
	inner := &FieldError{Path: "a", Err: errors.New("x")}
	err := errors.Join(inner, errors.New("no path"), errors.Join(&FieldError{Path: "b", Err: fs.ErrNotExist}))
	if diff := cmp.Diff([]string{"a", "b"}, paths(err)); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("errors.Is(%v, fs.ErrNotExist) = false; want true through FieldError.Unwrap", err)
	}
}

// A file setting is read no further than the cap: a wrong path to a large
// file costs MaxFileBytes of memory, not the file's size.
func TestOSEnvCapsFileReads(t *testing.T) {
	path := t.TempDir() + "/big.json"
	if err := os.WriteFile(path, make([]byte, MaxFileBytes+4096), 0o600); err != nil {
		t.Fatal(err)
	}
	data, err := OSEnv().ReadFile(path)
	if err != nil || len(data) != MaxFileBytes+1 {
		t.Errorf("OSEnv().ReadFile read %d bytes, %v; want %d", len(data), err, MaxFileBytes+1)
	}
	env := OSEnv()
	vars := map[string]string{EnvToken: testToken, EnvClusterConfigFile: path}
	env.Lookup = func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	_, err = Load(env, baseSpecs)
	checkProblems(t, err, []problem{{EnvClusterConfigFile, "is larger than 4 MiB"}})
}

// TestEnvNamesListsEveryVariableLoadReads records the variables Load
// looks up, with settings that make it read the conditional ones too,
// and checks that EnvNames names each.
func TestEnvNamesListsEveryVariableLoadReads(t *testing.T) {
	asked := map[string]bool{}
	for _, vars := range []map[string]string{
		{},
		{EnvTokenFile: "/token", EnvEndpoint: "http://api.example.com/v1", EnvClusterConfigFile: "/cc.json", EnvCloudInit: "I2Nsb3VkLWNvbmZpZw==",
			EnvImage: "debian-12", EnvNetwork: "n", EnvFirewall: "f", EnvSSHKey: "k", EnvPublicIPv4: "false", EnvPublicIPv6: "true",
			EnvServerCreationTimeout: "5", EnvClusterName: "c"},
		{EnvToken: strings.Repeat("a", 64), EnvClusterConfig: "e30=", EnvEndpoint: "http://10.0.0.1/v1", EnvEndpointInsecure: "true"},
	} {
		env := MapEnv(vars, map[string]string{"/token": strings.Repeat("a", 64), "/cc.json": "{}"})
		lookup := env.Lookup
		env.Lookup = func(name string) (string, bool) { asked[name] = true; return lookup(name) }
		_, _ = Load(env, []string{"1:3:cx23:fsn1:pool1"})
	}
	for name := range asked {
		if !slices.Contains(EnvNames(), name) {
			t.Errorf("Load reads %s, which EnvNames leaves out", name)
		}
	}
	if !asked[EnvEndpointInsecure] || !asked[EnvClusterName] {
		t.Errorf("Load read %v; the settings meant to make it read %s and %s", asked, EnvEndpointInsecure, EnvClusterName)
	}
}

// groupOrigins returns the Origin of every node group of c.
func groupOrigins(c *Config) []string {
	var out []string
	for _, g := range c.NodeGroups() {
		out = append(out, g.Origin)
	}
	return out
}
