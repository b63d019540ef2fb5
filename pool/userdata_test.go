package pool

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"

	"github.com/hcloudscale/hcloudscale/config"
)

// TestCreateRendersCloudInitTemplate: each server of a templated pool
// carries the template rendered for it, its own name included, and the
// rendering reaches no log.
func TestCreateRendersCloudInitTemplate(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	e := newEnv(t, envOptions{})
	cfg := poolConfig("gpu", 0, 10)
	cfg.CloudInitTemplate = true
	cfg.CloudInit = "#cloud-config\nhostname: <% .ServerName %>\n" +
		"# <% .Pool %> <% .Cluster %> <% .Location %> <% .ServerType %> <% .Arch %> ${HOME} {{ v1.region }}\n" +
		"runcmd: [kubeadm join --token abcdef.0123456789abcdef <% .KubeletFlags %>]\n"
	cfg.Labels = map[string]string{"workload": "gpu", "node-role.kubernetes.io/gpu": ""}
	cfg.Taints = []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	p := e.newPool(cfg, WithLogger(zap.New(core)))
	if err := p.IncreaseSize(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	servers := e.servers("gpu")
	if len(servers) != 2 {
		t.Fatalf("fake holds %d servers; want 2", len(servers))
	}
	for _, s := range servers {
		want := "#cloud-config\nhostname: " + s.Name + "\n" +
			"# gpu test fsn1 cx23 amd64 ${HOME} {{ v1.region }}\n" +
			"runcmd: [kubeadm join --token abcdef.0123456789abcdef --node-labels=workload=gpu --register-with-taints=gpu=true:NoSchedule]\n"
		if s.UserData != want {
			t.Errorf("server %s user data = %q; want %q", s.Name, s.UserData, want)
		}
	}
	for _, entry := range logs.All() {
		line := entry.Message
		for k, v := range entry.ContextMap() {
			line += " " + k + "=" + toString(v)
		}
		if strings.Contains(line, "abcdef.0123456789abcdef") || strings.Contains(line, "register-with-taints") {
			t.Errorf("log entry carries user data: %s", line)
		}
	}
}

// TestCreateSendsPlainCloudInitAsIs: a cloudInit that is not declared a
// template is sent byte for byte, template-like text and all.
func TestCreateSendsPlainCloudInitAsIs(t *testing.T) {
	e := newEnv(t, envOptions{})
	cfg := poolConfig("plain", 0, 10)
	cfg.CloudInit = "## template: jinja\n#cloud-config\n# {{ v1.instance_id }} {% if x %}{% endif %} ${HOME} $(id) <% .ServerName %> <% bad\n\x00\r\n"
	p := e.newPool(cfg)
	if err := p.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	servers := e.servers("plain")
	if len(servers) != 1 || servers[0].UserData != cfg.CloudInit.Reveal() {
		t.Fatalf("servers = %+v; want one with the cloudInit unchanged", servers)
	}
}

// TestCreateTemplateFailure: a template that fails to render for a server
// fails its claim with code cloud-init, and the message quotes nothing of
// the template's text.
func TestCreateTemplateFailure(t *testing.T) {
	e := newEnv(t, envOptions{})
	cfg := poolConfig("talos", 0, 10)
	cfg.CloudInitTemplate = true
	cfg.CloudInit = "token: abcdef.0123456789abcdef\nnodeTaints: <% .TalosNodeTaints %>\n"
	cfg.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}, {Key: "k", Effect: corev1.TaintEffectNoExecute}}
	p := e.newPool(cfg)
	if err := p.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	ins := p.Instances()
	if len(ins) != 1 || ins[0].Error == nil || ins[0].Error.Code != CodeCloudInit {
		t.Fatalf("Instances() = %+v; want one failed claim with code %s", ins, CodeCloudInit)
	}
	if msg := ins[0].Error.Message; !strings.Contains(msg, "two taints with key k") || strings.Contains(msg, "abcdef") {
		t.Errorf("error message = %q; want the cause, without the template text", msg)
	}
	if got := e.fake.Count("POST /servers"); got != 0 {
		t.Errorf("POST /servers requests = %d; want 0", got)
	}
}

func TestNewRejectsBadTemplate(t *testing.T) {
	e := newEnv(t, envOptions{})
	cfg := poolConfig("bad", 0, 1)
	cfg.CloudInitTemplate = true
	cfg.CloudInit = config.Secret("<% .Nope %>")
	_, err := New(cfg, e.deps(cfg))
	if err == nil || !strings.Contains(err.Error(), `pool "bad": cloudInit template: line 1: unknown field .Nope`) {
		t.Errorf("New = %v; want the unknown field named", err)
	}
}
