package fencedleader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// leaseVerbs are what the elector does with the Lease.
var leaseVerbs = []string{"get", "create", "update"}

// CheckAccess asks the API server whether this replica may get, create
// and update its Lease, so that missing RBAC is an error at start rather
// than a standby that never leads. Every verb missing is reported.
func (l *Leader) CheckAccess(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var errs []error
	for _, verb := range leaseVerbs {
		name := l.cfg.Name
		if verb == "create" {
			// The API server authorizes a create before it reads the
			// object's name: a rule limited to names never allows it.
			name = ""
		}
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: l.cfg.Namespace, Verb: verb, Group: "coordination.k8s.io", Resource: "leases", Name: name,
			},
		}}
		res, err := l.client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("checking access to Lease %s in namespace %s: %w", l.cfg.Name, l.cfg.Namespace, err)
		}
		if !res.Status.Allowed {
			errs = append(errs, fmt.Errorf("may not %s Lease %q in namespace %q (coordination.k8s.io leases)", verb, l.cfg.Name, l.cfg.Namespace))
		}
	}
	return errors.Join(errs...)
}

// Start runs the election in the background until Stop or HandOver; it
// returns at once. hooks run at the transitions (see [Hooks]). Start is
// called once.
func (l *Leader) Start(ctx context.Context, hooks Hooks) error {
	lock := l.lockFor(l.client)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            l.cfg.Name,
		LeaseDuration:   l.cfg.LeaseDuration,
		RenewDeadline:   l.cfg.RenewDeadline,
		RetryPeriod:     l.cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: l.started,
			OnStoppedLeading: l.stoppedLeading,
			OnNewLeader:      l.newLeader,
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	ectx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ectx = klog.NewContext(ectx, logr.New(&zapSink{log: l.log}))
	l.mu.Lock()
	l.cancel, l.hooks = cancel, hooks
	l.mu.Unlock()
	l.running.Add(1)
	go func() {
		defer l.running.Done()
		le.Run(ectx)
	}()
	l.log.Info("standing by for the Lease", zap.String("lease", l.cfg.Namespace+"/"+l.cfg.Name))
	return nil
}

// lockFor returns the elector's lock of the Lease, through client.
func (l *Leader) lockFor(client kubernetes.Interface) *fencedLock {
	return &fencedLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: l.cfg.Name, Namespace: l.cfg.Namespace},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: l.cfg.Identity},
	}, l: l}
}

// started is client-go's OnStartedLeading, which runs in a goroutine of
// its own: Stop waits for it.
func (l *Leader) started(ctx context.Context) {
	l.mu.Lock()
	if l.finished {
		l.mu.Unlock()
		return
	}
	l.starting++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.starting--
		l.left.Broadcast()
		l.mu.Unlock()
	}()
	hooks := l.hooks
	if !l.waitOutOldWrites(ctx) || !l.prepare(ctx, hooks) {
		return
	}
	l.mu.Lock()
	if ctx.Err() != nil || l.stopped || l.lostErr != nil {
		l.mu.Unlock()
		return
	}
	if !l.freshLocked() {
		// Renewals failed while it prepared. client-go may still renew
		// before it gives up: ended for good, as a term is, or the
		// replica would hold the Lease without leading.
		l.endTermLocked(l.staleLocked(), true)
		l.mu.Unlock()
		return
	}
	term, end := context.WithCancelCause(ctx)
	l.term, l.endTerm = term, end
	l.leading, l.writable = true, true
	l.holder = l.cfg.Identity
	l.armLapseLocked()
	l.mu.Unlock()
	l.log.Info("leading: changes are let in")
	if hooks.Leading != nil {
		hooks.Leading(term)
	}
}

// waitOutOldWrites waits, after an acquisition that needs it, until the
// previous holder's writes can no longer be carried out. It reports false
// when ctx ended meanwhile.
func (l *Leader) waitOutOldWrites(ctx context.Context) bool {
	l.mu.Lock()
	wait := l.lease.oldWritesUntil.Sub(l.now())
	l.mu.Unlock()
	if wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// prepare runs BeforeLeading until it succeeds; false when ctx ended.
func (l *Leader) prepare(ctx context.Context, hooks Hooks) bool {
	if hooks.BeforeLeading == nil {
		return ctx.Err() == nil
	}
	l.log.Info("acquired the Lease; preparing before leading")
	for {
		err := hooks.BeforeLeading(ctx)
		if err == nil {
			return true
		}
		l.log.Warn("preparing to lead failed; retrying", zap.Error(err))
		select {
		case <-ctx.Done():
			return false
		case <-time.After(l.cfg.RetryPeriod):
		}
	}
}

// stoppedLeading runs when the elector ends, whether or not it led.
func (l *Leader) stoppedLeading() {
	lost := fmt.Errorf("%w: the Lease was lost", ErrNotLeader)
	l.mu.Lock()
	stopped := l.stopped
	if !stopped {
		l.endTermLocked(lost, true)
	}
	l.mu.Unlock()
	l.demote(lost)
	if !stopped && l.hooks.Stopping != nil {
		l.hooks.Stopping()
	}
}

func (l *Leader) newLeader(id string) {
	l.mu.Lock()
	l.holder = id
	l.mu.Unlock()
	if id != l.cfg.Identity {
		l.log.Info("another replica leads", zap.String("leader", id))
	}
}

// Stop ends the election and, if this replica holds the Lease, releases
// it once every write let through has its answer (or is past the write
// grace); it waits for the hooks it started.
func (l *Leader) Stop() {
	l.mu.Lock()
	l.stopped = true
	cancel := l.cancel
	l.mu.Unlock()
	l.demote(errors.New("stopping"))
	if cancel != nil {
		cancel()
	}
	l.running.Wait()
	l.mu.Lock()
	l.finished = true
	for l.starting > 0 {
		l.left.Wait()
	}
	l.mu.Unlock()
}

// HandOver gives the Lease up as soon as it is safe: no change starts,
// hooks.Stopping drops the work not yet sent, and once every write sent
// has its answer (or timeout passed: the Lease then expires instead) the
// Lease is released, so that the next replica leads at once.
func (l *Leader) HandOver(timeout time.Duration) {
	l.demote(fmt.Errorf("%w: handing the Lease over", ErrNotLeader))
	if l.hooks.Stopping != nil {
		l.hooks.Stopping()
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := l.closeFence(ctx); err != nil {
		l.log.Warn("handing over: the Lease is kept until it expires", zap.Error(err))
	}
	l.Stop()
}
