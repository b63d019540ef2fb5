package chart

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/cli/values"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/hcloudscale/hcloudscale/integration/apiserver"
	"github.com/hcloudscale/hcloudscale/nodedrain"
)

// TestDrainHonoursBudgetsOnARealAPIServer drains a node as the node
// lifecycle does, with the chart's RBAC for it, against kube-apiserver
// with kube-controller-manager's disruption controller computing the
// budgets that the Eviction API enforces.
func TestDrainHonoursBudgetsOnARealAPIServer(t *testing.T) {
	s := apiserver.Start(t, apiserver.WithControllers("deployment", "replicaset", "daemonset", "disruption"), apiserver.WithScheduler())
	admin := s.AdminClient(t)
	kubelet := s.StartKubelet(t, "old")
	c := lifecycleClient(t, s)
	ctx := t.Context()

	ns := "app"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create(t, admin, ns, deployment("web", 2), daemonSet("agent"))
	budget := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptrTo(intstr.FromInt32(2)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
	if _, err := admin.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, budget, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := waitPods(t, admin, "old", func(ps []corev1.Pod) bool { return len(running(ps, "web")) == 2 && len(running(ps, "agent")) == 1 })
	waitFor(t, "the budget's status", func() bool {
		b, err := admin.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && b.Status.ObservedGeneration == b.Generation && b.Status.CurrentHealthy == 2
	})
	kubelet.AddNode(t, "new", nil)
	if err := nodedrain.Cordon(ctx, c, "old"); err != nil {
		t.Fatal(err)
	}

	// A budget that allows no disruption holds the drain: nothing goes.
	o := nodedrain.Options{Timeout: 3 * time.Second, Backoff: 200 * time.Millisecond, Poll: 200 * time.Millisecond}
	blockers, err := nodedrain.Blockers(ctx, c, "old", nodedrain.Policy{})
	if err != nil || len(blockers) != 2 {
		t.Fatalf("Blockers: %v, %v; want both web pods", blockers, err)
	}
	err = nodedrain.Drain(ctx, c, "old", o)
	var blocked *nodedrain.BlockedError
	if !errors.As(err, &blocked) || len(blocked.Blockers) != 2 || !strings.Contains(blocked.Blockers[0].Reason, "disruption budget") {
		t.Fatalf("Drain under minAvailable 2 of 2: %v, want both web pods refused by the budget", err)
	}
	if now := uids(waitPods(t, admin, "old", nil)); !slices.Equal(now, uids(before)) {
		t.Fatalf("pods changed under a blocking budget: %v, was %v", now, uids(before))
	}

	// A pod marked not to be disrupted blocks the drain before anything goes.
	marked := bare("batch-job", "old")
	marked.Annotations = map[string]string{nodedrain.DoNotDisruptAnnotation: "true"}
	create(t, admin, ns, marked)
	budget, _ = admin.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
	budget.Spec.MinAvailable = ptrTo(intstr.FromInt32(1))
	if _, err := admin.PolicyV1().PodDisruptionBudgets(ns).Update(ctx, budget, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the relaxed budget's status", func() bool {
		b, err := admin.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && b.Status.ObservedGeneration == b.Generation && b.Status.DisruptionsAllowed == 1
	})
	err = nodedrain.Drain(ctx, c, "old", o)
	if !errors.As(err, &blocked) || len(blocked.Blockers) != 1 || blocked.Blockers[0].Pod != ns+"/batch-job" {
		t.Fatalf("Drain with a do-not-disrupt pod: %v, want blocked by it alone", err)
	}
	if got := len(running(waitPods(t, admin, "old", nil), "web")); got != 2 {
		t.Fatalf("%d web pods on the old node after a blocked drain, want 2", got)
	}
	if err := admin.CoreV1().Pods(ns).Delete(ctx, "batch-job", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// Relaxed: one pod at a time moves, the DaemonSet's stays.
	o.Timeout = 90 * time.Second
	if err := nodedrain.Drain(ctx, c, "old", o); err != nil {
		t.Fatalf("Drain under minAvailable 1: %v", err)
	}
	left := waitPods(t, admin, "old", nil)
	if len(left) != 1 || left[0].Labels["app"] != "agent" {
		t.Errorf("pods left on the drained node: %v, want the DaemonSet's alone", names(left))
	}
	waitPods(t, admin, "new", func(ps []corev1.Pod) bool { return len(running(ps, "web")) == 2 })
	checkNoForbidden(t, s, serviceAccountUser(releaseNamespace, releaseName), lifecycleVerbs...)
}

// lifecycleClient applies the chart's RBAC for the node lifecycle and
// returns a client that authenticates as the chart's service account.
func lifecycleClient(t *testing.T, s *apiserver.Server) kubernetes.Interface {
	t.Helper()
	objs := mustRender(t, mergeValues(t, values.Options{
		ValueFiles: []string{filepath.Join(chartDir, "ci", "minimal-values.yaml")},
		Values:     []string{"nodeLifecycle.enabled=true"},
	}))
	var docs []string
	for _, o := range objs {
		if strings.HasSuffix(o.GetName(), "-node-lifecycle") {
			b, err := yaml.Marshal(o.Object)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, string(b))
		}
	}
	if len(docs) != 2 {
		t.Fatalf("the chart renders %d objects for the node lifecycle, want a ClusterRole and its binding", len(docs))
	}
	kubeconfig := s.ServiceAccountKubeconfig(t, releaseNamespace, releaseName)
	s.Apply(t, []byte(strings.Join(docs, "---\n")))
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkNoForbidden fails the test for every request of user the API
// server refused (403), and for each of want ("verb resource/subresource")
// that user never did: a permission the test did not exercise.
func checkNoForbidden(t *testing.T, s *apiserver.Server, user string, want ...string) {
	t.Helper()
	did := map[string]bool{}
	for _, e := range s.AuditEvents(t) {
		if e.User != user || e.Stage != "ResponseComplete" {
			continue
		}
		if e.Code == http.StatusForbidden {
			t.Errorf("403: %s %s/%s %s/%s", e.Verb, e.APIGroup, e.Resource+"/"+e.Subresource, e.Namespace, e.Name)
		}
		did[e.Verb+" "+e.Resource+"/"+e.Subresource] = true
	}
	for _, w := range want {
		if !did[w] {
			t.Errorf("the service account never did %q: the test did not exercise that permission", w)
		}
	}
}

// lifecycleVerbs are the requests of the node lifecycle, each allowed by
// the chart's RBAC for it.
var lifecycleVerbs = []string{"patch nodes/", "list pods/", "create pods/eviction", "list poddisruptionbudgets/"}

func deployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec()},
		},
	}
}

