package pacer

import "time"

// Clock is the time source of a [Pacer]. The default is the system clock;
// tests inject a manual clock so that waits of minutes take no real time.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once d has passed. A d of zero or
	// less fires at once.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer created by a [Clock].
type Timer interface {
	// C delivers the time once the timer fires.
	C() <-chan time.Time
	// Stop releases the timer; it reports whether the timer was still
	// pending.
	Stop() bool
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }
