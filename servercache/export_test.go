package servercache

// The options only tests set: production uses the defaults (DefaultJitter,
// DefaultListingBudget, math/rand/v2).

// MaxJitter bounds WithJitter so that an expiry never comes sooner than
// half the TTL.
const MaxJitter = 0.5

// WithJitter spreads expiries: each listing stays fresh for the TTL times
// a random factor in [1-fraction, 1+fraction), so that many processes (or
// the two caches of one) do not list in lockstep. The fraction is clamped
// to [0, MaxJitter]; the default is DefaultJitter.
func WithJitter(fraction float64) Option {
	return func(o *options) { o.jitter = min(max(fraction, 0), MaxJitter) }
}

// WithRand replaces the source of the jitter; f must return values in
// [0, 1) and be safe for concurrent use. Tests use it to make expiries
// deterministic. A nil f keeps math/rand/v2.
func WithRand(f func() float64) Option {
	return func(o *options) {
		if f != nil {
			o.rand = f
		}
	}
}

// WithListingBudget caps the steady-state cost of a [Cache]'s listings at
// requestsPerHour: a listing of P pages stays fresh for at least
// P × 3600 s / requestsPerHour, even at the low end of the jitter. At
// 10,000 servers (200 pages) and the default DefaultListingBudget that is
// 66 minutes, so no hour of the clock holds two listings (200 requests,
// under a tenth of the default 3,600); our own creates and deletes reach the snapshot at once
// through [Cache.Upsert] and [Cache.Remove], so only changes made by others
// wait that long. A non-positive value keeps the default. TypeCatalog
// ignores it.
func WithListingBudget(requestsPerHour int) Option {
	return func(o *options) {
		if requestsPerHour > 0 {
			o.budget = requestsPerHour
		}
	}
}
