package lifecycle_test

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/lifecycle"
	"github.com/hcloudscale/hcloudscale/nodedrain"
)

// bubbleClock reads the synctest bubble's time. The fake API is made
// outside the bubble (its listener would keep the bubble from ever being
// idle) and reads the time once then; every request is served inside the
// bubble, by the in-memory transport, where time.Now is the bubble's.
type bubbleClock struct{ in atomic.Bool }

// simEpoch is where every bubble's clock starts.
var simEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func (c *bubbleClock) Now() time.Time {
	if !c.in.Load() {
		return simEpoch
	}
	return time.Now()
}

// actorKey marks the requests the simulated autoscaler sends.
type actorKey struct{}

// memTransport serves each request by calling the fake API's handler in
// the caller's goroutine: no sockets, so the bubble sees every goroutine
// block durably and moves its clock only when all of them wait.
type memTransport struct{ s *sim }

func (t memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	if req.Method == http.MethodDelete && strings.Contains(req.URL.Path, "/servers/") && req.Context().Value(actorKey{}) == nil {
		t.s.checkServerDelete(req.URL.Path)
	}
	rec := httptest.NewRecorder()
	t.s.api.ServeHTTP(rec, req)
	return rec.Result(), nil
}

// simConfig is what a reload may change.
type simConfig struct {
	version      int  // the user data's version: a new one is drift
	driftOff     bool // the drift reason turned off in every pool
	paused       bool // the cluster's replacements paused
	batchRemoved bool // the pool batch removed from the configuration
	workersMax   int
	// offerings gives workers a second offering, cx33 in nbg1, and the
	// drift reason offering; secondOut takes that offering out of the
	// list again, swapped puts it first.
	offerings, secondOut, swapped bool
}

func (c simConfig) poolReplace() map[string]any {
	drift := []string{"user_data"}
	if c.offerings {
		drift = append(drift, "offering")
	}
	if c.driftOff {
		drift = []string{}
	}
	return map[string]any{"drift": drift, "maxSurge": 1, "maxInFlight": 1, "joinTimeout": "3m", "drainTimeout": "4m",
		"retryAfter": "2m", "repairAfter": "5m"}
}

// load builds the configuration of c for the fake API.
func (s *sim) load(c simConfig) *config.Config {
	cloudInit := fmt.Sprintf("#cloud-config\n# version %d\n", c.version)
	workers := map[string]any{"cloudInit": cloudInit, "replace": c.poolReplace()}
	first := "cx23:fsn1"
	if c.offerings {
		list := []map[string]string{{"serverType": "cx23", "location": "fsn1"}, {"serverType": "cx33", "location": "nbg1"}}
		switch {
		case c.secondOut:
			list = list[:1]
		case c.swapped:
			list[0], list[1], first = list[1], list[0], "cx33:nbg1"
		}
		workers["offerings"] = list
	}
	pools := map[string]any{"workers": workers}
	nodes := []string{fmt.Sprintf("1:%d:%s:workers", c.workersMax, first)}
	if !c.batchRemoved {
		batch := c.poolReplace()
		batch["evictUnreplicatedPods"] = true // workers keeps the default: such pods hold its nodes
		pools["batch"] = map[string]any{"cloudInit": cloudInit, "replace": batch}
		nodes = append(nodes, "0:3:cx23:fsn1:batch")
	}
	doc, _ := json.Marshal(map[string]any{"clusterName": "sim", "imagesForArch": map[string]string{"amd64": "ubuntu-24.04"},
		"replace": map[string]any{"maxInFlight": simClusterInFlight, "removedPools": true, "paused": c.paused}, "nodeConfigs": pools})
	vars := map[string]string{"HCLOUD_TOKEN": s.api.Token(), "HCLOUD_ENDPOINT": s.api.URL(),
		"HCLOUD_CLUSTER_CONFIG": base64.StdEncoding.EncodeToString(doc)}
	cfg, err := config.Load(config.MapEnv(vars, nil), nodes)
	if err != nil {
		s.t.Fatalf("config.Load: %v", err)
	}
	return cfg
}

// simClusterInFlight is the cluster's replace.maxInFlight; each pool's is 1.
const simClusterInFlight = 2

// replica is one process running the autoscaler's Cluster and the
// lifecycle's Controller; leads is its hold on the Lease.
type replica struct {
	cluster *hcloudscale.Cluster
	ctrl    *lifecycle.Controller
	leads   atomic.Bool
	retire  time.Time // a replica that lost the Lease is closed then
}

