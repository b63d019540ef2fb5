package nodedrain

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// Blockers lists the pods that would hold a drain of node under pol now,
// without evicting anything: pods marked not to be disrupted, pods pol
// does not let a drain evict (see Policy), and pods covered by a
// PodDisruptionBudget whose status allows no disruption (a budget the
// disruption controller has not computed yet counts as allowing none, as
// the Eviction API treats it). Each pod is listed once, with the first
// rule that holds it.
func Blockers(ctx context.Context, c kubernetes.Interface, node string, pol Policy) ([]Blocker, error) {
	pods, err := podsOn(ctx, c, node)
	if err != nil {
		return nil, err
	}
	budgets := &budgetCache{c: c}
	out, err := refused(ctx, pods, pol, budgets, time.Now())
	if err != nil {
		return nil, err
	}
	held := make(map[string]bool, len(out))
	for _, b := range out {
		held[b.Pod] = true
	}
	for i := range pods {
		p := &pods[i]
		if held[key(p)] || p.DeletionTimestamp != nil {
			continue
		}
		bs, err := budgets.in(ctx, p.Namespace)
		if err != nil {
			return nil, err
		}
		for _, b := range bs {
			if b.selector.Matches(labels.Set(p.Labels)) && b.allowed <= 0 {
				out = append(out, Blocker{Pod: key(p), Rule: RuleBudget, Reason: "PodDisruptionBudget " + b.name + " allows no disruption now"})
				break
			}
		}
	}
	return out, nil
}

// refused returns the pods of pods that a drain under pol must not evict,
// with why. A pod already being deleted goes anyway: it is waited for.
func refused(ctx context.Context, pods []corev1.Pod, pol Policy, budgets *budgetCache, now time.Time) ([]Blocker, error) {
	var out []Blocker
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		rule, why, err := budgets.refusal(ctx, pol, p, now)
		if err != nil {
			return nil, err
		}
		if rule != "" {
			out = append(out, Blocker{Pod: key(p), Rule: rule, Reason: why})
		}
	}
	return out, nil
}

type budget struct {
	name     string
	selector labels.Selector
	allowed  int32
}

// budgetCache lists the PodDisruptionBudgets of a namespace once.
type budgetCache struct {
	c    kubernetes.Interface
	byNS map[string][]budget
}

func (bc *budgetCache) in(ctx context.Context, ns string) ([]budget, error) {
	if bs, ok := bc.byNS[ns]; ok {
		return bs, nil
	}
	bs, err := budgetsIn(ctx, bc.c, ns)
	if err != nil {
		return nil, err
	}
	if bc.byNS == nil {
		bc.byNS = map[string][]budget{}
	}
	bc.byNS[ns] = bs
	return bs, nil
}

// refusal is pol.refusal with the budgets of p's namespace listed when
// the rule for kube-system asks for them.
func (bc *budgetCache) refusal(ctx context.Context, pol Policy, p *corev1.Pod, now time.Time) (Rule, string, error) {
	var listErr error
	covered := func() bool {
		bs, err := bc.in(ctx, p.Namespace)
		if err != nil {
			listErr = err
			return true
		}
		for _, b := range bs {
			if b.selector.Matches(labels.Set(p.Labels)) {
				return true
			}
		}
		return false
	}
	rule, why := pol.refusal(p, covered, now)
	return rule, why, listErr
}

func budgetsIn(ctx context.Context, c kubernetes.Interface, ns string) ([]budget, error) {
	list, err := c.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing PodDisruptionBudgets of namespace %s: %w", ns, err)
	}
	out := make([]budget, 0, len(list.Items))
	for _, pdb := range list.Items {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || pdb.Spec.Selector == nil {
			continue // the Eviction API ignores such a budget too
		}
		allowed := pdb.Status.DisruptionsAllowed
		if pdb.Status.ObservedGeneration < pdb.Generation {
			allowed = 0
		}
		out = append(out, budget{name: ns + "/" + pdb.Name, selector: sel, allowed: allowed})
	}
	return out, nil
}
