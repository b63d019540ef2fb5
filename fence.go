package hcloudscale

import (
	"fmt"
	"net/http"

	"github.com/hcloudscale/hcloudscale/pool"
)

// ErrFenced is returned, wrapped, for a request that changes servers which
// the [Fence] refused. Nothing was sent.
var ErrFenced = pool.ErrFenced

// A Fence decides, for each request that changes servers, whether this
// process may send it now. With several replicas of which one leads, the
// leader's fence lets requests through only while it holds the lease.
//
// The Cluster asks the fence at the one place every request passes, just
// before the request goes to the network: below hcloud-go's retries, the
// rate-limit pacer's holds and the request timeout, so that no retry,
// paced request or resumed create flow is sent without asking. Reads
// (GET, HEAD) are not asked about.
type Fence interface {
	// AllowWrite is called before a request that changes servers is sent.
	// It returns an error (reported wrapped in ErrFenced) when the request
	// must not be sent, else a function that the Cluster calls once the
	// request has its answer, or failed; until then the request may still
	// reach the API, so a lease must not be given up while a write is
	// allowed and not done.
	AllowWrite() (done func(), err error)
}

// WithFence makes every request that changes servers ask f first; see
// [Fence]. Without it every request is sent.
func WithFence(f Fence) Option {
	return func(o *options) { o.fence = f }
}

// fenceTransport asks the fence about every request that is not a read.
type fenceTransport struct {
	next  http.RoundTripper
	fence Fence
}

func newFenceTransport(next http.RoundTripper, f Fence) http.RoundTripper {
	if f == nil {
		return next
	}
	return &fenceTransport{next: next, fence: f}
}

func (t *fenceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return t.next.RoundTrip(req)
	}
	done, err := t.fence.AllowWrite()
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		// A plain error: hcloud-go retries only API errors and network
		// timeouts, so a refused request is not tried again.
		return nil, fmt.Errorf("%s %s: %w: %w", req.Method, req.URL.Path, ErrFenced, err)
	}
	// The answer's headers mean the API has the whole request; a request
	// that failed was either not sent or will not be sent again by the
	// transport, which retries no POST.
	defer done()
	return t.next.RoundTrip(req)
}
