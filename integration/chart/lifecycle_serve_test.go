package chart

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"helm.sh/helm/v4/pkg/cli/values"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/integration/apiserver"
	"github.com/hcloudscale/hcloudscale/lifecycle"
)

// TestServeReplacesNodesUnderChartRBAC runs serve as the chart starts it
// with nodeLifecycle.enabled (leader election, the cluster config from a
// mounted file, the chart's service account and RBAC) on kube-apiserver
// with kube-controller-manager's Deployment and disruption controllers
// and kube-scheduler. The test plays the autoscaler over mutual TLS: it
// scales the pool to one node and calls Refresh as the autoscaler's loop
// does. A cloud-init change written into the mounted file makes the node
// drifted; a PodDisruptionBudget that allows no disruption holds it
// before anything is created; relaxed, serve creates the replacement,
// drains the old node through the Eviction API and deletes its server.
// Throughout, the pool's target size is what the autoscaler would keep
// (one, two while the replacement surges) and no instance reports an
// error, which the autoscaler would delete without a drain.
func TestServeReplacesNodesUnderChartRBAC(t *testing.T) {
	s := apiserver.Start(t, apiserver.WithControllers("deployment", "replicaset", "daemonset", "disruption"), apiserver.WithScheduler())
	admin := s.AdminClient(t)
	kubelet := s.StartKubelet(t)
	const ns, pool = "serve-replace", "workers"
	leaseNS := ns + "-leases"
	workers := func(cloudInit string) map[string]any {
		return map[string]any{"cloudInit": cloudInit,
			"replace": map[string]any{"drift": []string{"user_data"}, "drainTimeout": "60s", "retryAfter": "1h"}}
	}
	vals := mergeValues(t, values.Options{
		ValueFiles: []string{filepath.Join(chartDir, "ci", "minimal-values.yaml")},
		Values: []string{"nodeLifecycle.enabled=true", "leaderElection.leaseName=" + ns + "-lock",
			"leaderElection.leaseNamespace=" + leaseNS},
	})
	vals["clusterConfig"] = map[string]any{"json": map[string]any{"nodeConfigs": map[string]any{pool: workers("#cloud-config\n")}}}
	manifest, err := renderIn(t, ns, vals)
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, manifest)
	// ServiceAccount, the ClusterRole and Role with their bindings, and
	// the node lifecycle's ClusterRole and binding.
	if n := applyChartRBAC(t, s, objs, ns, leaseNS); n != 7 {
		t.Fatalf("%d service account and RBAC objects among %q; want 7", n, kinds(objs))
	}
	pod := one[*appsv1.Deployment](t, objs, "Deployment").Spec.Template.Spec
	user := serviceAccountUser(ns, pod.ServiceAccountName)

	fake := hcloudtest.NewServer(hcloudtest.WithDefaultActionDuration(10 * time.Millisecond))
	t.Cleanup(fake.Close)
	root := t.TempDir()
	c := pod.Containers[0]
	host := "hcloudscale." + ns + ".svc"
	certs := writePodFiles(t, objs, pod, root, fake.Token(), host)
	args, env := podProcess{Root: root, Kubeconfig: s.ServiceAccountKubeconfig(t, ns, pod.ServiceAccountName),
		Endpoint: fake.URL(), PodName: "hcloudscale-5d9c7-abcde", Namespace: ns}.command(t, c)
	if !slices.Contains(args, "--replace-nodes") {
		t.Fatalf("serve %q: nodeLifecycle.enabled renders no --replace-nodes", args)
	}
	proc := startServe(t, append(args, "--replace-interval=1s"), env)
	serving := proc.waitLog(t, "serving")
	proc.waitLog(t, "leading: changes are let in")
	proc.waitLog(t, "node lifecycle started")
	metricsURL := "http://" + serving["metrics_listen"].(string) + "/metrics"
	diag := func() string {
		return fmt.Sprintf("metrics:\n%s\nlog:\n%s", grepLines(get(t, metricsURL), "hcloudscale_replacement"), proc.logs)
	}

	gc, err := grpc.NewClient(serving["listen"].(string), grpc.WithTransportCredentials(credentials.NewTLS(certs.clientTLS(t, host))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gc.Close() })
	as := &playedAutoscaler{t: t, cp: protos.NewCloudProviderClient(gc), fake: fake, kubelet: kubelet, pool: pool, joined: map[string]bool{}, diag: diag}
	if _, err := as.cp.NodeGroupIncreaseSize(t.Context(), &protos.NodeGroupIncreaseSizeRequest{Id: pool, Delta: 1}); err != nil {
		t.Fatalf("NodeGroupIncreaseSize: %v", err)
	}
	as.until("the first node", 1, func() bool { return len(as.joined) == 1 })
	old := slices.Collect(func(yield func(string) bool) {
		for n := range as.joined {
			yield(n)
		}
	})[0]

	budget := startGuardedApp(t, admin, old)

	// The new cloud-init reaches serve as the kubelet updates a mounted
	// Secret, and serve reads it at the autoscaler's Refresh.
	cfgPath := ""
	for _, e := range c.Env {
		if e.Name == config.EnvClusterConfigFile {
			cfgPath = podRemap(t, c, root)(e.Value)
		}
	}
	doc, err := json.Marshal(map[string]any{"nodeConfigs": map[string]any{pool: workers("#cloud-config\n# v2\n")}})
	if err != nil {
		t.Fatal(err)
	}
	swapVolume(t, filepath.Dir(cfgPath), map[string][]byte{filepath.Base(cfgPath): doc})
	blocked := regexp.MustCompile(`(?m)^hcloudscale_replacement_nodes\{pool="workers",reason="drift:user_data",state="blocked"\} 1$`)
	as.until("the drifted node held by the budget", 1, func() bool { return blocked.MatchString(get(t, metricsURL)) })
	// Held before anything is created, over three more steps.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		as.tick(1)
		if n := len(servers(t, fake)); n != 1 {
			t.Fatalf("%d servers while the budget allows no disruption; want the old one alone", n)
		}
	}

	budget.minAvailable = 1
	budget.update(t, admin)
	budget.waitAllowed(t, admin, 1)
	as.until("the old server gone", 0, func() bool {
		_, there := findServer(t, fake, old)
		return !there && len(servers(t, fake)) == 1
	})
	repl := servers(t, fake)[0].Name
	if repl == old || !as.joined[repl] {
		t.Fatalf("the server left is %s; want the replacement, a joined node other than %s", repl, old)
	}
	waitPods(t, admin, repl, func(ps []corev1.Pod) bool { return len(running(ps, "web")) == 2 })
	if as.maxTarget != 2 {
		t.Errorf("the target size peaked at %d; want 2 (one surge)", as.maxTarget)
	}
	// The node goes as the cloud controller manager removes it; the
	// replacement loses its scale-down protection.
	if err := admin.CoreV1().Nodes().Delete(t.Context(), old, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	as.until("the replacement's protection lifted", 1, func() bool {
		n, err := admin.CoreV1().Nodes().Get(t.Context(), repl, metav1.GetOptions{})
		_, protected := n.Annotations[lifecycle.ScaleDownDisabledAnnotation]
		return err == nil && !protected && !n.Spec.Unschedulable
	})
	if m := get(t, metricsURL); !strings.Contains(m, "\nhcloudscale_replacements_total{pool=\"workers\",result=\"done\"} 1\n") {
		t.Errorf("/metrics lacks one done replacement:\n%s", grepLines(m, "hcloudscale_replacement"))
	}
	checkNodeEvents(t, admin, old, "ReplacementStarted", "DrainStarted", "Replaced")
	proc.terminate(t)
	checkNoForbidden(t, s, user, append(lifecycleVerbs, "create events/", "update leases/")...)
}

