package metrics

import (
	"maps"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Bounds exports the size bounds of every node group and pool at scrape
// time, read from their sources: a group's bounds in a pool of several
// offerings change with the sizes of the pool's other groups, so a value
// set when the configuration changed would be stale by the next
// scale-up, and setting it on every change would cost a pass over the
// pool's groups each time.
//
// hcloudscale_pool_min_size and hcloudscale_pool_max_size, labelled with
// the node group's ID (the pool's name for its first offering), are what
// the group reports to the autoscaler as MinSize and MaxSize: its share of
// the pool's min and the pool's max less what its other groups hold.
// hcloudscale_pool_configured_min_size and _max_size, labelled with the
// pool's name, are the pool's configured bounds (0 once removed).
type Bounds struct {
	min, max, configuredMin, configuredMax *prometheus.Desc

	mu sync.Mutex // guards groups and pools
	// groups and pools hold the sources of each key, the last tracked
	// reporting: a second Cluster on one registerer takes its pools'
	// series over, and the first's report again once it closes.
	groups map[string][]*boundsSource
	pools  map[string][]*boundsSource
}

// boundsSource reads one node group's (or pool's) min and max size. Its
// function must not block on anything a scrape could wait for.
type boundsSource struct {
	read func() (minSize, maxSize int)
}

func newBounds() *Bounds {
	d := func(name, help string, label string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "pool", name), help, []string{label}, nil)
	}
	return &Bounds{
		min:           d("min_size", "Minimum size the node group reports to the autoscaler: in a pool of several offerings, its share of the pool's min.", LabelPool),
		max:           d("max_size", "Maximum size the node group reports to the autoscaler: in a pool of several offerings, the pool's max less what its other node groups hold.", LabelPool),
		configuredMin: d("configured_min_size", "Configured minimum size of the pool, over all its offerings' node groups; 0 once removed.", LabelPool),
		configuredMax: d("configured_max_size", "Configured maximum size of the pool, over all its offerings' node groups; 0 once removed.", LabelPool),
		groups:        map[string][]*boundsSource{},
		pools:         map[string][]*boundsSource{},
	}
}

// TrackGroup reports the bounds read returns as those of the node group
// with that ID, in place of any source tracked before for that ID, until
// the returned func is called.
func (b *Bounds) TrackGroup(id string, read func() (minSize, maxSize int)) (untrack func()) {
	return b.track(b.groups, id, read)
}

// TrackPool reports the bounds read returns as the configured bounds of
// the pool of that name; see TrackGroup.
func (b *Bounds) TrackPool(name string, read func() (minSize, maxSize int)) (untrack func()) {
	return b.track(b.pools, name, read)
}

func (b *Bounds) track(m map[string][]*boundsSource, key string, read func() (int, int)) func() {
	src := &boundsSource{read: read}
	b.mu.Lock()
	m[key] = append(m[key], src)
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if rest := slices.DeleteFunc(m[key], func(s *boundsSource) bool { return s == src }); len(rest) > 0 {
			m[key] = rest
		} else {
			delete(m, key)
		}
	}
}

// Describe sends the four descriptors.
func (b *Bounds) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{b.min, b.max, b.configuredMin, b.configuredMax} {
		ch <- d
	}
}

// Collect reads the last source of every key, without holding the lock
// while it does.
func (b *Bounds) Collect(ch chan<- prometheus.Metric) {
	last := func(m map[string][]*boundsSource) map[string]*boundsSource {
		out := make(map[string]*boundsSource, len(m))
		for k, srcs := range m {
			out[k] = srcs[len(srcs)-1]
		}
		return out
	}
	b.mu.Lock()
	groups, pools := last(b.groups), last(b.pools)
	b.mu.Unlock()
	emit := func(m map[string]*boundsSource, minDesc, maxDesc *prometheus.Desc) {
		for _, key := range slices.Sorted(maps.Keys(m)) {
			minSize, maxSize := m[key].read()
			ch <- prometheus.MustNewConstMetric(minDesc, prometheus.GaugeValue, float64(minSize), key)
			ch <- prometheus.MustNewConstMetric(maxDesc, prometheus.GaugeValue, float64(maxSize), key)
		}
	}
	emit(groups, b.min, b.max)
	emit(pools, b.configuredMin, b.configuredMax)
}
