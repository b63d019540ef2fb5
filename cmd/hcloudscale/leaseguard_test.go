package main

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// TestScaleAndCleanupRefuseBesideALeader: with a kubeconfig at hand,
// scale and cleanup --yes read serve's Lease and write nothing while a
// live holder has it, unless --ignore-leader; an expired or released
// Lease lets them write.
func TestScaleAndCleanupRefuseBesideALeader(t *testing.T) {
	// A case's Lease is made when its subtest starts, renewed ago before.
	lease := func(holder string, ago time.Duration) func() *coordinationv1.Lease {
		return func() *coordinationv1.Lease {
			renewed := time.Now().Add(-ago)
			return &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "hcloudscale", Namespace: "autoscaling"},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(int32(15)),
					RenewTime: &metav1.MicroTime{Time: renewed}},
			}
		}
	}
	for _, c := range []struct {
		name  string
		lease func() *coordinationv1.Lease
		extra []string
		podNS string // $POD_NAMESPACE; "": none, the guard defaults to kube-system
		want  string // in stderr, "" for a write
	}{
		{"live holder", lease("serve-0", 0), nil, "autoscaling", `serve's leader "serve-0" holds Lease autoscaling/hcloudscale`},
		{"live holder in a namespace not named", lease("serve-0", 0), nil, "", `serve's leader "serve-0" holds Lease autoscaling/hcloudscale`},
		{"within the write grace", lease("serve-0", 18*time.Second), nil, "autoscaling", `serve's leader "serve-0" holds Lease`},
		{"live holder, told to ignore it", lease("serve-0", 0), []string{"--ignore-leader"}, "autoscaling", ""},
		{"expired", lease("serve-0", time.Minute), nil, "autoscaling", ""},
		{"released", lease("", 0), nil, "autoscaling", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			kube := kubefake.NewClientset(c.lease())
			old := newKubeClient
			newKubeClient = func(string, config.Env) (kubernetes.Interface, error) { return kube, nil }
			t.Cleanup(func() { newKubeClient = old })
			for _, cmd := range []struct {
				name string
				run  subcommand
				args []string
			}{{"scale", runScale, []string{"workers", "1"}}, {"cleanup", runCleanup, []string{"--yes"}}} {
				p := newFakeProject(t, hcloudtest.WithDefaultActionDuration(0))
				vars := map[string]string{"KUBECONFIG": "/kubeconfig"}
				if c.podNS != "" {
					vars["POD_NAMESPACE"] = c.podNS
				}
				env := p.env(t, vars)
				args := append(append(append([]string{}, cmd.args...), c.extra...), exampleNodes...)
				r := runCmd(t, cmd.run, env, args...)
				writes := 0
				for _, req := range p.api.Requests() {
					if req.Method != "GET" {
						writes++
					}
				}
				switch {
				case c.want != "" && (r.code != exitFailure || !strings.Contains(r.stderr, c.want) || p.api.Count("GET /servers") != 0):
					t.Errorf("%s: exit %d, %d listings; stderr:\n%s\nwant %d before any request, naming %q", cmd.name, r.code, p.api.Count("GET /servers"), r.stderr, exitFailure, c.want)
				case c.want == "" && strings.Contains(r.stderr, "holds Lease"):
					t.Errorf("%s refused: %s", cmd.name, r.stderr)
				case c.want == "" && cmd.name == "scale" && writes == 0:
					t.Errorf("scale sent no write; stderr:\n%s", r.stderr)
				}
			}
		})
	}
}