// playedAutoscaler is what the autoscaler does to serve between two of its
// loops, as far as a replacement is concerned: Refresh, then read the
// pool's target size and instances. It registers a Node for each running
// server, as the server's kubelet would.
type playedAutoscaler struct {
	t       *testing.T
	cp      protos.CloudProviderClient
	fake    *hcloudtest.Server
	kubelet *apiserver.Kubelet
	pool    string

	joined    map[string]bool
	maxTarget int32
	diag      func() string // what a failure shows
}

// tick is one loop: Refresh, the target size at least min and within one
// of the running servers, and no instance with an error.
func (a *playedAutoscaler) tick(min int32) {
	t := a.t
	t.Helper()
	ctx := t.Context()
	if _, err := a.cp.Refresh(ctx, &protos.RefreshRequest{}); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	ts, err := a.cp.NodeGroupTargetSize(ctx, &protos.NodeGroupTargetSizeRequest{Id: a.pool})
	if err != nil {
		t.Fatalf("NodeGroupTargetSize: %v", err)
	}
	a.maxTarget = max(a.maxTarget, ts.GetTargetSize())
	if ts.GetTargetSize() < min || ts.GetTargetSize() > 2 {
		t.Fatalf("target size %d; want %d to 2", ts.GetTargetSize(), min)
	}
	nodes, err := a.cp.NodeGroupNodes(ctx, &protos.NodeGroupNodesRequest{Id: a.pool})
	if err != nil {
		t.Fatalf("NodeGroupNodes: %v", err)
	}
	for _, in := range nodes.GetInstances() {
		if e := in.GetStatus().GetErrorInfo(); e != nil {
			t.Fatalf("instance %s reports error %s (%s): the autoscaler would delete it without a drain", in.GetId(), e.GetErrorCode(), e.GetErrorMessage())
		}
	}
	for _, sv := range servers(t, a.fake) {
		if sv.Status == hcloud.ServerStatusRunning && !a.joined[sv.Name] {
			a.kubelet.AddNode(t, sv.Name, nil)
			a.joined[sv.Name] = true
		}
	}
}

// until ticks every 250 ms until ok, for up to 90 s.
func (a *playedAutoscaler) until(what string, min int32, ok func() bool) {
	a.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		a.tick(min)
		if ok() {
			return
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("waiting for %s: 90 s\n%s", what, a.diag())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// checkNodeEvents wants an Event of each reason on node, from hcloudscale.
func checkNodeEvents(t *testing.T, c kubernetes.Interface, node string, reasons ...string) {
	t.Helper()
	var got []string
	waitFor(t, fmt.Sprintf("events %q on node %s", reasons, node), func() bool {
		list, err := c.CoreV1().Events(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + node})
		if err != nil {
			return false
		}
		got = got[:0]
		for _, e := range list.Items {
			if e.Source.Component == "hcloudscale" {
				got = append(got, e.Reason)
			}
		}
		for _, r := range reasons {
			if !slices.Contains(got, r) {
				return false
			}
		}
		return true
	})
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
