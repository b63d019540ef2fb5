package chart

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hcloudscale/hcloudscale/integration/apiserver"
	"github.com/hcloudscale/hcloudscale/nodedrain"
)

// TestRolloutAndDrainWithTheChartsDefaults runs the chart's Deployment and
// PodDisruptionBudget under kube-controller-manager's Deployment,
// ReplicaSet and disruption controllers and kube-scheduler, on simulated
// clusters of one and three schedulable nodes: an upgrade that changes the
// pod template completes on both, and a drain (through the Eviction API,
// as kubectl drain) of a node holding a replica completes on three. On one
// node the drain cannot complete: the evicted replica has nowhere to go,
// and the budget keeps the other; the test shows that it stops there with
// one replica still serving, which is what a real one-node cluster does.
func TestRolloutAndDrainWithTheChartsDefaults(t *testing.T) {
	for _, nodes := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d nodes", nodes), func(t *testing.T) {
			s := apiserver.Start(t, apiserver.WithControllers("deployment", "replicaset", "disruption"), apiserver.WithScheduler())
			admin := s.AdminClient(t)
			var names []string
			for i := range nodes {
				names = append(names, fmt.Sprintf("node-%d", i))
			}
			s.StartKubelet(t, names...)
			dep, pdb := chartWorkload(t)
			ctx := t.Context()
			if _, err := admin.AppsV1().Deployments(releaseNamespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := admin.PolicyV1().PodDisruptionBudgets(releaseNamespace).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitRolledOut(t, admin, dep.Name, 1)

			// helm upgrade that changes the pod template.
			cur, err := admin.AppsV1().Deployments(releaseNamespace).Get(ctx, dep.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cur.Spec.Template.Annotations = map[string]string{"checksum/config": "changed"}
			if _, err := admin.AppsV1().Deployments(releaseNamespace).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitRolledOut(t, admin, dep.Name, 2)

			node := nodeOfAReplica(t, admin)
			if err := nodedrain.Cordon(ctx, admin, node); err != nil {
				t.Fatal(err)
			}
			timeout := 60 * time.Second
			if nodes == 1 {
				timeout = 8 * time.Second
			}
			err = nodedrain.Drain(ctx, admin, node, nodedrain.Options{Timeout: timeout, Backoff: 200 * time.Millisecond, Poll: 200 * time.Millisecond})
			var blocked *nodedrain.BlockedError
			switch {
			case nodes > 1 && err != nil:
				t.Fatalf("drain of %s on %d nodes: %v", node, nodes, err)
			case nodes > 1:
				waitRolledOut(t, admin, dep.Name, 2)
				if n := len(replicasOn(t, admin, node)); n != 0 {
					t.Errorf("%d replicas left on the drained node", n)
				}
			case !errors.As(err, &blocked):
				t.Fatalf("drain of the only node: %v; want it blocked", err)
			default:
				if ready := readyReplicas(t, admin); ready < 1 {
					t.Errorf("%d ready replicas while the only node is drained; the budget must keep one", ready)
				}
				t.Logf("one node: the drain stops as in a real cluster: %v", err)
			}
		})
	}
}

// chartWorkload renders the chart with its defaults and returns its
// Deployment and PodDisruptionBudget.
func chartWorkload(t *testing.T) (*appsv1.Deployment, *policyv1.PodDisruptionBudget) {
	t.Helper()
	objs := mustMinimal(t)
	dep := one[*appsv1.Deployment](t, objs, "Deployment")
	pdb := one[*policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget")
	// No kubelet runs the containers: volumes of Secrets that do not
	// exist and probes do not matter to the controllers.
	dep.ResourceVersion, pdb.ResourceVersion = "", ""
	return dep, pdb
}

// waitRolledOut waits until the Deployment's generation is observed and
// all its replicas are updated and available.
func waitRolledOut(t *testing.T, c kubernetes.Interface, name string, generation int64) {
	t.Helper()
	var last appsv1.DeploymentStatus
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	for {
		d, err := c.AppsV1().Deployments(releaseNamespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = d.Status
			want := *d.Spec.Replicas
			if d.Generation >= generation && d.Status.ObservedGeneration >= d.Generation &&
				d.Status.UpdatedReplicas == want && d.Status.AvailableReplicas == want && d.Status.Replicas == want {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("rollout of %s (generation %d) did not complete: %+v", name, generation, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func chartPods(t *testing.T, c kubernetes.Interface) []corev1.Pod {
	t.Helper()
	list, err := c.CoreV1().Pods(releaseNamespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=hcloudscale"})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func nodeOfAReplica(t *testing.T, c kubernetes.Interface) string {
	t.Helper()
	for _, p := range chartPods(t, c) {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			return p.Spec.NodeName
		}
	}
	t.Fatal("no replica is bound to a node")
	return ""
}

func replicasOn(t *testing.T, c kubernetes.Interface, node string) []string {
	t.Helper()
	var out []string
	for _, p := range chartPods(t, c) {
		if p.Spec.NodeName == node && p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	return out
}

func readyReplicas(t *testing.T, c kubernetes.Interface) int {
	t.Helper()
	n := 0
	for _, p := range chartPods(t, c) {
		if p.DeletionTimestamp == nil && strings.EqualFold(string(p.Status.Phase), string(corev1.PodRunning)) {
			n++
		}
	}
	return n
}
