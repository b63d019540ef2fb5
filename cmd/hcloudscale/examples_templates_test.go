package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/hcloudscale/hcloudscale/cloudinit"
	"github.com/hcloudscale/hcloudscale/config"
)

// templatePool has labels the kubelet may set, one it may not, and a
// taint with and one without a value.
var templatePool = config.Pool{
	Name: "arm-batch", Location: "nbg1", ServerType: "cax31",
	Labels: map[string]string{"node.kubernetes.io/pool": "arm-batch", "workload": "batch", "node-role.kubernetes.io/batch": ""},
	Taints: []corev1.Taint{
		{Key: "workload", Value: "batch", Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Effect: corev1.TaintEffectNoExecute},
	},
}

const templateServer = "arm-batch-0123456789abcdef"

// renderExample renders an example template for templatePool.
func renderExample(t *testing.T, file string) (text, rendered string) {
	t.Helper()
	raw, err := os.ReadFile("../../examples/cloud-init/" + file)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := cloudinit.Parse(string(raw))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if !tmpl.PrintsLabels() || !tmpl.PrintsTaints() {
		t.Errorf("%s prints labels %v, taints %v; want both", file, tmpl.PrintsLabels(), tmpl.PrintsTaints())
	}
	out, err := tmpl.Render(config.CloudInitValues(&templatePool, "prod", templateServer, config.ArchARM64))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if strings.Contains(out, "<%") || strings.Contains(out, "%>") {
		t.Errorf("%s rendered still holds template delimiters", file)
	}
	return string(raw), out
}

