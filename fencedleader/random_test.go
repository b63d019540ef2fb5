package fencedleader

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"
)

var randomSeeds = flag.Int("fencedleader.seeds", 8, "seeds of TestRandomHandOversHaveOneWriter (each runs about 6s of wall time, in parallel)")

// TestRandomHandOversHaveOneWriter runs three replicas, each writing as
// fast as its fence lets it, under random timings (lease 2-3s, retry
// 50-150ms, a renew deadline anywhere Validate allows, write grace
// 100-400ms), random API latencies (Lease and writes), and random cuts:
// links to the API server cut or their answers lost, renewals failed,
// reads of the Lease slowed, hand-overs (also of a holder still waiting
// before it leads), a replica stopped dead, the Lease deleted. A replica
// that loses the Lease restarts under a new identity.
//
// The invariant, checked at the end over every replica instance that
// led: a replica lists (BeforeLeading) only after every write of every
// earlier leader has landed. A write lands when the API carries it out:
// written whole at a time its permit allows, then carried out within the
// write grace. Any failure replays from its seed:
//
//	go test -run 'TestRandomHandOversHaveOneWriter/seed=17$' ./fencedleader/
func TestRandomHandOversHaveOneWriter(t *testing.T) {
	for seed := range *randomSeeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			s := newScenario(uint64(seed))
			t.Logf("lease %s, renew %s, retry %s, grace %s", s.cfg.LeaseDuration, s.cfg.RenewDeadline, s.cfg.RetryPeriod, s.cfg.WriteGrace)
			s.run(t, 6*time.Second)
			s.check(t)
		})
	}
}

// randomConfig returns timings Validate accepts.
func randomConfig(r *rand.Rand) Config {
	c := Config{Namespace: "ns", Name: "lease",
		LeaseDuration: time.Duration(2+r.IntN(2)) * time.Second,
		RetryPeriod:   time.Duration(50+r.IntN(101)) * time.Millisecond,
		WriteGrace:    time.Duration(100+r.IntN(301)) * time.Millisecond,
	}
	lo := time.Duration(float64(c.RetryPeriod)*1.2) + time.Millisecond
	hi := c.writeWindow() - c.RetryPeriod
	c.RenewDeadline = lo + time.Duration(r.Int64N(int64(hi-lo)))
	return c
}

type scenario struct {
	cfg Config
	api *leaseAPI

	mu   sync.Mutex // guards rand and the records
	rand *rand.Rand
	// listed and landed are, per replica instance, when it listed
	// before leading and when each of its writes landed.
	listed map[string]time.Time
	landed map[string][]time.Time
	writes int
}

func newScenario(seed uint64) *scenario {
	r := rand.New(rand.NewPCG(seed, 46))
	return &scenario{cfg: randomConfig(r), api: released(), rand: r, listed: map[string]time.Time{}, landed: map[string][]time.Time{}}
}

func (s *scenario) intn(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rand.IntN(n)
}

func (s *scenario) dur(maxD time.Duration) time.Duration {
	return time.Duration(s.intn(int(maxD/time.Millisecond)+1)) * time.Millisecond
}

// instance is one run of a replica.
type instance struct {
	id   string
	lead *Leader
	link *link
	stop context.CancelFunc
	done chan struct{}
}

func (s *scenario) start(t *testing.T, replica, gen int) *instance {
	cfg := s.cfg
	cfg.Identity = fmt.Sprintf("r%d-%d", replica, gen)
	client, lk := s.api.client(uint64(replica*1000 + gen))
	lk.latency.Store(int64(s.dur(40 * time.Millisecond)))
	l, err := New(cfg, client)
	if err != nil {
		t.Fatal(err)
	}
	in := &instance{id: cfg.Identity, lead: l, link: lk, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	in.stop = cancel
	if err := l.Start(ctx, Hooks{BeforeLeading: func(context.Context) error {
		s.mu.Lock()
		s.listed[in.id] = time.Now()
		s.mu.Unlock()
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(in.done)
		s.writeLoop(ctx, in)
	}()
	return in
}

// writeLoop writes through the fence until ctx ends.
func (s *scenario) writeLoop(ctx context.Context, in *instance) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		time.Sleep(s.dur(20 * time.Millisecond))
		p, err := in.lead.AllowWrite()
		if err != nil {
			continue
		}
		// The API takes most of the write grace to carry a write out:
		// the late end of what the guarantee allows.
		upload, carry, lost := s.dur(300*time.Millisecond), s.cfg.WriteGrace-time.Millisecond-s.dur(s.cfg.WriteGrace/4), s.intn(5) == 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(upload)
			// The last byte goes out at written, if the permit allows it
			// then; the guarded connection asks at each write.
			written := time.Now()
			if !written.Before(p.Deadline) || p.Check() != nil {
				p.Done(true)
				return
			}
			s.mu.Lock()
			s.landed[in.id] = append(s.landed[in.id], written.Add(carry))
			s.writes++
			s.mu.Unlock()
			if lost {
				p.Done(false)
				return
			}
			time.Sleep(carry)
			p.Done(true)
		}()
	}
}

