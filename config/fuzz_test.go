package config

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func FuzzParseNodeSpec(f *testing.F) {
	for _, s := range []string{
		"1:10:CPX51:FSN1:pool1", "0:1:cx22:nbg1:a", "1:2:cx22:fsn1:a:b", "", ":", "::::", "-1:0:x:y:z",
		"9223372036854775807:9223372036854775808:a:b:c", "1:2:CX22:FSN1:" + strings.Repeat("a", 47), "1:2:t:l:Pool_1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := ParseNodeSpec(s)
		if strings.Count(s, ":") < 4 && err == nil {
			t.Fatalf("ParseNodeSpec(%q) = %+v, nil; want an error for fewer than five fields", s, spec)
		}
		if err != nil {
			if spec != (NodeSpec{}) {
				t.Fatalf("ParseNodeSpec(%q) = %+v with error %v; want the zero NodeSpec", s, spec, err)
			}
			return
		}
		if spec.MinSize < 0 || spec.MaxSize < 0 || spec.MinSize > spec.MaxSize {
			t.Errorf("ParseNodeSpec(%q) accepted sizes %d..%d", s, spec.MinSize, spec.MaxSize)
		}
		if CheckPoolName(spec.Name) != nil || len(spec.Name) > MaxPoolNameLength {
			t.Errorf("ParseNodeSpec(%q) accepted pool name %q", s, spec.Name)
		}
		if strings.ToLower(spec.ServerType) != spec.ServerType || strings.ToLower(spec.Location) != spec.Location {
			t.Errorf("ParseNodeSpec(%q) = type %q, location %q; want lower case", s, spec.ServerType, spec.Location)
		}
	})
}

