package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// Lease timings of the tests: short, so that a hand-over takes well under
// a second of wall time, and long enough for a loaded machine.
const (
	testLeaseDuration = 4 * time.Second
	testRenewDeadline = 2 * time.Second
	testRetryPeriod   = 100 * time.Millisecond
)

// replica is one in-process `hcloudscale serve --leader-elect`.
type replica struct {
	t       *testing.T
	id      string
	cancel  context.CancelFunc
	stderr  *syncBuffer
	exited  chan int
	code    int
	conn    *grpc.ClientConn
	client  protos.CloudProviderClient
	metrics string // URL of /metrics
}

// electionEnv is a fake Hetzner project with one pool and a fake
// Kubernetes API for the Lease, shared by every replica.
type electionEnv struct {
	fake *hcloudtest.Server
	kube *kubefake.Clientset
	env  config.Env
}

func newElectionEnv(t *testing.T) *electionEnv {
	t.Helper()
	fake := hcloudtest.NewServer(hcloudtest.WithDefaultActionDuration(50 * time.Millisecond))
	t.Cleanup(fake.Close)
	doc, err := json.Marshal(map[string]any{
		"nodeConfigs": map[string]any{"workers": map[string]any{"cloudInit": "#cloud-config\n"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The Lease as a replica released it: the first to acquire it leads
	// without the wait a created Lease takes.
	kube := kubefake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "hcloudscale", Namespace: "kube-system"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(""), LeaseDurationSeconds: ptr.To(int32(1))},
	})
	allowAccessReviews(kube, nil)
	old := newKubeClient
	newKubeClient = func(string, config.Env) (kubernetes.Interface, error) { return kube, nil }
	t.Cleanup(func() { newKubeClient = old })
	return &electionEnv{fake: fake, kube: kube, env: config.MapEnv(map[string]string{
		config.EnvToken:         fake.Token(),
		config.EnvEndpoint:      fake.URL(),
		config.EnvClusterConfig: base64.StdEncoding.EncodeToString(doc),
		"POD_NAMESPACE":         "kube-system",
	}, nil)}
}

// allowAccessReviews answers the SelfSubjectAccessReviews serve makes at
// start: allowed, except for the verbs in deny.
func allowAccessReviews(kube *kubefake.Clientset, deny map[string]bool) {
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		review := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		review.Status.Allowed = !deny[review.Spec.ResourceAttributes.Verb]
		return true, review, nil
	})
}

// start runs a replica named id until the test ends or stop.
func (e *electionEnv) start(t *testing.T, id string, extra ...string) *replica {
	t.Helper()
	args := append([]string{"--nodes", "0:5:cx23:fsn1:workers", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
		"--shutdown-timeout", "30s", "--leader-elect", "--leader-elect-identity", id,
		"--leader-elect-lease-duration", testLeaseDuration.String(),
		"--leader-elect-renew-deadline", testRenewDeadline.String(),
		"--leader-elect-retry-period", testRetryPeriod.String()}, extra...)
	ctx, cancel := context.WithCancel(t.Context())
	r := &replica{t: t, id: id, cancel: cancel, stderr: &syncBuffer{}, exited: make(chan int, 1), code: -1}
	go func() { r.exited <- runServe(ctx, args, io.Discard, r.stderr, e.env) }()
	t.Cleanup(func() { r.stop(20 * time.Second) })
	serving := waitForLog(t, r.stderr, r.exited, "serving")
	conn, err := grpc.NewClient(serving["listen"].(string), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	r.conn, r.client = conn, protos.NewCloudProviderClient(conn)
	r.metrics = "http://" + serving["metrics_listen"].(string) + "/metrics"
	return r
}

// stop cancels the replica (SIGTERM) and returns its exit code.
func (r *replica) stop(timeout time.Duration) int {
	r.t.Helper()
	r.cancel()
	return r.wait(timeout)
}

// wait returns the replica's exit code once it has exited.
func (r *replica) wait(timeout time.Duration) int {
	r.t.Helper()
	if r.code >= 0 {
		return r.code
	}
	select {
	case r.code = <-r.exited:
	case <-time.After(timeout):
		r.t.Fatalf("replica %s did not exit within %s; stderr:\n%s", r.id, timeout, r.stderr.String())
	}
	return r.code
}

// waitLog waits up to d for a log line of the replica with msg.
func (r *replica) waitLog(msg string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if strings.Contains(r.stderr.String(), `"msg":"`+msg+`"`) {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

func (r *replica) ctx() context.Context {
	ctx, cancel := context.WithTimeout(r.t.Context(), 5*time.Second)
	r.t.Cleanup(cancel)
	return ctx
}

func (r *replica) increase(delta int32) error {
	_, err := r.client.NodeGroupIncreaseSize(r.ctx(), &protos.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: delta})
	return err
}

func (r *replica) targetSize() int32 {
	r.t.Helper()
	res, err := r.client.NodeGroupTargetSize(r.ctx(), &protos.NodeGroupTargetSizeRequest{Id: "workers"})
	if err != nil {
		r.t.Fatalf("%s: NodeGroupTargetSize: %v", r.id, err)
	}
	return res.GetTargetSize()
}

// leaderGauge returns the replica's hcloudscale_leader line.
func (r *replica) leaderGauge() string {
	for line := range strings.SplitSeq(get(r.t, r.metrics), "\n") {
		if strings.HasPrefix(line, "hcloudscale_leader ") {
			return line
		}
	}
	return ""
}

const (
	logLeading = "leading: changes are let in"
	logStandby = "another replica leads"
)

// TestLeaderElectionHandOver runs two replicas on one fake project. The
// invariants: only the Lease holder creates servers; the standby refuses
// Refresh and changes with Unavailable and answers reads; when the
// leader is stopped with a scale-up in flight, the standby leads within
// the lease duration and the pool ends with exactly the servers asked
// for, each created once, all counted by the new leader.
func TestLeaderElectionHandOver(t *testing.T) {
	e := newElectionEnv(t)
	a := e.start(t, "a")
	if !a.waitLog(logLeading, testLeaseDuration) {
		t.Fatalf("replica a does not lead; stderr:\n%s", a.stderr.String())
	}
	b := e.start(t, "b")
	if !b.waitLog(logStandby, testLeaseDuration) {
		t.Fatalf("replica b does not see a as the leader; stderr:\n%s", b.stderr.String())
	}

	// The standby changes nothing and sends the autoscaler away.
	if err := b.increase(2); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "the leader is a") {
		t.Errorf("standby NodeGroupIncreaseSize: %v; want Unavailable naming the leader", err)
	}
	if _, err := b.client.NodeGroupDecreaseTargetSize(b.ctx(), &protos.NodeGroupDecreaseTargetSizeRequest{Id: "workers", Delta: -1}); status.Code(err) != codes.Unavailable {
		t.Errorf("standby NodeGroupDecreaseTargetSize: %v; want Unavailable", err)
	}
	if groups, err := b.client.NodeGroups(b.ctx(), &protos.NodeGroupsRequest{}); err != nil || len(groups.GetNodeGroups()) != 1 {
		t.Errorf("standby NodeGroups = %v, %v; want the workers group", groups.GetNodeGroups(), err)
	}
	if got := b.targetSize(); got != 0 {
		t.Errorf("standby target size = %d; want 0", got)
	}
	if _, err := b.client.Refresh(b.ctx(), &protos.RefreshRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("standby Refresh: %v; want Unavailable", err)
	}
	// ...and closes the connection a Refresh came on, so that the
	// autoscaler's client reconnects (through a Service: to any replica).
	closed := func() bool {
		s := b.conn.GetState()
		return s == connectivity.Idle || s == connectivity.TransientFailure || s == connectivity.Connecting
	}
	for deadline := time.Now().Add(5 * time.Second); !closed() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if !closed() {
		t.Errorf("standby's connection after a refused Refresh is %v; want it closed", b.conn.GetState())
	}
	if n := e.fake.Count("POST /servers"); n != 0 {
		t.Fatalf("%d create requests after the standby's calls; want 0", n)
	}
	if got, want := a.leaderGauge(), "hcloudscale_leader 1"; got != want {
		t.Errorf("leader's gauge: %q; want %q", got, want)
	}
	if got, want := b.leaderGauge(), "hcloudscale_leader 0"; got != want {
		t.Errorf("standby's gauge: %q; want %q", got, want)
	}

	// A scale-up in flight at hand-over.
	if _, err := a.client.Refresh(a.ctx(), &protos.RefreshRequest{}); err != nil {
		t.Fatalf("leader Refresh: %v", err)
	}
	if err := a.increase(3); err != nil {
		t.Fatalf("leader NodeGroupIncreaseSize: %v", err)
	}
	// SIGTERM drops the claims whose create request is not sent yet
	// (TestLeaderHandsOverFast); these three are sent and in flight.
	for deadline := time.Now().Add(10 * time.Second); e.fake.Count("POST /servers") < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the leader's creates were not sent; a:\n%s", a.stderr.String())
		}
	}
	stopped := time.Now()
	a.cancel()
	if !b.waitLog(logLeading, testLeaseDuration) {
		t.Fatalf("replica b does not lead within the lease duration (%s) after a stopped; a:\n%s\nb:\n%s",
			testLeaseDuration, a.stderr.String(), b.stderr.String())
	}
	t.Logf("hand-over took %s", time.Since(stopped).Round(time.Millisecond))
	if code := a.wait(10 * time.Second); code != exitOK {
		t.Fatalf("replica a exited with %d; want 0; stderr:\n%s", code, a.stderr.String())
	}
	// a released the Lease once its create requests were answered, and
	// exited once its flows (or b's resumed ones) saw the servers run:
	// every server exists once and runs, and b's first listing counted
	// them.
	servers, err := e.fake.Servers(config.LabelNodeGroup + "=workers")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range servers {
		if s.Status != hcloud.ServerStatusRunning || names[s.Name] {
			t.Errorf("server %s is %s (or a duplicate name)", s.Name, s.Status)
		}
		names[s.Name] = true
	}
	if len(servers) != 3 || e.fake.Count("POST /servers") != 3 {
		t.Fatalf("after the hand-over: %d servers from %d create requests; want 3 from 3", len(servers), e.fake.Count("POST /servers"))
	}
	if all, _ := e.fake.Servers(""); len(all) != 3 {
		t.Errorf("the project has %d servers; want only the pool's 3", len(all))
	}

	// b reconnects and is the leader now: its listing has a's servers.
	b.conn.Connect()
	if got := b.targetSize(); got != 3 {
		t.Errorf("new leader's target size = %d; want 3", got)
	}
	if err := b.increase(3); status.Code(err) != codes.InvalidArgument {
		t.Errorf("new leader NodeGroupIncreaseSize(3) at 3 of max 5: %v; want InvalidArgument", err)
	}
	if err := b.increase(1); err != nil {
		t.Fatalf("new leader NodeGroupIncreaseSize(1): %v", err)
	}
	// A claim whose create request is not sent yet is dropped at SIGTERM
	// (the next leader would count it nowhere); wait until it is sent.
	for deadline := time.Now().Add(10 * time.Second); e.fake.Count("POST /servers") < 4; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the new leader's create was not sent; b:\n%s", b.stderr.String())
		}
	}
	if code := b.stop(20 * time.Second); code != exitOK {
		t.Fatalf("replica b exited with %d; stderr:\n%s", code, b.stderr.String())
	}
	servers, err = e.fake.Servers(config.LabelNodeGroup + "=workers")
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 4 || e.fake.Count("POST /servers") != 4 {
		t.Errorf("at the end: %d servers from %d create requests; want 4 from 4", len(servers), e.fake.Count("POST /servers"))
	}
	lease, err := e.kube.CoordinationV1().Leases("kube-system").Get(t.Context(), "hcloudscale", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h != "" {
		t.Errorf("Lease holder after both stopped = %q; want released", h)
	}
}