func daemonSet(name string) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec()},
		},
	}
}

func bare(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}}, Spec: func() corev1.PodSpec {
		s := podSpec()
		s.NodeName = node
		return s
	}()}
}

func podSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/pause"}}}
}

// create creates deployments, daemon sets and pods in ns.
func create(t *testing.T, c kubernetes.Interface, ns string, objs ...any) {
	t.Helper()
	var err error
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.Deployment:
			_, err = c.AppsV1().Deployments(ns).Create(t.Context(), o, metav1.CreateOptions{})
		case *appsv1.DaemonSet:
			_, err = c.AppsV1().DaemonSets(ns).Create(t.Context(), o, metav1.CreateOptions{})
		case *corev1.Pod:
			_, err = c.CoreV1().Pods(ns).Create(t.Context(), o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// waitPods waits until the pods bound to node satisfy ok (nil: any) and
// returns them.
func waitPods(t *testing.T, c kubernetes.Interface, node string, ok func([]corev1.Pod) bool) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	waitFor(t, "the pods of node "+node, func() bool {
		list, err := c.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false
		}
		pods = list.Items
		return ok == nil || ok(pods)
	})
	return pods
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func running(pods []corev1.Pod, app string) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.Labels["app"] == app && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func uids(pods []corev1.Pod) []types.UID {
	var out []types.UID
	for _, p := range pods {
		out = append(out, p.UID)
	}
	slices.Sort(out)
	return out
}

func names(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }
