package cloudinit

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func values() Values {
	return Values{
		Pool: "gpu", Server: "gpu-0123456789abcdef", Cluster: "prod", Location: "fsn1",
		ServerType: "cax31", Arch: "arm64",
		Labels: map[string]string{
			"workload":                       "gpu",
			"node.kubernetes.io/pool":        "gpu",
			"node-role.kubernetes.io/worker": "",
			"example.com/team":               "ml",
		},
		Taints: []corev1.Taint{
			{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule},
			{Key: "dedicated", Effect: corev1.TaintEffectNoExecute},
		},
	}
}

func render(t *testing.T, text string, v Values) string {
	t.Helper()
	tmpl, err := Parse(text)
	if err != nil {
		t.Fatalf("Parse(%q): %v", text, err)
	}
	out, err := tmpl.Render(v)
	if err != nil {
		t.Fatalf("Render(%q): %v", text, err)
	}
	return out
}

func TestFields(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"<% .Pool %>", "gpu"},
		{"<% .ServerName %>", "gpu-0123456789abcdef"},
		{"<% .Cluster %>", "prod"},
		{"<% .Location %>/<% .ServerType %>/<% .Arch %>", "fsn1/cax31/arm64"},
		{`<% index .Labels "node-role.kubernetes.io/worker" | printf "%q" %>`, `""`},
		{"<% range .Taints %><% .Key %>=<% .Effect %>;<% end %>", "gpu=NoSchedule;dedicated=NoExecute;"},
		{"<% .NodeLabels %>", "example.com/team=ml,node.kubernetes.io/pool=gpu,workload=gpu"},
		{"<% .NodeTaints %>", "gpu=true:NoSchedule,dedicated:NoExecute"},
		{"<% .KubeletFlags %>", "--node-labels=example.com/team=ml,node.kubernetes.io/pool=gpu,workload=gpu --register-with-taints=gpu=true:NoSchedule,dedicated:NoExecute"},
		{"<% .K3sFlags %>", "--node-label=example.com/team=ml --node-label=node.kubernetes.io/pool=gpu --node-label=workload=gpu --node-taint=gpu=true:NoSchedule --node-taint=dedicated:NoExecute"},
		{"<% .KubeadmKubeletExtraArgs %>", `[{"name":"node-labels","value":"example.com/team=ml,node.kubernetes.io/pool=gpu,workload=gpu"}]`},
		{"<% .KubeadmTaints %>", `[{"key":"gpu","value":"true","effect":"NoSchedule"},{"key":"dedicated","effect":"NoExecute"}]`},
		{"<% .TalosNodeLabels %>", `{"example.com/team":"ml","node.kubernetes.io/pool":"gpu","workload":"gpu"}`},
		{"<% .TalosNodeTaints %>", `{"dedicated":"NoExecute","gpu":"true:NoSchedule"}`},
		{"<% $.Pool %><% range .Taints %> <% $.Pool %><% end %>", "gpu gpu gpu"},
		{`a <%- " b " -%> c`, "a b c"},
		{`<% "<%" %>`, "<%"},
	} {
		if got := render(t, c.text, values()); got != c.want {
			t.Errorf("Render(%q) = %q; want %q", c.text, got, c.want)
		}
	}
}

func TestEmptyPool(t *testing.T) {
	v := Values{Pool: "plain", Server: "plain-1"}
	for _, c := range []struct{ text, want string }{
		{"<% .NodeLabels %>|<% .NodeTaints %>|<% .KubeletFlags %>|<% .K3sFlags %>", "|||"},
		{"<% .KubeadmKubeletExtraArgs %> <% .KubeadmTaints %>", "[] []"},
		{"<% .TalosNodeLabels %> <% .TalosNodeTaints %>", "{} {}"},
	} {
		if got := render(t, c.text, v); got != c.want {
			t.Errorf("Render(%q) = %q; want %q", c.text, got, c.want)
		}
	}
	// Only restricted labels: the kubelet helpers print nothing.
	v.Labels = map[string]string{"node-role.kubernetes.io/worker": ""}
	if got := render(t, "<% .KubeletFlags %>", v); got != "" {
		t.Errorf("KubeletFlags with only a restricted label = %q; want empty", got)
	}
}