// TestLeaderLosesLease cuts the leader off from the Kubernetes API (as in
// a partition), so that it cannot renew the Lease. It must stop letting
// changes in once the renew deadline has passed, before a standby could
// take over (the lease duration), and exit with an error, so that it
// restarts as a standby.
func TestLeaderLosesLease(t *testing.T) {
	e := newElectionEnv(t)
	var partitioned atomic.Bool
	e.kube.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if partitioned.Load() {
			return true, nil, errors.New("dial tcp: connect: connection refused")
		}
		return false, nil, nil
	})
	a := e.start(t, "a")
	if !a.waitLog(logLeading, testLeaseDuration) {
		t.Fatalf("replica a does not lead; stderr:\n%s", a.stderr.String())
	}
	if err := a.increase(1); err != nil {
		t.Fatalf("leader NodeGroupIncreaseSize: %v", err)
	}
	partitioned.Store(true)
	cut := time.Now()
	if !a.waitLog("stopped leading: changes are refused", testLeaseDuration) {
		t.Fatalf("replica a still leads %s after it lost the API; stderr:\n%s", testLeaseDuration, a.stderr.String())
	}
	if d := time.Since(cut); d >= testLeaseDuration {
		t.Errorf("replica a stopped leading %s after it lost the API; want before the lease duration %s", d, testLeaseDuration)
	}
	code := a.wait(20 * time.Second)
	if code != exitFailure || !strings.Contains(a.stderr.String(), "lost the leader Lease") {
		t.Fatalf("replica a after losing the Lease exited with %d; want 1 naming the lost Lease; stderr:\n%s", code, a.stderr.String())
	}
	// The create sent while it led ran to its end before the exit.
	servers, err := e.fake.Servers(config.LabelNodeGroup + "=workers")
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 1 || servers[0].Status != hcloud.ServerStatusRunning || e.fake.Count("POST /servers") != 1 {
		t.Errorf("servers after the exit: %+v from %d create requests; want one running from 1", servers, e.fake.Count("POST /servers"))
	}
}

