package chart

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/integration/apiserver"
	"github.com/hcloudscale/hcloudscale/lifecycle"
	"github.com/hcloudscale/hcloudscale/nodedrain"
)

func lifecycleDoc(t *testing.T, cloudInit string) []byte {
	t.Helper()
	doc, err := json.Marshal(map[string]any{
		"clusterName":   "prod",
		"imagesForArch": map[string]string{"amd64": "ubuntu-24.04"},
		"nodeConfigs": map[string]any{"workers": map[string]any{
			"cloudInit": cloudInit,
			"replace":   map[string]any{"drift": []string{"user_data"}, "drainTimeout": "8s", "retryAfter": "1h"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func lifecycleEnv(t *testing.T, api *hcloudtest.Server, cloudInit string) map[string]string {
	return map[string]string{
		"HCLOUD_TOKEN": api.Token(), "HCLOUD_ENDPOINT": api.URL(),
		"HCLOUD_CLUSTER_CONFIG": base64.StdEncoding.EncodeToString(lifecycleDoc(t, cloudInit)),
	}
}

func lifecycleConfig(t *testing.T, api *hcloudtest.Server, cloudInit string) *config.Config {
	t.Helper()
	cfg, err := config.Load(config.MapEnv(lifecycleEnv(t, api, cloudInit), nil), []string{"1:3:cx23:fsn1:workers"})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestLifecycleReplacesANodeOnARealAPIServer replaces a drifted node with
// the controller of package lifecycle, authenticated with the chart's RBAC
// for it, on kube-apiserver with kube-controller-manager's disruption
// controller: a budget with minAvailable equal to the replicas holds the
// drain (the old node serves on, uncordoned, its server kept); relaxed, the
// replacement finishes and the old server is deleted.
func TestLifecycleReplacesANodeOnARealAPIServer(t *testing.T) {
	s := apiserver.Start(t, apiserver.WithControllers("deployment", "replicaset", "daemonset", "disruption"), apiserver.WithScheduler())
	admin := s.AdminClient(t)
	kubelet := s.StartKubelet(t)
	c := lifecycleClient(t, s)
	ctx := t.Context()

	api := hcloudtest.NewServer(hcloudtest.WithDefaultActionDuration(0))
	t.Cleanup(api.Close)
	cluster, err := hcloudscale.New(ctx, lifecycleConfig(t, api, "#cloud-config\n"), hcloudscale.WithListTTL(time.Millisecond),
		hcloudscale.WithPollInterval(time.Millisecond), hcloudscale.WithClientOptions(hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond)})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Close(context.Background()) })
	if err := cluster.Pool("workers").IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	registered := map[string]bool{}
	join := func() {
		servers, _ := api.Servers("")
		for _, sv := range servers {
			if sv.Status == hcloud.ServerStatusRunning && !registered[sv.Name] {
				kubelet.AddNode(t, sv.Name, nil)
				registered[sv.Name] = true
			}
		}
	}
	waitFor(t, "the first server", func() bool { _ = cluster.Refresh(ctx); join(); return len(registered) == 1 })
	var old string
	for n := range registered {
		old = n
	}

	budget := startGuardedApp(t, admin, old)

	if err := cluster.Reconfigure(ctx, lifecycleConfig(t, api, "#cloud-config\n# v2\n")); err != nil {
		t.Fatal(err)
	}
	ctrl, err := lifecycle.New(cluster, c, lifecycle.WithDrainOptions(nodedrain.Options{Backoff: 200 * time.Millisecond, MaxBackoff: time.Second, Poll: 200 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctrl.Close)
	step := func() *lifecycle.Plan {
		p, err := ctrl.Step(ctx)
		if err != nil {
			t.Fatalf("Step: %v", err)
		}
		_ = cluster.Refresh(ctx)
		join()
		return p
	}

	// The budget allows no disruption: the plan holds the node before
	// anything is created.
	if p := step(); p.Count(lifecycle.StateBlocked) != 1 || !strings.Contains(strings.Join(p.Steps[0].Blocked, ";"), "PodDisruptionBudget app/web allows no disruption") {
		t.Fatalf("plan under minAvailable 2 of 2: %+v", p.Steps)
	}
	if n := len(servers(t, api)); n != 1 {
		t.Fatalf("%d servers while the budget blocks; want the old one alone", n)
	}
	checkReplacePlan(t, s, api, old)

	// Relaxed to one: the replacement joins, the old node drains one pod
	// at a time, and its server goes.
	budget.minAvailable = 1
	budget.update(t, admin)
	budget.waitAllowed(t, admin, 1)
	waitFor(t, "the replacement", func() bool {
		step()
		_, oldThere := findServer(t, api, old)
		return !oldThere && len(servers(t, api)) == 1
	})
	var repl string
	for _, sv := range servers(t, api) {
		repl = sv.Name
	}
	waitPods(t, admin, repl, func(ps []corev1.Pod) bool { return len(running(ps, "web")) == 2 })
	if err := admin.CoreV1().Nodes().Delete(ctx, old, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	step()
	n, err := admin.CoreV1().Nodes().Get(ctx, repl, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Annotations[lifecycle.ScaleDownDisabledAnnotation]; ok {
		t.Errorf("the replacement keeps the scale-down protection after its old node went: %v", n.Annotations)
	}
	checkNoForbidden(t, s, serviceAccountUser(releaseNamespace, releaseName), lifecycleVerbs...)
}

// checkReplacePlan runs hcloudscale replace --plan -o json with the
// chart's service account: the drifted node is due and held by the budget.
func checkReplacePlan(t *testing.T, s *apiserver.Server, api *hcloudtest.Server, node string) {
	t.Helper()
	cmd := exec.Command(buildServe(t), "replace", "--plan", "-o", "json", "--nodes", "1:3:cx23:fsn1:workers",
		"--kubeconfig", s.ServiceAccountKubeconfig(t, releaseNamespace, releaseName))
	for k, v := range lifecycleEnv(t, api, "#cloud-config\n# v2\n") {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("replace --plan: %v\n%s", err, out)
	}
	var plan lifecycle.Plan
	if err := json.Unmarshal(out, &plan); err != nil {
		t.Fatalf("replace --plan -o json: %v\n%s", err, out)
	}
	if len(plan.Steps) != 1 || plan.Steps[0].Node != node || plan.Steps[0].State != lifecycle.StateBlocked ||
		!strings.Contains(strings.Join(plan.Steps[0].Blocked, ";"), "PodDisruptionBudget app/web allows no disruption") {
		t.Fatalf("replace --plan: %s", out)
	}
}

// startGuardedApp starts, in namespace app, a Deployment "web" of two
// replicas on node (the only schedulable one) and a DaemonSet, with a
// PodDisruptionBudget of minAvailable 2 that allows no disruption yet.
func startGuardedApp(t *testing.T, admin kubernetes.Interface, node string) *policyv1PDB {
	t.Helper()
	const ns = "app"
	if _, err := admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create(t, admin, ns, deployment("web", 2), daemonSet("agent"))
	budget := &policyv1PDB{name: "web", ns: ns, minAvailable: 2}
	budget.create(t, admin)
	waitPods(t, admin, node, func(ps []corev1.Pod) bool { return len(running(ps, "web")) == 2 })
	budget.waitAllowed(t, admin, 0)
	return budget
}

func servers(t *testing.T, api *hcloudtest.Server) []hcloudtest.ServerInfo {
	t.Helper()
	ss, err := api.Servers("")
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

func findServer(t *testing.T, api *hcloudtest.Server, name string) (hcloudtest.ServerInfo, bool) {
	for _, s := range servers(t, api) {
		if s.Name == name {
			return s, true
		}
	}
	return hcloudtest.ServerInfo{}, false
}

// policyv1PDB is a PodDisruptionBudget on the pods app=<name>.
type policyv1PDB struct {
	name, ns     string
	minAvailable int32
}

func (b *policyv1PDB) create(t *testing.T, c kubernetes.Interface) {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: b.name, Namespace: b.ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptrTo(intstr.FromInt32(b.minAvailable)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": b.name}},
		},
	}
	if _, err := c.PolicyV1().PodDisruptionBudgets(b.ns).Create(t.Context(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (b *policyv1PDB) update(t *testing.T, c kubernetes.Interface) {
	t.Helper()
	pdb, err := c.PolicyV1().PodDisruptionBudgets(b.ns).Get(t.Context(), b.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pdb.Spec.MinAvailable = ptrTo(intstr.FromInt32(b.minAvailable))
	if _, err := c.PolicyV1().PodDisruptionBudgets(b.ns).Update(t.Context(), pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitAllowed waits until the disruption controller has computed the
// budget's current spec and allows that many disruptions.
func (b *policyv1PDB) waitAllowed(t *testing.T, c kubernetes.Interface, allowed int32) {
	t.Helper()
	waitFor(t, "the budget's status", func() bool {
		pdb, err := c.PolicyV1().PodDisruptionBudgets(b.ns).Get(t.Context(), b.name, metav1.GetOptions{})
		return err == nil && pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.DisruptionsAllowed == allowed
	})
}
