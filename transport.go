package hcloudscale

import (
	"context"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/hcloudscale/hcloudscale/internal/redact"
)

// newDebugTransport logs API traffic at debug level with the token, user
// data and passwords redacted; it costs nothing when debug is off.
// hcloud-go's own WithDebugWriter is never used: it dumps bodies whole.
func newDebugTransport(next http.RoundTripper, logger *zap.Logger) http.RoundTripper {
	return redact.NewDebugTransport(next, logger)
}

// timeoutTransport bounds one request from the moment it is sent until its
// body has been read, like http.Client.Timeout, but it sits below the
// pacer: the time a request is held back to keep the rate-limit reserve
// (up to a minute) does not count against it, so a paced request is not
// cut short and retried as a network error. The caller's context still
// bounds everything. Each request the pacer sends again after a 429 gets
// its own timeout.
type timeoutTransport struct {
	next    http.RoundTripper
	timeout time.Duration
}

func newTimeoutTransport(next http.RoundTripper, timeout time.Duration) http.RoundTripper {
	if timeout <= 0 {
		return next
	}
	return &timeoutTransport{next: next, timeout: timeout}
}

func (t *timeoutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), t.timeout)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose ends a request's timeout once its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