// cloudConfig decodes cloud-config and the content of one written file.
func cloudConfig(t *testing.T, rendered, path string, file any) []string {
	t.Helper()
	if !strings.HasPrefix(rendered, "#cloud-config\n") {
		t.Errorf("rendering does not start with #cloud-config")
	}
	var doc struct {
		WriteFiles []struct {
			Path    string `yaml:"path"`
			Content string `yaml:"content"`
		} `yaml:"write_files"`
		Runcmd []string `yaml:"runcmd"`
	}
	if err := yaml.UnmarshalStrict([]byte(rendered), &doc); err != nil {
		// Strict only for the keys this test knows; retry loosely.
		if err := yaml.Unmarshal([]byte(rendered), &doc); err != nil {
			t.Fatalf("rendering is not YAML: %v", err)
		}
	}
	found := false
	for _, f := range doc.WriteFiles {
		if f.Path == path {
			found = true
			if err := yaml.Unmarshal([]byte(f.Content), file); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
	}
	if !found {
		t.Errorf("rendering writes no %s", path)
	}
	return doc.Runcmd
}

func TestKubeadmTemplateExample(t *testing.T) {
	_, out := renderExample(t, "kubeadm-join.tmpl.yaml")
	var join struct {
		Kind             string `yaml:"kind"`
		NodeRegistration struct {
			Name             string                         `yaml:"name"`
			KubeletExtraArgs []struct{ Name, Value string } `yaml:"kubeletExtraArgs"`
			Taints           []map[string]string            `yaml:"taints"`
		} `yaml:"nodeRegistration"`
	}
	runcmd := cloudConfig(t, out, "/etc/kubeadm/join.yaml", &join)
	nr := join.NodeRegistration
	if join.Kind != "JoinConfiguration" || nr.Name != templateServer {
		t.Errorf("join.yaml: kind %q, node name %q; want JoinConfiguration, %q", join.Kind, nr.Name, templateServer)
	}
	args := map[string]string{}
	for _, a := range nr.KubeletExtraArgs {
		args[a.Name] = a.Value
	}
	if diff := cmp.Diff(map[string]string{"cloud-provider": "external", "node-labels": "node.kubernetes.io/pool=arm-batch,workload=batch"}, args); diff != "" {
		t.Errorf("kubeletExtraArgs (-want +got):\n%s", diff)
	}
	want := []map[string]string{{"key": "workload", "value": "batch", "effect": "NoSchedule"}, {"key": "dedicated", "effect": "NoExecute"}}
	if diff := cmp.Diff(want, nr.Taints); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
	for _, line := range []string{
		`            value: "node.kubernetes.io/pool=arm-batch,workload=batch"`,
		`        taints: [{"key":"workload","value":"batch","effect":"NoSchedule"},{"key":"dedicated","effect":"NoExecute"}]`,
	} {
		if !strings.Contains(out, "\n"+line+"\n") {
			t.Errorf("rendering lacks the line %q", line)
		}
	}
	if !strings.Contains(strings.Join(runcmd, "\n"), "kubeadm join --config /etc/kubeadm/join.yaml") {
		t.Errorf("runcmd does not join")
	}
}

func TestK3sTemplateExample(t *testing.T) {
	_, out := renderExample(t, "k3s-agent.tmpl.yaml")
	var cfg map[string]any
	runcmd := cloudConfig(t, out, "/etc/rancher/k3s/config.yaml", &cfg)
	if cfg["node-name"] != templateServer {
		t.Errorf("k3s node-name = %v; want %s", cfg["node-name"], templateServer)
	}
	want := "curl -sfL https://get.k3s.io | INSTALL_K3S_CHANNEL=stable sh -s - agent " +
		"--node-label=node.kubernetes.io/pool=arm-batch --node-label=workload=batch " +
		"--node-taint=workload=batch:NoSchedule --node-taint=dedicated:NoExecute"
	if diff := cmp.Diff([]string{want}, runcmd); diff != "" {
		t.Errorf("runcmd (-want +got):\n%s", diff)
	}
}

func TestTalosTemplateExample(t *testing.T) {
	_, out := renderExample(t, "talos-worker.tmpl.yaml")
	var doc struct {
		Machine struct {
			Type    string `yaml:"type"`
			Network struct {
				Hostname string `yaml:"hostname"`
			} `yaml:"network"`
			NodeLabels map[string]string `yaml:"nodeLabels"`
			NodeTaints map[string]string `yaml:"nodeTaints"`
		} `yaml:"machine"`
	}
	if err := yaml.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("rendering is not YAML: %v", err)
	}
	m := doc.Machine
	if m.Type != "worker" || m.Network.Hostname != templateServer {
		t.Errorf("machine type %q, hostname %q; want worker, %s", m.Type, m.Network.Hostname, templateServer)
	}
	if diff := cmp.Diff(map[string]string{"node.kubernetes.io/pool": "arm-batch", "workload": "batch"}, m.NodeLabels); diff != "" {
		t.Errorf("nodeLabels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"workload": "batch:NoSchedule", "dedicated": "NoExecute"}, m.NodeTaints); diff != "" {
		t.Errorf("nodeTaints (-want +got):\n%s", diff)
	}
}

// TestExampleConfigUsesTemplates: the example cluster config carries the
// templates as they are in examples/cloud-init.
func TestExampleConfigUsesTemplates(t *testing.T) {
	var cc struct {
		NodeConfigs map[string]struct {
			CloudInit string `json:"cloudInit"`
		} `json:"nodeConfigs"`
	}
	if err := json.Unmarshal([]byte(readExampleConfig(t)), &cc); err != nil {
		t.Fatal(err)
	}
	for pool, file := range map[string]string{"workers": "kubeadm-join.tmpl.yaml", "arm-batch": "k3s-agent.tmpl.yaml", "arm-batch-hel1": "k3s-agent.tmpl.yaml"} {
		raw, err := os.ReadFile("../../examples/cloud-init/" + file)
		if err != nil {
			t.Fatal(err)
		}
		if cc.NodeConfigs[pool].CloudInit != string(raw) {
			t.Errorf("nodeConfigs.%s.cloudInit differs from examples/cloud-init/%s", pool, file)
		}
	}
}
