package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Scheduler binds pending pods to nodes, first fit, in the order the pods
// were created. A pod fits a node that is Ready and schedulable, whose
// labels match the pod's nodeSelector, whose NoSchedule and NoExecute
// taints the pod tolerates, and whose allocatable CPU, memory and pod
// count cover the pod's requests plus those of the pods already bound to
// it. A pod that fits nowhere is marked unschedulable (condition
// PodScheduled=False, reason Unschedulable), which is what the autoscaler
// looks for.
//
// It also stands in for the ReplicaSet controller and the pod garbage
// collector: a pod bound to a node that no longer exists goes back to
// pending, as its replacement would.
type Scheduler struct {
	client kubernetes.Interface
}

// NewScheduler returns a scheduler that works through client.
func NewScheduler(client kubernetes.Interface) *Scheduler {
	return &Scheduler{client: client}
}

// Step schedules every pending pod once.
func (s *Scheduler) Step(ctx context.Context) error {
	nodeList, err := s.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	podList, err := s.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	nodes := map[string]*corev1.Node{}
	used := map[string]corev1.ResourceList{}
	for i := range nodeList.Items {
		n := &nodeList.Items[i]
		nodes[n.Name] = n
		used[n.Name] = corev1.ResourceList{}
	}
	var pending []*corev1.Pod
	for i := range podList.Items {
		p := &podList.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if p.Spec.NodeName == "" {
			pending = append(pending, p)
			continue
		}
		if _, ok := nodes[p.Spec.NodeName]; !ok {
			if err := s.requeue(ctx, p); err != nil {
				return err
			}
			continue
		}
		add(used[p.Spec.NodeName], requests(p))
	}
	slices.SortFunc(pending, func(a, b *corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	names := make([]string, 0, len(nodes))
	for name := range nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, p := range pending {
		target := ""
		for _, name := range names {
			if fits(p, nodes[name], used[name]) {
				target = name
				break
			}
		}
		if target == "" {
			if err := s.markUnschedulable(ctx, p); err != nil {
				return err
			}
			continue
		}
		if err := s.bind(ctx, p, target); err != nil {
			return err
		}
		add(used[target], requests(p))
	}
	return nil
}

// requeue replaces a pod whose node is gone by a pending copy.
func (s *Scheduler) requeue(ctx context.Context, p *corev1.Pod) error {
	if err := s.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s of a gone node: %w", p.Name, err)
	}
	_, err := s.client.CoreV1().Pods(p.Namespace).Create(ctx, PendingCopy(p), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("recreate pod %s: %w", p.Name, err)
	}
	return nil
}

func (s *Scheduler) bind(ctx context.Context, p *corev1.Pod, node string) error {
	p = p.DeepCopy()
	p.Spec.NodeName = node
	p.Status.Phase = corev1.PodRunning
	setScheduled(p, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()})
	_, err := s.client.CoreV1().Pods(p.Namespace).Update(ctx, p, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // deleted or changed meanwhile: the next step sees it again
	}
	return err
}

func (s *Scheduler) markUnschedulable(ctx context.Context, p *corev1.Pod) error {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return nil
		}
	}
	p = p.DeepCopy()
	setScheduled(p, unschedulable())
	_, err := s.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

func unschedulable() corev1.PodCondition {
	return corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, LastTransitionTime: metav1.Now()}
}

func setScheduled(p *corev1.Pod, c corev1.PodCondition) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			p.Status.Conditions[i] = c
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, c)
}

// fits reports whether p fits node, on which used is already requested.
func fits(p *corev1.Pod, node *corev1.Node, used corev1.ResourceList) bool {
	if node.Spec.Unschedulable || !ready(node) {
		return false
	}
	for k, v := range p.Spec.NodeSelector {
		if node.Labels[k] != v {
			return false
		}
	}
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !slices.ContainsFunc(p.Spec.Tolerations, func(tol corev1.Toleration) bool { return tolerates(tol, t) }) {
			return false
		}
	}
	req := requests(p)
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		have := node.Status.Allocatable[name]
		need := used[name].DeepCopy()
		need.Add(req[name])
		if need.Cmp(have) > 0 {
			return false
		}
	}
	pods := used[corev1.ResourcePods]
	maxPods := node.Status.Allocatable[corev1.ResourcePods]
	return pods.Value()+1 <= maxPods.Value()
}

// tolerates reports whether tol tolerates taint: same effect (or any),
// and same key and value (Equal) or same key, or any key (Exists).
func tolerates(tol corev1.Toleration, taint corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != taint.Effect {
		return false
	}
	if tol.Operator == corev1.TolerationOpExists {
		return tol.Key == "" || tol.Key == taint.Key
	}
	return tol.Key == taint.Key && tol.Value == taint.Value
}

func ready(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// requests sums the requests of p's containers, counting the pod itself.
func requests(p *corev1.Pod) corev1.ResourceList {
	out := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)}
	for _, c := range p.Spec.Containers {
		add(out, c.Resources.Requests)
	}
	return out
}

func add(to, r corev1.ResourceList) {
	for k, v := range r {
		q := to[k].DeepCopy()
		q.Add(v)
		to[k] = q
	}
}

// Pod returns a pending, unschedulable pod of the default namespace that
// requests cpu and memory (quantities such as "1500m", "1Gi").
func Pod(name, cpu, memory string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, CreationTimestamp: metav1.Now(), UID: ktypes.UID("uid-" + name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "app",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(cpu),
				corev1.ResourceMemory: resource.MustParse(memory),
			}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{unschedulable()}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// PendingCopy returns p as a new pending pod of the same name and spec.
func PendingCopy(p *corev1.Pod) *corev1.Pod {
	c := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels,
			CreationTimestamp: metav1.Now(), UID: p.UID + "-r"},
		Spec:   *p.Spec.DeepCopy(),
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{unschedulable()}},
	}
	c.Spec.NodeName = ""
	return c
}

// WithNodeSelector sets a pod's nodeSelector.
func WithNodeSelector(sel map[string]string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.NodeSelector = sel }
}

// WithToleration adds a toleration of every effect of key=value.
func WithToleration(key, value string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpEqual, Value: value})
	}
}
