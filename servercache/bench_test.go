package servercache

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// syntheticServers returns n API servers as a listing decodes them:
// names like upstream's "<pool>-<16 hex digits>", ten pools, labels.
func syntheticServers(n int) []*hcloud.Server {
	out := make([]*hcloud.Server, n)
	types := []*hcloud.ServerType{{ID: 22, Name: "cpx22"}, {ID: 45, Name: "cax21"}}
	locs := []*hcloud.Location{{ID: 1, Name: "fsn1"}, {ID: 2, Name: "nbg1"}, {ID: 3, Name: "hel1"}}
	created := time.Date(2026, 8, 1, 12, 0, 0, 0, time.FixedZone("", 0))
	for i := range n {
		pool := fmt.Sprintf("pool-%d", i%10)
		out[i] = &hcloud.Server{
			ID:         int64(100000 + i),
			Name:       fmt.Sprintf("%s-%016x", pool, uint64(i)*0x9e3779b97f4a7c15),
			Status:     hcloud.ServerStatusRunning,
			Created:    created,
			ServerType: types[i%len(types)],
			Location:   locs[i%len(locs)],
			Labels:     poolLabels(pool, "prod"),
		}
	}
	return out
}

func syntheticSnapshot(n int) *Snapshot {
	c := New(nil, WithClusterName("prod"))
	servers, _ := c.convert(syntheticServers(n))
	return newSnapshot(servers, epoch)
}

func BenchmarkByNode(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		snap := syntheticSnapshot(n)
		mid := snap.All()[n/2]
		providerID, name := mid.ProviderID(), mid.Name
		b.Run("providerID/servers="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if snap.ByNode(providerID, "") != mid {
					b.Fatal("ByNode missed")
				}
			}
		})
		b.Run("nodeName/servers="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if snap.ByNode("", name) != mid {
					b.Fatal("ByNode missed")
				}
			}
		})
		b.Run("robot/servers="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if snap.ByNode("hcloud://bm-4711", name) != nil {
					b.Fatal("ByNode matched a Robot server")
				}
			}
		})
	}
}

// heapAfterGC returns the live heap.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

const mib = 1 << 20

// snapshotHeap returns the heap that a snapshot of n servers keeps alive,
// once the API objects it was built from are gone.
func snapshotHeap(n int) float64 {
	c := New(nil, WithClusterName("prod"))
	servers, _ := c.convert(syntheticServers(n))
	snap := newSnapshot(servers, epoch)
	// The records share their name strings with the API objects, so the
	// snapshot is measured by dropping it after those are gone.
	with := heapAfterGC()
	runtime.KeepAlive(snap)
	snap = nil
	without := heapAfterGC()
	return float64(with-without) / mib
}

// TestSnapshotMemory keeps the 10,000-server snapshot under its budget of
// 25 MiB; upstream keeps about 103 MiB of API objects for the same.
func TestSnapshotMemory(t *testing.T) {
	const limit = 25.0
	got := snapshotHeap(10_000)
	t.Logf("a snapshot of 10,000 servers keeps %.2f MiB", got)
	if got > limit {
		t.Errorf("a snapshot of 10,000 servers keeps %.2f MiB; want at most %.0f MiB", got, limit)
	}
}

// BenchmarkSnapshotMemory lists 10,000 servers from the fake API through
// the real client and reports the heap the snapshot keeps (MiB/snapshot),
// next to the heap of the API objects of the same listing, which is what a
// cache of whole objects keeps (MiB/objects).
func BenchmarkSnapshotMemory(b *testing.B) {
	const n = 10_000
	fake, client, clock := newFake(b, hcloudtest.WithRateLimit(0, 0))
	addServers(b, fake, "pool-0123456789abcdef", n, poolLabels("workers", "prod"))
	var snapMiB, rawMiB float64
	for b.Loop() {
		base := heapAfterGC()
		c := New(&client.Server, WithClusterName("prod"), WithClock(clock))
		snap, err := c.Get(b.Context())
		if err != nil {
			b.Fatalf("Get() error: %v", err)
		}
		if snap.Len() != n {
			b.Fatalf("Get() returned %d servers; want %d", snap.Len(), n)
		}
		snapMiB = float64(heapAfterGC()-base) / mib
		runtime.KeepAlive(snap)
		c.Close()
		snap, c = nil, nil

		base = heapAfterGC()
		raw, err := client.Server.AllWithOpts(b.Context(), hcloud.ServerListOpts{ListOpts: hcloud.ListOpts{LabelSelector: "hcloud/node-group"}})
		if err != nil {
			b.Fatalf("AllWithOpts() error: %v", err)
		}
		rawMiB = float64(heapAfterGC()-base) / mib
		runtime.KeepAlive(raw)
	}
	b.ReportMetric(snapMiB, "MiB/snapshot")
	b.ReportMetric(rawMiB, "MiB/objects")
	if snapMiB > 25 {
		b.Errorf("a snapshot of %d servers keeps %.2f MiB; want at most 25 MiB", n, snapMiB)
	}
}
