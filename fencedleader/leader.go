package fencedleader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
)

// ErrNotLeader is why a change or a write is refused: this replica does
// not lead now. Errors wrap it.
var ErrNotLeader = errors.New("this replica does not lead")

// ErrSameIdentity is why a Leader stops for good when another process
// renews the Lease under this replica's identity.
var ErrSameIdentity = errors.New("another process renews the Lease under this replica's identity")

// Hooks are what a Leader runs at its transitions. Each may be nil.
type Hooks struct {
	// BeforeLeading runs once the Lease is held (and, after a take-over,
	// the previous holder's writes are waited out), before the first
	// write is let through: the place to list what exists. An error is
	// logged and it runs again every RetryPeriod until it succeeds or
	// leadership ends.
	BeforeLeading func(ctx context.Context) error
	// Leading runs once writes are let through, with the leadership
	// context (see [Leader.Context]).
	Leading func(ctx context.Context)
	// Stopping runs when leadership ends or is handed over, before the
	// Lease is released: the place to drop work not yet sent.
	Stopping func()
}

// Option configures a Leader.
type Option func(*Leader)

// WithLogger sets the logger; zap.NewNop() by default.
func WithLogger(log *zap.Logger) Option {
	return func(l *Leader) {
		if log != nil {
			l.log = log
		}
	}
}

// A Leader takes part in the election of one Lease and, while it holds
// the Lease, lets writes through: it is an hcloudscale.Fence for the
// Cluster's writes and a gate ([Leader.Enter]) for changes.
type Leader struct {
	cfg    Config
	client kubernetes.Interface
	log    *zap.Logger
	now    func() time.Time // the fence's monotonic clock; time.Now outside tests

	mu      sync.Mutex // guards the fields below
	left    *sync.Cond // broadcast when inside, writes or starting drop, or a wait ends
	leading bool       // changes may start (after BeforeLeading, until the term ends)
	holder  string     // the last leader seen, "" before the first
	inside  int        // changes let in and not yet left
	stopped bool       // Stop was called: losing the Lease is expected

	renewed     time.Time // when the renew time of the last successful acquire or renewal was taken; zero: never
	renewedWall time.Time // the same by the wall clock, which a suspended VM's monotonic clock may not count
	writable    bool      // the fence is open: set when leading starts, cleared when the term ends
	writes      int       // writes let through the fence and not yet ended
	// unknownUntil is when the last write whose answer was lost can no
	// longer take effect. The Lease is not released before.
	unknownUntil time.Time

	lease leaseState // what the lock saw and wrote

	term    context.Context // the leadership context; done outside a term
	endTerm context.CancelCauseFunc
	lapse   *time.Timer // ends the term at the renew deadline

	lostCh   chan struct{} // closed when leadership ended without Stop
	lostErr  error
	starting int  // Hooks running from client-go's OnStartedLeading
	finished bool // Stop has ended the elector: no more starts

	hooks   Hooks              // set by Start
	cancel  context.CancelFunc // stops the elector
	running sync.WaitGroup     // the elector
}

// ended is the context of no term.
var ended = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrNotLeader)
	return ctx
}()

// New returns a Leader for cfg, which it validates, using client for the
// Lease. It does no I/O; see [Leader.CheckAccess] and [Leader.Start].
func New(cfg Config, client kubernetes.Interface, opts ...Option) (*Leader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if client == nil {
		return nil, errors.New("fencedleader: no Kubernetes client")
	}
	l := &Leader{cfg: cfg, client: client, log: zap.NewNop(), now: time.Now, term: ended, lostCh: make(chan struct{})}
	for _, o := range opts {
		o(l)
	}
	l.log = l.log.Named("leader").With(zap.String("identity", cfg.Identity))
	l.left = sync.NewCond(&l.mu)
	return l, nil
}

// Identity is this replica's name in the Lease.
func (l *Leader) Identity() string { return l.cfg.Identity }

// Leading reports whether this replica leads now, by its own clock.
func (l *Leader) Leading() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leadsLocked()
}

// Context returns the leadership context: it is done the moment this
// replica stops leading (its renewal older than the renew deadline by its
// own clock, the Lease lost or handed over, Stop), and already done when
// it does not lead. Work that may only be done by the leader, such as
// Kubernetes writes, runs under it.
func (l *Leader) Context() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.leadsLocked() {
		return ended
	}
	return l.term
}

