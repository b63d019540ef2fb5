package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestNewRegistersOrReuses(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	a, err := New(reg)
	if err != nil {
		t.Fatalf("New(reg) error: %v", err)
	}
	b, err := New(reg)
	if err != nil {
		t.Fatalf("second New(reg) error: %v", err)
	}
	a.ServerCreates.WithLabelValues("p", ResultSuccess, "").Inc()
	b.ServerCreates.WithLabelValues("p", ResultSuccess, "").Inc()
	if got := testutil.ToFloat64(a.ServerCreates.WithLabelValues("p", ResultSuccess, "")); got != 2 {
		t.Errorf("shared counter = %v; want 2: the second Set must reuse the first's collectors", got)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestNewWithoutRegisterer(t *testing.T) {
	s, err := New(nil)
	if err != nil {
		t.Fatalf("New(nil) error: %v", err)
	}
	s.PoolTargetSize.WithLabelValues("p").Set(3) // usable, registered nowhere
	if got := testutil.ToFloat64(s.PoolTargetSize.WithLabelValues("p")); got != 3 {
		t.Errorf("gauge = %v; want 3", got)
	}
}

func TestNewReportsConflicts(t *testing.T) {
	reg := prometheus.NewRegistry()
	// Same name, other labels: not reusable.
	reg.MustRegister(prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hcloudscale_pool_target_size", Help: "x"}, []string{"other"}))
	_, err := New(reg)
	if err == nil || !strings.Contains(err.Error(), "registering metric") {
		t.Errorf("New with a conflicting collector = %v; want a registration error", err)
	}
}

func TestForgetPool(t *testing.T) {
	s, _ := New(nil)
	s.PoolTargetSize.WithLabelValues("a").Set(1)
	s.PoolTargetSize.WithLabelValues("b").Set(2)
	s.PoolInstances.WithLabelValues("a", "running").Set(1)
	s.ForgetPool("a")
	if n := testutil.CollectAndCount(s.PoolTargetSize); n != 1 {
		t.Errorf("target series after ForgetPool(a) = %d; want 1", n)
	}
	if n := testutil.CollectAndCount(s.PoolInstances); n != 0 {
		t.Errorf("instance series after ForgetPool(a) = %d; want 0", n)
	}
}
