package redact

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"
)

// maxBody is the largest body logged. Larger ones are logged by length:
// a listing of 50 servers is well below it, and redacting needs the whole
// document.
const maxBody = 1 << 20

type debugTransport struct {
	next http.RoundTripper
	log  *zap.Logger
}

// NewDebugTransport returns an [http.RoundTripper] that sends requests
// through next ([http.DefaultTransport] if nil) and logs each request and
// its response at debug level under the logger name "api": method, path
// and query, status, duration, the X-Correlation-Id the API answers with,
// and JSON bodies with secret fields redacted by [JSON]. Headers are never
// logged, so neither is the Authorization header. Bodies that are not
// JSON, do not parse or exceed 1 MiB are logged by length only.
//
// When the logger's core does not enable debug level, requests go straight
// to next: no body is read or copied and nothing is allocated.
func NewDebugTransport(next http.RoundTripper, logger *zap.Logger) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &debugTransport{next: next, log: logger.Named("api")}
}

func (t *debugTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.log.Core().Enabled(zap.DebugLevel) {
		return t.next.RoundTrip(req)
	}
	target := req.URL.RequestURI()
	body, req, err := requestBody(req)
	if err != nil {
		return nil, err
	}
	t.log.Debug("api request", zap.String("method", req.Method), zap.String("url", target), body)

	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	took := time.Since(start)
	if err != nil {
		t.log.Debug("api request failed", zap.String("method", req.Method), zap.String("url", target),
			zap.Duration("duration", took), zap.Error(err))
		return resp, err
	}
	t.log.Debug("api response", zap.String("method", req.Method), zap.String("url", target),
		zap.Int("status", resp.StatusCode), zap.Duration("duration", took),
		zap.String("correlation_id", resp.Header.Get("X-Correlation-Id")), responseBody(resp))
	return resp, nil
}

// requestBody returns the log field for req's body, and the request to
// send: req itself, or a copy whose body replays what was read.
func requestBody(req *http.Request) (zap.Field, *http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return zap.Skip(), req, nil
	}
	if !isJSON(req.Header) {
		return zap.Int64("body_bytes", req.ContentLength), req, nil
	}
	if req.GetBody != nil {
		// A copy leaves the body that is sent untouched; hcloud-go's
		// requests have one.
		rc, err := req.GetBody()
		if err != nil {
			return zap.Int64("body_bytes", req.ContentLength), req, nil
		}
		defer rc.Close()
		head, _ := io.ReadAll(io.LimitReader(rc, maxBody+1))
		return bodyField(head, req.ContentLength), req, nil
	}
	head, err := io.ReadAll(io.LimitReader(req.Body, maxBody+1))
	if err != nil {
		req.Body.Close()
		return zap.Skip(), nil, err
	}
	sent := req.Clone(req.Context())
	sent.Body = replay{Reader: io.MultiReader(bytes.NewReader(head), req.Body), Closer: req.Body}
	return bodyField(head, req.ContentLength), sent, nil
}

// responseBody returns the log field for resp's body and makes resp.Body
// replay what was read.
func responseBody(resp *http.Response) zap.Field {
	if resp.Body == nil || resp.Body == http.NoBody {
		return zap.Skip()
	}
	if !isJSON(resp.Header) {
		return zap.Int64("body_bytes", resp.ContentLength)
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	// The reader that failed is replayed too, so the caller sees the error.
	resp.Body = replay{Reader: io.MultiReader(bytes.NewReader(head), resp.Body), Closer: resp.Body}
	if err != nil {
		return zap.Int("body_bytes", len(head))
	}
	return bodyField(head, resp.ContentLength)
}

// bodyField logs head redacted if it is the whole body and valid JSON, and
// its length otherwise.
func bodyField(head []byte, length int64) zap.Field {
	if len(head) > maxBody {
		return zap.Int64("body_bytes", length)
	}
	if red := JSON(head); red != nil {
		return zap.ByteString("body", red)
	}
	return zap.Int("body_bytes", len(head))
}

func isJSON(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// replay is a body that reads what was already read, then the rest, and
// closes the original.
type replay struct {
	io.Reader
	io.Closer
}