// TestPassThrough: text outside <% %> is copied as is, whatever it holds.
func TestPassThrough(t *testing.T) {
	text := "## template: jinja\n#cloud-config\nhostname: {{ v1.local_hostname }}\n{% if v1.region %}x{% endif %}{# c #}\n" +
		"runcmd:\n  - echo ${HOME} $(hostname) $((1+2)) [[ -f x ]] %> <% .Pool %>\n"
	want := strings.Replace(text, "<% .Pool %>", "gpu", 1)
	if got := render(t, text, values()); got != want {
		t.Errorf("Render = %q; want %q", got, want)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       []string // substrings of the error
	}{
		{"unclosed action", "a\nb <% .Pool", []string{"line 2:", "unclosed action"}},
		{"unknown function", "<% nope .Pool %>", []string{"line 1:", `function "nope" not defined`}},
		{"unknown field", "x\n\n<% .Nodelabels %>", []string{"line 3: unknown field .Nodelabels", "NodeLabels"}},
		{"unknown field of $", "<% range .Taints %><% $.Server %><% end %>", []string{"unknown field .Server"}},
		{"unknown field in if", "<% if .Gpu %>x<% end %>", []string{"unknown field .Gpu"}},
		{"two unknown fields", "<% .A %>\n<% .B %>", []string{"line 1: unknown field .A", "line 2: unknown field .B"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.text)
			if err == nil {
				t.Fatalf("Parse(%q) succeeded; want an error", c.text)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Parse(%q) = %q; want it to contain %q", c.text, err, w)
				}
			}
			if strings.Contains(err.Error(), "template:") {
				t.Errorf("Parse(%q) = %q; want text/template's prefix replaced", c.text, err)
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	v := values()
	v.Taints = append(v.Taints, corev1.Taint{Key: "gpu", Effect: corev1.TaintEffectNoExecute})
	tmpl, err := Parse("secret-token\n<% .TalosNodeTaints %>")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render(v)
	if err == nil || !strings.Contains(err.Error(), "line 2:") || !strings.Contains(err.Error(), "two taints with key gpu") {
		t.Errorf("Render = %v; want a line-2 error about two taints with key gpu", err)
	}
	if strings.Contains(err.Error(), "secret-token") {
		t.Errorf("Render error %q quotes the template text", err)
	}
}

func TestPrints(t *testing.T) {
	for _, c := range []struct {
		text           string
		labels, taints bool
	}{
		{"plain", false, false},
		{"<% .KubeletFlags %>", true, true},
		{"<% .K3sFlags %>", true, true},
		{"<% .NodeLabels %>", true, false},
		{"<% .KubeadmKubeletExtraArgs %> <% .KubeadmTaints %>", true, true},
		{"<% .TalosNodeTaints %>", false, true},
		{"<% range $k, $v := .Labels %><% $k %><% end %>", true, false},
		{"<% range .Taints %><% .Key %><% end %>", false, true},
		// Inside with, dot is the server name: .Labels is not the pool's.
		{"<% with .ServerName %><% .Labels %><% end %>", false, false},
		// One label, or a label's presence, is not all of them.
		{"<% .Labels.workload %>", false, false},
		{`<% index .Labels "workload" %> <% $.Labels.team %>`, false, false},
		{"<% if .Labels.gpu %><% .KubeadmTaints %><% end %>", false, true},
		{"<% len .Taints %>", false, false},
		{"<% .Labels %> <% $.Taints %>", true, true},
	} {
		tmpl, err := Parse(c.text)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.text, err)
		}
		if got := tmpl.PrintsLabels(); got != c.labels {
			t.Errorf("Parse(%q).PrintsLabels() = %v; want %v", c.text, got, c.labels)
		}
		if got := tmpl.PrintsTaints(); got != c.taints {
			t.Errorf("Parse(%q).PrintsTaints() = %v; want %v", c.text, got, c.taints)
		}
	}
}

func TestKubeletMaySet(t *testing.T) {
	got := map[string]bool{}
	for _, k := range []string{
		"workload", "example.com/team", "node.kubernetes.io/pool", "kubelet.kubernetes.io/x",
		"sub.node.kubernetes.io/x", "kubernetes.io/hostname", "topology.kubernetes.io/zone",
		"node.kubernetes.io/instance-type", "kubernetes.io/arch", "beta.kubernetes.io/os",
		"node-role.kubernetes.io/worker", "node-restriction.kubernetes.io/pool", "kubernetes.io/team",
		"example.k8s.io/x", "k8s.io/x", "Node-Role.Kubernetes.io/worker", "notkubernetes.io/x",
	} {
		got[k] = KubeletMaySet(k)
	}
	want := map[string]bool{
		"workload": true, "example.com/team": true, "node.kubernetes.io/pool": true, "kubelet.kubernetes.io/x": true,
		"sub.node.kubernetes.io/x": true, "kubernetes.io/hostname": true, "topology.kubernetes.io/zone": true,
		"node.kubernetes.io/instance-type": true, "kubernetes.io/arch": true, "beta.kubernetes.io/os": true,
		"node-role.kubernetes.io/worker": false, "node-restriction.kubernetes.io/pool": false, "kubernetes.io/team": false,
		"example.k8s.io/x": false, "k8s.io/x": false, "Node-Role.Kubernetes.io/worker": false, "notkubernetes.io/x": true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("KubeletMaySet (-want +got):\n%s", diff)
	}
}

func TestOpenQuoteErrors(t *testing.T) {
	const token = "abcdef.0123456789abcdef"
	for _, c := range []struct {
		name, text string
		want       []string
	}{
		{"character constant", "#cloud-config\n<% if eq .Arch 'arm64 %>arm<% end %> && kubeadm join --token " + token + "'",
			[]string{"line 2, column 16: a character constant (') opened in this action runs past its %>"}},
		{"quoted string", `x <% index .Labels "a %> --token ` + token + `" %>`,
			[]string{`line 1, column 20: a quoted string (") opened`}},
		{"raw string over lines", "<% `a\n%>\n" + token + "` %>", []string{"line 1, column 4: a raw string (`)"}},
		{"escaped delimiter", `<% "\%> ` + token + `" %>`, []string{"line 1, column 4: a quoted string"}},
		{"every action at once", "<% 'a %> " + token + "\n<% \"b %> " + token + "\n",
			[]string{"line 1, column 4: a character constant", "line 2, column 4: a quoted string"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.text)
			if err == nil {
				t.Fatalf("Parse(%q) succeeded; want an error", c.text)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Parse(%q) = %q; want it to contain %q", c.text, err, w)
				}
			}
			if strings.Contains(err.Error(), "abcdef") {
				t.Errorf("Parse(%q) = %q; want no text from outside the actions", c.text, err)
			}
		})
	}
	// A quote that closes inside its action, and %> in plain text, parse.
	for _, text := range []string{`<% if eq .Arch "arm64" %>'<% end %>`, `it's %> "x`, "<%/* a %> b */%>", `<% "<%" %>`} {
		if _, err := Parse(text); err != nil {
			t.Errorf("Parse(%q) = %v; want no error", text, err)
		}
	}
}
