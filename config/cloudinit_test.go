package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func loadTemplates(t *testing.T, doc string, specs ...string) (*Config, error) {
	t.Helper()
	return Load(MapEnv(map[string]string{EnvToken: testToken, EnvClusterConfig: b64(doc)}, nil), specs)
}

func TestLoadCloudInitTemplate(t *testing.T) {
	doc := `{
	  "cloudInitTemplate": true,
	  "nodeConfigs": {
	    "tmpl": {"cloudInit": "#cloud-config\n# <% .ServerName %>\n", "labels": {"a": "b"}},
	    "plain": {"cloudInitTemplate": false, "cloudInit": "## template: jinja\n{{ v1.instance_id }} ${HOME} <% nope"}
	  }
	}`
	cfg, err := loadTemplates(t, doc, "0:1:cx22:fsn1:tmpl", "0:1:cx22:fsn1:plain")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	got := map[string]bool{}
	for _, p := range cfg.Pools {
		got[p.Name] = p.CloudInitTemplate
	}
	if diff := cmp.Diff(map[string]bool{"tmpl": true, "plain": false}, got); diff != "" {
		t.Errorf("CloudInitTemplate per pool (-want +got):\n%s", diff)
	}
	if ci := cfg.Pool("plain").CloudInit.Reveal(); ci != "## template: jinja\n{{ v1.instance_id }} ${HOME} <% nope" {
		t.Errorf("plain cloudInit = %q; want it unchanged", ci)
	}
}

// TestLoadCloudInitTemplateErrors: every bad template is reported at once,
// naming its pool, and no error quotes the template's text.
func TestLoadCloudInitTemplateErrors(t *testing.T) {
	big := strings.Repeat("x", 20*1024)
	doc := `{
	  "nodeConfigs": {
	    "syntax": {"cloudInitTemplate": true, "cloudInit": "token: SECRET\n<% .Pool"},
	    "field": {"cloudInitTemplate": true, "cloudInit": "token: SECRET\n\n<% .Hostname %>"},
	    "big": {"cloudInitTemplate": true, "cloudInit": "<% define \"b\" %>` + big + `<% end %><% template \"b\" %><% template \"b\" %>"},
	    "talos": {"cloudInitTemplate": true, "cloudInit": "token: SECRET\n<% .TalosNodeTaints %>",
	      "taints": [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "NoExecute"}]},
	    "fine": {"cloudInitTemplate": true, "cloudInit": "<% .KubeletFlags %>"}
	  }
	}`
	_, err := loadTemplates(t, doc, "0:1:cx22:fsn1:syntax", "0:1:cx22:fsn1:field", "0:1:cx22:fsn1:big", "0:1:cx22:fsn1:talos", "0:1:cx22:fsn1:fine")
	if err == nil {
		t.Fatal("Load succeeded; want errors")
	}
	checkProblems(t, err, []problem{
		{"nodeConfigs.field.cloudInit", "template: line 3: unknown field .Hostname"},
		{"nodeConfigs.syntax.cloudInit", "template: line 2: unclosed action"},
		{"nodeConfigs.big.cloudInit", "rendered cloud-init is up to 40960 bytes, Hetzner accepts at most 32768"},
		{"nodeConfigs.talos.cloudInit", "template: line 2: <.TalosNodeTaints>: error calling TalosNodeTaints: two taints with key k"},
	})
	if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "xxxx") {
		t.Errorf("errors quote the template text: %v", err)
	}
}

// TestLoadCloudInitNotTemplate: without the opt-in, a cloudInit is never
// parsed, whatever it holds, and only its own size counts.
func TestLoadCloudInitNotTemplate(t *testing.T) {
	ci := "#cloud-config\n# <% .Nope {{ x }} ${y} {% if %}\n"
	cfg, err := loadTemplates(t, `{"nodeConfigs": {"p": {"cloudInit": `+jsonString(ci)+`}}}`, "0:1:cx22:fsn1:p")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := cfg.Pools[0]; got.CloudInitTemplate || got.CloudInit.Reveal() != ci {
		t.Errorf("pool = template %v, cloudInit %q; want no template, %q", got.CloudInitTemplate, got.CloudInit.Reveal(), ci)
	}
	_, err = loadTemplates(t, `{"nodeConfigs": {"p": {"cloudInit": `+jsonString(strings.Repeat("x", MaxCloudInitBytes+1))+`}}}`, "0:1:cx22:fsn1:p")
	checkProblems(t, err, []problem{{"nodeConfigs.p.cloudInit", "cloud-init is 32769 bytes, Hetzner accepts at most 32768"}})
}

