package integration

import (
	"context"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// createDuration is how long each create_server action runs: creates are
// in flight when the leader goes away.
const createDuration = 6 * time.Second

// handOverGoal is how soon after SIGTERM the standby must lead while the
// leader has creates in flight.
const handOverGoal = 3 * time.Second

// TestSIGTERMMidScaleUp stops the leader with SIGTERM while ten creates
// of 6 s each are in flight: the standby must lead within 3 s, and the
// pool ends with exactly the ten servers.
func TestSIGTERMMidScaleUp(t *testing.T) {
	c := newCluster(t, clusterOptions{max: 20, createDuration: createDuration})
	a, b := c.startPair(t, "")
	a.increase(t, pool, 10)
	c.waitRequests(t, a.id, "POST /servers", 10, 10*time.Second)

	stopped := time.Now()
	a.signal(t, syscall.SIGTERM)
	led := b.waitLeads(t, 60*time.Second)
	if err := a.waitExit(t, 45*time.Second); exitCode(err) != 0 {
		t.Errorf("%s exited with %v after SIGTERM; want 0", a.id, err)
	}
	acquired, ok := acquiredBy(c.leaseTimeline(t), b.id, stopped)
	if !ok {
		t.Fatalf("%s leads, but the audit log shows no Lease update naming it after SIGTERM", b.id)
	}
	handOver := led.Sub(stopped)
	t.Logf("hand-over: SIGTERM to %s holding the Lease %s, leading %s (goal %s)",
		b.id, acquired.Sub(stopped).Round(time.Millisecond), handOver.Round(time.Millisecond), handOverGoal)
	if handOver > handOverGoal {
		t.Errorf("%s led %s after SIGTERM of %s with 10 creates in flight; want within %s",
			b.id, handOver.Round(time.Millisecond), a.id, handOverGoal)
	}
	if before := c.topUp(t, b, 10); before != 10 {
		t.Logf("%s's target after the hand-over: %d; topped up to 10", b.id, before)
	}
	c.verify(t, 10)
}

// TestSIGKILLMidScaleUp kills the leader while creates are in flight: the
// standby takes over once the Lease expires, resumes the creates the
// killed one sent, and the pool ends with exactly the target.
func TestSIGKILLMidScaleUp(t *testing.T) {
	c := newCluster(t, clusterOptions{max: 20, createDuration: createDuration})
	a, b := c.startPair(t, "")
	a.increase(t, pool, 10)
	c.waitRequests(t, a.id, "POST /servers", 10, 10*time.Second)

	killed := time.Now()
	a.signal(t, syscall.SIGKILL)
	led := b.waitLeads(t, 60*time.Second)
	t.Logf("take-over after SIGKILL: %s leads %s later (lease duration %s)", b.id, led.Sub(killed).Round(time.Millisecond), leaseDuration)
	if before := c.topUp(t, b, 10); before != 10 {
		t.Logf("%s's target after the take-over: %d; topped up to 10", b.id, before)
	}
	c.verify(t, 10)
}

// TestSIGSTOPPastTheLease pauses the leader (SIGSTOP) mid-scale-up, with
// creates still queued, past the lease duration; the standby takes over
// and the autoscaler tops the pool up through it. Then the paused leader
// resumes (SIGCONT) and is asked for one more server at once, as an
// autoscaler still connected to it would: it must send nothing, refuse
// the change, and the pool must end with exactly the target.
func TestSIGSTOPPastTheLease(t *testing.T) {
	c := newCluster(t, clusterOptions{max: 30, createDuration: createDuration})
	a, b := c.startPair(t, "")
	// Slow requests (2 s) and 15 claims for 10 create slots: the leader
	// pauses once 10 creates are on the wire and 5 wait for a slot.
	c.hc.SetLatency(2 * time.Second)
	a.increase(t, pool, 15)
	c.waitInFlight(t, 10, 2*time.Second)
	paused := time.Now()
	a.signal(t, syscall.SIGSTOP)
	c.hc.SetLatency(0)
	led := b.waitLeads(t, 60*time.Second)
	t.Logf("take-over after SIGSTOP: %s leads %s later", b.id, led.Sub(paused).Round(time.Millisecond))
	before := c.topUp(t, b, 15)
	t.Logf("%s's target after the take-over: %d; topped up to 15", b.id, before)
	// Past the lease duration by a margin, as a long GC pause or a frozen
	// VM would be.
	time.Sleep(time.Second)

	a.signal(t, syscall.SIGCONT)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	_, err := a.client.NodeGroupIncreaseSize(ctx, &protos.NodeGroupIncreaseSizeRequest{Id: pool, Delta: 1})
	cancel()
	if err == nil {
		t.Errorf("%s, resumed after losing the Lease, accepted NodeGroupIncreaseSize", a.id)
	}
	// It must notice that it lost the Lease and exit; whatever it sends
	// until then counts.
	code := exitCode(a.waitExit(t, 45*time.Second))
	t.Logf("%s exited with %d after it resumed", a.id, code)
	c.verify(t, 15)
}

// TestRenewalsFailWhileCreatesRetry cuts the leader off from the API
// server (its renewals fail) while its creates are being retried after
// failures: the standby takes over once the Lease expires, and no retry
// of the old leader may reach the Hetzner API after that.
func TestRenewalsFailWhileCreatesRetry(t *testing.T) {
	c := newCluster(t, clusterOptions{max: 20, createDuration: createDuration})
	link := newForwarder(t, c.apiHostPort(t))
	a, b := c.startPair(t, link.addr())

	// Every create request fails with timeout a few times (hcloud-go and
	// the pool retry those with growing pauses), so creates are still
	// being retried seconds later.
	const faults = 40
	for range faults {
		c.hc.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Code: "timeout"})
	}
	a.increase(t, pool, 10)
	c.waitRequests(t, a.id, "POST /servers", 10, 10*time.Second)

	cut := time.Now()
	link.setCut(true)
	led := b.waitLeads(t, 60*time.Second)
	t.Logf("take-over after the cut: %s leads %s later", b.id, led.Sub(cut).Round(time.Millisecond))
	code := exitCode(a.waitExit(t, 60*time.Second))
	t.Logf("%s exited with %d after losing the Lease", a.id, code)
	before := c.topUp(t, b, 10)
	t.Logf("%s's target after the take-over: %d; topped up to 10", b.id, before)
	c.verify(t, 10)
}

