package config_test

import (
	"encoding/base64"
	"fmt"

	"github.com/hcloudscale/hcloudscale/config"
)

func ExampleParseNodeSpec() {
	spec, err := config.ParseNodeSpec("1:10:CPX51:FSN1:pool1")
	fmt.Printf("%+v %v\n", spec, err)

	_, err = config.ParseNodeSpec("3:2:cx22:fsn1:my_pool")
	fmt.Println(err)
	// Output:
	// {MinSize:1 MaxSize:10 ServerType:cpx51 Location:fsn1 Name:pool1} <nil>
	// min size 3 is greater than max size 2
	// pool name "my_pool" contains '_': only lower-case letters, digits and '-' are allowed
}

func ExampleLoad() {
	clusterConfig := `{
	  "clusterName": "prod",
	  "imagesForArch": {"amd64": "ubuntu-24.04", "arm64": "ubuntu-24.04"},
	  "nodeConfigs": {
	    "workers": {
	      "cloudInit": "#cloud-config\nruncmd: [kubeadm join --token abc.def]",
	      "labels": {"node.kubernetes.io/role": "worker"}
	    }
	  }
	}`
	env := config.MapEnv(map[string]string{
		"HCLOUD_TOKEN":          "my-token",
		"HCLOUD_CLUSTER_CONFIG": base64.StdEncoding.EncodeToString([]byte(clusterConfig)),
		"HCLOUD_CLOUD_INIT":     base64.StdEncoding.EncodeToString([]byte("#legacy")),
		"HCLOUD_FIREWALL":       "base, workers",
	}, nil)
	cfg, err := config.Load(env, []string{"1:5:CX22:FSN1:workers"})
	if err != nil {
		fmt.Println(err)
		return
	}
	pool := cfg.Pool("workers")
	fmt.Println(cfg.Source, cfg.Token, cfg.CreationTimeout)
	fmt.Println(cfg.Warnings)
	fmt.Println(pool.ServerType, pool.Location, pool.Firewalls, pool.ServerLabels)
	fmt.Printf("cloud-init: %v\n", pool.CloudInit)

	// Every problem at once, each with its path.
	env = config.MapEnv(map[string]string{
		"HCLOUD_PUBLIC_IPV4":    "yes",
		"HCLOUD_CLUSTER_CONFIG": base64.StdEncoding.EncodeToString([]byte(`{"nodeConfigs": {"workers": {"taints:": []}}}`)),
	}, nil)
	_, err = config.Load(env, []string{"1:5:cx22:fsn1:workers"})
	fmt.Println(err)
	// Output:
	// HCLOUD_CLUSTER_CONFIG [redacted] 5m0s
	// [HCLOUD_CLUSTER_CONFIG: used; HCLOUD_CLOUD_INIT set but ignored]
	// cx22 fsn1 [base workers] map[hcloud/node-group:workers hcloudscale/cluster:prod]
	// cloud-init: [redacted]
	// HCLOUD_TOKEN: required (or HCLOUD_TOKEN_FILE)
	// HCLOUD_PUBLIC_IPV4: "yes" is not a boolean (true, false, 1, 0, ...)
	// nodeConfigs.workers["taints:"]: unknown key, did you mean "taints"
}

// The image of a pool is chosen per architecture: the pool's imagesForArch,
// then the global imagesForArch, then HCLOUD_IMAGE, then DefaultImage.
func ExampleLoad_imagePrecedence() {
	clusterConfig := `{
	  "imagesForArch": {"amd64": "app=k8s,arch=x86"},
	  "nodeConfigs": {
	    "gpu": {"imagesForArch": {"amd64": "987654"}},
	    "general": {}
	  }
	}`
	env := config.MapEnv(map[string]string{
		"HCLOUD_TOKEN":          "my-token",
		"HCLOUD_CLUSTER_CONFIG": base64.StdEncoding.EncodeToString([]byte(clusterConfig)),
		"HCLOUD_IMAGE":          "debian-12",
	}, nil)
	cfg, err := config.Load(env, []string{"0:2:ccx33:fsn1:gpu", "0:5:cax21:fsn1:general"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range cfg.Pools {
		fmt.Printf("%s: amd64=%s arm64=%s\n", p.Name, p.Images.AMD64, p.Images.ARM64)
	}
	// Output:
	// gpu: amd64=987654 arm64=debian-12
	// general: amd64=app=k8s,arch=x86 arm64=debian-12
}

func ExampleCloudInitSetting() {
	fmt.Println(config.CloudInitSetting(&config.Config{Source: config.SourceClusterConfigFile}, "workers"))
	fmt.Println(config.CloudInitSetting(&config.Config{Source: config.SourceClusterConfig}, "pool.v2"))
	fmt.Println(config.CloudInitSetting(&config.Config{Source: config.SourceLegacyCloudInit}, "workers"))
	// Output:
	// nodeConfigs.workers.cloudInit
	// nodeConfigs["pool.v2"].cloudInit
	// HCLOUD_CLOUD_INIT
}

func ExampleConfig_Priorities() {
	cfg := config.Config{Pools: []config.Pool{
		{Name: "workers", ServerType: "cpx31", Location: "nbg1", Offerings: []config.Offering{
			{ServerType: "cpx31", Location: "nbg1"}, {ServerType: "cx33", Location: "fsn1"}, {ServerType: "cx33", Location: "hel1"},
		}},
		{Name: "arm", ServerType: "cax21", Location: "fsn1"},
	}}
	fmt.Print(config.PrioritiesYAML(cfg.Priorities()))
	// Output:
	// 100: ['^workers$', '^arm$']
	// 99: ['^workers@cx33-fsn1$']
	// 98: ['^workers@cx33-hel1$']
	// 1: ['.*']
}
