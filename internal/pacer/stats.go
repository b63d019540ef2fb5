package pacer

import "time"

// Stats is a snapshot of a [Pacer], for metrics. The counters only grow.
type Stats struct {
	// Limit, Remaining and Reset are the last RateLimit-* headers seen;
	// zero until an answer carried them.
	Limit     int
	Remaining int
	Reset     time.Time
	// Estimated is the pacer's estimate of the budget left now: Remaining
	// less the requests sent since, plus the refill. Never below zero.
	Estimated int
	// Waiting is the number of requests held back right now.
	Waiting int
	// Waited is the total time requests were held back, and Waits the
	// number of times a request was held back.
	Waited time.Duration
	Waits  int
	// Overdue counts requests sent because they had waited the maximum.
	Overdue int
	// Got429 counts answers with status 429, and Resent the ones the
	// pacer waited out and re-sent itself.
	Got429 int
	Resent int
}