func TestValidateCloudInitTemplate(t *testing.T) {
	cfg, err := loadTemplates(t, `{"nodeConfigs": {"p": {"cloudInitTemplate": true, "cloudInit": "<% .Pool %>"}}}`, "0:1:cx22:fsn1:p")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	cfg.Pools[0].CloudInit = "<% .Pools %>"
	checkProblems(t, cfg.Validate(), []problem{{"pools[0].cloudInit", "unknown field .Pools"}})
}

func TestCheckRenderingLargest(t *testing.T) {
	// The arm64 rendering is the larger: it alone is over the limit.
	pool := &Pool{Name: "p", CloudInitTemplate: true,
		CloudInit: Secret(`<% if eq .Arch "arm64" %>` + strings.Repeat("y", MaxCloudInitBytes) + `<% end %><% .ServerName %>`)}
	err := CheckRendering(pool, "")
	if err == nil || !strings.Contains(err.Error(), "up to 32786 bytes") {
		t.Errorf("CheckRendering = %v; want the arm64 rendering of 32768+18 bytes reported", err)
	}
}

func TestNodeLabelWarnings(t *testing.T) {
	doc := `{"nodeConfigs": {
	  "plain": {"cloudInit": "#cloud-config\n", "labels": {"a": "b"}, "taints": [{"key": "k", "effect": "NoSchedule"}]},
	  "prints-all": {"cloudInitTemplate": true, "cloudInit": "<% .KubeletFlags %>", "labels": {"a": "b"}, "taints": [{"key": "k", "effect": "NoSchedule"}]},
	  "restricted": {"cloudInitTemplate": true, "cloudInit": "<% .K3sFlags %>", "labels": {"node-role.kubernetes.io/gpu": "", "a": "b"}},
	  "labels-only": {"cloudInitTemplate": true, "cloudInit": "<% .NodeLabels %>", "labels": {"a": "b"}, "taints": [{"key": "k", "effect": "NoSchedule"}]},
	  "nothing": {"cloudInit": "#cloud-config\n"},
	  "one-label": {"cloudInitTemplate": true, "cloudInit": "<% .Labels.a %> <% .NodeTaints %>", "labels": {"a": "b", "c": "d"}, "taints": [{"key": "k", "effect": "NoSchedule"}]}
	}}`
	cfg, err := loadTemplates(t, doc, "0:1:cx22:fsn1:plain", "0:1:cx22:fsn1:prints-all", "0:1:cx22:fsn1:restricted", "0:1:cx22:fsn1:labels-only", "0:1:cx22:fsn1:nothing", "0:1:cx22:fsn1:one-label")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range NodeLabelWarnings(cfg, false) {
		path, rest, _ := strings.Cut(w, ": ")
		got = append(got, path+": "+rest[:strings.Index(rest, ":")])
	}
	want := []string{
		"nodeConfigs.plain.labels: the pool's nodes will not have these labels, which the autoscaler assumes they have",
		"nodeConfigs.plain.taints: the pool's nodes will not have these taints, which the autoscaler assumes they have",
		"nodeConfigs.restricted.labels: the kubelet may not set node-role.kubernetes.io/gpu (NodeRestriction), so the template leaves them out",
		"nodeConfigs.labels-only.taints: the pool's nodes will not have these taints, which the autoscaler assumes they have",
		// One label printed is not the pool's labels.
		"nodeConfigs.one-label.labels: the pool's nodes will not have these labels, which the autoscaler assumes they have",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NodeLabelWarnings(labeller off) (-want +got):\n%s", diff)
	}
	if got := NodeLabelWarnings(cfg, true); len(got) != 0 {
		t.Errorf("NodeLabelWarnings(labeller on) = %q; want none", got)
	}
}
