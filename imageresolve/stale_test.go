package imageresolve_test

import (
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/imageresolve"
)

// TestStaleImageDuringAnOutage: once resolved, a spec keeps resolving to
// its image while lookups fail, retried every 30 s, up to WithMaxStale
// after the last good lookup; a "not found" is never papered over.
func TestStaleImageDuringAnOutage(t *testing.T) {
	const maxStale = time.Hour
	f := newFixture(t, imageresolve.WithMaxStale(maxStale))
	v1 := f.addImage(t, hcloudtest.Image{Description: "v1", Labels: map[string]string{"role": "node"}})
	const spec = config.ImageSpec("role=node")
	img, err := f.res.Resolve(t.Context(), spec, config.ArchAMD64)
	if err != nil || img.ID != v1 {
		t.Fatalf("Resolve() = %v, %v; want image %d", img, err, v1)
	}
	resolvedAt := f.clock.Now()

	f.api.SetOutage(hcloudtest.RequestFault{Code: "server_error"}, hcloudtest.RequestFault{Code: "timeout"})
	f.clock.Step(imageresolve.DefaultTTL)
	outage := f.clock.Now()
	for f.clock.Now().Sub(resolvedAt) <= maxStale {
		img, err := f.res.Resolve(t.Context(), spec, config.ArchAMD64)
		if err != nil || img.ID != v1 {
			t.Fatalf("Resolve() %v into the outage = %v, %v; want the stale image %d", f.clock.Now().Sub(outage), img, err, v1)
		}
		if got := f.res.StaleSince(); !got.Equal(outage) {
			t.Fatalf("StaleSince() = %v; want %v", got, outage)
		}
		f.clock.Step(10 * time.Second)
	}
	// A lookup every 30 s, not one per call (every 10 s); hcloud-go
	// sends a request that met a timeout once more.
	calls := int(f.clock.Now().Sub(outage) / (10 * time.Second))
	if got, most := f.api.Count(list)-1, 2*(calls/3+1); got > most {
		t.Errorf("%d image listings during %d calls in the outage; want at most %d (one lookup per 30 s)", got, calls, most)
	}
	f.clock.Step(30 * time.Second)
	if img, err := f.res.Resolve(t.Context(), spec, config.ArchAMD64); !hcloud.IsError(err, hcloud.ErrorCodeServerError, hcloud.ErrorCodeTimeout) {
		t.Errorf("Resolve() of an image resolved more than %v ago = %v, %v; want the lookup's error", maxStale, img, err)
	}

	f.api.SetOutage()
	if img, err := f.res.Resolve(t.Context(), spec, config.ArchAMD64); err != nil || img.ID != v1 {
		t.Errorf("Resolve() after the outage = %v, %v; want image %d", img, err, v1)
	}
	if got := f.res.StaleSince(); !got.IsZero() {
		t.Errorf("StaleSince() after a good lookup = %v; want zero", got)
	}
}

// TestForgetDropsARotatedImage: a snapshot replaced and deleted within the
// TTL is found again at once after Forget of the old ID.
func TestForgetDropsARotatedImage(t *testing.T) {
	f := newFixture(t)
	v1 := f.addImage(t, hcloudtest.Image{Description: "v1", Labels: map[string]string{"role": "node"}})
	const spec = config.ImageSpec("role=node")
	if img, err := f.res.Resolve(t.Context(), spec, config.ArchAMD64); err != nil || img.ID != v1 {
		t.Fatalf("Resolve() = %v, %v; want image %d", img, err, v1)
	}
	f.clock.Step(time.Minute)
	v2 := f.addImage(t, hcloudtest.Image{Description: "v2", Labels: map[string]string{"role": "node"}})
	f.api.DeleteImage(v1)
	if img, _ := f.res.Resolve(t.Context(), spec, config.ArchAMD64); img == nil || img.ID != v1 {
		t.Fatalf("Resolve() within the TTL = %v; want the cached image %d", img, v1)
	}
	if f.res.Forget(v2) {
		t.Error("Forget(an image not in the cache) = true")
	}
	if !f.res.Forget(v1) {
		t.Error("Forget(the cached image) = false")
	}
	if img, err := f.res.Resolve(t.Context(), spec, config.ArchAMD64); err != nil || img.ID != v2 {
		t.Errorf("Resolve() after Forget = %v, %v; want image %d", img, err, v2)
	}
}