func (s *sim) newReplica() *replica {
	ctx := context.Background()
	r := &replica{}
	r.leads.Store(true)
	backoff := hcloud.ConstantBackoff(time.Second)
	c, err := hcloudscale.New(ctx, s.load(s.cfg), hcloudscale.WithTransport(memTransport{s}), hcloudscale.WithListTTL(5*time.Second),
		hcloudscale.WithConcurrency(1, 1), // creates in a pool take IDs in turn
		hcloudscale.WithClientOptions(hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: backoff}),
			hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: backoff, MaxRetries: 3})))
	if err != nil {
		s.t.Fatalf("hcloudscale.New: %v", err)
	}
	r.cluster = c
	r.ctrl, err = lifecycle.New(c, s.kube, lifecycle.WithLeader(r.leads.Load),
		lifecycle.WithDrainOptions(nodedrain.Options{Backoff: 5 * time.Second, Poll: 2 * time.Second}))
	if err != nil {
		s.t.Fatalf("lifecycle.New: %v", err)
	}
	return r
}

func (r *replica) close() {
	r.ctrl.Close()
	_ = r.cluster.Close(context.Background())
}

// servers returns the fake API's servers by ID order.
func (s *sim) servers() []hcloudtest.ServerInfo {
	all, err := s.api.Servers("")
	if err != nil {
		s.t.Fatal(err)
	}
	slices.SortFunc(all, func(a, b hcloudtest.ServerInfo) int { return cmp.Compare(a.ID, b.ID) })
	s.mu.Lock()
	for _, sv := range all {
		s.ids[sv.Name] = sv.ID
	}
	s.mu.Unlock()
	return all
}

func (s *sim) serverNamed(name string) (hcloudtest.ServerInfo, bool) {
	for _, sv := range s.servers() {
		if sv.Name == name {
			return sv, true
		}
	}
	return hcloudtest.ServerInfo{}, false
}

var (
	nodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	podsGVR  = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	pdbsGVR  = schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}
)

// nodes returns the nodes by name, read from the tracker so that a
// reactor may call it.
func (s *sim) nodes() []*corev1.Node {
	obj, err := s.kube.Tracker().List(nodesGVR, corev1.SchemeGroupVersion.WithKind("Node"), "")
	if err != nil {
		s.t.Fatal(err)
	}
	list := obj.(*corev1.NodeList)
	out := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	// By provider ID: server names are random, IDs count up.
	slices.SortFunc(out, func(a, b *corev1.Node) int {
		return cmp.Or(cmp.Compare(len(a.Spec.ProviderID), len(b.Spec.ProviderID)), strings.Compare(a.Spec.ProviderID, b.Spec.ProviderID))
	})
	return out
}

func (s *sim) node(name string) *corev1.Node {
	obj, err := s.kube.Tracker().Get(nodesGVR, "", name)
	if err != nil {
		return nil
	}
	return obj.(*corev1.Node)
}

// pods returns every pod by name.
func (s *sim) pods() []*corev1.Pod {
	obj, err := s.kube.Tracker().List(podsGVR, corev1.SchemeGroupVersion.WithKind("Pod"), "")
	if err != nil {
		s.t.Fatal(err)
	}
	list := obj.(*corev1.PodList)
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func nodeReady(n *corev1.Node) bool {
	if n == nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func markOf(n *corev1.Node) (lifecycle.Mark, bool) {
	var m lifecycle.Mark
	v, ok := n.Annotations[lifecycle.ReplacementAnnotation]
	if !ok || json.Unmarshal([]byte(v), &m) != nil {
		return m, false
	}
	return m, true
}

// movable reports whether a drain must move p (not a DaemonSet's).
func movable(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	return ref == nil || ref.Kind != "DaemonSet"
}

// trace records one line of what happened, stamped with the bubble's time.
func (s *sim) trace(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, fmt.Sprintf("%7s %s", time.Since(simEpoch).Round(time.Second), fmt.Sprintf(format, args...)))
}

// violate records a broken invariant; the driver fails the run after the
// event, as reactors and transports run in other goroutines.
func (s *sim) violate(inv, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.trace("VIOLATION %s: %s", inv, msg)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.broken = append(s.broken, violation{inv: inv, msg: msg})
}

type violation struct{ inv, msg string }

// sim is one simulated cluster: the fake Hetzner API, the fake
// Kubernetes API with a kubelet, a scheduler, a deployment and disruption
// controller played by react, the autoscaler and people played by the
// events, and the replicas of hcloudscale.
type sim struct {
	t    testing.TB
	seed uint64
	api  *hcloudtest.Server
	kube *fake.Clientset
	cfg  simConfig
	live *replica   // the replica holding the Lease
	old  []*replica // replicas that lost it and have not noticed yet

	// What the world is doing (driver goroutine only).
	kubeletDown  map[string]bool // nodes whose kubelet stopped posting
	neverJoin    map[string]bool // servers whose node never registers
	joinNext     int             // the next servers created that never join
	personCordon map[string]bool // nodes a person cordoned
	uid          int
	allowance    map[string]int  // the max a pool may still be over (max lowered)
	caDeleted    map[string]bool // instances the autoscaler deleted, by name
	// moves holds the replacements seen on another offering than the
	// server they replace, by name: nodes moved between offerings.
	moves map[string]bool

	mu     sync.Mutex // guards lines, broken and ids (reactors write them)
	lines  []string
	ids    map[string]int64 // server IDs by name, for the trace
	broken []violation
}
