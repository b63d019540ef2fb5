package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v2"

	"github.com/hcloudscale/hcloudscale/config"
)

// TestExampleClusterConfig keeps examples/cluster-config.json a complete
// reference: it must load with the --nodes flags its README gives, without
// warnings, and set every field of the cluster config somewhere, so that
// a field added to config.NodeConfig fails here until the example shows it.
func TestExampleClusterConfig(t *testing.T) {
	doc := readExampleConfig(t)
	cc, err := config.ParseClusterConfig([]byte(doc))
	if err != nil {
		t.Fatalf("ParseClusterConfig(examples/cluster-config.json): %v", err)
	}
	if len(cc.Warnings) > 0 {
		t.Errorf("ParseClusterConfig warnings = %q, want none", cc.Warnings)
	}

	unset := func(v reflect.Value, skip ...string) []string {
		var out []string
	fields:
		for i := range v.NumField() {
			name := v.Type().Field(i).Name
			for _, s := range skip {
				if s == name {
					continue fields
				}
			}
			if v.Field(i).IsZero() {
				out = append(out, name)
			}
		}
		return out
	}
	if missing := unset(reflect.ValueOf(*cc), "Warnings"); len(missing) > 0 {
		t.Errorf("the example sets no top-level %v", missing)
	}
	// Each NodeConfig and Autoscaling field must be set by some pool,
	// except the fields that declare a pool in the file alone: the
	// example's pools are the --nodes pools of examples/README.md.
	declaring := map[string]bool{"MinSize": true, "MaxSize": true, "ServerType": true, "Location": true}
	setNode := map[string]bool{}
	setAutoscaling := map[string]bool{}
	for _, nc := range cc.NodeConfigs {
		v := reflect.ValueOf(*nc)
		for i := range v.NumField() {
			if !v.Field(i).IsZero() {
				setNode[v.Type().Field(i).Name] = true
			}
		}
		if nc.Autoscaling != nil {
			a := reflect.ValueOf(*nc.Autoscaling)
			for i := range a.NumField() {
				if !a.Field(i).IsZero() {
					setAutoscaling[a.Type().Field(i).Name] = true
				}
			}
		}
	}
	for _, c := range []struct {
		typ reflect.Type
		set map[string]bool
	}{
		{reflect.TypeFor[config.NodeConfig](), setNode},
		{reflect.TypeFor[config.Autoscaling](), setAutoscaling},
	} {
		for i := range c.typ.NumField() {
			name := c.typ.Field(i).Name
			if c.typ == reflect.TypeFor[config.NodeConfig]() && declaring[name] {
				continue
			}
			if !c.set[name] {
				t.Errorf("no pool of the example sets %s.%s", c.typ.Name(), name)
			}
		}
	}

	p := newFakeProject(t)
	var nodes []string
	for _, n := range exampleNodes {
		nodes = append(nodes, n[len("--nodes="):])
	}
	cfg, err := config.Load(p.env(t, nil), nodes)
	if err != nil {
		t.Fatalf("config.Load(example): %v", err)
	}
	if len(cfg.Warnings) > 0 {
		t.Errorf("config.Load(example) warnings = %q, want none", cfg.Warnings)
	}
	if len(cfg.Pools) != len(cc.NodeConfigs) {
		t.Errorf("config.Load(example) has %d pools, the example configures %d", len(cfg.Pools), len(cc.NodeConfigs))
	}
}

