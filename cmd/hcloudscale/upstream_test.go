package main

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/hcloudscale/hcloudscale/config"
)

// upstreamREADMEConfig is the cluster config of the upstream provider's
// README, with its comments removed (as written it is not JSON, for
// upstream either).
const upstreamREADMEConfig = `{
    "imagesForArch": {
        "arm64": "",
        "amd64": ""
    },
    "defaultSubnetIPRange": "10.0.0.0/16",
    "nodeConfigs": {
        "pool1": {
            "cloudInit": "",
            "labels": {
                "node.kubernetes.io/role": "autoscaler-node"
            },
            "serverLabels": {
                "my-label": "my-value"
            },
            "taints":
            [
                {
                    "key": "node.kubernetes.io/role",
                    "value": "autoscaler-node",
                    "effect": "NoExecute"
                }
            ],
            "subnetIPRange": "10.0.0.0/24",
            "firewalls": ["my-pool1-firewall"]
        }
    }
}`

// TestUpstreamConfigurations feeds configurations written for the
// upstream provider through validate (which reads them with config.Load):
// accepted ones say in a warning wherever hcloudscale behaves differently,
// rejected ones name the setting and the fix.
func TestUpstreamConfigurations(t *testing.T) {
	t.Parallel()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	withJSON := func(doc string, extra map[string]string) map[string]string {
		env := map[string]string{config.EnvToken: "upstream-token", config.EnvClusterConfig: b64(doc)}
		for k, v := range extra {
			env[k] = v
		}
		return env
	}
	legacy := func(extra map[string]string) map[string]string {
		env := map[string]string{config.EnvToken: "upstream-token", config.EnvCloudInit: b64("#cloud-config\nruncmd: [kubeadm join]\n")}
		for k, v := range extra {
			env[k] = v
		}
		return env
	}
	const images = `"imagesForArch": {"amd64": "ubuntu-24.04", "arm64": "ubuntu-24.04"}, `

	for _, c := range []struct {
		name  string
		env   map[string]string
		nodes []string
		// Accepted: each warning must appear (substring), and check sees
		// the loaded Config.
		warnings []string
		check    func(t *testing.T, cfg *config.Config)
		// Rejected: each problem's setting and a substring of its message.
		problems []problem
	}{
		{
			name:  "upstream README cluster config",
			env:   withJSON(upstreamREADMEConfig, map[string]string{config.EnvNetwork: "k8s"}),
			nodes: []string{"--nodes=1:10:CPX51:FSN1:pool1"},
			warnings: []string{
				"imagesForArch.amd64: empty",
				`imagesForArch: no amd64 or arm64 entry for pools pool1: their servers boot "ubuntu-24.04" from the default, where upstream sent no image name and booted the newest snapshot`,
				"nodeConfigs.pool1.subnetIPRange: 10.0.0.0/24 overlaps defaultSubnetIPRange 10.0.0.0/16",
			},
		},
		{
			name:     "upstream README cluster config with its comments",
			env:      withJSON(strings.Replace(upstreamREADMEConfig, `"cloudInit": "",`, `"cloudInit": "", // HCLOUD_CLOUD_INIT`, 1), nil),
			nodes:    []string{"--nodes=1:10:CPX51:FSN1:pool1"},
			problems: []problem{{"HCLOUD_CLUSTER_CONFIG", "JSON has no comments"}},
		},
		{
			name:     "upstream README --nodes and example deployment, legacy format",
			env:      legacy(nil),
			nodes:    []string{"--nodes=1:10:CPX51:FSN1:pool1", "--nodes=1:10:CPX51:NBG1:pool2", "--nodes=1:10:CX41:NBG1:pool3"},
			warnings: []string{"HCLOUD_IMAGE: unset: servers boot ubuntu-24.04; upstream booted ubuntu-20.04"},
			check: func(t *testing.T, cfg *config.Config) {
				if p := cfg.Pool("pool3"); p == nil || p.ServerType != "cx41" || p.Location != "nbg1" {
					t.Errorf("pool3 = %+v; want cx41 in nbg1, lower-cased as upstream", p)
				}
			},
		},
		{
			name:  "legacy format with HCLOUD_IMAGE: no warning about the image",
			env:   legacy(map[string]string{config.EnvImage: "ubuntu-22.04"}),
			nodes: []string{"--nodes=1:10:CPX11:FSN1:pool1"},
			check: func(t *testing.T, cfg *config.Config) {
				for _, w := range cfg.Warnings {
					if strings.Contains(w, "image") {
						t.Errorf("unexpected warning %q", w)
					}
				}
			},
		},
		{
			name:  "keys in another case, as encoding/json matched them",
			env:   withJSON(`{"ImagesForArch": {"AMD64": "ubuntu-24.04", "arm64": "ubuntu-24.04"}, "NodeConfigs": {"pool1": {"CloudInit": "#cloud-config\n", "Labels": {"role": "worker"}}}}`, nil),
			nodes: []string{"--nodes=0:3:cx23:fsn1:pool1"},
			warnings: []string{
				`NodeConfigs: key matched "nodeConfigs" ignoring case, as upstream did; write "nodeConfigs"`,
				`ImagesForArch: key matched "imagesForArch" ignoring case`,
				`ImagesForArch.AMD64: key matched "amd64" ignoring case`,
				`NodeConfigs.pool1.CloudInit: key matched "cloudInit" ignoring case`,
				`NodeConfigs.pool1.Labels: key matched "labels" ignoring case`,
			},
			check: func(t *testing.T, cfg *config.Config) {
				p := cfg.Pool("pool1")
				if p.CloudInit.Reveal() != "#cloud-config\n" || p.Labels["role"] != "worker" {
					t.Errorf("pool1 cloud-init %q, labels %v; want them read from the keys in another case", p.CloudInit.Reveal(), p.Labels)
				}
			},
		},
		{
			name:     "two keys that differ only in case",
			env:      withJSON(`{"nodeConfigs": {"pool1": {"cloudInit": "#a\n", "CloudInit": "#b\n"}}}`, nil),
			nodes:    []string{"--nodes=0:3:cx23:fsn1:pool1"},
			problems: []problem{{"nodeConfigs.pool1.CloudInit", `"cloudInit" and "CloudInit" differ only in case`}},
		},
		{
			name:     "parked pool 0:0",
			env:      withJSON(`{`+images+`"nodeConfigs": {"pool1": {}, "parked": {}}}`, nil),
			nodes:    []string{"--nodes=0:3:cx23:fsn1:pool1", "--nodes=0:0:cx23:fsn1:parked"},
			warnings: []string{"--nodes[1] (parked): max size 0: the pool is parked and never scaled up"},
			check: func(t *testing.T, cfg *config.Config) {
				if p := cfg.Pool("parked"); p == nil || p.MaxSize != 0 {
					t.Errorf("parked pool = %+v; want max size 0", p)
				}
			},
		},
		{
			name:     "http endpoint of an in-cluster proxy without the opt-in",
			env:      withJSON(`{`+images+`"nodeConfigs": {"pool1": {}}}`, map[string]string{config.EnvEndpoint: "http://hcloud-proxy.kube-system:8080/v1"}),
			nodes:    []string{"--nodes=0:3:cx23:fsn1:pool1"},
			problems: []problem{{"HCLOUD_ENDPOINT", "set HCLOUD_ENDPOINT_INSECURE=true if this endpoint is a proxy inside a trusted network"}},
		},
		{
			name: "http endpoint of an in-cluster proxy with HCLOUD_ENDPOINT_INSECURE",
			env: withJSON(`{`+images+`"nodeConfigs": {"pool1": {}}}`, map[string]string{
				config.EnvEndpoint: "http://hcloud-proxy.kube-system:8080/v1", config.EnvEndpointInsecure: "true"}),
			nodes:    []string{"--nodes=0:3:cx23:fsn1:pool1"},
			warnings: []string{"HCLOUD_ENDPOINT: http://hcloud-proxy.kube-system:8080/v1 uses http and HCLOUD_ENDPOINT_INSECURE=true: the API token travels in clear"},
			check: func(t *testing.T, cfg *config.Config) {
				if cfg.Endpoint != "http://hcloud-proxy.kube-system:8080/v1" || !cfg.EndpointInsecure {
					t.Errorf("endpoint %q, insecure %v", cfg.Endpoint, cfg.EndpointInsecure)
				}
			},
		},
		{
			name:     "creation timeout 0 means the default",
			env:      withJSON(`{`+images+`"nodeConfigs": {"pool1": {}}}`, map[string]string{config.EnvServerCreationTimeout: "0"}),
			nodes:    []string{"--nodes=0:3:cx23:fsn1:pool1"},
			warnings: []string{"HCLOUD_SERVER_CREATION_TIMEOUT: 0 means the default, 5m0s, as upstream"},
			check: func(t *testing.T, cfg *config.Config) {
				if cfg.CreationTimeout != 5*time.Minute {
					t.Errorf("CreationTimeout = %v; want 5m", cfg.CreationTimeout)
				}
			},
		},
		{
			name:     "JSON format without imagesForArch and HCLOUD_IMAGE, which upstream ignored there",
			env:      withJSON(`{"nodeConfigs": {"pool1": {}}}`, map[string]string{config.EnvImage: "k8s-node=true"}),
			nodes:    []string{"--nodes=0:3:cx23:fsn1:pool1"},
			warnings: []string{`imagesForArch: no amd64 or arm64 entry for pools pool1: their servers boot "k8s-node=true" from HCLOUD_IMAGE`},
		},
		{
			// Whether this matters depends on the server type's
			// architecture: hcloudscale.New warns (TestNewWarnsAboutInheritedImage).
			name:  "a pool's imagesForArch with one architecture",
			env:   withJSON(`{"imagesForArch": {"arm64": "arm-node=true"}, "nodeConfigs": {"pool1": {"imagesForArch": {"amd64": "x86-node=true"}}}}`, nil),
			nodes: []string{"--nodes=0:3:cx23:fsn1:pool1"},
			check: func(t *testing.T, cfg *config.Config) {
				if got := cfg.Pool("pool1").InheritedImages; len(got) != 1 || got[0] != config.ArchARM64 {
					t.Errorf("InheritedImages = %v; want arm64", got)
				}
			},
		},
		// Rejected on purpose: each is a mistake upstream hid.
		{
			name:     "typo in a key",
			env:      withJSON(`{`+images+`"nodeConfigs": {"pool1": {"taints:": []}}}`, nil),
			nodes:    []string{"--nodes=0:3:cx23:fsn1:pool1"},
			problems: []problem{{`nodeConfigs.pool1["taints:"]`, `unknown key, did you mean "taints"`}},
		},
		{
			name:     "invalid label value",
			env:      withJSON(`{`+images+`"nodeConfigs": {"pool1": {"labels": {"role": "auto scaler"}}}}`, nil),
			nodes:    []string{"--nodes=0:3:cx23:fsn1:pool1"},
			problems: []problem{{`nodeConfigs.pool1.labels.role`, "auto scaler"}},
		},
		{
			name:     "pool name that is not a hostname",
			env:      legacy(nil),
			nodes:    []string{"--nodes=0:3:cx23:fsn1:Pool_1"},
			problems: []problem{{"--nodes[0] (Pool_1)", `pool name "Pool_1" contains`}},
		},
		{
			name:     "both public IPs off without a network",
			env:      legacy(map[string]string{config.EnvPublicIPv4: "false", config.EnvPublicIPv6: "false"}),
			nodes:    []string{"--nodes=0:3:cx23:fsn1:pool1"},
			problems: []problem{{"HCLOUD_PUBLIC_IPV4, HCLOUD_PUBLIC_IPV6", "servers would have no network at all"}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := config.MapEnv(c.env, nil)
			r := runCmd(t, runValidate, env, append([]string{"--output=json"}, c.nodes...)...)
			res := decodeJSON[validateResult](t, r)
			if len(c.problems) > 0 {
				if r.code != exitFailure || res.Valid {
					t.Fatalf("validate = %d, valid %v; want %d, problems %v", r.code, res.Valid, exitFailure, c.problems)
				}
				for _, want := range c.problems {
					found := false
					for _, got := range res.Problems {
						if strings.HasPrefix(got.Setting, want.Setting) && strings.Contains(got.Message, want.Message) {
							found = true
						}
					}
					if !found {
						t.Errorf("no problem %q containing %q; problems %v", want.Setting, want.Message, res.Problems)
					}
				}
				return
			}
			if r.code != exitOK || !res.Valid {
				t.Fatalf("validate = %d, problems %v; want it accepted", r.code, res.Problems)
			}
			got := strings.Join(res.Warnings, "\n")
			for _, w := range c.warnings {
				if !strings.Contains(got, w) {
					t.Errorf("warnings lack %q; warnings:\n%s", w, got)
				}
			}
			// config.Load gives the same warnings, the ones Cluster.Warnings
			// starts from; validate adds those about labels and taints the
			// nodes will not get, which depend on whether the labeller runs.
			cfg, err := config.Load(env, trimNodes(c.nodes))
			if err != nil {
				t.Fatalf("config.Load: %v", err)
			}
			if want := strings.Join(append(cfg.Warnings, config.NodeLabelWarnings(cfg, false)...), "\n"); want != got {
				t.Errorf("config.Load warnings %q differ from validate's %q", cfg.Warnings, res.Warnings)
			}
			if c.check != nil {
				c.check(t, cfg)
			}
		})
	}
}

func trimNodes(flags []string) []string {
	out := make([]string, len(flags))
	for i, f := range flags {
		out[i] = strings.TrimPrefix(f, "--nodes=")
	}
	return out
}
