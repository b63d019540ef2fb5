package nodedrain

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

const (
	// DoNotDisruptAnnotation set to "true" on a pod keeps Drain from
	// evicting it: a drain of its node is blocked.
	DoNotDisruptAnnotation = "hcloudscale.io/do-not-disrupt"
	// SafeToEvictAnnotation is the Cluster Autoscaler's: "false" keeps
	// the autoscaler from removing the pod's node, and Drain honours it too.
	SafeToEvictAnnotation = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	// mirrorAnnotation marks a static pod's mirror in the API.
	mirrorAnnotation = "kubernetes.io/config.mirror"
)

// Options tune Drain. The zero value is usable: 10 minutes, evictions
// refused by a budget retried after 1 s, doubling up to 30 s.
type Options struct {
	// Timeout bounds the whole drain; 0 means 10 minutes.
	Timeout time.Duration
	// Backoff is the first wait before an eviction the API refused with
	// 429 is tried again; it doubles up to MaxBackoff. 0 means 1 s and 30 s.
	Backoff, MaxBackoff time.Duration
	// Poll is how often Drain looks whether evicted pods are gone, after
	// a first look right after the evictions; 0 means 1 s.
	Poll time.Duration
	// Log receives a line per eviction and per refusal; nil: no log.
	Log *zap.Logger
	// Check, when set, is asked before each eviction: an error ends the
	// drain with it before that eviction is sent (what the drain stands
	// on is gone).
	Check func(ctx context.Context) error
	// Policy says which pods the autoscaler would not remove a node for
	// are evicted all the same; the zero value evicts none of them.
	Policy Policy
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.MaxBackoff < o.Backoff {
		o.MaxBackoff = max(30*time.Second, o.Backoff)
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	return o
}

// A Blocker is a pod that holds a drain, and why.
type Blocker struct {
	Pod    string // namespace/name
	Rule   Rule
	Reason string
}

func (b Blocker) String() string { return b.Pod + ": " + b.Reason }

// BlockedError is Drain's answer when pods are left on the node.
type BlockedError struct {
	Node     string
	Blockers []Blocker
}

func (e *BlockedError) Error() string {
	parts := make([]string, len(e.Blockers))
	for i, b := range e.Blockers {
		parts[i] = b.String()
	}
	return fmt.Sprintf("drain of node %s blocked by %d pod(s): %s", e.Node, len(e.Blockers), strings.Join(parts, "; "))
}

// Cordon marks node unschedulable.
func Cordon(ctx context.Context, c kubernetes.Interface, node string) error {
	return setUnschedulable(ctx, c, node, true)
}

// Uncordon marks node schedulable again.
func Uncordon(ctx context.Context, c kubernetes.Interface, node string) error {
	return setUnschedulable(ctx, c, node, false)
}

func setUnschedulable(ctx context.Context, c kubernetes.Interface, node string, v bool) error {
	patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, v)
	if _, err := c.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("node %s: setting unschedulable=%t: %w", node, v, err)
	}
	return nil
}

// podsOn lists the pods bound to node that a drain must move.
func podsOn(ctx context.Context, c kubernetes.Interface, node string) ([]corev1.Pod, error) {
	list, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("node %s: listing its pods: %w", node, err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.Spec.NodeName == node && mustMove(&p) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return key(&out[i]) < key(&out[j]) })
	return out, nil
}

// mustMove tells whether a drain has to evict p.
func mustMove(p *corev1.Pod) bool {
	if _, ok := p.Annotations[mirrorAnnotation]; ok {
		return false
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "DaemonSet" {
		return false
	}
	return p.Annotations[DaemonSetPodAnnotation] != "true"
}

// doNotDisrupt returns why p must not be evicted, or "".
func doNotDisrupt(p *corev1.Pod) string {
	if p.Annotations[DoNotDisruptAnnotation] == "true" {
		return DoNotDisruptAnnotation + "=true"
	}
	if p.Annotations[SafeToEvictAnnotation] == "false" {
		return SafeToEvictAnnotation + "=false"
	}
	return ""
}

func key(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// Drain evicts the pods of node; see the package documentation. It does
// not cordon: call Cordon first, or the scheduler may place pods on it again.
func Drain(ctx context.Context, c kubernetes.Interface, node string, o Options) error {
	o = o.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	pods, err := podsOn(ctx, c, node)
	if err != nil {
		return err
	}
	d := &drainer{c: c, node: node, o: o, retry: map[string]*retryState{}, budgets: &budgetCache{c: c}}
	held, err := refused(ctx, pods, o.Policy, d.budgets, time.Now())
	if err != nil {
		return err
	}
	if len(held) > 0 {
		return &BlockedError{Node: node, Blockers: held}
	}
	for wait := false; len(pods) > 0; wait = true {
		if wait {
			select {
			case <-ctx.Done():
				return d.stopped(ctx, pods)
			case <-time.After(o.Poll):
			}
			if pods, err = d.listAgain(ctx, pods); err != nil {
				return err
			}
		}
		if err := d.round(ctx, pods); err != nil {
			return err
		}
		// Evictions often end at once: look again before waiting.
		if pods, err = d.listAgain(ctx, pods); err != nil {
			return err
		}
	}
	return nil
}

// listAgain lists the node's pods again. When the drain's time is up
// (ctx done, or the client's rate limiter refusing to wait past its
// deadline, which x/time/rate reports before the deadline passes), it
// answers as stopped with the pods of the last list.
func (d *drainer) listAgain(ctx context.Context, last []corev1.Pod) ([]corev1.Pod, error) {
	pods, err := podsOn(ctx, d.c, d.node)
	switch {
	case err == nil:
		return pods, nil
	case ctx.Err() != nil || strings.Contains(err.Error(), "would exceed context deadline"):
		return nil, d.stopped(ctx, last)
	}
	return nil, err
}

// stopped is Drain's answer once ctx is done with pods left: blocked when
// the timeout passed, else the caller's reason to stop.
func (d *drainer) stopped(ctx context.Context, left []corev1.Pod) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.DeadlineExceeded) {
		return cause
	}
	return &BlockedError{Node: d.node, Blockers: d.blockers(left)}
}

