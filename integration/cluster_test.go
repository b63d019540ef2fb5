package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/integration/apiserver"
)

// pool is the one node pool of every scenario.
const pool = "workers"

// leaseName is the Lease the replicas compete for: the default of
// --leader-elect-resource-name, the one the example Role allows.
const leaseName = "hcloudscale"

// serviceAccount is the example manifests' service account.
const serviceAccount = "hcloudscale"

// cluster is one scenario's world: a namespace of the shared API server
// with the example manifests' RBAC, a fake Hetzner API with a token per
// replica, and the replicas.
type cluster struct {
	api        *apiserver.Server
	ns         string
	hc         *hcloudtest.Server
	kubeconfig string // the service account's
	opts       clusterOptions
	replicas   []*replica
	start      time.Time
}

// defaultClusterConfig is the cluster config of the scenarios that need
// no labels.
const defaultClusterConfig = `{"imagesForArch": {"amd64": "ubuntu-24.04", "arm64": "ubuntu-24.04"},
  "nodeConfigs": {"workers": {"cloudInit": "#cloud-config\n"}}}`

type clusterOptions struct {
	max            int           // the pool's max size
	createDuration time.Duration // of create_server actions
	// clusterConfig is the JSON of HCLOUD_CLUSTER_CONFIG; empty for
	// defaultClusterConfig.
	clusterConfig string
	// labelNodes runs the node labeller (--label-nodes) with the service
	// account's kubeconfig.
	labelNodes bool
}

// newCluster sets up a scenario's world without replicas.
func newCluster(t *testing.T, o clusterOptions) *cluster {
	t.Helper()
	c := &cluster{api: apiserver.Shared(t), ns: namespaceFor(t), opts: o}
	c.start = time.Now()
	c.api.Apply(t, exampleRBAC(t, c.ns))
	c.kubeconfig = c.api.ServiceAccountKubeconfig(t, c.ns, serviceAccount)
	c.hc = hcloudtest.NewServer(
		hcloudtest.WithTokens(tokenOf("replica-a"), tokenOf("replica-b")),
		hcloudtest.WithActionDuration("create_server", o.createDuration),
		hcloudtest.WithRateLimit(0, 0),
	)
	// Registered first, so it runs after the replicas have stopped.
	t.Cleanup(c.hc.Close)
	return c
}

func tokenOf(id string) string { return "token-of-" + id }

// startReplica starts replica id; through, when not empty, is the
// host:port it reaches the API server by instead of the server itself;
// args are added to serve's.
func (c *cluster) startReplica(t *testing.T, id, through string, args ...string) *replica {
	t.Helper()
	kubeconfig := c.kubeconfig
	if through != "" {
		kubeconfig = redirect(t, c.kubeconfig, "https://"+through)
	}
	cc := c.opts.clusterConfig
	if cc == "" {
		cc = defaultClusterConfig
	}
	env := []string{"HCLOUD_CLUSTER_CONFIG=" + base64.StdEncoding.EncodeToString([]byte(cc))}
	var extra []string
	if c.opts.labelNodes {
		extra = append(extra, "--label-nodes", "--kubeconfig="+kubeconfig)
	}
	extra = append(extra, args...)
	r := startReplica(t, replicaConfig{
		id: id, token: tokenOf(id), kubeconfig: kubeconfig, namespace: c.ns, endpoint: c.hc.URL(),
		nodes:     fmt.Sprintf("0:%d:cpx31:fsn1:%s", c.opts.max, pool),
		extraEnv:  env,
		extraArgs: extra,
	})
	c.replicas = append(c.replicas, r)
	return r
}

// startPair starts replica-a, waits until it leads, then starts replica-b
// as its standby. through is replica-a's way to the API server, as in
// startReplica.
func (c *cluster) startPair(t *testing.T, through string) (a, b *replica) {
	t.Helper()
	a = c.startReplica(t, "replica-a", through)
	a.waitLeads(t, 30*time.Second)
	b = c.startReplica(t, "replica-b", "")
	return a, b
}

