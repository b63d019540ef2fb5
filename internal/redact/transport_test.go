package redact

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// entry is the part of a log entry the tests compare.
type entry struct {
	Message string
	Fields  map[string]any
}

func entries(logs *observer.ObservedLogs) []entry {
	var out []entry
	for _, e := range logs.All() {
		f := e.ContextMap()
		delete(f, "duration") // varies
		out = append(out, entry{Message: e.Message, Fields: f})
	}
	return out
}

func TestDebugTransport(t *testing.T) {
	tests := []struct {
		name        string
		reqType     string
		reqBody     string // sent with GetBody unless noGetBody
		noGetBody   bool
		respType    string
		respBody    string
		wantReqLog  map[string]any
		wantRespLog map[string]any
	}{
		{
			name:        "JSON both ways, secrets redacted",
			reqType:     "application/json",
			reqBody:     `{"name":"pool1-abc","user_data":"join --token abc.def"}`,
			respType:    "application/json",
			respBody:    `{"server":{"id":1},"root_password":"hunter2"}`,
			wantReqLog:  map[string]any{"body": `{"name":"pool1-abc","user_data":"[redacted]"}`},
			wantRespLog: map[string]any{"body": `{"server":{"id":1},"root_password":"[redacted]"}`},
		},
		{
			name:        "body without GetBody is read and replayed",
			reqType:     "application/json; charset=utf-8",
			reqBody:     `{"token":"t0k3n"}`,
			noGetBody:   true,
			respType:    "application/problem+json",
			respBody:    `{"error":{"code":"invalid_input","message":"bad"}}`,
			wantReqLog:  map[string]any{"body": `{"token":"[redacted]"}`},
			wantRespLog: map[string]any{"body": `{"error":{"code":"invalid_input","message":"bad"}}`},
		},
		{
			name:        "non-JSON bodies by length only",
			reqType:     "text/plain",
			reqBody:     "user_data=secret-cloud-init",
			respType:    "text/html",
			respBody:    "<html>secret-page</html>",
			wantReqLog:  map[string]any{"body_bytes": int64(27)},
			wantRespLog: map[string]any{"body_bytes": int64(24)},
		},
		{
			name:        "JSON that does not parse by length only",
			reqType:     "application/json",
			reqBody:     `{"user_data":"secret-cloud-init"`,
			respType:    "application/json",
			respBody:    `{"root_password":"hunter2"`,
			wantReqLog:  map[string]any{"body_bytes": int64(32)},
			wantRespLog: map[string]any{"body_bytes": int64(26)},
		},
		{
			name:        "no bodies",
			respType:    "application/json",
			wantReqLog:  map[string]any{},
			wantRespLog: map[string]any{"body": `{}`},
			respBody:    `{}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotBody string
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				gotBody = string(b)
				w.Header().Set("Content-Type", tt.respType)
				w.Header().Set("X-Correlation-Id", "c0ffee")
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, tt.respBody)
			}))
			defer ts.Close()
			core, logs := observer.New(zapcore.DebugLevel)
			client := &http.Client{Transport: NewDebugTransport(ts.Client().Transport, zap.New(core))}

			var body io.Reader
			if tt.reqBody != "" {
				body = strings.NewReader(tt.reqBody)
				if tt.noGetBody {
					body = io.MultiReader(body)
				}
			}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+"/v1/servers?label_selector=a%3Db", body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer s3cr3t-token")
			if tt.reqType != "" {
				req.Header.Set("Content-Type", tt.reqType)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			gotResp, _ := io.ReadAll(resp.Body)
			resp.Body.Close()

			if gotBody != tt.reqBody || string(gotResp) != tt.respBody {
				t.Errorf("bodies passed on: request %q, response %q; want %q, %q", gotBody, gotResp, tt.reqBody, tt.respBody)
			}
			wantReq := map[string]any{"method": "POST", "url": "/v1/servers?label_selector=a%3Db"}
			wantResp := map[string]any{"method": "POST", "url": "/v1/servers?label_selector=a%3Db", "status": int64(201), "correlation_id": "c0ffee"}
			for k, v := range tt.wantReqLog {
				wantReq[k] = v
			}
			for k, v := range tt.wantRespLog {
				wantResp[k] = v
			}
			want := []entry{{"api request", wantReq}, {"api response", wantResp}}
			if diff := cmp.Diff(want, entries(logs)); diff != "" {
				t.Errorf("log entries (-want +got):\n%s", diff)
			}
			for _, e := range logs.All() {
				if e.LoggerName != "api" || e.Level != zapcore.DebugLevel {
					t.Errorf("entry %q logged by %q at %v; want \"api\" at debug", e.Message, e.LoggerName, e.Level)
				}
			}
		})
	}
}

func TestDebugTransportRequestFailed(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	failing := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, io.ErrUnexpectedEOF })
	req, _ := http.NewRequest(http.MethodDelete, "http://127.0.0.1:1/v1/servers/42", nil)
	if _, err := NewDebugTransport(failing, zap.New(core)).RoundTrip(req); err != io.ErrUnexpectedEOF {
		t.Fatalf("RoundTrip error = %v; want %v", err, io.ErrUnexpectedEOF)
	}
	want := []entry{
		{"api request", map[string]any{"method": "DELETE", "url": "/v1/servers/42"}},
		{"api request failed", map[string]any{"method": "DELETE", "url": "/v1/servers/42", "error": io.ErrUnexpectedEOF.Error()}},
	}
	if diff := cmp.Diff(want, entries(logs)); diff != "" {
		t.Errorf("log entries (-want +got):\n%s", diff)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// countingBody counts reads of a body.
type countingBody struct {
	r     io.Reader
	reads *atomic.Int64
}

func (c countingBody) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.r.Read(p)
}

func (countingBody) Close() error { return nil }

// TestDebugTransportDisabled: with debug level off, the transport hands
// the very request on and the very response back, and reads no body.
func TestDebugTransportDisabled(t *testing.T) {
	for _, level := range []zapcore.Level{zapcore.InfoLevel, zapcore.ErrorLevel} {
		t.Run(level.String(), func(t *testing.T) {
			var reads, getBodies atomic.Int64
			core, logs := observer.New(level)
			resp := &http.Response{
				StatusCode: http.StatusOK,
				Header:     http.Header{"Content-Type": {"application/json"}},
				Body:       countingBody{strings.NewReader(`{"root_password":"x"}`), &reads},
			}
			var sent *http.Request
			next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				sent = r
				return resp, nil
			})
			req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/v1/servers", nil)
			req.Header.Set("Content-Type", "application/json")
			req.Body = countingBody{strings.NewReader(`{"user_data":"x"}`), &reads}
			req.GetBody = func() (io.ReadCloser, error) {
				getBodies.Add(1)
				return countingBody{strings.NewReader(`{"user_data":"x"}`), &reads}, nil
			}

			got, err := NewDebugTransport(next, zap.New(core)).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			if sent != req || got != resp || got.Body != resp.Body {
				t.Error("request or response replaced with debug level off; want them passed as they are")
			}
			if reads.Load() != 0 || getBodies.Load() != 0 || logs.Len() != 0 {
				t.Errorf("body reads %d, GetBody calls %d, log entries %d; want 0, 0, 0", reads.Load(), getBodies.Load(), logs.Len())
			}
		})
	}
}

type rewindBody struct{ bytes.Reader }

func (*rewindBody) Close() error { return nil }

// BenchmarkDebugTransport compares the cost per request with debug level
// off (nothing read, no allocation) and on.
func BenchmarkDebugTransport(b *testing.B) {
	reqBody := []byte(`{"name":"pool1-abc","server_type":"cx23","image":"ubuntu-24.04","user_data":"` + strings.Repeat("x", 4096) + `"}`)
	respBody := []byte(`{"server":{"id":42,"name":"pool1-abc","status":"initializing"},"root_password":"secret","action":{"id":1}}`)
	header := http.Header{"Content-Type": {"application/json"}}
	// One response, rewound each time, so that only the transport's own
	// allocations are counted.
	body := &rewindBody{}
	resp := &http.Response{StatusCode: http.StatusCreated, Header: header}
	next := roundTripFunc(func(*http.Request) (*http.Response, error) {
		body.Reset(respBody)
		resp.Body = body
		return resp, nil
	})
	for _, bc := range []struct {
		name  string
		level zapcore.Level
	}{{"off", zapcore.InfoLevel}, {"on", zapcore.DebugLevel}} {
		b.Run(bc.name, func(b *testing.B) {
			core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), bc.level)
			tr := NewDebugTransport(next, zap.New(core))
			req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/v1/servers", bytes.NewReader(reqBody))
			req.Header = header
			b.ReportAllocs()
			for b.Loop() {
				resp, err := tr.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}