func clusterConfigSeeds(f *testing.F) [][]byte {
	readme, err := os.ReadFile("testdata/upstream-readme.json")
	if err != nil {
		f.Fatal(err)
	}
	return [][]byte{
		readme,
		[]byte(`{}`), []byte(`null`), []byte(`[]`), []byte(`{"nodeConfigs": {"p": null}}`),
		[]byte(`{"nodeConfigs": {"p": {"taints": [{"key": "k", "effect": "NoSchedule"}], "maxPods": 1e3}}}`),
		[]byte(`{"imagesForArch": {"amd64": "a in (b", "arm64": "!x"}, "defaultSubnetIPRange": "10.0.0.0/8"}`),
		[]byte(`{"nodeConfigs": {"p": {"reserved": {"cpu": "1e400"}, "autoscaling": {"scaleDownUtilizationThreshold": 1e999}}}}`),
		[]byte(`{"a": 1, "a": 2, "nodeConfigs": {"p": {"labels": {"x": "y", "x": "z"}}}}`),
		[]byte(`{"nodeConfigs": {"pool1": {"minSize": 1, "maxSize": 10, "serverType": "cpx51", "location": "fsn1"}, "p2": {"serverType": "CX22", "location": "NBG1", "maxSize": 3}}}`),
		[]byte(`{"nodeConfigs": {"pool1": {"minSize": 0, "maxSize": 9}, "P_2": {"serverType": "", "location": " x", "minSize": -1, "maxSize": 1.5}, "q": {"minSize": 3, "maxSize": 2}}}`),
		// The node lifecycle: valid, defaults, every kind of bad value.
		[]byte(`{"replace": {"maxInFlight": 2, "removedPools": true, "paused": false, "windows": [{"schedule": "0 2 * * 1-5", "duration": "3h", "timeZone": "Europe/Berlin"}]}, "nodeConfigs": {"pool1": {"replace": {"drift": ["image", "user_data"], "expireAfter": "720h", "expireJitter": "24h", "maxSurge": 0, "maxInFlight": 1, "joinTimeout": "10m", "drainTimeout": "15m", "retryAfter": "1h", "windows": [{"schedule": "0 23 * * *", "duration": "2h"}], "paused": true}}}}`),
		[]byte(`{"replace": {}, "nodeConfigs": {"pool1": {"replace": {}}, "p2": {"serverType": "cx22", "location": "fsn1", "maxSize": 1, "replace": {"drift": []}}}}`),
		[]byte(`{"replace": {"maxInFlight": 0, "windows": [{"schedule": "@every 1h", "duration": "-1h", "timeZone": "Local"}]}, "nodeConfigs": {"pool1": {"replace": {"drift": ["imag", "image", "image", 1], "expireAfter": "30d", "expireJitter": "99999h", "maxSurge": -1, "maxInFlight": 1e9, "windows": [{"schedule": "0 0 30 2 *", "duration": "1h"}, {}, null, "x"]}}}}`),
		[]byte(`{"replace": null, "nodeConfigs": {"pool1": {"replace": {"expireAfter": "10m", "expireJitter": "10m", "windows": [{"schedule": "TZ=UTC 0 2 * * *", "duration": "2562047h", "timeZone": "UTC"}]}}}}`),
		[]byte(`{"replace": {"repairMaxUnhealthy": "20%"}, "nodeConfigs": {"pool1": {"replace": {"repairAfter": "15m"}}}}`),
		[]byte(`{"replace": {"repairMaxUnhealthy": "-5%"}, "nodeConfigs": {"pool1": {"replace": {"repairAfter": "1m", "drift": []}}, "pool2": {"replace": {"repairAfter": "9223372036854775807ns"}}}}`),
		[]byte(`{"replace": {"repairMaxUnhealthy": "%"}}`),
		[]byte(`{"replace": {"RemovedPools": true, "windows": [{"Schedule": "x", "timezone": "europe/berlin"}]}, "nodeConfigs": {"pool1": {"replace": {"removedPool": true, "MAXSURGE": 1, "repairMaxUnhealthy": 1, "windows": [{"timeZone": "Mars/Olympus", "schedule": "@every 1h"}]}}}}`),
		[]byte(`{"replace": {"repairMaxUnhealthy": 1e3}}`),
		[]byte(`{"nodeConfigs": {"pool1": {"publicIPv4": false, "publicIPv6": true}, "p2": {"serverType": "cx22", "location": "fsn1", "maxSize": 1, "publicIPv4": false, "publicIPv6": false, "subnetIPRange": "10.0.1.0/24"}}}`),
		[]byte(`{"nodeConfigs": {"pool1": {"publicIPv4": "false", "publicipv6": null, "PublicIPv4": true}}}`),
		[]byte(`{"nodeConfigs": {"pool1": {"spreadGroups": true}, "p2": {"serverType": "cx22", "location": "fsn1", "maxSize": 1, "spreadGroups": true, "placementGroup": "pg"}}}`),
		[]byte(`{"nodeConfigs": {"pool1": {"spreadGroups": "yes", "SpreadGroups": false}}}`),
		[]byte(`{"nodeConfigs": {"pool1": {"offerings": [{"serverType": "cx22", "location": "fsn1"}, {"serverType": "CPX31", "location": "nbg1"}]}, "p2": {"serverType": "cx22", "location": "fsn1", "maxSize": 1, "offerings": [{"serverType": "cax11", "location": "hel1"}]}}}`),
		[]byte(`{"nodeConfigs": {"pool1": {"offerings": [{"serverType": "cx32", "location": "nbg1"}, {"serverType": "cx22", "location": "fsn1"}, {"serverType": "cx32", "location": "nbg1"}, {"serverType": ""}, {"location": 1}, null, "x", {"serverType": "a b", "location": "fsn1", "zone": "x"}], "spreadGroups": true}, "p2": {"offerings": []}, "p3": {"offerings": {}}}}`),
		[]byte(`{"nodeConfigs": {"pool1": {"offerings": [{"serverType": "cx22", "location": "fsn1"}, {"serverType": "cx32", "location": "nbg1"}], "replace": {"drift": ["offering", "offerings", "fallback"]}}, "p2": {"serverType": "cx22", "location": "fsn1", "maxSize": 1, "replace": {"drift": ["offering"]}}}}`),
		[]byte(`{"replace": {"evictUnreplicatedPods": true, "evictLocalStoragePods": false, "evictKubeSystemPods": true}, "nodeConfigs": {"pool1": {"replace": {"drift": ["image"], "evictUnreplicatedPods": false, "evictLocalStoragePods": true, "evictKubeSystemPods": null}}}}`),
		[]byte(`{"replace": {"evictUnreplicatedPods": "true", "evictLocalStoragePod": 1}, "nodeConfigs": {"pool1": {"replace": {"evictKubeSystemPods": []}}}}`),
	}
}