// redirect writes a copy of the kubeconfig at path with server as the API
// server's address.
func redirect(t *testing.T, path, server string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range cfg.Clusters {
		cl.Server = server
	}
	out := filepath.Join(t.TempDir(), "through.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// apiHostPort is the host:port of the API server.
func (c *cluster) apiHostPort(t *testing.T) string {
	u, err := url.Parse(c.api.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// exampleRBAC returns the service account and the RBAC objects of
// examples/externalgrpc/hcloudscale.yaml moved to namespace ns (created
// with them); the
// cluster-scoped ones get ns as a suffix, so scenarios do not share them.
func exampleRBAC(t *testing.T, ns string) []byte {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "examples", "externalgrpc", "hcloudscale.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out bytes.Buffer
	fmt.Fprintf(&out, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", ns)
	kinds := map[string]bool{}
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		kind, _ := obj["kind"].(string)
		switch kind {
		case "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
		default:
			continue
		}
		kinds[kind] = true
		meta := obj["metadata"].(map[string]any)
		if strings.HasPrefix(kind, "Cluster") {
			meta["name"] = fmt.Sprint(meta["name"]) + "-" + ns
		} else {
			meta["namespace"] = ns
		}
		if kind == "ClusterRoleBinding" {
			ref := obj["roleRef"].(map[string]any)
			ref["name"] = fmt.Sprint(ref["name"]) + "-" + ns
		}
		if subjects, ok := obj["subjects"].([]any); ok {
			for _, s := range subjects {
				s.(map[string]any)["namespace"] = ns
			}
		}
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	for _, k := range []string{"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"} {
		if !kinds[k] {
			t.Fatalf("examples/externalgrpc/hcloudscale.yaml has no %s", k)
		}
	}
	return out.Bytes()
}

// holding is a change of the Lease's holder, as the audit log has it: a
// successful create or update whose answer names the holder.
type holding struct {
	at     time.Time
	holder string // "" once released
}

// leaseTimeline returns the changes of the Lease's holder in time order.
func (c *cluster) leaseTimeline(t *testing.T) []holding {
	t.Helper()
	var out []holding
	for _, e := range c.api.AuditEvents(t) {
		if e.Stage != "ResponseComplete" || e.Resource != "leases" || e.Namespace != c.ns ||
			(e.Verb != "create" && e.Verb != "update") || e.Code/100 != 2 {
			continue
		}
		// A create names its object in the body, not the path.
		var lease struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				HolderIdentity *string `json:"holderIdentity"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(e.ResponseObject, &lease); err != nil {
			t.Fatalf("audit: the Lease in the answer to %s %s: %v", e.Verb, e.RequestURI, err)
		}
		if lease.Metadata.Name != leaseName {
			continue
		}
		h := holding{at: e.Completed}
		if lease.Spec.HolderIdentity != nil {
			h.holder = *lease.Spec.HolderIdentity
		}
		out = append(out, h)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	// Renewals do not change the holder.
	var changes []holding
	for _, h := range out {
		if len(changes) == 0 || changes[len(changes)-1].holder != h.holder {
			changes = append(changes, h)
		}
	}
	return changes
}

// holderAt is the holder of the Lease at time at, "" before the first.
func holderAt(timeline []holding, at time.Time) string {
	holder := ""
	for _, h := range timeline {
		if h.at.After(at) {
			break
		}
		holder = h.holder
	}
	return holder
}

// acquiredBy returns when id first became the holder at or after since.
func acquiredBy(timeline []holding, id string, since time.Time) (time.Time, bool) {
	for _, h := range timeline {
		if h.holder == id && !h.at.Before(since) {
			return h.at, true
		}
	}
	return time.Time{}, false
}

// mutating reports whether a Hetzner request changes anything.
func mutating(r hcloudtest.Request) bool {
	return r.Method == "POST" || r.Method == "PUT" || r.Method == "DELETE"
}

// writesByNonHolder returns, as readable lines, every mutating Hetzner
// request a replica sent (by its arrival) while it did not hold the Lease.
func (c *cluster) writesByNonHolder(t *testing.T) []string {
	t.Helper()
	timeline := c.leaseTimeline(t)
	var out []string
	for _, r := range c.hc.Requests() {
		if !mutating(r) {
			continue
		}
		id, ok := strings.CutPrefix(r.Token, "token-of-")
		if !ok {
			t.Errorf("a request without a replica's token: %s %s", r.Method, r.Path)
			continue
		}
		if h := holderAt(timeline, r.Arrived); h != id {
			out = append(out, fmt.Sprintf("%s %s %s (%d) at %s while the Lease was held by %q",
				id, r.Method, r.Path, r.Status, c.rel(r.Arrived), h))
		}
	}
	return out
}

// rel formats a time relative to the scenario's start.
func (c *cluster) rel(at time.Time) string {
	return "+" + at.Sub(c.start).Round(time.Millisecond).String()
}

// forbidden returns the requests of the service account that the API
// server refused (401 or 403).
func (c *cluster) forbidden(t *testing.T) []string {
	t.Helper()
	user := "system:serviceaccount:" + c.ns + ":" + serviceAccount
	var out []string
	for _, e := range c.api.AuditEvents(t) {
		if e.User == user && (e.Code == 401 || e.Code == 403) {
			out = append(out, fmt.Sprintf("%s %s %s/%s: %d", e.Verb, e.Resource, e.Namespace, e.Name, e.Code))
		}
	}
	return out
}

// poolServers returns the servers of the pool.
func (c *cluster) poolServers(t *testing.T) []hcloudtest.ServerInfo {
	t.Helper()
	servers, err := c.hc.Servers("hcloud/node-group=" + pool)
	if err != nil {
		t.Fatal(err)
	}
	return servers
}

// settle waits until the pool has want running servers and nothing else
// changed for quiet, for at most limit; it returns the servers then (or
// at the limit).
func (c *cluster) settle(t *testing.T, want int, quiet, limit time.Duration) []hcloudtest.ServerInfo {
	t.Helper()
	deadline := time.Now().Add(limit)
	var since time.Time
	var last string
	for {
		servers := c.poolServers(t)
		var states []string
		running := 0
		for _, s := range servers {
			states = append(states, s.Name+"="+string(s.Status))
			if s.Status == hcloud.ServerStatusRunning {
				running++
			}
		}
		slices.Sort(states)
		key := fmt.Sprint(len(c.hc.Requests()), states)
		if key != last {
			last, since = key, time.Now()
		}
		if running == len(servers) && len(servers) >= want && time.Since(since) >= quiet {
			return servers
		}
		if time.Now().After(deadline) {
			t.Logf("not settled after %s: %d servers, %d running; want %d", limit, len(servers), running, want)
			return servers
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// verify checks the end state of a scenario: want servers, every one
// running, distinct names, no write by a replica that did not hold the
// Lease, and no request of the service account refused.
func (c *cluster) verify(t *testing.T, want int) {
	t.Helper()
	servers := c.settle(t, want, 3*time.Second, 60*time.Second)
	names := map[string]int{}
	var notRunning []string
	for _, s := range servers {
		names[s.Name]++
		if s.Status != hcloud.ServerStatusRunning {
			notRunning = append(notRunning, s.Name+" "+string(s.Status))
		}
	}
	if len(servers) != want {
		t.Errorf("pool %s has %d servers; want the target, %d", pool, len(servers), want)
	}
	if len(notRunning) > 0 {
		t.Errorf("servers left half made: %v", notRunning)
	}
	for n, k := range names {
		if k > 1 {
			t.Errorf("server name %s used %d times", n, k)
		}
	}
	// The leader's target, which the autoscaler reads, is the target too.
	for _, r := range c.replicas {
		select {
		case <-r.exited:
			continue
		default:
		}
		if r.leads() {
			if got := r.targetSize(t, pool); got != want {
				t.Errorf("the leader %s's target size is %d; want %d", r.id, got, want)
			}
		}
	}
	creates := map[string]int{}
	for _, r := range c.hc.Requests() {
		if r.Template == "POST /servers" && r.Status == 201 {
			creates[strings.TrimPrefix(r.Token, "token-of-")]++
		}
	}
	t.Logf("servers created: %v; servers now: %d (want %d)", creates, len(servers), want)
	if w := c.writesByNonHolder(t); len(w) > 0 {
		t.Errorf("%d mutating Hetzner requests from a replica that did not hold the Lease:\n%s", len(w), strings.Join(w, "\n"))
	}
	if f := c.forbidden(t); len(f) > 0 {
		t.Errorf("the API server refused the service account %d times: %v", len(f), f)
	}
	var tl []string
	for _, h := range c.leaseTimeline(t) {
		tl = append(tl, fmt.Sprintf("%s %q", c.rel(h.at), h.holder))
	}
	t.Logf("Lease holders: %s", strings.Join(tl, ", "))
}

// waitRequests waits until the fake API has logged n requests of
// template from replica id (by token), for at most limit.
func (c *cluster) waitRequests(t *testing.T, id, template string, n int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		got := 0
		for _, r := range c.hc.Requests() {
			if r.Template == template && r.Token == tokenOf(id) {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s sent %d %s requests in %s; want %d", id, got, template, limit, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitInFlight waits until the fake handles at least n requests at once
// (the fake logs a request only once answered; this sees it arrive).
func (c *cluster) waitInFlight(t *testing.T, n int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for c.hc.ActiveRequests() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests in flight after %s; want %d", c.hc.ActiveRequests(), limit, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// topUp asks r for the servers of the pool missing from want, as the
// autoscaler does after a fail-over: the new leader knows only the
// servers that exist, not the claims the old one had not sent.
func (c *cluster) topUp(t *testing.T, r *replica, want int) int {
	t.Helper()
	got := r.targetSize(t, pool)
	if got < want {
		r.increase(t, pool, want-got)
	}
	return got
}
