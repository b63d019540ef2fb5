package fencedleader

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// leaseAPI is the Lease part of a Kubernetes API server, with optimistic
// concurrency as the real one has (the fake clientset's tracker has none):
// an update whose resourceVersion is not the stored one is a conflict.
// Each replica reaches it through a link that can be cut or slowed.
type leaseAPI struct {
	mu    sync.Mutex // guards lease, rv and writes
	lease *coordinationv1.Lease
	rv    int
	// writes are the successful creates and updates, in order.
	writes []leaseWrite
}

type leaseWrite struct {
	at     time.Time
	holder string
}

var leasesResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// errCut is what a replica cut off from the API server gets.
var errCut = errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")

// link is one replica's way to the API server.
type link struct {
	cut      atomic.Bool  // requests fail before they arrive
	dropAns  atomic.Bool  // requests are carried out, their answers lost
	latency  atomic.Int64 // nanoseconds, at most, each way
	randMu   sync.Mutex
	rand     *rand.Rand
	requests atomic.Int64
	// cutAfter, when set before the link is used, cuts the link once an
	// answer it is true for has been delivered.
	cutAfter func(*coordinationv1.Lease) bool
	// failRenewals fails every update that holds the Lease, before it
	// arrives; releases pass.
	failRenewals atomic.Bool
	// slowReads holds each read of the Lease that long (nanoseconds)
	// before it arrives.
	slowReads atomic.Int64
	// before, when set before the link is used, sees each request first;
	// an error fails it before it arrives.
	before func(k8stesting.Action) error
}

func (l *link) delay() {
	max := time.Duration(l.latency.Load())
	if max <= 0 {
		return
	}
	l.randMu.Lock()
	d := time.Duration(l.rand.Int64N(int64(max)))
	l.randMu.Unlock()
	time.Sleep(d)
}

// released returns a leaseAPI holding the Lease ns/lease as a replica
// released it.
func released() *leaseAPI {
	a := &leaseAPI{}
	a.lease = &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "lease", Namespace: "ns"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(""), LeaseDurationSeconds: ptr.To(int32(1))},
	}
	a.rv = 1
	a.lease.ResourceVersion = "1"
	return a
}

// client returns a clientset whose Lease requests go over a new link.
func (a *leaseAPI) client(seed uint64) (kubernetes.Interface, *link) {
	l := &link{rand: rand.New(rand.NewPCG(seed, 7))}
	c := kubefake.NewClientset()
	c.PrependReactor("*", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		l.requests.Add(1)
		if l.cut.Load() {
			return true, nil, errCut
		}
		if l.before != nil {
			if err := l.before(action); err != nil {
				return true, nil, err
			}
		}
		if u, ok := action.(k8stesting.UpdateAction); ok && l.failRenewals.Load() &&
			ptr.Deref(u.GetObject().(*coordinationv1.Lease).Spec.HolderIdentity, "") != "" {
			return true, nil, apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
		}
		if action.GetVerb() == "get" {
			time.Sleep(time.Duration(l.slowReads.Load()))
		}
		l.delay()
		obj, err := a.react(action)
		l.delay()
		if l.dropAns.Load() || l.cut.Load() {
			return true, nil, errCut
		}
		if lease, ok := obj.(*coordinationv1.Lease); ok && err == nil && action.GetVerb() != "get" && l.cutAfter != nil && l.cutAfter(lease) {
			l.cut.Store(true)
		}
		return true, obj, err
	})
	return c, l
}

func (a *leaseAPI) react(action k8stesting.Action) (runtime.Object, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch action.GetVerb() {
	case "get":
		if a.lease == nil {
			return nil, apierrors.NewNotFound(leasesResource, "lease")
		}
		return a.lease.DeepCopy(), nil
	case "create":
		if a.lease != nil {
			return nil, apierrors.NewAlreadyExists(leasesResource, "lease")
		}
		return a.storeLocked(action.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease))
	case "update":
		l := action.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		switch {
		case a.lease == nil:
			return nil, apierrors.NewNotFound(leasesResource, "lease")
		case l.ResourceVersion != a.lease.ResourceVersion:
			return nil, apierrors.NewConflict(leasesResource, "lease", errors.New("the object has been modified"))
		}
		return a.storeLocked(l)
	case "delete":
		a.lease = nil
		return nil, nil
	}
	return nil, errors.New("unexpected verb " + action.GetVerb())
}

func (a *leaseAPI) storeLocked(l *coordinationv1.Lease) (runtime.Object, error) {
	l = l.DeepCopy()
	// The API server keeps microseconds.
	for _, t := range []**metav1.MicroTime{&l.Spec.RenewTime, &l.Spec.AcquireTime} {
		if *t != nil {
			*t = &metav1.MicroTime{Time: (*t).Truncate(time.Microsecond)}
		}
	}
	if a.lease != nil && apiequality.Semantic.DeepEqual(a.lease.Spec, l.Spec) && apiequality.Semantic.DeepEqual(a.lease.Labels, l.Labels) {
		// An update that changes nothing is no write: the API server
		// answers with the object as it is, resourceVersion and all.
		return a.lease.DeepCopy(), nil
	}
	a.rv++
	l.ResourceVersion = itoa(a.rv)
	a.lease = l
	a.writes = append(a.writes, leaseWrite{at: time.Now(), holder: ptr.Deref(l.Spec.HolderIdentity, "")})
	return l.DeepCopy(), nil
}

// takeOver writes the Lease as a replica holder that took it over now
// would.
func (a *leaseAPI) takeOver(holder string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.lease.DeepCopy()
	l.Spec.HolderIdentity = ptr.To(holder)
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	_, _ = a.storeLocked(l)
}

func (a *leaseAPI) delete() {
	a.mu.Lock()
	a.lease = nil
	a.mu.Unlock()
}

func (a *leaseAPI) holder() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lease == nil {
		return ""
	}
	return ptr.Deref(a.lease.Spec.HolderIdentity, "")
}

// acquired returns when holder first wrote the Lease after from.
func (a *leaseAPI) acquired(holder string, from time.Time) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, w := range a.writes {
		if w.holder == holder && !w.at.Before(from) {
			return w.at
		}
	}
	return time.Time{}
}

func itoa(n int) string { return strconv.Itoa(n) }

// testConfig returns the timings of the tests: lease 4s, renew 2s, retry
// 100ms, write grace 300ms.
func testConfig(id string) Config {
	return Config{Namespace: "ns", Name: "lease", Identity: id,
		LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 100 * time.Millisecond, WriteGrace: 300 * time.Millisecond}
}

// startLeader starts a Leader with hooks that record when it listed.
func startLeader(t *testing.T, cfg Config, client kubernetes.Interface, hooks Hooks) *Leader {
	t.Helper()
	l, err := New(cfg, client)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(t.Context(), hooks); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	return l
}

// waitFor polls cond every 5ms for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}