// TestSIGTERMWithCreatesOnTheWire stops the leader while its ten create
// requests are still unanswered (each takes 1 s): it may release the
// Lease only once they have their answers, or the new leader's listing
// misses their servers and the top-up makes duplicates. The hand-over
// must still come within 3 s.
func TestSIGTERMWithCreatesOnTheWire(t *testing.T) {
	c := newCluster(t, clusterOptions{max: 20, createDuration: createDuration})
	a, b := c.startPair(t, "")
	c.hc.SetLatency(time.Second)
	a.increase(t, pool, 10)
	// The ten creates are on the wire and none is answered.
	c.waitInFlight(t, 10, time.Second)
	stopped := time.Now()
	a.signal(t, syscall.SIGTERM)
	// Requests on the wire keep their delay; later ones (the new
	// leader's listing among them) have none.
	c.hc.SetLatency(0)
	led := b.waitLeads(t, 60*time.Second)
	if err := a.waitExit(t, 45*time.Second); exitCode(err) != 0 {
		t.Errorf("%s exited with %v after SIGTERM; want 0", a.id, err)
	}
	var answeredBefore int
	for _, r := range c.hc.Requests() {
		if r.Template == "POST /servers" && r.Token == tokenOf(a.id) && r.Time.Before(stopped) {
			answeredBefore++
		}
	}
	handOver := led.Sub(stopped)
	t.Logf("hand-over with creates on the wire (%d of them answered before SIGTERM): %s leads %s after SIGTERM (goal %s)",
		answeredBefore, b.id, handOver.Round(time.Millisecond), handOverGoal)
	if handOver > handOverGoal {
		t.Errorf("%s led %s after SIGTERM; want within %s", b.id, handOver.Round(time.Millisecond), handOverGoal)
	}
	before := c.topUp(t, b, 10)
	t.Logf("%s's target after the hand-over: %d; topped up to 10", b.id, before)
	c.verify(t, 10)
}

// TestOldLeadersCreateAnsweredLate: the leader's create request is on
// the wire and held by the API when its renewals are cut; the API carries
// it out late, a moment after the standby took the Lease. The new leader
// must count that server before it tops the pool up: the pool never
// exceeds its max, and no write of the old leader arrived after its Lease.
func TestOldLeadersCreateAnsweredLate(t *testing.T) {
	c := newCluster(t, clusterOptions{max: 5, createDuration: createDuration})
	link := newForwarder(t, c.apiHostPort(t))
	a, b := c.startPair(t, link.addr())
	hold := c.hc.HoldRequest("POST /servers", 1)
	defer hold.Release()
	a.increase(t, pool, 1)
	select {
	case <-hold.Arrived():
	case <-time.After(10 * time.Second):
		t.Fatal("the leader's create did not arrive")
	}
	cut := time.Now()
	link.setCut(true)
	go func() {
		// The API answers a moment after the standby holds the Lease.
		admin := c.api.AdminClient(t)
		for time.Since(cut) < time.Minute {
			l, err := admin.CoordinationV1().Leases(c.ns).Get(context.Background(), leaseName, metav1.GetOptions{})
			if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == b.id {
				time.Sleep(300 * time.Millisecond)
				hold.Release()
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	led := b.waitLeads(t, 60*time.Second)
	t.Logf("take-over after the cut: %s leads %s later", b.id, led.Sub(cut).Round(time.Millisecond))
	_ = a.waitExit(t, 60*time.Second)
	before := c.topUp(t, b, 5)
	t.Logf("%s's target after the take-over: %d (the old leader's server counted); topped up to 5", b.id, before)
	if before != 1 {
		t.Errorf("%s's target after the take-over = %d; want 1, the old leader's late server", b.id, before)
	}
	c.verify(t, 5)
}
