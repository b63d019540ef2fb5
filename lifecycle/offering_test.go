package lifecycle_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/lifecycle"
	"github.com/hcloudscale/hcloudscale/pool"
)

// The pool of the offering tests: workers, max 2, on cx23 in fsn1, then
// cx33 in nbg1 (node group workers@cx33-nbg1); maxSurge 1, one node at a
// time.
const (
	offeringMax    = 2
	offeringSecond = "workers@cx33-nbg1"
)

var replaceOffering = map[string]any{"drift": []string{"offering"}, "maxSurge": 1, "maxInFlight": 1, "joinTimeout": "2m", "drainTimeout": "1m"}

// offeringEnv is the cluster config of the pool; offeringNodes its
// --nodes entry.
func offeringEnv() config.Env {
	cc := map[string]any{"clusterName": "prod", "imagesForArch": map[string]string{"amd64": "ubuntu-24.04"},
		"nodeConfigs": map[string]any{"workers": map[string]any{"cloudInit": "#cloud-config\n", "replace": replaceOffering,
			"offerings": []map[string]string{{"serverType": "cx23", "location": "fsn1"}, {"serverType": "cx33", "location": "nbg1"}}}}}
	doc, _ := json.Marshal(cc)
	return config.MapEnv(map[string]string{"HCLOUD_CLUSTER_CONFIG": base64.StdEncoding.EncodeToString(doc)}, nil)
}

var offeringNodes = fmt.Sprintf("0:%d:cx23:fsn1:workers", offeringMax)

// newOfferingEnv runs the pool with its max of servers on the second
// offering, the first marked sold out while they were created.
func newOfferingEnv(t *testing.T) *env {
	t.Helper()
	api := hcloudtest.NewServer(hcloudtest.WithDefaultActionDuration(0))
	t.Cleanup(api.Close)
	e := newEnvOf(t, api, load(t, api, offeringEnv(), offeringNodes), offeringSecond, offeringMax)
	e.kube.PrependReactor("create", "pods", e.checkEviction)
	return e
}

func soldOut(serverType, location string) pool.UnavailableError {
	return pool.UnavailableError{ServerType: serverType, Location: location, Code: "resource_unavailable", Message: "sold out"}
}

// checkEviction fails the test when a pod is evicted from a node that
// has no replacement server whose node is Ready and schedulable: the
// invariant that no pod is evicted before its node's replacement is
// Ready. It lets the eviction through to the env's reactor.
func (e *env) checkEviction(a k8stesting.Action) (bool, runtime.Object, error) {
	if a.GetSubresource() != "eviction" {
		return false, nil, nil
	}
	node := strings.TrimPrefix(a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction).Name, "app-on-")
	var oldID int64
	for _, s := range e.all() {
		if s.Name == node {
			oldID = s.ID
		}
	}
	for _, s := range e.all() {
		if s.Labels[config.LabelReplaces] != strconv.FormatInt(oldID, 10) {
			continue
		}
		// The tracker, not the client: the client's lock is held while
		// its reactors run.
		obj, err := e.kube.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", s.Name)
		if n, ok := obj.(*corev1.Node); err == nil && ok && !n.Spec.Unschedulable && n.DeletionTimestamp == nil &&
			slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
				return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
			}) {
			return false, nil, nil
		}
	}
	e.t.Errorf("a pod of %s (server %d) evicted while no replacement of it is Ready", node, oldID)
	return false, nil, nil
}

// offeringsOf returns the running servers by offering ("cx23-fsn1").
func (e *env) offeringsOf() map[string][]string {
	out := map[string][]string{}
	for _, s := range e.running() {
		k := s.ServerType + "-" + s.Location
		out[k] = append(out[k], s.Name)
	}
	return out
}

// TestOfferingMovesNodesBack runs a pool with drift reason offering whose
// nodes run on its second offering while the first is sold out: nothing
// is due; back in stock, the lifecycle replaces them, one at a time and
// surge-first, by nodes on the first offering, never with more than max
// + maxSurge servers across both offerings, and a restart in the middle
// finds the replacement in the other offering's group by its label.
func TestOfferingMovesNodesBack(t *testing.T) {
	e := newOfferingEnv(t)
	ctx := context.Background()
	mark := func(ttl time.Duration) { e.cluster.Offerings().MarkUnavailable(soldOut("cx23", "fsn1"), ttl) }
	mark(time.Hour)
	if p, err := e.ctrl.Step(ctx); err != nil || len(p.Steps) != 0 {
		t.Fatalf("first offering sold out: plan %+v, %v; want nothing due", p, err)
	}
	old := e.offeringsOf()["cx33-nbg1"]
	if len(old) != offeringMax {
		t.Fatalf("servers %v; want %d on cx33-nbg1", e.offeringsOf(), offeringMax)
	}
	mark(0) // back in stock
	p, err := e.ctrl.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != 2 || p.Count(lifecycle.StateStart) != 1 || p.Steps[0].Into != "workers" || p.Steps[0].Pool != offeringSecond ||
		!slices.Equal(p.Steps[0].Reasons, []string{"drift:offering"}) || !strings.Contains(strings.Join(p.Steps[1].Blocked, ";"), "1 of 1 replacements") {
		t.Fatalf("back in stock: plan %+v; want both nodes due for drift:offering, one starting into workers, one held by maxInFlight", p.Steps)
	}
	e.run(200, offeringMax, 1, func() bool { return len(e.all()) == offeringMax+1 && e.replacementNode() })
	e.restart(offeringEnv(), offeringNodes)
	e.run(400, offeringMax, 1, func() bool {
		by := e.offeringsOf()
		return len(by["cx23-fsn1"]) == offeringMax && len(e.all()) == offeringMax && !e.protected()
	})
	e.mu.Lock()
	evicted := slices.Clone(e.evicted)
	e.mu.Unlock()
	slices.Sort(evicted)
	want := []string{"app-on-" + old[0], "app-on-" + old[1]}
	slices.Sort(want)
	if !slices.Equal(evicted, want) {
		t.Errorf("evicted %v; want the pods of the old nodes %v, once each", evicted, want)
	}
	if g, f := e.cluster.Pool("workers").TargetSize(), e.cluster.Pool(offeringSecond).TargetSize(); g != offeringMax || f != 0 {
		t.Errorf("target sizes %d and %d; want %d on the first offering, 0 on the second", g, f, offeringMax)
	}
	if p, err := e.ctrl.Step(ctx); err != nil || len(p.Steps) != 0 {
		t.Errorf("after the move: plan %+v, %v; want nothing due", p, err)
	}
	e.clean()
}

