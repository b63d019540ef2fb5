package hcloudscale_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/pool"
)

// TestAPIOutage takes the API down (5xx and timeouts on every endpoint)
// for 15 simulated minutes, starting after the server-type catalogue and
// the resolved images have expired, while a simulated autoscaler calls
// the Cluster every 10 s as its loop does: Refresh, then, as it does when
// its Refresh is answered (with a large listing, whose TTL is over an
// hour, it is), templates, node and pod prices, instances and target
// sizes, and the deletion of failed instances.
//
// Templates and prices must keep answering from the stale catalogue,
// nothing may be deleted or created, every instance keeps its state and
// the staleness metric says since when. Right after the API recovers, a
// scale-up creates a server.
func TestAPIOutage(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newFaultEnv(t, faultOptions{nodes: []string{"1:4:cpx21:fsn1:plain", "0:3:cax11:nbg1:subnet"},
		cluster: []hcloudscale.Option{hcloudscale.WithRegisterer(reg)}})
	plain := e.c.Pool("plain")
	if err := plain.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if err := e.settle(); err != nil {
		t.Fatal(err)
	}
	before := poolServers(t, e.api(), "plain")
	if len(before) != 1 {
		t.Fatalf("plain has %d servers before the outage; want 1", len(before))
	}
	// Past every TTL: the catalogue (1 h ± 10%) and the images (5 min).
	e.clock.Advance(70 * time.Minute)
	counts := e.api().Counts()

	e.api().SetOutage(
		hcloudtest.RequestFault{Code: "server_error"},
		hcloudtest.RequestFault{Code: "timeout"},
		hcloudtest.RequestFault{Status: http.StatusServiceUnavailable},
		hcloudtest.RequestFault{Status: http.StatusBadGateway},
	)
	outageStart := e.clock.Now()
	refreshFailures := 0
	for e.clock.Now().Sub(outageStart) < 15*time.Minute {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := e.c.Refresh(ctx); err != nil {
			refreshFailures++
		}
		for _, p := range e.c.Pools() {
			if _, err := p.TemplateNode(ctx); err != nil {
				t.Fatalf("%v into the outage: %s TemplateNode: %v", e.clock.Now().Sub(outageStart), p.Name(), err)
			}
			if price, err := p.Price(e.clock.Now(), e.clock.Now().Add(time.Hour)); err != nil || price <= 0 {
				t.Fatalf("%v into the outage: %s Price = %v, %v", e.clock.Now().Sub(outageStart), p.Name(), price, err)
			}
			for _, in := range p.Instances() {
				if in.Error != nil || in.State != pool.Running {
					t.Fatalf("%v into the outage: %s instance %s is %v with error %v; the autoscaler would delete a failed one",
						e.clock.Now().Sub(outageStart), p.Name(), in.ID, in.State, in.Error)
				}
			}
		}
		if rate, err := e.c.PodRate(ctx); err != nil || rate.PerCore <= 0 {
			t.Fatalf("%v into the outage: PodRate = %v, %v", e.clock.Now().Sub(outageStart), rate, err)
		}
		if got := plain.TargetSize(); got != 1 {
			t.Fatalf("%v into the outage: plain TargetSize = %d; want 1", e.clock.Now().Sub(outageStart), got)
		}
		cancel()
		e.clock.Advance(10 * time.Second)
	}
	if refreshFailures == 0 {
		t.Error("Refresh never failed during 15 minutes of outage; the listing should report it")
	}
	stale := staleSince(t, reg)
	for _, data := range []string{"servers", "server_types"} {
		if s := stale[data]; s < float64(outageStart.Unix()) || s > float64(outageStart.Add(2*time.Minute).Unix()) {
			t.Errorf("hcloudscale_stale_since_seconds{data=%q} = %v; want about the outage's start %d", data, s, outageStart.Unix())
		}
	}
	after := e.api().Counts()
	for _, tmpl := range []string{"POST /servers", "DELETE /servers/{id}"} {
		if after[tmpl] != counts[tmpl] {
			t.Errorf("%s requests during the outage = %d; want 0", tmpl, after[tmpl]-counts[tmpl])
		}
	}
	if got := poolServers(t, e.api(), "plain"); len(got) != 1 || got[0].ID != before[0].ID {
		t.Errorf("plain's servers after the outage = %+v; want %+v", got, before)
	}

	// The API answers again: the next loop's scale-up creates a server
	// with the catalogue and image in memory.
	e.api().SetOutage()
	if err := plain.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatalf("IncreaseSize right after the outage: %v", err)
	}
	if err := e.settle(); err != nil {
		t.Fatal(err)
	}
	if got := poolServers(t, e.api(), "plain"); len(got) != 2 {
		t.Errorf("plain has %d servers after the scale-up that followed the outage; want 2", len(got))
	}
	for _, in := range plain.Instances() {
		if in.Error != nil {
			t.Errorf("instance %s failed after the outage: %v", in.ID, in.Error)
		}
	}
	// Within one autoscaler loop of the recovery (10 s, the longest
	// failure backoff) every read path is fresh again.
	e.clock.Advance(10 * time.Second)
	if err := e.c.Refresh(t.Context()); err != nil {
		t.Errorf("Refresh one loop (10 s) after the outage: %v", err)
	}
	if _, err := plain.TemplateNode(t.Context()); err != nil {
		t.Fatal(err)
	}
	for data, s := range staleSince(t, reg) {
		if s != 0 {
			t.Errorf("hcloudscale_stale_since_seconds{data=%q} = %v one loop after the outage; want 0", data, s)
		}
	}
}

func staleSince(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "hcloudscale_stale_since_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	if len(out) != 3 {
		t.Fatalf("hcloudscale_stale_since_seconds has %d series; want 3", len(out))
	}
	return out
}
