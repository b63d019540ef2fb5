package main

import (
	"reflect"
	"testing"

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
	// Each NodeConfig and Autoscaling field must be set by some pool.
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
			if name := c.typ.Field(i).Name; !c.set[name] {
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
