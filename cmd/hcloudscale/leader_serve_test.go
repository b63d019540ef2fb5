package main

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// writes returns the requests of the fake that change something.
func writes(api *hcloudtest.Server) []hcloudtest.Request {
	var out []hcloudtest.Request
	for _, r := range api.Requests() {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			out = append(out, r)
		}
	}
	return out
}

// TestLeaderStopsWritingWhenRenewalsFail cuts the leader off from the
// Kubernetes API while its create requests are being retried (the API
// answers them with timeouts, which hcloud-go retries with growing
// backoffs). No request that changes servers may reach the API later
// than the renew deadline after the last renewal the leader sent: a
// standby could take the Lease over lease-duration after it. Without the
// fence the retries went on for seconds after that.
func TestLeaderStopsWritingWhenRenewalsFail(t *testing.T) {
	e := newElectionEnv(t)
	var (
		partitioned atomic.Bool
		mu          sync.Mutex
		lastRenewal time.Time
	)
	e.kube.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if partitioned.Load() {
			return true, nil, errors.New("dial tcp: connect: connection refused")
		}
		if a.GetVerb() == "update" || a.GetVerb() == "create" {
			mu.Lock()
			lastRenewal = time.Now()
			mu.Unlock()
		}
		return false, nil, nil
	})
	for range 40 {
		e.fake.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Code: "timeout"})
	}
	a := e.start(t, "a")
	if !a.waitLog(logLeading, testLeaseDuration) {
		t.Fatalf("replica a does not lead; stderr:\n%s", a.stderr.String())
	}
	if err := a.increase(3); err != nil {
		t.Fatalf("leader NodeGroupIncreaseSize: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); e.fake.Count("POST /servers") < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the creates were not sent")
		}
	}
	partitioned.Store(true)
	mu.Lock()
	cut := lastRenewal
	mu.Unlock()
	if code := a.wait(30 * time.Second); code != exitFailure {
		t.Fatalf("replica a exited with %d; want 1 (lost the Lease); stderr:\n%s", code, a.stderr.String())
	}
	fenceEnd := cut.Add(testRenewDeadline)
	var late []string
	for _, r := range writes(e.fake) {
		if !r.Time.Before(fenceEnd) {
			late = append(late, r.Template+" at +"+r.Time.Sub(cut).Round(time.Millisecond).String())
		}
	}
	if len(late) > 0 {
		t.Errorf("writes after the renew deadline (%s after the last renewal): %v", testRenewDeadline, late)
	}
	if n := e.fake.Count("POST /servers"); n < 3 {
		t.Errorf("%d create requests; want the 3 first attempts at least", n)
	}
	// The failed attempts made no server: nothing is left behind.
	if servers, _ := e.fake.Servers(""); len(servers) != 0 {
		t.Errorf("servers after the exit: %d; want none", len(servers))
	}
}

// TestLeaderHandsOverFast stops the leader (SIGTERM) while ten creates
// wait for their servers to boot. It releases the Lease once every create
// request has its answer, not once every server runs; the standby leads
// at once and resumes the flows. The pool ends with one running server
// per create request and no duplicate.
func TestLeaderHandsOverFast(t *testing.T) {
	e := newElectionEnv(t)
	e.fake.SetActionDuration("create_server", 3*time.Second)
	e.fake.SetActionDuration("start_server", 3*time.Second)
	a := e.start(t, "a")
	if !a.waitLog(logLeading, testLeaseDuration) {
		t.Fatalf("replica a does not lead; stderr:\n%s", a.stderr.String())
	}
	b := e.start(t, "b")
	if !b.waitLog(logStandby, testLeaseDuration) {
		t.Fatalf("replica b does not see a as the leader; stderr:\n%s", b.stderr.String())
	}
	if _, err := a.client.Refresh(a.ctx(), &protos.RefreshRequest{}); err != nil {
		t.Fatalf("leader Refresh: %v", err)
	}
	e.fake.ResetCounts()
	if err := a.increase(5); err != nil {
		t.Fatalf("leader NodeGroupIncreaseSize: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); e.fake.Count("POST /servers") < 5; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the creates were not sent")
		}
	}
	stopped := time.Now()
	a.cancel()
	if !b.waitLog(logLeading, 3*time.Second) {
		t.Fatalf("replica b does not lead within 3s of a's SIGTERM; a:\n%s\nb:\n%s", a.stderr.String(), b.stderr.String())
	}
	took := time.Since(stopped)
	t.Logf("hand-over took %s", took.Round(time.Millisecond))
	if booted := e.fake.Count("GET /servers"); took >= 3*time.Second {
		t.Errorf("hand-over took %s (%d listings); want under the boot time", took, booted)
	}
	if code := a.wait(20 * time.Second); code != exitOK {
		t.Fatalf("replica a exited with %d; stderr:\n%s", code, a.stderr.String())
	}
	b.conn.Connect()
	deadline := time.Now().Add(20 * time.Second)
	for {
		servers, err := e.fake.Servers(config.LabelNodeGroup + "=workers")
		if err != nil {
			t.Fatal(err)
		}
		running := slices.IndexFunc(servers, func(s hcloudtest.ServerInfo) bool { return s.Status != hcloud.ServerStatusRunning }) < 0
		if running && len(servers) == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("servers after the hand-over: %+v; want 5 running", servers)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := e.fake.Count("POST /servers"); n != 5 {
		t.Errorf("%d create requests; want 5 (no duplicate)", n)
	}
	if got := b.targetSize(); got != 5 {
		t.Errorf("new leader's target size = %d; want 5", got)
	}
}

