package nodedrain

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// Blockers lists the pods that would hold a drain of node now, without
// evicting anything: pods marked not to be disrupted, and pods covered by
// a PodDisruptionBudget whose status allows no disruption (a budget the
// disruption controller has not computed yet counts as allowing none, as
// the Eviction API treats it).
func Blockers(ctx context.Context, c kubernetes.Interface, node string) ([]Blocker, error) {
	pods, err := podsOn(ctx, c, node)
	if err != nil {
		return nil, err
	}
	out := markedBlockers(pods)
	marked := make(map[string]bool, len(out))
	for _, b := range out {
		marked[b.Pod] = true
	}
	budgets := map[string][]budget{}
	for i := range pods {
		p := &pods[i]
		if marked[key(p)] || p.DeletionTimestamp != nil {
			continue
		}
		bs, ok := budgets[p.Namespace]
		if !ok {
			if bs, err = budgetsIn(ctx, c, p.Namespace); err != nil {
				return nil, err
			}
			budgets[p.Namespace] = bs
		}
		for _, b := range bs {
			if b.selector.Matches(labels.Set(p.Labels)) && b.allowed <= 0 {
				out = append(out, Blocker{Pod: key(p), Reason: "PodDisruptionBudget " + b.name + " allows no disruption now"})
				break
			}
		}
	}
	return out, nil
}

type budget struct {
	name     string
	selector labels.Selector
	allowed  int32
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