func (s *scenario) run(t *testing.T, d time.Duration) {
	gen := [3]int{}
	var ins [3]*instance
	for i := range ins {
		ins[i] = s.start(t, i, 0)
	}
	restart := func(i int) {
		ins[i].stop()
		<-ins[i].done
		gen[i]++
		ins[i] = s.start(t, i, gen[i])
	}
	for end := time.Now().Add(d); time.Now().Before(end); {
		time.Sleep(100*time.Millisecond + s.dur(400*time.Millisecond))
		for i, in := range ins {
			select {
			case <-in.lead.Lost():
				go in.lead.Stop()
				restart(i)
			default:
			}
		}
		s.fault(ins[:], restart)
	}
	for _, in := range ins {
		in.stop()
		in.lead.Stop()
		<-in.done
	}
}

// fault does one random thing to a random replica.
func (s *scenario) fault(ins []*instance, restart func(int)) {
	// Half the faults hit the leader, if there is one, else the Lease's
	// holder, which may still wait out its predecessor's writes.
	i := s.intn(len(ins))
	if s.intn(2) == 0 {
		holder := s.api.holder()
		for j, in := range ins {
			if in.lead.Leading() || in.id == holder {
				i = j
			}
		}
	}
	in := ins[i]
	switch max(s.intn(10)-2, 0) {
	case 0: // partition
		in.link.cut.Store(true)
		time.AfterFunc(s.dur(s.cfg.LeaseDuration+time.Second), func() { in.link.cut.Store(false) })
	case 1: // answers lost
		in.link.dropAns.Store(true)
		time.AfterFunc(s.dur(s.cfg.LeaseDuration), func() { in.link.dropAns.Store(false) })
	case 2: // SIGTERM
		in.lead.HandOver(10 * time.Second)
		restart(i)
	case 3: // SIGKILL: nothing more is sent, not even the release
		in.link.cut.Store(true)
		in.stop()
		go in.lead.Stop()
		restart(i)
	case 4:
		if s.intn(3) == 0 {
			s.api.delete()
		}
	case 5: // slower or faster links
		in.link.latency.Store(int64(s.dur(100 * time.Millisecond)))
	case 6: // the API server fails renewals (etcd timeouts)
		in.link.failRenewals.Store(true)
		time.AfterFunc(s.dur(s.cfg.LeaseDuration), func() { in.link.failRenewals.Store(false) })
	case 7: // slow reads: client-go sends a renew time taken before its read
		in.link.slowReads.Store(int64(s.dur(s.cfg.RenewDeadline)))
		time.AfterFunc(s.dur(s.cfg.LeaseDuration), func() { in.link.slowReads.Store(0) })
	}
}

// check: every leader listed after every write of the leaders before it
// had landed.
func (s *scenario) check(t *testing.T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	type term struct {
		id     string
		listed time.Time
	}
	var terms []term
	for id, at := range s.listed {
		terms = append(terms, term{id, at})
	}
	sort.Slice(terms, func(i, j int) bool { return terms[i].listed.Before(terms[j].listed) })
	t.Logf("%d writes landed over %d terms", s.writes, len(terms))
	bad := 0
	for j, later := range terms {
		for _, earlier := range terms[:j] {
			for _, w := range s.landed[earlier.id] {
				if !w.Before(later.listed) {
					bad++
					t.Errorf("a write of %s landed %s after %s listed to lead", earlier.id, w.Sub(later.listed).Round(time.Millisecond), later.id)
				}
			}
		}
	}
	if bad > 0 {
		s.logHistory(t, terms[0].listed)
	}
	if len(terms) == 0 || s.writes == 0 {
		t.Errorf("%d terms, %d writes: the scenario tested nothing", len(terms), s.writes)
	}
}

// logHistory logs the Lease's writes, from the first listing on, to tell
// how a second writer came about.
func (s *scenario) logHistory(t *testing.T, from time.Time) {
	s.api.mu.Lock()
	defer s.api.mu.Unlock()
	for _, w := range s.api.writes {
		t.Logf("%8s: the Lease held by %q", w.at.Sub(from).Round(time.Millisecond), w.holder)
	}
	for id, at := range s.listed {
		t.Logf("%8s: %s listed", at.Sub(from).Round(time.Millisecond), id)
	}
}
