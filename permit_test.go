package hcloudscale_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// permitFence lets every write through with the permit it is given, and
// records how each ended.
type permitFence struct {
	permit  func() hcloudscale.Permit
	mu      sync.Mutex
	endings []bool // answered, per write
}

func (f *permitFence) AllowWrite() (hcloudscale.Permit, error) {
	p := f.permit()
	p.Done = func(answered bool) {
		f.mu.Lock()
		f.endings = append(f.endings, answered)
		f.mu.Unlock()
	}
	return p, nil
}

func (f *permitFence) ended() []bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]bool(nil), f.endings...)
}

// slowDialer dials like net.Dialer, slowly while slow is set: a dial
// whose SYNs are retransmitted.
type slowDialer struct {
	slow atomic.Int64 // nanoseconds
}

func (d *slowDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if delay := time.Duration(d.slow.Load()); delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

// permitEnv is a Cluster whose writes go through fence, over a transport
// whose dials can be made slow.
func permitEnv(t *testing.T, fence *permitFence, opts ...hcloudscale.Option) (*project, *hcloudscale.Cluster, *slowDialer) {
	t.Helper()
	p := newProject(t, fastActions())
	dialer := &slowDialer{}
	transport := &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: 4}
	c := newCluster(t, p.load(t, healthyClusterConfig(), nil, healthyNodes),
		append([]hcloudscale.Option{hcloudscale.WithFence(fence), hcloudscale.WithTransport(transport)}, opts...)...)
	return p, c, dialer
}

// noRetries keeps hcloud-go from sending a request again: a retry asks
// the fence anew and gets a permit of its own.
func noRetries() hcloudscale.Option {
	return hcloudscale.WithClientOptions(hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond), MaxRetries: 0}))
}

func createServer(c *hcloudscale.Cluster) error {
	_, _, err := c.Client().Server.Create(context.Background(), hcloud.ServerCreateOpts{
		Name: "probe", ServerType: &hcloud.ServerType{Name: "cpx21"}, Image: &hcloud.Image{Name: "ubuntu-24.04"},
		Location: &hcloud.Location{Name: "fsn1"},
	})
	return err
}

// A fence that closes while the write waits for its connection (a slow
// dial) stops it: nothing reaches the API, and the outcome is known.
func TestPermitIsCheckedAtTheConnection(t *testing.T) {
	var closed atomic.Bool
	fence := &permitFence{permit: func() hcloudscale.Permit {
		return hcloudscale.Permit{Check: func() error {
			if closed.Load() {
				return errors.New("lease lost")
			}
			return nil
		}}
	}}
	p, c, dialer := permitEnv(t, fence)
	dialer.slow.Store(int64(300 * time.Millisecond))
	time.AfterFunc(100*time.Millisecond, func() { closed.Store(true) })
	err := createServer(c)
	if !errors.Is(err, hcloudscale.ErrFenced) {
		t.Errorf("create whose fence closed during the dial: %v; want ErrFenced", err)
	}
	if n := p.api.Count("POST /servers"); n != 0 {
		t.Errorf("%d creates reached the API after the fence closed; want 0", n)
	}
	if got := fence.ended(); len(got) != 1 || !got[0] {
		t.Errorf("write endings %v; want one, answered (nothing was written)", got)
	}
}

// A write not written by its permit's deadline is never written.
func TestPermitDeadlineBoundsTheWrite(t *testing.T) {
	fence := &permitFence{permit: func() hcloudscale.Permit {
		return hcloudscale.Permit{Deadline: time.Now().Add(100 * time.Millisecond)}
	}}
	p, c, dialer := permitEnv(t, fence, noRetries())
	dialer.slow.Store(int64(400 * time.Millisecond))
	start := time.Now()
	if err := createServer(c); err == nil {
		t.Error("a create past its permit's deadline succeeded")
	}
	if d := time.Since(start); d > 350*time.Millisecond {
		t.Errorf("the create returned after %v; want at its deadline, 100 ms", d)
	}
	time.Sleep(500 * time.Millisecond) // a late write would have arrived
	if n := p.api.Count("POST /servers"); n != 0 {
		t.Errorf("%d creates reached the API after the permit's deadline; want 0", n)
	}
	if got := fence.ended(); len(got) != 1 || !got[0] {
		t.Errorf("write endings %v; want one, answered (nothing was written)", got)
	}
}

// A write whose answer is lost (written, then the request timed out) ends
// with its outcome unknown: the API may still carry it out, and does.
func TestPermitOfAWriteWithoutAnswer(t *testing.T) {
	fence := &permitFence{permit: func() hcloudscale.Permit { return hcloudscale.Permit{} }}
	p, c, _ := permitEnv(t, fence, hcloudscale.WithRequestTimeout(150*time.Millisecond), noRetries())
	p.api.SetLatency(400 * time.Millisecond)
	if err := createServer(c); err == nil {
		t.Fatal("a create without an answer succeeded")
	}
	got := fence.ended()
	if len(got) == 0 || got[0] {
		t.Fatalf("write endings %v; want the first unknown (not answered)", got)
	}
	p.api.SetLatency(0)
	deadline := time.Now().Add(5 * time.Second)
	for p.api.Count("POST /servers") == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	servers, err := p.api.Servers("")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range servers {
		found = found || s.Name == "probe"
	}
	if !found {
		t.Error("the API did not carry out the write whose answer was lost; the test shows nothing")
	}
}

// A gateway's 502, 503 or 504 leaves the outcome open: the write ends
// unanswered; a 422 is the API's own answer.
func TestPermitOfAWriteAnsweredByAGateway(t *testing.T) {
	for _, c := range []struct {
		status   int
		answered bool
	}{{502, false}, {503, false}, {504, false}, {422, true}} {
		fence := &permitFence{permit: func() hcloudscale.Permit { return hcloudscale.Permit{} }}
		p, cl, _ := permitEnv(t, fence, noRetries())
		p.api.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Status: c.status})
		_ = createServer(cl)
		if got := fence.ended(); len(got) != 1 || got[0] != c.answered {
			t.Errorf("%d: write endings %v; want one, answered %v", c.status, got, c.answered)
		}
	}
}

// Under a fence only an *http.Transport's connections can be checked at
// each write: another RoundTripper is refused.
func TestFenceRefusesTransportsItCannotCheck(t *testing.T) {
	p := newProject(t, fastActions())
	cfg := p.load(t, healthyClusterConfig(), nil, healthyNodes)
	fence := &permitFence{permit: func() hcloudscale.Permit { return hcloudscale.Permit{} }}
	wrapped := roundTripFunc(http.DefaultTransport.RoundTrip)
	_, err := hcloudscale.New(t.Context(), cfg, hcloudscale.WithFence(fence), hcloudscale.WithTransport(wrapped))
	if err == nil || !strings.Contains(err.Error(), "WithTransport: a hcloudscale_test.roundTripFunc under WithFence") {
		t.Errorf("New with a RoundTripper func under a fence: %v; want a refusal naming WithTransport", err)
	}

}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