// TestLeaderElectionChecksAccessAtStart: a service account that may not
// update its Lease (a Role naming another Lease, say) makes serve fail at
// start with the Lease, the namespace and the verb, not stay a standby.
func TestLeaderElectionChecksAccessAtStart(t *testing.T) {
	e := newElectionEnv(t)
	allowAccessReviews(e.kube, map[string]bool{"update": true, "create": true}) // answers before the allowing reactor
	args := []string{"--nodes", "0:5:cx23:fsn1:workers", "--listen", "127.0.0.1:0", "--metrics-listen", "",
		"--leader-elect", "--leader-elect-resource-name", "autoscaler-lease"}
	r := runCmd(t, runServe, e.env, args...)
	for _, want := range []string{`may not create Lease \"autoscaler-lease\" in namespace \"kube-system\"`, `may not update Lease \"autoscaler-lease\"`} {
		if r.code != exitFailure || !strings.Contains(r.stderr, want) {
			t.Errorf("serve with a Lease it may not write = %d, stderr:\n%s\nwant %d and %q", r.code, r.stderr, exitFailure, want)
		}
	}
	if strings.Contains(r.stderr, "may not get") {
		t.Errorf("stderr names the allowed verb get:\n%s", r.stderr)
	}
}

// TestKubeconfigForLeaderElection: --kubeconfig, else $KUBECONFIG, is the
// Kubernetes client of the Lease; without either, outside a pod, the
// error says what to set.
func TestKubeconfigForLeaderElection(t *testing.T) {
	dir := t.TempDir()
	write := func(name, server string) string {
		path := filepath.Join(dir, name)
		doc := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + server +
			"\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	flagFile, envFile := write("flag", "https://127.0.0.1:6443"), write("env", "https://127.0.0.1:7443")
	env := config.MapEnv(map[string]string{"KUBECONFIG": envFile}, nil)
	for _, c := range []struct {
		name, flag string
		env        config.Env
		want       string
	}{
		{"flag wins", flagFile, env, "https://127.0.0.1:6443"},
		{"KUBECONFIG", "", env, "https://127.0.0.1:7443"},
	} {
		cfg, err := kubeRESTConfig(c.flag, c.env)
		if err != nil || cfg.Host != c.want {
			t.Errorf("%s: kubeRESTConfig = %v, %v; want host %s", c.name, cfg, err, c.want)
		}
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := kubeRESTConfig("", config.Env{}); err == nil || !strings.Contains(err.Error(), "no --kubeconfig or $KUBECONFIG") {
		t.Errorf("kubeRESTConfig outside a pod without a kubeconfig: %v; want an error naming --kubeconfig and $KUBECONFIG", err)
	}
}

// TestNewLeaderCountsAnOldLeadersLateCreate: the leader's create is on
// the wire when its renewals stop; the API carries it out only after the
// Lease has expired and the standby has taken over. The invariant: the
// new leader counts that server before it accepts a scale-up, so the
// pool never exceeds its max (5).
func TestNewLeaderCountsAnOldLeadersLateCreate(t *testing.T) {
	e := newElectionEnv(t)
	var (
		cutA     atomic.Bool
		mu       sync.Mutex
		bLeadsAt time.Time
	)
	e.kube.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		lease, _ := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		holder := ""
		if lease != nil && lease.Spec.HolderIdentity != nil {
			holder = *lease.Spec.HolderIdentity
		}
		if holder == "a" && cutA.Load() {
			return true, nil, errors.New("dial tcp: i/o timeout")
		}
		if holder == "b" {
			mu.Lock()
			if bLeadsAt.IsZero() {
				bLeadsAt = time.Now()
			}
			mu.Unlock()
		}
		return false, nil, nil
	})
	grace := []string{"--leader-elect-write-grace", "2s"}
	a := e.start(t, "a", grace...)
	if !a.waitLog(logLeading, testLeaseDuration) {
		t.Fatalf("replica a does not lead; stderr:\n%s", a.stderr.String())
	}
	b := e.start(t, "b", grace...)
	if !b.waitLog(logStandby, testLeaseDuration) {
		t.Fatalf("replica b does not see a as the leader; stderr:\n%s", b.stderr.String())
	}
	hold := e.fake.HoldRequest("POST /servers", 1)
	defer hold.Release()
	if err := a.increase(1); err != nil {
		t.Fatalf("leader NodeGroupIncreaseSize: %v", err)
	}
	<-hold.Arrived()
	cutA.Store(true)

	// The API carries the create out a moment after b took the Lease.
	go func() {
		for {
			mu.Lock()
			at := bLeadsAt
			mu.Unlock()
			if !at.IsZero() {
				time.Sleep(300 * time.Millisecond)
				hold.Release()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	if !b.waitLog(logLeading, 3*testLeaseDuration) {
		t.Fatalf("replica b does not lead; stderr:\n%s", b.stderr.String())
	}
	if got := b.targetSize(); got != 1 {
		t.Errorf("new leader's target size = %d; want 1 (the old leader's server)", got)
	}
	// The autoscaler sees room for 5 - target and asks for it.
	_ = b.increase(5 - b.targetSize())
	time.Sleep(time.Second)
	servers, err := e.fake.Servers(config.LabelNodeGroup + "=workers")
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) > 5 {
		t.Errorf("%d servers in a pool of max 5", len(servers))
	}
	if code := a.wait(30 * time.Second); code != exitFailure {
		t.Errorf("replica a exited with %d; want 1 (lost the Lease)", code)
	}
}
