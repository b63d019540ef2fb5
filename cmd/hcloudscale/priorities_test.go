package main

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"sigs.k8s.io/yaml"

	"github.com/hcloudscale/hcloudscale/config"
)

func TestPriorities(t *testing.T) {
	t.Parallel()
	doc := `{"nodeConfigs": {"workers": {"offerings": [{"serverType": "cx33", "location": "nbg1"}, {"serverType": "cpx31", "location": "hel1"}]}, "arm": {}}}`
	env := config.MapEnv(map[string]string{config.EnvClusterConfig: base64.StdEncoding.EncodeToString([]byte(doc))}, nil)
	nodes := []string{"--nodes=0:10:cpx21:fsn1:workers", "--nodes=0:3:cax11:fsn1:arm"}

	r := runCmd(t, runPriorities, env, nodes...)
	if r.code != exitOK {
		t.Fatalf("priorities = %d; stderr:\n%s", r.code, r.stderr)
	}
	var got map[int][]string
	if err := yaml.UnmarshalStrict([]byte(r.stdout), &got); err != nil {
		t.Fatalf("output is not the priorities YAML: %v\n%s", err, r.stdout)
	}
	want := map[int][]string{100: {"^workers$", "^arm$"}, 99: {"^workers@cx33-nbg1$"}, 98: {"^workers@cpx31-hel1$"}, 1: {".*"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("priorities (-want +got):\n%s", diff)
	}

	r = runCmd(t, runPriorities, env, append(nodes, "--configmap", "--namespace=autoscaler")...)
	var cm struct {
		APIVersion, Kind string
		Metadata         struct{ Name, Namespace string }
		Data             struct{ Priorities string }
	}
	if err := yaml.UnmarshalStrict([]byte(r.stdout), &cm); err != nil || r.code != exitOK {
		t.Fatalf("priorities --configmap = %d, %v:\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	var inMap map[int][]string
	if err := yaml.UnmarshalStrict([]byte(cm.Data.Priorities), &inMap); err != nil {
		t.Fatal(err)
	}
	if cm.Kind != "ConfigMap" || cm.Metadata.Name != "cluster-autoscaler-priority-expander" || cm.Metadata.Namespace != "autoscaler" || !cmp.Equal(want, inMap) {
		t.Errorf("ConfigMap %+v; want cluster-autoscaler-priority-expander in autoscaler holding %v", cm, want)
	}

	bad := `{"nodeConfigs": {"workers": {"offerings": [{"serverType": "cx33", "location": "nbg1"}, {"serverType": "cx33", "location": "nbg1"}]}, "arm": {}}}`
	env = config.MapEnv(map[string]string{config.EnvClusterConfig: base64.StdEncoding.EncodeToString([]byte(bad))}, nil)
	r = runCmd(t, runPriorities, env, nodes...)
	if r.code != exitFailure || !strings.Contains(r.stderr, "nodeConfigs.workers.offerings[1]: cx33-nbg1 is listed already") {
		t.Errorf("priorities with an offering listed twice = %d, stderr:\n%s\nwant %d naming the offering", r.code, r.stderr, exitFailure)
	}
}
