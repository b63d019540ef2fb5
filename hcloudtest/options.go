package hcloudtest

import (
	"slices"
	"time"
)

// Option configures a [Server] at construction.
type Option func(*config)

type config struct {
	clock           Clock
	token           string
	extraTokens     []string
	durations       map[string]time.Duration
	defaultDuration *time.Duration
	serverLimit     int
	rateLimit       int
	rateRefill      time.Duration
}

// Default action durations. They are short enough that a test on the real
// clock finishes quickly and long enough that a client sees the action
// running at least once. Real creates take tens of seconds; tests that care
// about timing inject a [ManualClock] or set durations explicitly.
var defaultDurations = map[string]time.Duration{
	"create_server":       1 * time.Second,
	"start_server":        500 * time.Millisecond,
	"delete_server":       500 * time.Millisecond,
	"attach_to_network":   500 * time.Millisecond,
	"detach_from_network": 500 * time.Millisecond,
	"stop_server":         500 * time.Millisecond,
	"shutdown_server":     1 * time.Second,
	"reboot_server":       1 * time.Second,
	"reset_server":        500 * time.Millisecond,
}

// DefaultActionDuration is the duration of commands that have no entry in
// the built-in table (create_server 1 s; start_server, stop_server,
// reset_server, delete_server, attach_to_network 500 ms; shutdown_server,
// reboot_server 1 s).
const DefaultActionDuration = 500 * time.Millisecond

// Default rate limit: Hetzner's 3600 requests per project, refilled by one
// request per second.
const (
	DefaultRateLimit  = 3600
	DefaultRateRefill = time.Second
)

// DefaultToken is the API token [Server.Client] sends and the server
// expects unless [WithToken] sets another.
const DefaultToken = "hcloudtest-token"

func newConfig(opts []Option) config {
	c := config{
		clock:      realClock{},
		token:      DefaultToken,
		durations:  map[string]time.Duration{},
		rateLimit:  DefaultRateLimit,
		rateRefill: DefaultRateRefill,
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// WithClock makes the server read time from c instead of the wall clock.
// Actions complete, and the rate limiter refills, as c advances.
func WithClock(c Clock) Option {
	return func(cfg *config) {
		if c != nil {
			cfg.clock = c
		}
	}
}

// WithToken sets the bearer token the server accepts; other tokens get 401
// unauthorized.
func WithToken(token string) Option {
	return func(c *config) { c.token = token }
}

// WithTokens makes the server accept every one of tokens (and no other),
// as when several clients share one project with a token each. The
// request log records which token each request carried ([Request.Token]),
// so a test can attribute every request to its client. The first token is
// the one [Server.Token] returns and [Server.Client] sends. WithTokens()
// with no tokens changes nothing.
func WithTokens(tokens ...string) Option {
	return func(c *config) {
		if len(tokens) == 0 {
			return
		}
		c.token = tokens[0]
		c.extraTokens = append([]string(nil), tokens[1:]...)
	}
}

// accepts reports whether token is one the server accepts.
func (c *config) accepts(token string) bool {
	return token == c.token || slices.Contains(c.extraTokens, token)
}

// WithActionDuration sets how long actions of command (the API's command
// name: "create_server", "start_server" (also of a power-on),
// "stop_server" (power-off), "shutdown_server", "reboot_server",
// "reset_server", "delete_server", "attach_to_network", ...) run. Zero
// makes them finish on the next request that reads state.
func WithActionDuration(command string, d time.Duration) Option {
	return func(c *config) { c.durations[command] = max(d, 0) }
}

// WithDefaultActionDuration sets the duration of every command not set with
// [WithActionDuration], replacing the built-in table. WithDefaultActionDuration(0)
// makes every action finish on the next read.
func WithDefaultActionDuration(d time.Duration) Option {
	return func(c *config) {
		d = max(d, 0)
		c.defaultDuration = &d
	}
}

// WithServerLimit caps the number of servers in the project; a create
// beyond it fails with resource_limit_exceeded. Zero or less means no cap.
func WithServerLimit(n int) Option {
	return func(c *config) { c.serverLimit = n }
}

// WithRateLimit sets the size of the request bucket and how often one
// request is refilled, on the server's clock. A limit of zero or less
// turns the limiter off (no RateLimit headers are sent then).
func WithRateLimit(limit int, refillEvery time.Duration) Option {
	return func(c *config) {
		c.rateLimit = limit
		if refillEvery > 0 {
			c.rateRefill = refillEvery
		}
	}
}

func (c *config) duration(command string) time.Duration {
	if d, ok := c.durations[command]; ok {
		return d
	}
	if c.defaultDuration != nil {
		return *c.defaultDuration
	}
	if d, ok := defaultDurations[command]; ok {
		return d
	}
	return DefaultActionDuration
}

// SetActionDuration changes how long actions of command run that start
// from now on, as [WithActionDuration] sets it at construction. Running
// actions keep their duration.
func (s *Server) SetActionDuration(command string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.durations[command] = max(d, 0)
}
