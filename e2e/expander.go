package e2e

import (
	"cmp"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"sigs.k8s.io/cluster-autoscaler/pkg/core"
	"sigs.k8s.io/cluster-autoscaler/pkg/expander"
	"sigs.k8s.io/cluster-autoscaler/pkg/expander/priority"
	"sigs.k8s.io/cluster-autoscaler/pkg/expander/random"
	"sigs.k8s.io/cluster-autoscaler/pkg/metrics"
	"sigs.k8s.io/cluster-autoscaler/pkg/simulator/framework"
)

// withPriorities makes the autoscaler choose pools as with
// --expander=priority and the priority expander's ConfigMap holding
// byPriority (pool name patterns by priority, higher first).
//
// The core's expander factory cannot build the priority expander on the
// fake clientset (its ConfigMap lister wants a REST client), so the world
// builds the autoscaler with the default expander and then puts in the
// priority expander's own filter, reading the ConfigMap through the
// informer factory, followed by the random choice the factory ends every
// chain with.
func withPriorities(byPriority map[int][]string) worldOption {
	return func(w *world) { w.priorities = byPriority }
}

// withPriorityData is withPriorities with the ConfigMap's data as
// written, such as the output of hcloudscale priorities.
func withPriorityData(data string) worldOption {
	return func(w *world) { w.priorityData = data }
}

// priorityYAML is the priority expander's ConfigMap data.
func priorityYAML(byPriority map[int][]string) string {
	var prios []int
	for p := range byPriority {
		prios = append(prios, p)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(prios)))
	var b strings.Builder
	for _, p := range prios {
		fmt.Fprintf(&b, "%d:\n", p)
		for _, pattern := range byPriority[p] {
			fmt.Fprintf(&b, "  - %s\n", pattern)
		}
	}
	return b.String()
}

// installPriorityExpander writes the priority ConfigMap (once) and puts the
// priority expander into ca.
func (w *world) installPriorityExpander(ca core.Autoscaler) {
	w.t.Helper()
	sa, ok := ca.(*core.StaticAutoscaler)
	if !ok {
		w.t.Fatalf("the autoscaler is a %T, not a *core.StaticAutoscaler", ca)
	}
	ns := w.options.ConfigNamespace
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: priority.PriorityConfigMapName, Namespace: ns},
		Data:       map[string]string{priority.ConfigMapKey: cmp.Or(w.priorityData, priorityYAML(w.priorities))},
	}
	_, err := w.kube.KubeClient.CoreV1().ConfigMaps(ns).Create(w.ctx, cm, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		w.t.Fatalf("create the priority expander's ConfigMap: %v", err)
	}
	f := w.kube.InformerFactory
	lister := f.Core().V1().ConfigMaps().Lister().ConfigMaps(ns)
	f.Start(w.ctx.Done())
	f.WaitForCacheSync(w.ctx.Done())
	if _, err := lister.Get(priority.PriorityConfigMapName); err != nil {
		w.t.Fatalf("the priority expander's ConfigMap is not in the informer: %v", err)
	}
	sa.ExpanderStrategy = chainStrategy{
		filter:   priority.NewFilter(lister, sa.Recorder),
		fallback: random.NewStrategy(),
	}
}

// chainStrategy is the expander chain --expander=priority builds: the
// priority filter, then a random choice among what it keeps.
type chainStrategy struct {
	filter   expander.Filter
	fallback expander.Strategy
}

func (c chainStrategy) BestOption(options []expander.Option, nodeInfo map[string]*framework.NodeInfo) *expander.Option {
	if kept := c.filter.BestOptions(options, nodeInfo); len(kept) > 0 {
		options = kept
	}
	return c.fallback.BestOption(options, nodeInfo)
}

var registerMetrics sync.Once

// registerAutoscalerMetrics registers the autoscaler's metrics, per node
// group ones included, as its main does with --emit-per-nodegroup-metrics,
// so that a scenario can read the backoff the autoscaler holds.
func registerAutoscalerMetrics() {
	registerMetrics.Do(func() { metrics.RegisterAll(true) })
}

// backoffReasons returns the reasons for which the autoscaler holds pool
// backed off, as of its last loop: the labels of its
// node_group_backoff_status gauge at 1 (the error code of the failure
// that backed it off, "cloudProviderError" and the like for a failed
// IncreaseSize).
func backoffReasons(pool string) ([]string, error) {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return nil, err
	}
	var reasons []string
	for _, f := range families {
		if f.GetName() != "cluster_autoscaler_node_group_backoff_status" {
			continue
		}
		for _, m := range f.GetMetric() {
			group, reason := "", ""
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "node_group":
					group = l.GetValue()
				case "reason":
					reason = l.GetValue()
				}
			}
			if group == pool && m.GetGauge().GetValue() == 1 {
				reasons = append(reasons, reason)
			}
		}
	}
	sort.Strings(reasons)
	return reasons, nil
}
