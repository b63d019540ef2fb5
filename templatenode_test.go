package hcloudscale_test

import (
	"testing"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
)

func TestPoolForTemplateNode(t *testing.T) {
	p := newProject(t)
	cc := clusterConfig{
		"imagesForArch": map[string]string{"amd64": "ubuntu-24.04", "arm64": "ubuntu-24.04"},
		"nodeConfigs": map[string]any{
			"workers":   map[string]any{"cloudInit": "#cloud-config\n"},
			"workers-5": map[string]any{"cloudInit": "#cloud-config\n"},
		},
	}
	c := newCluster(t, p.load(t, cc, nil, []string{"0:3:cpx21:fsn1:workers", "0:3:cpx21:fsn1:workers-5"}))
	tmpl := map[string]string{hcloudscale.LabelTemplateNode: "true"}
	withGroup := func(g string) map[string]string {
		return map[string]string{hcloudscale.LabelTemplateNode: "true", config.LabelNodeGroup: g}
	}
	for _, tc := range []struct {
		why    string
		name   string
		labels map[string]string
		want   string
	}{
		{"copy of a real node", "template-node-for-workers-8674665223082153551", tmpl, "workers"},
		{"copy of the copy", "template-node-for-workers-8674665223082153551-upcoming-3", tmpl, "workers"},
		{"the longest pool name that fits wins", "template-node-for-workers-5-77", tmpl, "workers-5"},
		{"the pool label decides", "template-node-for-workers-5-77", withGroup("workers"), "workers"},
		{"our own template", "workers-5-template", withGroup("workers-5"), "workers-5"},
		{"a pool label of no pool falls back to the name", "template-node-for-workers-1", withGroup("gone"), "workers"},
		{"no template label", "template-node-for-workers-1", map[string]string{config.LabelNodeGroup: "workers"}, ""},
		{"template label false", "template-node-for-workers-1", map[string]string{hcloudscale.LabelTemplateNode: "false"}, ""},
		{"no digits after the pool name", "template-node-for-workers-x", tmpl, ""},
		{"no pool of that name", "template-node-for-batch-1", tmpl, ""},
		{"a pool name prefix is not a pool", "template-node-for-work-1", tmpl, ""},
		{"not a template name", "workers-1", tmpl, ""},
	} {
		got := ""
		if pl := c.PoolForTemplateNode(tc.name, tc.labels); pl != nil {
			got = pl.Name()
		}
		if got != tc.want {
			t.Errorf("PoolForTemplateNode(%q, %v) = %q; want %q (%s)", tc.name, tc.labels, got, tc.want, tc.why)
		}
	}
}
