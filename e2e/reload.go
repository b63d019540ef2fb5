package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// configFile is a cluster-config file laid out as the kubelet lays out a
// ConfigMap volume: cluster-config.json is a symlink through ..data, a
// symlink to a generation directory that an update replaces by swapping
// ..data.
type configFile struct {
	dir   string
	gen   int
	pools []poolSpec // the pools the file declares now
}

func (f *configFile) path() string { return filepath.Join(f.dir, "cluster-config.json") }

func (f *configFile) write(t *testing.T, content []byte) {
	t.Helper()
	f.gen++
	gen := filepath.Join(f.dir, fmt.Sprintf("..gen%d", f.gen))
	if err := os.Mkdir(gen, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gen, "cluster-config.json"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(f.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(gen), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(f.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if f.gen == 1 {
		if err := os.Symlink(filepath.Join("..data", "cluster-config.json"), f.path()); err != nil {
			t.Fatal(err)
		}
	}
}

// withConfigFile declares the world's pools in a cluster-config file
// instead of --nodes, only the named ones at first; the kubelet knows
// every pool of the world, so that pools added later get nodes.
func withConfigFile(active ...string) worldOption {
	return func(w *world) {
		w.file = &configFile{dir: w.t.TempDir()}
		for _, p := range w.pools {
			if slices.Contains(active, p.name) {
				w.file.pools = append(w.file.pools, p)
			}
		}
	}
}

// setPools writes pools to the configuration file, as a ConfigMap update.
func (w *world) setPools(pools ...poolSpec) {
	w.t.Helper()
	klog.Infof("e2e: configuration file now declares %d pools", len(pools))
	w.file.pools = pools
	w.file.write(w.t, w.clusterConfig(pools, true))
}

// pool returns the world's pool spec named name.
func (w *world) pool(name string) poolSpec {
	for _, p := range w.pools {
		if p.name == name {
			return p
		}
	}
	w.t.Fatalf("no pool %s", name)
	return poolSpec{}
}

// hasGroup reports whether our provider has a node group named id.
func (w *world) hasGroup(id string) bool {
	for _, g := range w.provider.current().NodeGroups() {
		if g.Id() == id {
			return true
		}
	}
	return false
}

// reloadPeriod covers our provider's reading of the file (at most every
// 5 s, at a Refresh) and one more loop.
const reloadPeriod = 8 * time.Second

var batchPods = []func(*corev1.Pod){WithNodeSelector(map[string]string{"role": "batch"}), WithToleration("dedicated", "batch")}

// PoolAdded: pods that need a pool nobody has declared stay pending; once
// the pool is added to the file, the autoscaler scales it up and the
// pods are scheduled on it.
func PoolAdded(t *testing.T, kind Provider) {
	w := newWorld(t, kind, []poolSpec{
		{name: "general", serverType: "cx33", location: "fsn1", max: 3, labels: map[string]string{"role": "general"}},
		{name: "batch", serverType: "cx23", location: "nbg1", max: 3, labels: map[string]string{"role": "batch"}, taints: []corev1.Taint{batchTaint}},
	}, withConfigFile("general"))
	w.addPods(pods("batch", 2, batchPods...)...)
	none := func() { w.atMost("general", 0); w.atMost("batch", 0) }
	w.loopFor(reloadPeriod, none)
	if w.hasGroup("batch") || w.pending() != 2 {
		t.Fatalf("before the pool is added: group batch %v, %d pending", w.hasGroup("batch"), w.pending())
	}
	w.setPools(w.pool("general"), w.pool("batch"))
	w.loopUntil("pods bound on the added pool", 60*time.Second, func() bool { return w.boundOn("batch-", "batch") == 2 },
		func() { w.atMost("general", 0); w.atMost("batch", 2) })
	w.noLeak()
	w.record("pool-added")
}

// PoolResized: a max lowered below the pool's size deletes no node for
// that alone; raised again, pending pods get nodes.
func PoolResized(t *testing.T, kind Provider) {
	workers := poolSpec{name: "workers", serverType: "cx23", location: "fsn1", max: 3}
	w := newWorld(t, kind, []poolSpec{workers}, withConfigFile("workers"))
	w.addPods(pods("web", 3)...)
	w.loopUntil("three pods bound", 60*time.Second, func() bool { return w.boundOn("web-", "workers") == 3 }, func() { w.atMost("workers", 3) })

	smaller := workers
	smaller.max = 1
	w.setPools(smaller)
	w.loopUntil("max 1 applied", 30*time.Second, func() bool {
		for _, g := range w.provider.current().NodeGroups() {
			if g.Id() == "workers" {
				return g.MaxSize() == 1
			}
		}
		return false
	}, nil)
	keep := func() {
		if n := len(w.servers("workers")); n != 3 || w.boundOn("web-", "workers") != 3 {
			t.Fatalf("max lowered below the size: %d servers, %d pods bound; want 3 and 3\n%s", n, w.boundOn("web-", "workers"), w.describe())
		}
	}
	w.loopFor(unneededTime+5*time.Second, keep)

	larger := workers
	larger.max = 5
	w.setPools(larger)
	w.addPods(pods("more", 2)...)
	w.loopUntil("every pod bound after the max was raised", 60*time.Second, func() bool {
		return w.boundOn("web-", "workers") == 3 && w.boundOn("more-", "workers") == 2
	}, func() { w.atMost("workers", 5) })
	w.noLeak()
	w.record("pool-resized")
}

// PoolRemoved: a pool removed from the file while its nodes run pods is
// no surprise delete: its nodes stay while needed, it does not grow, and
// once its pods are gone its nodes are scaled down and the pool is gone.
func PoolRemoved(t *testing.T, kind Provider) {
	general := poolSpec{name: "general", serverType: "cx33", location: "fsn1", max: 3, labels: map[string]string{"role": "general"}}
	batch := poolSpec{name: "batch", serverType: "cx23", location: "nbg1", max: 3, labels: map[string]string{"role": "batch"}, taints: []corev1.Taint{batchTaint}}
	w := newWorld(t, kind, []poolSpec{general, batch}, withConfigFile("general", "batch"))
	w.addPods(pods("batch", 2, batchPods...)...)
	w.loopUntil("pods bound on batch", 60*time.Second, func() bool { return w.boundOn("batch-", "batch") == 2 }, nil)

	w.setPools(general)
	w.addPods(pods("late", 1, batchPods...)...)
	keep := func() {
		if n := len(w.servers("batch")); n != 2 || w.boundOn("batch-", "batch") != 2 {
			t.Fatalf("removed pool: %d servers, %d pods bound; want 2 and 2 (no delete, no growth)\n%s", n, w.boundOn("batch-", "batch"), w.describe())
		}
		w.atMost("general", 0)
	}
	w.loopFor(reloadPeriod+unneededTime+3*time.Second, keep)
	if !w.hasGroup("batch") || w.boundOn("late-", "batch") != 0 {
		t.Fatalf("removed pool with nodes: group present %v, late pod bound %d; want present and 0", w.hasGroup("batch"), w.boundOn("late-", "batch"))
	}

	w.deletePods("batch-")
	w.deletePods("late-")
	w.loopUntil("removed pool empty and gone", 90*time.Second, func() bool {
		return len(w.servers("batch")) == 0 && !w.hasGroup("batch")
	}, func() { w.atMost("batch", 2) })
	w.noLeak()
	w.record("pool-removed")
}

// BadReload: a broken file changes nothing; scaling goes on with the
// last good configuration.
func BadReload(t *testing.T, kind Provider) {
	w := newWorld(t, kind, []poolSpec{{name: "workers", serverType: "cx23", location: "fsn1", max: 3}}, withConfigFile("workers"))
	w.file.write(t, []byte(`{"nodeConfigs": {"workers": {"serverType": "cx23", "location": `))
	w.loopFor(reloadPeriod, nil)
	w.addPods(pods("web", 2)...)
	w.loopUntil("pods bound with a broken file", 60*time.Second, func() bool { return w.boundOn("web-", "workers") == 2 },
		func() { w.atMost("workers", 2) })
	w.noLeak()
	w.record("bad-reload")
}