func FuzzParseClusterConfig(f *testing.F) {
	for _, s := range clusterConfigSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cc, err := ParseClusterConfig(data)
		if !json.Valid(data) && err == nil {
			t.Fatalf("ParseClusterConfig(%q) = nil error for invalid JSON", data)
		}
		if (cc == nil) == (err == nil) {
			t.Fatalf("ParseClusterConfig(%q) = %v, %v; want exactly one of config and error", data, cc, err)
		}
	})
}

// FuzzLoad feeds arbitrary cluster configs and variable values through Load
// and checks that it never panics, that whatever it accepts passes Validate,
// and that no secret reaches the error text.
func FuzzLoad(f *testing.F) {
	for _, s := range clusterConfigSeeds(f) {
		f.Add(s, "1:10:CPX51:FSN1:pool1", "true", "5", "")
	}
	f.Add([]byte(`{"nodeConfigs": {"pool1": {"cloudInit": "SECRETINIT"}}}`), "0:1:cx22:fsn1:pool1", "false", "90s", "https://127.0.0.1/v1")
	f.Add([]byte(`{"nodeConfigs": {"pool1": {"serverType": "cx22", "location": "fsn1", "maxSize": 2}}}`), "", "true", "", "")
	f.Add([]byte(`{"nodeConfigs": {"pool1": {"serverType": "cx32", "location": "fsn1", "maxSize": 2}}}`), "0:2:cx22:fsn1:pool1", "true", "", "")
	// Offerings with the pool's own first, and without it: the origins of each.
	f.Add([]byte(`{"nodeConfigs": {"pool1": {"offerings": [{"serverType": "cx22", "location": "fsn1"}, {"serverType": "cx32", "location": "nbg1"}]}}}`), "0:2:cx22:fsn1:pool1", "true", "", "")
	f.Add([]byte(`{"nodeConfigs": {"pool1": {"serverType": "cx22", "location": "fsn1", "maxSize": 2, "offerings": [{"serverType": "cx32", "location": "nbg1"}, {"serverType": "cax11", "location": "hel1"}]}}}`), "", "true", "", "")
	f.Add([]byte(`{"nodeConfigs": {"pool1": {"serverLabels": {"hcloudscale/offering": "cx32-nbg1"}}}}`), "0:2:cx22:fsn1:pool1", "true", "", "")
	f.Fuzz(func(t *testing.T, doc []byte, spec, ipv4, timeout, endpoint string) {
		const token = "SECRETTOKEN"
		env := MapEnv(map[string]string{
			EnvToken:                 token,
			EnvClusterConfigFile:     "/cc.json",
			EnvPublicIPv4:            ipv4,
			EnvServerCreationTimeout: timeout,
			EnvEndpoint:              endpoint,
		}, map[string]string{"/cc.json": string(doc)})
		specs := []string{spec}
		if spec == "" {
			specs = nil // the cluster config's pools only
		}
		cfg, err := Load(env, specs)
		if err != nil {
			if cfg != nil {
				t.Fatalf("Load returned a Config and error %v", err)
			}
			if msg := err.Error(); strings.Contains(msg, token) {
				t.Fatalf("error text contains the token: %s", msg)
			}
			return
		}
		if verr := cfg.Validate(); verr != nil {
			t.Fatalf("Load accepted a Config that Validate rejects: %v", verr)
		}
		for _, p := range cfg.Pools {
			if p.Origin == "" {
				t.Errorf("pool %q has no Origin", p.Name)
			}
			if len(p.OfferingOrigins) != len(p.Offerings) {
				t.Errorf("pool %q: %d offering origins for %d offerings", p.Name, len(p.OfferingOrigins), len(p.Offerings))
			}
			for j, o := range p.OfferingOrigins {
				if j > 0 && o == "" {
					t.Errorf("pool %q: offering %d has no origin", p.Name, j)
				}
			}
		}
	})
}