// retryState is one pod's eviction backoff.
type retryState struct {
	uid     types.UID
	next    time.Time
	wait    time.Duration
	refusal string
}

type drainer struct {
	c       kubernetes.Interface
	node    string
	o       Options
	retry   map[string]*retryState
	budgets *budgetCache
}

// round tries to evict each pod of the node that is due for it.
func (d *drainer) round(ctx context.Context, pods []corev1.Pod) error {
	now := time.Now()
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		// Checked again before each eviction: a pod marked, or come,
		// after the drain began is never evicted, and it stays.
		rule, why, err := d.budgets.refusal(ctx, d.o.Policy, p, now)
		if err != nil {
			return err
		}
		if rule != "" {
			d.state(p).refusal = why
			continue
		}
		st := d.state(p)
		if waitsForCompletion(p) {
			st.refusal = "left to complete (" + SafeToEvictAnnotation + "=" + safeToEvictOnCompletion + ")"
			continue
		}
		if now.Before(st.next) {
			continue
		}
		if d.o.Check != nil {
			if err := d.o.Check(ctx); err != nil {
				return fmt.Errorf("node %s: not evicting pod %s: %w", d.node, key(p), err)
			}
		}
		if err := d.evict(ctx, p, st, now); err != nil {
			return err
		}
	}
	return nil
}

func (d *drainer) state(p *corev1.Pod) *retryState {
	st := d.retry[key(p)]
	if st == nil || st.uid != p.UID {
		st = &retryState{uid: p.UID, wait: d.o.Backoff}
		d.retry[key(p)] = st
	}
	return st
}

// evict asks the API to evict p once. A refusal the API may lift (429 from
// a budget, 500 for a pod under several budgets, a conflict) is retried
// with backoff; other errors end the drain.
func (d *drainer) evict(ctx context.Context, p *corev1.Pod, st *retryState, now time.Time) error {
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
	err := d.c.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
	switch {
	case err == nil:
		d.o.Log.Info("evicted pod", zap.String("node", d.node), zap.String("pod", key(p)))
		st.refusal = "terminating"
		st.next = now.Add(d.o.Backoff)
		return nil
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsTooManyRequests(err), apierrors.IsInternalError(err), apierrors.IsConflict(err),
		apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), ctx.Err() != nil:
		st.refusal = "eviction refused: " + err.Error()
		st.next = now.Add(st.wait)
		st.wait = min(2*st.wait, d.o.MaxBackoff)
		d.o.Log.Info("eviction refused; trying again later", zap.String("node", d.node),
			zap.String("pod", key(p)), zap.Duration("retry_in", st.next.Sub(now)), zap.Error(err))
		return nil
	default:
		return fmt.Errorf("node %s: evicting pod %s: %w", d.node, key(p), err)
	}
}

func (d *drainer) blockers(pods []corev1.Pod) []Blocker {
	out := make([]Blocker, 0, len(pods))
	for i := range pods {
		why := "not evicted yet"
		if st := d.retry[key(&pods[i])]; st != nil && st.refusal != "" {
			why = st.refusal
		}
		if pods[i].DeletionTimestamp != nil {
			why = "terminating"
		}
		out = append(out, Blocker{Pod: key(&pods[i]), Rule: RuleLeft, Reason: why})
	}
	return out
}

// PodsToMove names the pods (namespace/name) on node that a drain would
// have to move: none means the node holds nothing but DaemonSet, mirror
// and finished pods, and can go without a drain.
func PodsToMove(ctx context.Context, c kubernetes.Interface, node string) ([]string, error) {
	pods, err := podsOn(ctx, c, node)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(pods))
	for i := range pods {
		out[i] = key(&pods[i])
	}
	return out, nil
}
