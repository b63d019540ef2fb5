package lifecycle_test

import (
	"fmt"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hcloudscale/hcloudscale/config"
)

// The simulated workloads: ReplicaSets whose pods the drain moves, one
// under a PodDisruptionBudget; a DaemonSet pod per node; and single pods
// without a controller, which nothing recreates.
var simApps = []struct {
	name     string
	replicas int
}{{"web", 4}, {"api", 3}}

// joinDelay is how long a running server takes to register its node.
const joinDelay = 30 * time.Second

// react plays Kubernetes after each event and each passage of time: the
// kubelets, the node lifecycle and pod garbage collectors, the
// ReplicaSets, the scheduler and the disruption controller.
func (s *sim) react() {
	s.kubelet()
	s.replicaSets()
	s.schedule()
	s.disruption()
}

// kubelet registers a Ready node with a DaemonSet pod for each running
// server once joinDelay passed (unless it never joins), keeps each node's
// Ready condition as its server and kubelet are, and removes the nodes of
// servers that are gone, with their pods.
func (s *sim) kubelet() {
	now := time.Now()
	live := map[string]bool{}
	for _, sv := range s.servers() {
		live[sv.Name] = true
		n := s.node(sv.Name)
		if n == nil {
			if _, seen := s.neverJoin[sv.Name]; !seen {
				s.neverJoin[sv.Name] = s.joinNext > 0
				s.joinNext = max(s.joinNext-1, 0)
			}
			if sv.Status == hcloud.ServerStatusRunning && !s.neverJoin[sv.Name] && now.Sub(sv.Created) >= joinDelay {
				s.register(sv.ID, sv.Name)
			}
			continue
		}
		want := sv.Status == hcloud.ServerStatusRunning && !s.kubeletDown[sv.Name]
		if nodeReady(n) != want {
			s.setReady(n, want)
		}
	}
	for _, n := range s.nodes() {
		if !live[n.Name] {
			s.must(s.kube.Tracker().Delete(nodesGVR, "", n.Name))
			for _, p := range s.pods() {
				if p.Spec.NodeName == n.Name {
					s.must(s.kube.Tracker().Delete(podsGVR, p.Namespace, p.Name))
				}
			}
		}
	}
}

func (s *sim) must(err error) {
	if err != nil {
		s.t.Fatal(err)
	}
}

func (s *sim) register(id int64, name string) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("hcloud://%d", id)}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	s.must(s.kube.Tracker().Add(n))
	ds := s.pod("ds-"+name, name)
	ds.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", Controller: ptr(true)}}
	s.must(s.kube.Tracker().Add(ds))
	s.trace("kubelet: node %s registered", name)
}

func ptr[T any](v T) *T { return &v }

func (s *sim) setReady(n *corev1.Node, ready bool) {
	n = n.DeepCopy()
	st := corev1.ConditionTrue
	if !ready {
		st = corev1.ConditionUnknown
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st, LastTransitionTime: metav1.Now()}}
	s.must(s.kube.Tracker().Update(nodesGVR, n, ""))
	s.trace("node %s Ready=%v", n.Name, ready)
}

// pod returns a new running pod, bound to node unless it is empty.
func (s *sim) pod(name, node string) *corev1.Pod {
	s.uid++
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(fmt.Sprint(s.uid))},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// replicaSets creates the pods each app lacks, unscheduled.
func (s *sim) replicaSets() {
	have := map[string]int{}
	for _, p := range s.pods() {
		if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "ReplicaSet" {
			have[ref.Name]++
		}
	}
	for _, a := range simApps {
		for range a.replicas - have[a.name] {
			p := s.pod(fmt.Sprintf("%s-%d", a.name, s.uid+1), "")
			p.Labels = map[string]string{"app": a.name}
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: a.name, Controller: ptr(true)}}
			s.must(s.kube.Tracker().Add(p))
		}
	}
}

// schedule binds each pending pod to the Ready, schedulable node with the
// fewest pods (by name on a tie).
func (s *sim) schedule() {
	load := map[string]int{}
	var fit []string
	for _, n := range s.nodes() {
		if nodeReady(n) && !n.Spec.Unschedulable {
			fit = append(fit, n.Name)
			load[n.Name] = 0
		}
	}
	pods := s.pods()
	for _, p := range pods {
		if _, ok := load[p.Spec.NodeName]; ok {
			load[p.Spec.NodeName]++
		}
	}
	for _, p := range pods {
		if p.Spec.NodeName != "" || len(fit) == 0 {
			continue
		}
		best := fit[0]
		for _, n := range fit[1:] {
			if load[n] < load[best] {
				best = n
			}
		}
		p = p.DeepCopy()
		p.Spec.NodeName = best
		load[best]++
		s.must(s.kube.Tracker().Update(podsGVR, p, p.Namespace))
	}
}

// disruption sets each budget's status as the disruption controller
// would: the healthy pods (bound to a Ready node) above minAvailable.
func (s *sim) disruption() {
	healthy := map[string]int32{}
	for _, p := range s.pods() {
		if nodeReady(s.node(p.Spec.NodeName)) {
			healthy[p.Labels["app"]]++
		}
	}
	for _, b := range s.budgets() {
		b = b.DeepCopy()
		b.Status.ObservedGeneration = b.Generation
		b.Status.DisruptionsAllowed = max(0, healthy[b.Spec.Selector.MatchLabels["app"]]-b.Spec.MinAvailable.IntVal)
		s.must(s.kube.Tracker().Update(pdbsGVR, b, b.Namespace))
	}
}

func (s *sim) budgets() []*policyv1.PodDisruptionBudget {
	obj, err := s.kube.Tracker().List(pdbsGVR, policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"), "default")
	if err != nil {
		s.t.Fatal(err)
	}
	list := obj.(*policyv1.PodDisruptionBudgetList)
	out := make([]*policyv1.PodDisruptionBudget, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out
}

func (s *sim) addBudget(app string, minAvailable int) {
	b := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: "default", Generation: 1},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromInt32(int32(minAvailable))),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
	s.must(s.kube.Tracker().Add(b))
}

// evict plays the Eviction API, with the budgets as the disruption
// controller last computed them, and checks the eviction invariants at
// the moment the lifecycle asks.
func (s *sim) evict(a k8stesting.Action) (bool, runtime.Object, error) {
	if a.GetSubresource() != "eviction" {
		return false, nil, nil
	}
	ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
	obj, err := s.kube.Tracker().Get(podsGVR, ev.Namespace, ev.Name)
	if err != nil {
		return true, nil, err
	}
	p := obj.(*corev1.Pod)
	for _, b := range s.budgets() {
		if b.Spec.Selector.MatchLabels["app"] == p.Labels["app"] {
			if b.Status.DisruptionsAllowed <= 0 {
				return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 1)
			}
			b = b.DeepCopy()
			b.Status.DisruptionsAllowed--
			s.must(s.kube.Tracker().Update(pdbsGVR, b, b.Namespace))
		}
	}
	s.checkEviction(p)
	s.trace("evicted %s from %s", p.Name, p.Spec.NodeName)
	return true, nil, s.kube.Tracker().Delete(podsGVR, p.Namespace, p.Name)
}

// poolOf returns the pool label of a server.
func poolOf(labels map[string]string) string { return labels[config.LabelNodeGroup] }
