package main

import (
	"context"
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
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

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

// TestFenceAfterPause checks the fence on the leader's own monotonic
// clock: a replica whose last renewal is older than the renew deadline,
// as after a pause (SIGSTOP, a frozen VM) longer than that, sends no
// write and takes no change until a renewal succeeds, whatever its
// elector still believes.
func TestFenceAfterPause(t *testing.T) {
	f := leaderFlags{enabled: true, namespace: "ns", name: "lease", identity: "a",
		leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: 2 * time.Second}
	reg := prometheus.NewRegistry()
	l, err := newLeadership(f, config.Env{}, reg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Now()
	l.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	gauge := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "hcloudscale_leader" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no hcloudscale_leader gauge")
		return -1
	}
	allowed := func() bool {
		done, err := l.AllowWrite()
		if err != nil {
			return false
		}
		done.Done(true)
		return true
	}
	entered := func() bool {
		leave, err := l.Enter()
		if err != nil {
			return false
		}
		leave()
		return true
	}

	if allowed() || entered() {
		t.Fatal("a replica that never acquired the Lease may write or change")
	}
	l.renewedAt(l.now(), time.Time{})
	if allowed() {
		t.Fatal("writes are let through before the first listing opened the fence")
	}
	l.mu.Lock()
	l.leading, l.writable = true, true
	l.mu.Unlock()
	advance(f.renewDeadline - time.Millisecond)
	if !allowed() || !entered() || gauge() != 1 {
		t.Fatalf("renewed %s ago (deadline %s): allowed %v, entered %v, gauge %v; want all", f.renewDeadline-time.Millisecond, f.renewDeadline, allowed(), entered(), gauge())
	}
	// The process was stopped past the lease duration; its elector has
	// not run since, so it still thinks it leads.
	advance(f.leaseDuration)
	if allowed() || entered() || gauge() != 0 {
		t.Fatalf("after a pause past the lease: allowed %v, entered %v, gauge %v; want none", allowed(), entered(), gauge())
	}
	_, err = l.AllowWrite()
	if !errors.Is(err, errNotLeader) || !strings.Contains(err.Error(), "not within the renew deadline 10s") {
		t.Errorf("AllowWrite after the pause: %v; want errNotLeader naming the renew deadline", err)
	}
	// A renewal that succeeds again (no other replica took over) opens
	// the fence; one sent before the pause does not.
	l.renewedAt(l.now().Add(-f.leaseDuration), time.Time{})
	if allowed() {
		t.Fatal("a renewal sent before the pause reopened the fence")
	}
	l.renewedAt(l.now(), time.Time{})
	if !allowed() || !entered() {
		t.Fatal("a fresh renewal did not reopen the fence")
	}
}

// TestFenceReleaseWaitsForWrites: the Lease is released (an update with
// no holder) only after the fence is closed and every write let through
// has its answer; a write that never gets one keeps the Lease held.
func TestFenceReleaseWaitsForWrites(t *testing.T) {
	f := leaderFlags{enabled: true, namespace: "ns", name: "lease", identity: "a",
		leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: 2 * time.Second}
	l, err := newLeadership(f, config.Env{}, prometheus.NewRegistry(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	l.renewedAt(time.Now(), time.Time{})
	l.mu.Lock()
	l.leading, l.writable = true, true
	l.mu.Unlock()
	done, err := l.AllowWrite()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := l.closeFence(ctx); err == nil || !strings.Contains(err.Error(), "1 requests that change servers still in flight") {
		t.Fatalf("closeFence with a write in flight: %v; want an error after the timeout", err)
	}
	if _, err := l.AllowWrite(); err == nil {
		t.Fatal("a write was let through after closeFence")
	}
	released := make(chan error, 1)
	go func() { released <- l.closeFence(t.Context()) }()
	select {
	case err := <-released:
		t.Fatalf("closeFence returned (%v) while a write has no answer", err)
	case <-time.After(20 * time.Millisecond):
	}
	done.Done(true)
	select {
	case err := <-released:
		if err != nil {
			t.Fatalf("closeFence after the last answer: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("closeFence did not return after the last write was answered")
	}
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

// TestReleaseWaitsOutAWriteWithoutAnswer: a write that ended without an
// answer (a timeout after it was written) may still be carried out by the
// API: the fence stays closed, and the Lease unreleased, for the write
// grace after it ended; a write answered, or never written, holds nothing.
func TestReleaseWaitsOutAWriteWithoutAnswer(t *testing.T) {
	f := leaderFlags{enabled: true, namespace: "ns", name: "lease", identity: "a",
		leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: 2 * time.Second, writeGrace: 300 * time.Millisecond}
	l, err := newLeadership(f, config.Env{}, prometheus.NewRegistry(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	l.renewedAt(time.Now(), time.Now().Round(0))
	l.mu.Lock()
	l.leading, l.writable = true, true
	l.mu.Unlock()
	answered, err := l.AllowWrite()
	if err != nil {
		t.Fatal(err)
	}
	lost, err := l.AllowWrite()
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(lost.Deadline); left < 13*time.Second || left > f.leaseDuration-f.writeMargin() {
		t.Errorf("permit deadline in %s; want the lease duration less a tenth, 13.5s", left)
	}
	answered.Done(true)
	lost.Done(false)
	if err := lost.Check(); err != nil {
		t.Errorf("Check with the fence open: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := l.closeFence(ctx); err == nil {
		t.Fatal("closeFence returned at once although a write without answer may still take effect")
	}
	if err := lost.Check(); err == nil {
		t.Error("Check after closeFence let a write on")
	}
	start := time.Now()
	if err := l.closeFence(t.Context()); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Errorf("closeFence waited %s; want until the write grace after the lost write (300ms)", waited)
	}
}

// TestPermitCheckFollowsTheLease: a permit may be written until the Lease's
// expiry less a tenth of its duration after the last renewal, by the
// leader's clock, and only while the fence is open.
func TestPermitCheckFollowsTheLease(t *testing.T) {
	f := leaderFlags{enabled: true, namespace: "ns", name: "lease", identity: "a",
		leaseDuration: 10 * time.Second, renewDeadline: 5 * time.Second, retryPeriod: time.Second, writeGrace: time.Second}
	l, err := newLeadership(f, config.Env{}, prometheus.NewRegistry(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Now()
	l.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	l.renewedAt(l.now(), time.Time{})
	l.mu.Lock()
	l.leading, l.writable = true, true
	l.mu.Unlock()
	p, err := l.AllowWrite()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Done(true)
	advance(8*time.Second + 999*time.Millisecond)
	if err := p.Check(); err != nil {
		t.Errorf("Check 8.999s after the renewal (lease 10s, margin 1s): %v", err)
	}
	if _, err := l.AllowWrite(); err == nil {
		t.Error("a new write was let through past the renew deadline")
	}
	advance(time.Millisecond)
	if err := p.Check(); err == nil || !strings.Contains(err.Error(), "may expire before the write is carried out") {
		t.Errorf("Check 9s after the renewal: %v; want a refusal", err)
	}
}

// TestTakeOverWaitsAfterARestartWithTheSameIdentity: a container restart
// keeps the pod's name, so the new process finds the Lease held by its
// own identity; the previous process's writes may still be carried out,
// so it takes the Lease over with the write grace, as from another
// replica. Its own later renewals are no take-over.
func TestTakeOverWaitsAfterARestartWithTheSameIdentity(t *testing.T) {
	f := leaderFlags{enabled: true, namespace: "ns", name: "lease", identity: "a",
		leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: 2 * time.Second, writeGrace: time.Second}
	l, err := newLeadership(f, config.Env{}, prometheus.NewRegistry(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	kube := kubefake.NewClientset()
	lock := &fencedLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta: metav1.ObjectMeta{Name: "lease", Namespace: "ns"}, Client: kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "a"},
	}, l: l}
	ctx := t.Context()
	held := resourcelock.LeaderElectionRecord{HolderIdentity: "a", LeaseDurationSeconds: 15,
		AcquireTime: metav1.Now(), RenewTime: metav1.Now()}
	// The previous process of this pod holds it.
	if err := lock.Interface.Create(ctx, held); err != nil {
		t.Fatal(err)
	}
	renew := func() bool {
		t.Helper()
		if _, _, err := lock.Get(ctx); err != nil {
			t.Fatal(err)
		}
		if err := lock.Update(ctx, held); err != nil {
			t.Fatal(err)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		took := l.tookOver
		l.tookOver = false
		return took
	}
	if !renew() {
		t.Error("the first acquisition of a Lease held by this identity before a restart is no take-over; want one")
	}
	if renew() {
		t.Error("a renewal by this process counted as a take-over")
	}
}

// TestLeaderContextEndsWithLeadership: the context the node lifecycle's
// Kubernetes writes run under ends the moment this replica stops leading:
// when its last renewal passes the renew deadline (no step, no call
// needed), and when it is demoted. A fresh renewal gives a new one.
func TestLeaderContextEndsWithLeadership(t *testing.T) {
	f := leaderFlags{enabled: true, namespace: "ns", name: "lease", identity: "a",
		leaseDuration: 300 * time.Millisecond, renewDeadline: 200 * time.Millisecond, retryPeriod: 50 * time.Millisecond}
	l, err := newLeadership(f, config.Env{}, prometheus.NewRegistry(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if l.leaderContext().Err() == nil {
		t.Fatal("a leader context before leading")
	}
	l.renewedAt(time.Now(), time.Time{})
	l.mu.Lock()
	l.leading, l.writable = true, true
	l.mu.Unlock()
	ctx := l.leaderContext()
	if ctx.Err() != nil {
		t.Fatal("the leader context of a leader ended")
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the leader context lived on past the renew deadline")
	}
	l.renewedAt(time.Now(), time.Time{})
	ctx = l.leaderContext()
	if ctx.Err() != nil {
		t.Fatal("no new leader context after a fresh renewal")
	}
	l.demote()
	if ctx.Err() == nil {
		t.Fatal("the leader context lived on after demote")
	}
	if (*leadership)(nil).leaderContext().Err() != nil {
		t.Error("without leader election the context ended")
	}
}