// TestCloudInitExample checks that examples/cloud-init/kubeadm-join.yaml is
// cloud-config whose kubeadm JoinConfiguration registers the node with the
// pool's labels and taints, and that, rendered, it fits a pool's cloudInit.
func TestCloudInitExample(t *testing.T) {
	raw, err := os.ReadFile("../../examples/cloud-init/kubeadm-join.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(raw), "#cloud-config\n") {
		t.Errorf("kubeadm-join.yaml does not start with #cloud-config")
	}
	var doc struct {
		WriteFiles []struct {
			Path    string `yaml:"path"`
			Content string `yaml:"content"`
		} `yaml:"write_files"`
		Runcmd []string `yaml:"runcmd"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("kubeadm-join.yaml: %v", err)
	}
	var join struct {
		APIVersion       string `yaml:"apiVersion"`
		Kind             string `yaml:"kind"`
		NodeRegistration struct {
			KubeletExtraArgs []struct{ Name, Value string } `yaml:"kubeletExtraArgs"`
			Taints           []map[string]string            `yaml:"taints"`
		} `yaml:"nodeRegistration"`
	}
	for _, f := range doc.WriteFiles {
		if f.Path == "/etc/kubeadm/join.yaml" {
			if err := yaml.Unmarshal([]byte(f.Content), &join); err != nil {
				t.Fatalf("join.yaml: %v", err)
			}
		}
	}
	if join.APIVersion != "kubeadm.k8s.io/v1beta4" || join.Kind != "JoinConfiguration" {
		t.Errorf("join.yaml is %s %s, want kubeadm.k8s.io/v1beta4 JoinConfiguration", join.APIVersion, join.Kind)
	}
	args := map[string]string{}
	for _, a := range join.NodeRegistration.KubeletExtraArgs {
		args[a.Name] = a.Value
	}
	if diff := cmp.Diff(map[string]string{"cloud-provider": "external", "node-labels": "__NODE_LABELS__"}, args); diff != "" {
		t.Errorf("kubeletExtraArgs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]map[string]string{{"key": "workload", "value": "batch", "effect": "NoSchedule"}}, join.NodeRegistration.Taints); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
	script := strings.Join(doc.Runcmd, "\n")
	for _, want := range []string{"pkgs.k8s.io/core:/stable:/v1.35/deb/Release.key", "pkgs.k8s.io/core:/stable:/v1.35/deb/ /", "SystemdCgroup = true", "kubeadm join --config /etc/kubeadm/join.yaml"} {
		if !strings.Contains(script, want) {
			t.Errorf("runcmd lacks %q", want)
		}
	}

	// Rendered for the example's arm-batch pool, it is a valid cloudInit.
	rendered := strings.NewReplacer(
		"__API_SERVER_ENDPOINT__", "10.0.0.2:6443",
		"__BOOTSTRAP_TOKEN__", "abcdef.0123456789abcdef",
		"__CA_CERT_HASH__", "sha256:"+strings.Repeat("0", 64),
		"__NODE_LABELS__", "node.kubernetes.io/pool=arm-batch,workload=batch",
	).Replace(string(raw))
	var cc map[string]any
	if err := json.Unmarshal([]byte(readExampleConfig(t)), &cc); err != nil {
		t.Fatal(err)
	}
	cc["nodeConfigs"].(map[string]any)["arm-batch"].(map[string]any)["cloudInit"] = rendered
	b, err := json.Marshal(cc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.ParseClusterConfig(b); err != nil {
		t.Errorf("the example config with the rendered cloud-init: %v", err)
	}
}

// TestForkManifest checks examples/fork/cluster-autoscaler.yaml: the
// objects of the upstream layout, the adapter's provider name, the metrics
// port, and that every environment variable is one hcloudscale reads.
func TestForkManifest(t *testing.T) {
	raw, err := os.ReadFile("../../examples/fork/cluster-autoscaler.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type container struct {
		Command []string `yaml:"command"`
		Env     []struct {
			Name  string `yaml:"name"`
			Value string `yaml:"value"`
		} `yaml:"env"`
		Ports []struct {
			ContainerPort int `yaml:"containerPort"`
		} `yaml:"ports"`
	}
	var kinds []string
	var containers []container
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	for {
		var obj struct {
			Kind string `yaml:"kind"`
			Spec struct {
				Template struct {
					Spec struct {
						Containers []container `yaml:"containers"`
					} `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		}
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("cluster-autoscaler.yaml: %v", err)
		}
		if obj.Kind == "" {
			continue
		}
		kinds = append(kinds, obj.Kind)
		containers = append(containers, obj.Spec.Template.Spec.Containers...)
	}
	wantKinds := []string{"ServiceAccount", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding", "Secret", "Deployment", "Service"}
	if diff := cmp.Diff(wantKinds, kinds); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	if len(containers) != 1 {
		t.Fatalf("%d containers, want 1", len(containers))
	}
	c := containers[0]
	for _, want := range []string{"--cloud-provider=hcloudscale", "--address=:8085", "--nodes=0:10:cpx31:fsn1:workers"} {
		if !slices.Contains(c.Command, want) {
			t.Errorf("command %q lacks %s", c.Command, want)
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 8085 {
		t.Errorf("ports %+v, want the metrics port 8085", c.Ports)
	}
	known := []string{
		config.EnvToken, config.EnvTokenFile, config.EnvEndpoint, config.EnvClusterConfig, config.EnvClusterConfigFile,
		config.EnvCloudInit, config.EnvImage, config.EnvNetwork, config.EnvFirewall, config.EnvSSHKey,
		config.EnvPublicIPv4, config.EnvPublicIPv6, config.EnvServerCreationTimeout, config.EnvClusterName,
	}
	vars := map[string]string{}
	for _, e := range c.Env {
		if !slices.Contains(known, e.Name) {
			t.Errorf("env %s is not a variable hcloudscale reads", e.Name)
		}
		vars[e.Name] = e.Value
	}
	// The values load, given the files they name.
	env := config.MapEnv(vars, map[string]string{
		"/etc/hcloudscale/token":               "token",
		"/etc/hcloudscale/cluster-config.json": `{"clusterName": "prod", "nodeConfigs": {"workers": {"cloudInit": "#cloud-config\n"}}}`,
	})
	if _, err := config.Load(env, []string{"0:10:cpx31:fsn1:workers"}); err != nil {
		t.Errorf("the manifest's environment does not load: %v", err)
	}
}
