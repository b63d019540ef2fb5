package fencedleader

import (
	"context"
	"encoding/base64"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// newCluster returns a Cluster of one pool (0-5 servers) on api whose
// fence is lead, with hcloud-go's retries 1ms apart.
func newCluster(t *testing.T, api *hcloudtest.Server, lead *Leader) *hcloudscale.Cluster {
	t.Helper()
	doc := `{"nodeConfigs": {"workers": {"cloudInit": "#cloud-config\n"}}}`
	cfg, err := config.Load(config.MapEnv(map[string]string{
		config.EnvToken:         api.Token(),
		config.EnvEndpoint:      api.URL(),
		config.EnvClusterConfig: base64.StdEncoding.EncodeToString([]byte(doc)),
	}, nil), []string{"0:5:cpx31:fsn1:workers"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := hcloudscale.New(t.Context(), cfg, hcloudscale.WithFence(lead), hcloudscale.WithResumeWhen(lead.Leading),
		hcloudscale.WithPollInterval(5*time.Millisecond),
		hcloudscale.WithClientOptions(hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond), MaxRetries: 3})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// TestGatewayAnswerIsNoAnswer: a create answered by a gateway's 502 may
// still be carried out by the API (hcloud-go sends it again for that
// reason). The leader handed over at once after it must keep the Lease
// for the write grace after that answer; it released it at once.
func TestGatewayAnswerIsNoAnswer(t *testing.T) {
	for _, status := range []int{502, 503, 504} {
		api := hcloudtest.NewServer(hcloudtest.WithDefaultActionDuration(0))
		t.Cleanup(api.Close)
		leases := released()
		kube, _ := leases.client(1)
		cfg := testConfig("a")
		cfg.WriteGrace = time.Second
		lead, err := New(cfg, kube)
		if err != nil {
			t.Fatal(err)
		}
		c := newCluster(t, api, lead)
		if err := lead.Start(t.Context(), lead.ClusterHooks(c)); err != nil {
			t.Fatal(err)
		}
		if !waitFor(5*time.Second, lead.Leading) {
			t.Fatal("a does not lead")
		}
		api.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Status: status})
		if err := c.Pool("workers").IncreaseSize(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		if !waitFor(5*time.Second, func() bool { return api.Count("POST /servers") >= 2 }) {
			t.Fatalf("%d: the create was not sent again", status)
		}
		var answered time.Time
		for _, r := range api.Requests() {
			if r.Template == "POST /servers" && r.Status == status {
				answered = r.Time
			}
		}
		lead.HandOver(10 * time.Second)
		releasedAt := leases.acquired("", answered)
		if held := releasedAt.Sub(answered); held < cfg.WriteGrace {
			t.Errorf("%d: the Lease was released %s after the gateway's answer; want the write grace %s at least", status, held.Round(time.Millisecond), cfg.WriteGrace)
		}
	}
}

// TestRecreatedLeaseIsATakeOver: the Lease is deleted while its holder
// is cut off from the API server and still writes. The standby creates
// it anew; the old holder is unknown to it, so it must wait the lease
// duration and the write grace before it lists and writes. It led at once.
func TestRecreatedLeaseIsATakeOver(t *testing.T) {
	api := released()
	clientA, linkA := api.client(1)
	clientB, _ := api.client(2)
	a := startLeader(t, testConfig("a"), clientA, Hooks{})
	if !waitFor(5*time.Second, a.Leading) {
		t.Fatal("a does not lead")
	}
	var (
		mu     sync.Mutex
		listed time.Time
	)
	b := startLeader(t, testConfig("b"), clientB, Hooks{BeforeLeading: func(context.Context) error {
		mu.Lock()
		listed = time.Now()
		mu.Unlock()
		return nil
	}})
	if !waitFor(5*time.Second, func() bool { return b.Holder() == "a" }) {
		t.Fatal("b does not see a lead")
	}
	linkA.cut.Store(true)
	permit, err := a.AllowWrite()
	if err != nil {
		t.Fatalf("a right after the cut: %v", err)
	}
	permit.Done(true)
	deleted := time.Now()
	api.delete()
	if !waitFor(10*time.Second, b.Leading) {
		t.Fatal("b does not lead")
	}
	created := api.acquired("b", deleted)
	mu.Lock()
	defer mu.Unlock()
	cfg := testConfig("b")
	if waited := listed.Sub(created); waited < cfg.LeaseDuration+cfg.WriteGrace {
		t.Errorf("b listed %s after it created the Lease; want the lease duration and the write grace, %s", waited.Round(time.Millisecond), cfg.LeaseDuration+cfg.WriteGrace)
	}
	if !permit.Deadline.Add(cfg.WriteGrace).Before(listed) {
		t.Errorf("b listed %s before a's last write could no longer be carried out", permit.Deadline.Add(cfg.WriteGrace).Sub(listed).Round(time.Millisecond))
	}
}

// TestSameIdentityRefusesToLead: two replicas started with the same
// identity. Each took the other's renewals for its own and both led; now
// a renewal this process did not make stops it for good, loudly, and the
// two never lead at once.
func TestSameIdentityRefusesToLead(t *testing.T) {
	api := released()
	client1, _ := api.client(1)
	client2, _ := api.client(2)
	first := startLeader(t, testConfig("a"), client1, Hooks{})
	if !waitFor(5*time.Second, first.Leading) {
		t.Fatal("the first does not lead")
	}
	second := startLeader(t, testConfig("a"), client2, Hooks{})
	var both atomic.Int64
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if first.Leading() && second.Leading() {
			both.Add(1)
		}
		time.Sleep(time.Millisecond)
	}
	if n := both.Load(); n > 0 {
		t.Errorf("both replicas led at %d samples", n)
	}
	refused := 0
	for _, l := range []*Leader{first, second} {
		select {
		case <-l.Lost():
			if !errors.Is(l.Err(), ErrSameIdentity) {
				t.Errorf("lost with %v; want ErrSameIdentity", l.Err())
			}
			refused++
		default:
		}
	}
	if refused == 0 {
		t.Error("neither replica noticed the other's renewals")
	}
}

// TestTakeOverWaitsAfterARestartWithTheSameIdentity: a container restart
// keeps the pod's name, so the new process finds the Lease held under its
// own identity by a process it cannot know is gone: it waits the lease
// duration and the write grace, as after a created Lease. Its own later
// renewals are no take-over, and a released Lease needs no wait.
func TestTakeOverWaitsAfterARestartWithTheSameIdentity(t *testing.T) {
	cfg := testConfig("a")
	for _, c := range []struct {
		name   string
		holder string
		want   time.Duration
	}{
		{"held under this identity", "a", cfg.LeaseDuration + cfg.WriteGrace},
		{"held by another replica", "b", cfg.WriteGrace},
		{"released", "", 0},
	} {
		l := newTestLeader(t, cfg)
		lock := l.lockFor(l.client)
		ctx := t.Context()
		rec, _, err := lock.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rec.HolderIdentity = c.holder
		if err := lock.Interface.Update(ctx, *rec); err != nil {
			t.Fatal(err)
		}
		advance := fakeNow(l)
		start := l.now()
		// The second write, a second later, is a renewal: no wait of its own.
		for i := range 2 {
			if _, _, err := lock.Get(ctx); err != nil {
				t.Fatal(err)
			}
			mine := *rec
			mine.HolderIdentity, mine.RenewTime = "a", metav1.Now()
			if err := lock.Update(ctx, mine); err != nil {
				t.Fatal(err)
			}
			l.mu.Lock()
			got := time.Duration(0)
			if !l.lease.oldWritesUntil.IsZero() {
				got = l.lease.oldWritesUntil.Sub(start)
			}
			l.mu.Unlock()
			if got != c.want {
				t.Errorf("%s: after write %d of this process: waits until %s after the first; want %s", c.name, i+1, got, c.want)
			}
			advance(time.Second)
		}
	}
}

// TestReleaseKeepsATakenOverLease: renewals fail, so the leader's term
// lapses and client-go releases the Lease: it reads the Lease (held by
// the leader), and the release waits for a write whose answer was lost.
// Meanwhile another replica takes the Lease over. The release conflicts
// and client-go retries it, asking whether it leads of the record it
// observed before the take-over: it cleared the new holder's hold, and a
// third replica could lead at once beside it.
func TestReleaseKeepsATakenOverLease(t *testing.T) {
	api := released()
	client, link := api.client(1)
	cfg := testConfig("a")
	cfg.WriteGrace = 1500 * time.Millisecond
	a := startLeader(t, cfg, client, Hooks{})
	if !waitFor(5*time.Second, a.Leading) {
		t.Fatal("a does not lead")
	}
	permit, err := a.AllowWrite()
	if err != nil {
		t.Fatal(err)
	}
	link.failRenewals.Store(true)
	if !waitFor(5*time.Second, func() bool { return !a.Leading() }) {
		t.Fatal("a still leads with its renewals failing")
	}
	// The release now waits out the write grace of this write.
	permit.Done(false)
	time.Sleep(cfg.WriteGrace / 2)
	api.takeOver("b")
	taken := time.Now()
	time.Sleep(cfg.WriteGrace + cfg.RetryPeriod*5)
	if h := api.holder(); h != "b" {
		t.Errorf("the Lease taken over by b is held by %q after a's release", h)
	}
	if at := api.acquired("", taken); !at.IsZero() {
		t.Errorf("a released the Lease %s after b took it over", at.Sub(taken).Round(time.Millisecond))
	}
}

// TestFailedRenewalsAreNoSecondProcess: renewals fail for most of the
// renew deadline, then succeed again. Each failed try sends two writes;
// the renew time the Lease still holds, of the last one that succeeded,
// fell out of the few kept, and the replica took its own renewal for
// another process's and stopped leading for good.
func TestFailedRenewalsAreNoSecondProcess(t *testing.T) {
	api := released()
	client, link := api.client(1)
	cfg := testConfig("a")
	a := startLeader(t, cfg, client, Hooks{})
	if !waitFor(5*time.Second, a.Leading) {
		t.Fatal("a does not lead")
	}
	link.failRenewals.Store(true)
	time.Sleep(cfg.RenewDeadline * 3 / 4)
	link.failRenewals.Store(false)
	if !waitFor(cfg.RenewDeadline, func() bool { return api.acquired("a", time.Now().Add(-cfg.RetryPeriod)) != (time.Time{}) }) {
		t.Fatal("a did not renew once its renewals passed again")
	}
	select {
	case <-a.Lost():
		t.Fatalf("a stopped leading: %v", a.Err())
	default:
	}
	if !a.Leading() {
		t.Error("a does not lead after renewing")
	}
}

// TestReleaseWaitsOutThePreviousHoldersWrites: b takes the Lease over
// from a holder that did not release it, so a's last writes may still be
// carried out for the write grace, and b waits that long before it lists.
// b is handed over during that wait. The next replica takes a released
// Lease over without waiting: b released at once, and c listed while a's
// writes could still land.
func TestReleaseWaitsOutThePreviousHoldersWrites(t *testing.T) {
	api := released()
	api.takeOver("a") // a holds the Lease and is gone, its writes on the way
	api.mu.Lock()
	api.lease.Spec.LeaseDurationSeconds = ptr.To(int32(2))
	api.mu.Unlock()
	cfg := Config{Namespace: "ns", Name: "lease", Identity: "b",
		LeaseDuration: 2 * time.Second, RenewDeadline: 500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond, WriteGrace: time.Second}
	clientB, _ := api.client(1)
	b := startLeader(t, cfg, clientB, Hooks{})
	if !waitFor(10*time.Second, func() bool { return api.holder() == "b" }) {
		t.Fatal("b does not take the Lease over")
	}
	taken := api.acquired("b", time.Time{})
	b.HandOver(10 * time.Second)
	var (
		mu     sync.Mutex
		listed time.Time
	)
	cfg.Identity = "c"
	clientC, _ := api.client(2)
	c := startLeader(t, cfg, clientC, Hooks{BeforeLeading: func(context.Context) error {
		mu.Lock()
		listed = time.Now()
		mu.Unlock()
		return nil
	}})
	if !waitFor(10*time.Second, c.Leading) {
		t.Fatal("c does not lead")
	}
	mu.Lock()
	defer mu.Unlock()
	if after := listed.Sub(taken); after < cfg.WriteGrace {
		t.Errorf("c listed %s after b took the Lease over from a; want a's write grace %s at least", after.Round(time.Millisecond), cfg.WriteGrace)
	}
}

// TestStaleAfterListingIsLost: renewals fail while the new holder lists,
// so its last renewal is past the renew deadline when the listing ends,
// and then pass again before client-go gives up (it tries for the renew
// deadline from a retry period after the last success). The holder must
// not lead on that renewal; it held the Lease, renewing, and neither led
// nor reported leadership lost: no replica led until it was restarted.
func TestStaleAfterListingIsLost(t *testing.T) {
	api := released()
	client, link := api.client(1)
	cfg := testConfig("a")
	cfg.RetryPeriod = 600 * time.Millisecond
	var lead atomic.Pointer[Leader]
	stale := make(chan time.Time, 1)
	a := startLeader(t, cfg, client, Hooks{BeforeLeading: func(context.Context) error {
		// The renewal right after the acquisition passes.
		listing := time.Now()
		waitFor(cfg.RetryPeriod, func() bool { return api.acquired("a", listing) != (time.Time{}) })
		link.failRenewals.Store(true)
		waitFor(cfg.LeaseDuration, func() bool {
			a := lead.Load()
			if a == nil {
				return false
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			return !a.freshLocked()
		})
		link.failRenewals.Store(false)
		stale <- time.Now()
		return nil
	}})
	lead.Store(a)
	at := <-stale
	if !waitFor(cfg.RetryPeriod*2, func() bool { return api.acquired("a", at) != (time.Time{}) }) {
		t.Fatal("a did not renew once its renewals passed again")
	}
	time.Sleep(cfg.RetryPeriod)
	select {
	case <-a.Lost():
		if !errors.Is(a.Err(), ErrNotLeader) {
			t.Errorf("lost with %v; want ErrNotLeader", a.Err())
		}
	default:
		if !a.Leading() {
			t.Errorf("a holds the Lease (%q) but neither leads nor reports leadership lost", api.holder())
		}
	}
}
