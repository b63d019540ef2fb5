package apiserver

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Kubelet stands in for the kubelets of a set of Nodes, just enough for
// the controllers and the scheduler: it registers each Node Ready (4 CPUs,
// 8 GiB, 110 pods) without the not-ready taint that admission puts on a
// new Node, reports the pods bound to its Nodes Running and Ready, and
// removes the pods being deleted from its Nodes at once, as a kubelet does
// once their containers have stopped. It runs no container.
type Kubelet struct {
	c kubernetes.Interface

	mu    sync.Mutex
	nodes map[string]bool
}

// StartKubelet registers nodes and serves them until t ends.
func (s *Server) StartKubelet(t testing.TB, nodes ...string) *Kubelet {
	t.Helper()
	k := &Kubelet{c: s.AdminClient(t), nodes: map[string]bool{}}
	for _, n := range nodes {
		k.AddNode(t, n, nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			k.sync(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return k
}

// AddNode registers a Ready Node with labels.
func (k *Kubelet) AddNode(t testing.TB, name string, labels map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if _, err := k.c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("registering node %s: %v", name, err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	status := corev1.NodeStatus{
		Capacity: capacity, Allocatable: capacity,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}},
	}
	// What watches Nodes (serve's labeller, the lifecycle) may write the
	// Node between these writes: read it again on a conflict, as a
	// kubelet does.
	nodes := k.c.CoreV1().Nodes()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err == nil && len(n.Spec.Taints) > 0 {
			n.Spec.Taints = nil
			_, err = nodes.Update(ctx, n, metav1.UpdateOptions{})
		}
		return err
	}); err != nil {
		t.Fatalf("lifting the taints of node %s: %v", name, err)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			n.Status = status
			_, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
		}
		return err
	}); err != nil {
		t.Fatalf("reporting node %s Ready: %v", name, err)
	}
	k.mu.Lock()
	k.nodes[name] = true
	k.mu.Unlock()
}

func (k *Kubelet) serves(node string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.nodes[node]
}

// sync does one round: pods of its Nodes Running, deleted pods gone.
func (k *Kubelet) sync(ctx context.Context) {
	pods, err := k.c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	zero := int64(0)
	for i := range pods.Items {
		p := &pods.Items[i]
		if !k.serves(p.Spec.NodeName) {
			continue
		}
		switch {
		case p.DeletionTimestamp != nil:
			err = k.c.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		case p.Status.Phase == corev1.PodPending || p.Status.Phase == "":
			now := metav1.Now()
			p.Status.Phase = corev1.PodRunning
			p.Status.StartTime = &now
			p.Status.Conditions = []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			}
			_, err = k.c.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
			// The next round tries again.
			continue
		}
	}
}
