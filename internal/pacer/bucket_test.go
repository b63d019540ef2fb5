package pacer

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseRateLimit(t *testing.T) {
	tests := []struct {
		name    string
		headers map[string]string
		want    rateLimit
		wantOK  bool
	}{
		{
			name:    "Hetzner's headers",
			headers: map[string]string{"RateLimit-Limit": "3600", "RateLimit-Remaining": "3599", "RateLimit-Reset": "1800000001"},
			want:    rateLimit{limit: 3600, remaining: 3599, reset: time.Unix(1800000001, 0)},
			wantOK:  true,
		},
		{
			name:    "empty bucket",
			headers: map[string]string{"RateLimit-Limit": "100", "RateLimit-Remaining": "0", "RateLimit-Reset": "1800000100"},
			want:    rateLimit{limit: 100, remaining: 0, reset: time.Unix(1800000100, 0)},
			wantOK:  true,
		},
		{name: "no headers (a proxy's answer)", headers: map[string]string{}},
		{name: "reset missing", headers: map[string]string{"RateLimit-Limit": "3600", "RateLimit-Remaining": "10"}},
		{name: "limit missing", headers: map[string]string{"RateLimit-Remaining": "10", "RateLimit-Reset": "1800000001"}},
		{name: "not a number", headers: map[string]string{"RateLimit-Limit": "lots", "RateLimit-Remaining": "10", "RateLimit-Reset": "1800000001"}},
		{name: "reset as a date", headers: map[string]string{"RateLimit-Limit": "3600", "RateLimit-Remaining": "10", "RateLimit-Reset": "Mon, 02 Jan 2006 15:04:05 GMT"}},
		{name: "zero limit", headers: map[string]string{"RateLimit-Limit": "0", "RateLimit-Remaining": "0", "RateLimit-Reset": "1800000001"}},
		{name: "negative remaining", headers: map[string]string{"RateLimit-Limit": "3600", "RateLimit-Remaining": "-1", "RateLimit-Reset": "1800000001"}},
		{name: "remaining above limit", headers: map[string]string{"RateLimit-Limit": "100", "RateLimit-Remaining": "101", "RateLimit-Reset": "1800000001"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.headers {
				h.Set(k, v)
			}
			got, ok := parseRateLimit(h)
			if ok != tt.wantOK {
				t.Fatalf("parseRateLimit(%v) ok = %v; want %v", tt.headers, ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(rateLimit{})); diff != "" {
				t.Errorf("parseRateLimit(%v) (-want +got):\n%s", tt.headers, diff)
			}
		})
	}
}

func TestBucketObserve(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tests := []struct {
		name       string
		prevRate   float64 // 0: nothing observed before
		rl         rateLimit
		uncounted  int
		wantRate   float64
		wantTokens float64
	}{
		{
			name:       "first answer, full bucket: default rate",
			rl:         rateLimit{limit: 3600, remaining: 3600, reset: now},
			wantRate:   1,
			wantTokens: 3600,
		},
		{
			name:       "rate from missing tokens and reset, rounding second included",
			rl:         rateLimit{limit: 3600, remaining: 3000, reset: now.Add(599 * time.Second)},
			wantRate:   600.0 / 600,
			wantTokens: 3000,
		},
		{
			name:       "raised limit refilling twice as fast",
			rl:         rateLimit{limit: 7200, remaining: 6000, reset: now.Add(599 * time.Second)},
			wantRate:   1200.0 / 600,
			wantTokens: 6000,
		},
		{
			name:       "requests that may be uncounted are taken off",
			rl:         rateLimit{limit: 100, remaining: 50, reset: now.Add(49 * time.Second)},
			uncounted:  3,
			wantRate:   50.0 / 50,
			wantTokens: 47,
		},
		{
			name:       "reset in the past (clock skew): previous rate kept",
			prevRate:   0.5,
			rl:         rateLimit{limit: 100, remaining: 50, reset: now.Add(-10 * time.Second)},
			wantRate:   0.5,
			wantTokens: 50,
		},
		{
			name:       "full bucket says nothing about the rate",
			prevRate:   2,
			rl:         rateLimit{limit: 100, remaining: 100, reset: now},
			wantRate:   2,
			wantTokens: 100,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bucket
			if tt.prevRate > 0 {
				b = bucket{known: true, rate: tt.prevRate, limit: tt.rl.limit}
			}
			b.observe(tt.rl, now, tt.uncounted)
			if b.rate != tt.wantRate || b.tokens != tt.wantTokens {
				t.Errorf("after observe: rate %v, tokens %v; want %v, %v", b.rate, b.tokens, tt.wantRate, tt.wantTokens)
			}
		})
	}
}

func TestBucketReadyAt(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tests := []struct {
		name      string
		tokens    float64
		rate      float64
		floor     float64
		notBefore time.Time
		want      time.Time
	}{
		{name: "above the floor", tokens: 20, rate: 1, floor: 10, want: now},
		{name: "one above the floor", tokens: 11, rate: 1, floor: 10, want: now},
		{name: "at the floor: one refill", tokens: 10, rate: 1, floor: 10, want: now.Add(time.Second)},
		{name: "owed requests: several refills", tokens: -2, rate: 2, floor: 0, want: now.Add(1500 * time.Millisecond)},
		{name: "Retry-After later than the refill", tokens: 0, rate: 1, floor: 0, notBefore: now.Add(5 * time.Second), want: now.Add(5 * time.Second)},
		{name: "floor at the bucket size: never", tokens: 100, rate: 1, floor: 100},
		{name: "tiny rate from a skewed reset: a day at most", tokens: 0, rate: 1e-12, floor: 10, want: now.Add(24 * time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bucket{known: true, limit: 100, tokens: tt.tokens, at: now, rate: tt.rate, notBefore: tt.notBefore}
			if got := b.readyAt(tt.floor, now); !got.Equal(tt.want) {
				t.Errorf("readyAt(%v) with %v tokens at %v/s = %v; want %v", tt.floor, tt.tokens, tt.rate, got, tt.want)
			}
		})
	}
}

func TestPriorityOf(t *testing.T) {
	tests := []struct {
		name   string
		method string
		bare   bool     // no priority on the context
		set    Priority // on the context
		want   Priority
	}{
		{name: "GET polls and listings", method: http.MethodGet, bare: true, want: Background},
		{name: "HEAD", method: http.MethodHead, bare: true, want: Background},
		{name: "POST creates and actions", method: http.MethodPost, bare: true, want: Foreground},
		{name: "DELETE", method: http.MethodDelete, bare: true, want: Foreground},
		{name: "PUT updates", method: http.MethodPut, bare: true, want: Foreground},
		{name: "GET marked foreground", method: http.MethodGet, set: Foreground, want: Foreground},
		{name: "POST marked background", method: http.MethodPost, set: Background, want: Background},
		{name: "Auto on the context defers to the method", method: http.MethodPost, set: Auto, want: Foreground},
		{name: "unknown value defers to the method", method: http.MethodGet, set: Priority(42), want: Background},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if !tt.bare {
				ctx = WithPriority(ctx, tt.set)
			}
			req, err := http.NewRequestWithContext(ctx, tt.method, "http://127.0.0.1/v1/servers", nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := PriorityOf(req); got != tt.want {
				t.Errorf("PriorityOf(%s with %v) = %v; want %v", tt.method, tt.set, got, tt.want)
			}
		})
	}
}