// Lost is closed when leadership ended without Stop: the Lease lost, a
// renewal older than the renew deadline (also one found so once
// BeforeLeading is done: the replica holds the Lease and would never
// lead), or another process with this identity. A replica should then
// restart as a standby; Err says why.
func (l *Leader) Lost() <-chan struct{} { return l.lostCh }

// Err is why leadership was lost, once Lost is closed.
func (l *Leader) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostErr
}

// Holder is the last leader this replica saw, "" before the first.
func (l *Leader) Holder() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holder
}

// leadsLocked: leading, and the last renewal within the renew deadline.
// A renewal found too old ends the term for good.
func (l *Leader) leadsLocked() bool {
	if !l.leading {
		return false
	}
	if !l.freshLocked() {
		l.endTermLocked(l.staleLocked(), true)
		return false
	}
	return true
}

// staleLocked is why a renewal older than the renew deadline ends
// leadership.
func (l *Leader) staleLocked() error {
	return fmt.Errorf("%w: its last renewal of the Lease was %s ago, not within the renew deadline %s",
		ErrNotLeader, l.sinceRenewalLocked().Round(time.Millisecond), l.cfg.RenewDeadline)
}

// freshLocked reports whether the last successful renewal was taken less
// than the renew deadline ago.
func (l *Leader) freshLocked() bool {
	return !l.renewed.IsZero() && l.sinceRenewalLocked() < l.cfg.RenewDeadline
}

// sinceRenewalLocked is the time since the last successful renewal was
// sent: by the monotonic clock, or by the wall clock when that says more
// (a suspended VM whose monotonic clock stood still, or a wall clock set
// forward: either way the safe side).
func (l *Leader) sinceRenewalLocked() time.Duration {
	d := l.now().Sub(l.renewed)
	if !l.renewedWall.IsZero() {
		d = max(d, time.Now().Round(0).Sub(l.renewedWall))
	}
	return d
}

// notLeaderLocked is why a change or a write is refused now.
func (l *Leader) notLeaderLocked() error {
	switch {
	case l.lostErr != nil:
		return fmt.Errorf("%w: %w", ErrNotLeader, l.lostErr)
	case l.holder == "" || l.holder == l.cfg.Identity:
		return fmt.Errorf("%w; no leader is known yet", ErrNotLeader)
	}
	return fmt.Errorf("%w; the leader is %s", ErrNotLeader, l.holder)
}

// Enter lets a change in while this replica leads; the returned func
// marks it done. [Leader.HandOver] waits for the changes let in.
func (l *Leader) Enter() (func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.leadsLocked() {
		return nil, l.notLeaderLocked()
	}
	l.inside++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.inside--
			l.left.Broadcast()
			l.mu.Unlock()
		})
	}, nil
}

// endTermLocked ends the current term, if any: no change and no write
// starts any more, and the leadership context is cancelled with cause.
// lost marks it as leadership lost without Stop.
func (l *Leader) endTermLocked(cause error, lost bool) {
	was := l.leading
	l.leading, l.writable = false, false
	if l.endTerm != nil {
		l.endTerm(cause)
		l.endTerm = nil
	}
	if l.lapse != nil {
		l.lapse.Stop()
		l.lapse = nil
	}
	if lost && !l.stopped && l.lostErr == nil {
		l.lostErr = cause
		close(l.lostCh)
	}
	switch {
	case was && lost:
		l.log.Error("stopped leading: changes are refused", zap.Error(cause))
	case was:
		l.log.Info("stopped leading: changes are refused", zap.String("reason", cause.Error()))
	}
	l.left.Broadcast()
}

// armLapseLocked ends the term when the renew deadline passes without a
// renewal, so that the leadership context is cancelled then, not at the
// next check. It looks at least every retry period: a timer counts the
// monotonic clock, which a suspended VM's may not advance, while the
// renew deadline is also measured by the wall clock.
func (l *Leader) armLapseLocked() {
	if l.lapse != nil {
		l.lapse.Stop()
	}
	wait := min(max(l.cfg.RenewDeadline-l.sinceRenewalLocked(), 0), l.cfg.RetryPeriod)
	l.lapse = time.AfterFunc(wait, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.leading && l.freshLocked() {
			l.armLapseLocked()
			return
		}
		l.leadsLocked()
	})
}

// demote stops letting changes in and waits until those inside have left.
func (l *Leader) demote(cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endTermLocked(cause, false)
	for l.inside > 0 {
		l.left.Wait()
	}
}