// TestOfferingSoldOutDuringMove sells the first offering out while the
// replacement of a node on the second is created there: the failed
// replacement is deleted, the old nodes stay, uncordoned, with their pods,
// the stop is recorded, and nothing is due while the first is sold out.
func TestOfferingSoldOutDuringMove(t *testing.T) {
	e := newOfferingEnv(t)
	ctx := context.Background()
	old := e.offeringsOf()["cx33-nbg1"]
	e.api.SetUnavailable("cx23", "fsn1", true) // the catalogue still shows it available
	e.run(100, offeringMax, 1, func() bool {
		for _, name := range old {
			if n := e.node(name); n != nil && strings.Contains(n.Annotations[lifecycle.StoppedAnnotation], "failed to be created") {
				return true
			}
		}
		return false
	})
	e.run(50, offeringMax, 1, func() bool {
		ins := e.cluster.Pool("workers").Instances()
		return len(ins) == 0
	})
	if n := e.evictedCount(); n != 0 {
		t.Errorf("%d pods evicted; want none (no replacement became Ready)", n)
	}
	for _, name := range old {
		n := e.node(name)
		if n == nil || n.Spec.Unschedulable || n.Annotations[lifecycle.ReplacementAnnotation] != "" {
			t.Errorf("old node %s: %+v; want it serving, uncordoned and unmarked", name, n)
		}
	}
	if by := e.offeringsOf(); len(by["cx33-nbg1"]) != offeringMax || len(e.all()) != offeringMax {
		t.Errorf("servers %v; want the %d old ones and nothing else (no leak)", by, offeringMax)
	}
	p, err := e.ctrl.Plan(ctx)
	if err != nil || len(p.Steps) != 0 {
		t.Errorf("first offering sold out after the failure: plan %+v, %v; want nothing due", p, err)
	}
}

// replacementNode reports whether a replacement has a node.
func (e *env) replacementNode() bool {
	for _, s := range e.all() {
		if s.Labels[config.LabelReplaces] != "" && e.node(s.Name) != nil {
			return true
		}
	}
	return false
}

// TestOfferingRemovedMovesBack takes the second offering out of the
// pool's list while its nodes run there, with the cluster's removedPools
// set: the pool is still configured, so its nodes are not drained out as
// a removed pool's (no replacement, pods evicted at once) but moved back,
// surge-first, to the first offering for drift reason offering.
func TestOfferingRemovedMovesBack(t *testing.T) {
	e := newOfferingEnv(t)
	ctx := context.Background()
	old := e.offeringsOf()["cx33-nbg1"]
	cc := map[string]any{"clusterName": "prod", "imagesForArch": map[string]string{"amd64": "ubuntu-24.04"}, "replace": map[string]any{"removedPools": true},
		"nodeConfigs": map[string]any{"workers": map[string]any{"cloudInit": "#cloud-config\n", "replace": replaceOffering,
			"offerings": []map[string]string{{"serverType": "cx23", "location": "fsn1"}}}}}
	doc, _ := json.Marshal(cc)
	env2 := config.MapEnv(map[string]string{"HCLOUD_CLUSTER_CONFIG": base64.StdEncoding.EncodeToString(doc)}, nil)
	if err := e.cluster.Reconfigure(ctx, load(t, e.api, env2, offeringNodes)); err != nil {
		t.Fatal(err)
	}
	p, err := e.ctrl.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != len(old) || p.Steps[0].Into != "workers" || !slices.Equal(p.Steps[0].Reasons, []string{"drift:offering"}) {
		t.Fatalf("second offering removed: plan %+v; want its nodes due for drift:offering into workers", p.Steps)
	}
	e.run(400, offeringMax, 1, func() bool {
		return len(e.offeringsOf()["cx23-fsn1"]) == offeringMax && len(e.all()) == offeringMax && !e.protected()
	})
}