func TestLeaderFlagValidation(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"renew deadline not below lease duration", []string{"--leader-elect-lease-duration=10s", "--leader-elect-renew-deadline=10s"},
			"--leader-elect-renew-deadline 10s: must be below --leader-elect-lease-duration 10s"},
		{"retry period too long", []string{"--leader-elect-retry-period=9s"}, "must exceed 1.2 × --leader-elect-retry-period 9s"},
		{"negative duration", []string{"--leader-elect-lease-duration=-1s"}, "--leader-elect-lease-duration -1s: must be positive"},
		{"empty lease name", []string{"--leader-elect-resource-name="}, "--leader-elect-resource-name: must not be empty"},
		{"write grace off", []string{"--leader-elect-write-grace=0s"}, "--leader-elect-write-grace 0s: must be positive"},
		{"fractional lease duration", []string{"--leader-elect-lease-duration=4500ms", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=100ms"},
			"--leader-elect-lease-duration 4.5s: must be whole seconds: the Lease stores 4s"},
		{"sub-second lease duration", []string{"--leader-elect-lease-duration=900ms", "--leader-elect-renew-deadline=500ms", "--leader-elect-retry-period=100ms"},
			"--leader-elect-lease-duration 900ms: must be 2s or more"},
		{"no margin for the last writes", []string{"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"},
			"--leader-elect-renew-deadline 3s: with --leader-elect-retry-period 500ms must fit in the write window 2.6s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runCmd(t, runServe, config.Env{}, append([]string{"--nodes=0:1:cx23:fsn1:workers", "--leader-elect"}, c.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
				t.Errorf("serve %q = %d, stderr %q; want %d and %q", c.args, r.code, r.stderr, exitUsage, c.want)
			}
		})
	}
}
