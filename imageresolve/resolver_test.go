package imageresolve_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/imageresolve"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Catalogue images of hcloudtest.NewServer.
const (
	ubuntu2404X86 = 161547269
	ubuntu2404ARM = 161547270
	debian12X86   = 114690387
	debian12ARM   = 114690389
)

const (
	getByID = "GET /images/{id}"
	list    = "GET /images"
)

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	api   *hcloudtest.Server
	clock *testingclock.FakeClock
	res   *imageresolve.Resolver
	logs  *observer.ObservedLogs
}

// newFixture starts a fake API and a resolver over the real hcloud-go
// client; both share one manual clock, so image creation times and cache
// expiry move together.
func newFixture(t *testing.T, opts ...imageresolve.Option) *fixture {
	t.Helper()
	clock := testingclock.NewFakeClock(epoch)
	api := hcloudtest.NewServer(hcloudtest.WithClock(clock))
	t.Cleanup(api.Close)
	core, logs := observer.New(zapcore.DebugLevel)
	all := append([]imageresolve.Option{
		imageresolve.WithClock(clock),
		imageresolve.WithLogger(zap.New(core)),
	}, opts...)
	res := imageresolve.New(&api.Client().Image, all...)
	t.Cleanup(res.Close)
	return &fixture{api: api, clock: clock, res: res, logs: logs}
}

func (f *fixture) addImage(t *testing.T, img hcloudtest.Image) int64 {
	t.Helper()
	id, err := f.api.AddImage(img)
	if err != nil {
		t.Fatalf("AddImage(%+v): %v", img, err)
	}
	return id
}

// imageRequests returns the image requests made so far, by template.
func (f *fixture) imageRequests() map[string]int {
	out := map[string]int{}
	for _, tmpl := range []string{getByID, list} {
		if n := f.api.Count(tmpl); n > 0 {
			out[tmpl] = n
		}
	}
	return out
}

func TestResolve(t *testing.T) {
	deprecatedAt := epoch.Add(-24 * time.Hour)
	tests := []struct {
		name string
		// setup adds images and returns the image the spec should resolve to.
		setup        func(t *testing.T, f *fixture) imageresolve.Image
		spec         config.ImageSpec
		arch         config.Arch
		wantRequests map[string]int
	}{
		{
			name: "ID of a system image",
			setup: func(*testing.T, *fixture) imageresolve.Image {
				return imageresolve.Image{ID: debian12X86, Name: "debian-12", Description: "Debian 12", Type: "system", Arch: config.ArchAMD64, Created: time.Date(2023, 6, 13, 6, 0, 2, 0, time.UTC)}
			},
			spec:         "114690387",
			arch:         config.ArchAMD64,
			wantRequests: map[string]int{getByID: 1},
		},
		{
			name: "name picks the image of the wanted arch",
			setup: func(*testing.T, *fixture) imageresolve.Image {
				return imageresolve.Image{ID: ubuntu2404ARM, Name: "ubuntu-24.04", Description: "Ubuntu 24.04", Type: "system", Arch: config.ArchARM64, Created: time.Date(2024, 4, 25, 13, 26, 57, 0, time.UTC)}
			},
			spec:         "ubuntu-24.04",
			arch:         config.ArchARM64,
			wantRequests: map[string]int{list: 1},
		},
		{
			name: "selector picks the newest available snapshot of the arch with the labels",
			setup: func(t *testing.T, f *fixture) imageresolve.Image {
				labels := map[string]string{"role": "worker", "os": "talos"}
				f.addImage(t, hcloudtest.Image{Description: "old", Architecture: hcloud.ArchitectureX86, Labels: labels, Created: epoch.Add(-3 * time.Hour)})
				want := f.addImage(t, hcloudtest.Image{Description: "newest available", Architecture: hcloud.ArchitectureX86, Labels: labels, Created: epoch.Add(-2 * time.Hour)})
				f.addImage(t, hcloudtest.Image{Description: "newer but still creating", Architecture: hcloud.ArchitectureX86, Labels: labels, Status: hcloud.ImageStatusCreating, Created: epoch.Add(-1 * time.Hour)})
				f.addImage(t, hcloudtest.Image{Description: "newer but arm", Architecture: hcloud.ArchitectureARM, Labels: labels, Created: epoch.Add(-1 * time.Hour)})
				f.addImage(t, hcloudtest.Image{Description: "newer but other labels", Architecture: hcloud.ArchitectureX86, Labels: map[string]string{"role": "db", "os": "talos"}, Created: epoch.Add(-1 * time.Hour)})
				f.addImage(t, hcloudtest.Image{Description: "newer but a backup", Type: hcloud.ImageTypeBackup, Architecture: hcloud.ArchitectureX86, Labels: labels, Created: epoch.Add(-1 * time.Hour)})
				return imageresolve.Image{ID: want, Description: "newest available", Type: "snapshot", Arch: config.ArchAMD64, Created: epoch.Add(-2 * time.Hour), Labels: labels}
			},
			spec:         "role=worker,os=talos",
			arch:         config.ArchAMD64,
			wantRequests: map[string]int{list: 1},
		},
		{
			name: "a bare word that is no image name falls back to a label-key selector",
			setup: func(t *testing.T, f *fixture) imageresolve.Image {
				want := f.addImage(t, hcloudtest.Image{Description: "golden arm", Architecture: hcloud.ArchitectureARM, Labels: map[string]string{"golden": ""}})
				return imageresolve.Image{ID: want, Description: "golden arm", Type: "snapshot", Arch: config.ArchARM64, Created: epoch, Labels: map[string]string{"golden": ""}}
			},
			spec:         "golden",
			arch:         config.ArchARM64,
			wantRequests: map[string]int{list: 2},
		},
		{
			name: "digits that are no image ID fall back to a name, as upstream",
			setup: func(t *testing.T, f *fixture) imageresolve.Image {
				want := f.addImage(t, hcloudtest.Image{Name: "2026", Description: "year image", Type: hcloud.ImageTypeSystem, Architecture: hcloud.ArchitectureX86})
				return imageresolve.Image{ID: want, Name: "2026", Description: "year image", Type: "system", Arch: config.ArchAMD64, Created: epoch}
			},
			spec:         "2026",
			arch:         config.ArchAMD64,
			wantRequests: map[string]int{getByID: 1, list: 1},
		},
		{
			name: "deprecated image by name is returned and marked",
			setup: func(t *testing.T, f *fixture) imageresolve.Image {
				want := f.addImage(t, hcloudtest.Image{Name: "centos-7", Description: "CentOS 7", Type: hcloud.ImageTypeSystem, Architecture: hcloud.ArchitectureX86, Deprecated: deprecatedAt, Created: epoch.Add(-1000 * time.Hour)})
				return imageresolve.Image{ID: want, Name: "centos-7", Description: "CentOS 7", Type: "system", Arch: config.ArchAMD64, Created: epoch.Add(-1000 * time.Hour), Deprecated: true, UnavailableAfter: deprecatedAt.Add(90 * 24 * time.Hour)}
			},
			spec:         "centos-7",
			arch:         config.ArchAMD64,
			wantRequests: map[string]int{list: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			want := tt.setup(t, f)
			got, err := f.res.Resolve(t.Context(), tt.spec, tt.arch)
			if err != nil {
				t.Fatalf("Resolve(%q, %s): %v", tt.spec, tt.arch, err)
			}
			if diff := cmp.Diff(&want, got, equalTimes, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Resolve(%q, %s) mismatch (-want +got):\n%s", tt.spec, tt.arch, diff)
			}
			if diff := cmp.Diff(tt.wantRequests, f.imageRequests()); diff != "" {
				t.Errorf("API requests mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// equalTimes compares instants, not time.Time's location pointers, which
// differ after a JSON round trip.
var equalTimes = cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })

func TestResolveErrors(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, f *fixture)
		spec  config.ImageSpec
		arch  config.Arch
		// wantErr is matched with errors.As against its own type and
		// compared field by field; wantMsg is the whole message, or its
		// start with msgPrefix (hcloud.Error ends in a request ID).
		wantErr      error
		wantMsg      string
		msgPrefix    bool
		wantRequests map[string]int
	}{
		{
			name:         "empty spec is an error, never the newest snapshot",
			setup:        addSnapshot(hcloud.ArchitectureARM, nil),
			spec:         "",
			arch:         config.ArchARM64,
			wantErr:      &imageresolve.MissingSpecError{Arch: config.ArchARM64},
			wantMsg:      "no image for arch arm64",
			wantRequests: map[string]int{},
		},
		{
			name:         "unknown arch",
			spec:         "ubuntu-24.04",
			arch:         "s390x",
			wantErr:      &imageresolve.UnknownArchError{Arch: "s390x"},
			wantMsg:      `image "ubuntu-24.04": arch "s390x" is not one of amd64, arm64`,
			wantRequests: map[string]int{},
		},
		{
			name:         "unknown ID tries ID, name, then selector",
			spec:         "999999",
			arch:         config.ArchAMD64,
			wantErr:      &imageresolve.NotFoundError{Spec: "999999", Arch: config.ArchAMD64, Kind: imageresolve.KindID},
			wantMsg:      `image "999999" for arch amd64: no image matches it as ID, name or label selector`,
			wantRequests: map[string]int{getByID: 1, list: 2},
		},
		{
			name:         "unknown name",
			spec:         "ubuntu-99.04",
			arch:         config.ArchARM64,
			wantErr:      &imageresolve.NotFoundError{Spec: "ubuntu-99.04", Arch: config.ArchARM64, Kind: imageresolve.KindName},
			wantMsg:      `image "ubuntu-99.04" for arch arm64: no image matches it as name or label selector`,
			wantRequests: map[string]int{list: 2},
		},
		{
			name:         "name that is not a valid selector is simply not found",
			spec:         "-weird-",
			arch:         config.ArchAMD64,
			wantErr:      &imageresolve.NotFoundError{Spec: "-weird-", Arch: config.ArchAMD64, Kind: imageresolve.KindName},
			wantMsg:      `image "-weird-" for arch amd64: no image matches it as name or label selector`,
			wantRequests: map[string]int{list: 2},
		},
		{
			name:         "selector matching only a snapshot of the other arch",
			setup:        addSnapshot(hcloud.ArchitectureARM, map[string]string{"role": "worker"}),
			spec:         "role=worker",
			arch:         config.ArchAMD64,
			wantErr:      &imageresolve.NotFoundError{Spec: "role=worker", Arch: config.ArchAMD64, Kind: imageresolve.KindSelector},
			wantMsg:      `image "role=worker" for arch amd64: no image matches it as label selector (available snapshots only)`,
			wantRequests: map[string]int{list: 1},
		},
		{
			name: "selector matching only a snapshot still being created",
			setup: func(t *testing.T, f *fixture) {
				f.addImage(t, hcloudtest.Image{Architecture: hcloud.ArchitectureX86, Status: hcloud.ImageStatusCreating, Labels: map[string]string{"role": "worker"}})
			},
			spec:         "role=worker",
			arch:         config.ArchAMD64,
			wantErr:      &imageresolve.NotFoundError{Spec: "role=worker", Arch: config.ArchAMD64, Kind: imageresolve.KindSelector},
			wantMsg:      `image "role=worker" for arch amd64: no image matches it as label selector (available snapshots only)`,
			wantRequests: map[string]int{list: 1},
		},
		{
			name:         "ID of an image of another arch",
			spec:         "114690389",
			arch:         config.ArchAMD64,
			wantErr:      &imageresolve.ArchMismatchError{Spec: "114690389", ID: debian12ARM, Got: config.ArchARM64, Want: config.ArchAMD64},
			wantMsg:      `image "114690389" for arch amd64: image 114690389 is built for arch arm64`,
			wantRequests: map[string]int{getByID: 1},
		},
		{
			name: "API error is wrapped",
			setup: func(_ *testing.T, f *fixture) {
				f.api.FailRequest(list, 1, hcloudtest.RequestFault{Code: "forbidden", Message: "insufficient permissions"})
			},
			spec:         "ubuntu-24.04",
			arch:         config.ArchAMD64,
			wantErr:      hcloud.Error{Code: hcloud.ErrorCodeForbidden, Message: "insufficient permissions"},
			wantMsg:      `image "ubuntu-24.04" for arch amd64: get image by name: insufficient permissions (forbidden`,
			msgPrefix:    true,
			wantRequests: map[string]int{list: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			if tt.setup != nil {
				tt.setup(t, f)
			}
			got, err := f.res.Resolve(t.Context(), tt.spec, tt.arch)
			if err == nil {
				t.Fatalf("Resolve(%q, %s) = image %d, nil; want error %q", tt.spec, tt.arch, got.ID, tt.wantMsg)
			}
			if msg := err.Error(); msg != tt.wantMsg && !(tt.msgPrefix && strings.HasPrefix(msg, tt.wantMsg)) {
				t.Errorf("Resolve(%q, %s) error = %q; want %q", tt.spec, tt.arch, err, tt.wantMsg)
			}
			target := reflect.New(reflect.TypeOf(tt.wantErr))
			if !errors.As(err, target.Interface()) {
				t.Fatalf("Resolve(%q, %s) error %q is not a %T", tt.spec, tt.arch, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantErr, target.Elem().Interface(), cmp.FilterPath(isResponseField, cmp.Ignore())); diff != "" {
				t.Errorf("Resolve(%q, %s) error mismatch (-want +got):\n%s", tt.spec, tt.arch, diff)
			}
			if diff := cmp.Diff(tt.wantRequests, f.imageRequests()); diff != "" {
				t.Errorf("API requests mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// isResponseField leaves out hcloud.Error's HTTP response and details,
// which carry no meaning for these tests.
func isResponseField(p cmp.Path) bool {
	switch p.Last().String() {
	case ".response", ".Details":
		return true
	}
	return false
}

func addSnapshot(arch hcloud.Architecture, labels map[string]string) func(*testing.T, *fixture) {
	return func(t *testing.T, f *fixture) {
		f.addImage(t, hcloudtest.Image{Architecture: arch, Labels: labels})
	}
}

func TestResolvePool(t *testing.T) {
	tests := []struct {
		name    string
		pool    *config.Pool
		arch    config.Arch
		wantID  int64
		wantErr string
		wantAs  error
	}{
		{
			name:   "pool image for the arch",
			pool:   &config.Pool{Name: "workers", Images: config.ImagesForArch{AMD64: "debian-12", ARM64: "ubuntu-24.04"}},
			arch:   config.ArchARM64,
			wantID: ubuntu2404ARM,
		},
		{
			name:    "no image for arm64 names pool and arch",
			pool:    &config.Pool{Name: "workers", Images: config.ImagesForArch{AMD64: "debian-12"}},
			arch:    config.ArchARM64,
			wantErr: `pool "workers": no image for arch arm64`,
			wantAs:  &imageresolve.MissingSpecError{Pool: "workers", Arch: config.ArchARM64},
		},
		{
			name:    "no image for amd64 names pool and arch",
			pool:    &config.Pool{Name: "gpu", Images: config.ImagesForArch{ARM64: "debian-12"}},
			arch:    config.ArchAMD64,
			wantErr: `pool "gpu": no image for arch amd64`,
			wantAs:  &imageresolve.MissingSpecError{Pool: "gpu", Arch: config.ArchAMD64},
		},
		{
			name:    "lookup failure names the pool",
			pool:    &config.Pool{Name: "workers", Images: config.ImagesForArch{AMD64: "role=none"}},
			arch:    config.ArchAMD64,
			wantErr: `pool "workers": image "role=none" for arch amd64: no image matches it as label selector (available snapshots only)`,
			wantAs:  &imageresolve.NotFoundError{Spec: "role=none", Arch: config.ArchAMD64, Kind: imageresolve.KindSelector},
		},
		{
			name:    "unknown arch names the pool",
			pool:    &config.Pool{Name: "workers", Images: config.ImagesForArch{AMD64: "debian-12"}},
			arch:    "riscv64",
			wantErr: `pool "workers": arch "riscv64" is not one of amd64, arm64`,
			wantAs:  &imageresolve.UnknownArchError{Arch: "riscv64"},
		},
		{
			name:    "nil pool",
			arch:    config.ArchAMD64,
			wantErr: "resolve pool image: pool is nil",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			got, err := f.res.ResolvePool(t.Context(), tt.pool, tt.arch)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ResolvePool(%s): %v", tt.arch, err)
				}
				if got.ID != tt.wantID {
					t.Errorf("ResolvePool(%s) = image %d; want %d", tt.arch, got.ID, tt.wantID)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("ResolvePool(%s) error = %v; want %q", tt.arch, err, tt.wantErr)
			}
			if tt.wantAs != nil {
				target := reflect.New(reflect.TypeOf(tt.wantAs))
				if !errors.As(err, target.Interface()) {
					t.Fatalf("ResolvePool(%s) error %q is not a %T", tt.arch, err, tt.wantAs)
				}
				if diff := cmp.Diff(tt.wantAs, target.Elem().Interface()); diff != "" {
					t.Errorf("ResolvePool(%s) error mismatch (-want +got):\n%s", tt.arch, diff)
				}
			}
		})
	}
}

// TestResolveConcurrentOneRequest shows that a pool scaling by 50 costs one
// lookup: with the cache, and, with the cache off, through coalescing alone
// (the fake's latency keeps the first lookup in flight while all 50 join).
func TestResolveConcurrentOneRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		ttl  time.Duration
	}{
		{"cache on", imageresolve.DefaultTTL},
		{"cache off", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, imageresolve.WithTTL(tc.ttl))
			want := f.addImage(t, hcloudtest.Image{Architecture: hcloud.ArchitectureX86, Labels: map[string]string{"role": "worker"}})
			f.api.SetLatency(200 * time.Millisecond)

			const n = 50
			ids := make([]int64, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					img, err := f.res.Resolve(t.Context(), "role=worker", config.ArchAMD64)
					errs[i] = err
					if img != nil {
						ids[i] = img.ID
					}
				})
			}
			wg.Wait()
			for i := range n {
				if errs[i] != nil || ids[i] != want {
					t.Errorf("caller %d: Resolve = image %d, %v; want %d, nil", i, ids[i], errs[i], want)
				}
			}
			if diff := cmp.Diff(map[string]int{list: 1}, f.imageRequests()); diff != "" {
				t.Errorf("API requests for %d concurrent calls mismatch (-want +got):\n%s", n, diff)
			}
		})
	}
}

func TestResolveCacheTTL(t *testing.T) {
	f := newFixture(t, imageresolve.WithTTL(5*time.Minute))
	labels := map[string]string{"role": "worker"}
	first := f.addImage(t, hcloudtest.Image{Description: "v1", Architecture: hcloud.ArchitectureX86, Labels: labels})

	resolve := func(step string, wantID int64, wantRequests int) {
		t.Helper()
		f.api.ResetCounts()
		img, err := f.res.Resolve(t.Context(), "role=worker", config.ArchAMD64)
		if err != nil {
			t.Fatalf("%s: Resolve: %v", step, err)
		}
		if img.ID != wantID {
			t.Errorf("%s: Resolve = image %d; want %d", step, img.ID, wantID)
		}
		if got := f.api.Count(list); got != wantRequests {
			t.Errorf("%s: %d list requests; want %d", step, got, wantRequests)
		}
	}

	resolve("first lookup", first, 1)
	f.clock.Step(time.Minute)
	second := f.addImage(t, hcloudtest.Image{Description: "v2", Architecture: hcloud.ArchitectureX86, Labels: labels})
	resolve("within the TTL the cached image is used", first, 0)
	f.clock.Step(4*time.Minute - time.Second)
	resolve("just before expiry still cached", first, 0)
	f.clock.Step(time.Second)
	resolve("after the TTL the new snapshot is picked up", second, 1)
	resolve("and cached again", second, 0)

	third := f.addImage(t, hcloudtest.Image{Description: "v3", Architecture: hcloud.ArchitectureX86, Labels: labels, Created: f.clock.Now().Add(time.Second)})
	f.res.Invalidate()
	resolve("Invalidate forces a lookup", third, 1)
}

func TestResolveReturnsCopies(t *testing.T) {
	f := newFixture(t)
	f.addImage(t, hcloudtest.Image{Architecture: hcloud.ArchitectureX86, Labels: map[string]string{"role": "worker"}})
	img, err := f.res.Resolve(t.Context(), "role=worker", config.ArchAMD64)
	if err != nil {
		t.Fatal(err)
	}
	img.Labels["role"] = "changed by caller"
	img.Name = "changed by caller"
	again, err := f.res.Resolve(t.Context(), "role=worker", config.ArchAMD64)
	if err != nil {
		t.Fatal(err)
	}
	if again.Labels["role"] != "worker" || again.Name != "" {
		t.Errorf("cached image changed through a returned copy: labels %v, name %q", again.Labels, again.Name)
	}
}

func TestResolveNegativeCache(t *testing.T) {
	t.Run("not found is cached briefly", func(t *testing.T) {
		f := newFixture(t, imageresolve.WithNegativeTTL(30*time.Second))
		lookup := func(step string, wantFound bool, wantRequests map[string]int) {
			t.Helper()
			f.api.ResetCounts()
			_, err := f.res.Resolve(t.Context(), "my-image", config.ArchAMD64)
			var nf *imageresolve.NotFoundError
			if found := err == nil; found != wantFound || (!found && !errors.As(err, &nf)) {
				t.Errorf("%s: Resolve error = %v; want found=%v", step, err, wantFound)
			}
			if diff := cmp.Diff(wantRequests, f.imageRequests()); diff != "" {
				t.Errorf("%s: API requests mismatch (-want +got):\n%s", step, diff)
			}
		}
		lookup("unknown name", false, map[string]int{list: 2})
		f.addImage(t, hcloudtest.Image{Name: "my-image", Type: hcloud.ImageTypeSystem, Architecture: hcloud.ArchitectureX86})
		lookup("within the negative TTL", false, map[string]int{})
		f.clock.Step(30 * time.Second)
		lookup("after the negative TTL the new image is found", true, map[string]int{list: 1})
	})
	t.Run("failed requests are not cached", func(t *testing.T) {
		f := newFixture(t)
		f.api.FailRequest(list, 1, hcloudtest.RequestFault{Code: "forbidden"})
		if _, err := f.res.Resolve(t.Context(), "debian-12", config.ArchAMD64); !hcloud.IsError(err, hcloud.ErrorCodeForbidden) {
			t.Fatalf("Resolve with an injected fault: error = %v; want forbidden", err)
		}
		img, err := f.res.Resolve(t.Context(), "debian-12", config.ArchAMD64)
		if err != nil || img.ID != debian12X86 {
			t.Fatalf("Resolve after the fault = %v, %v; want image %d", img, err, debian12X86)
		}
		if got := f.api.Count(list); got != 2 {
			t.Errorf("%d list requests; want 2 (the failure must not be cached)", got)
		}
	})
	t.Run("negative cache off", func(t *testing.T) {
		f := newFixture(t, imageresolve.WithNegativeTTL(0))
		for range 2 {
			if _, err := f.res.Resolve(t.Context(), "114690389", config.ArchAMD64); err == nil {
				t.Fatal("Resolve of an arm image ID for amd64 succeeded; want an error")
			}
		}
		if got := f.api.Count(getByID); got != 2 {
			t.Errorf("%d requests; want 2 with the negative cache off", got)
		}
	})
}

func TestDeprecatedImageWarnsOncePerImage(t *testing.T) {
	f := newFixture(t, imageresolve.WithTTL(0))
	old := f.addImage(t, hcloudtest.Image{Name: "centos-7", Type: hcloud.ImageTypeSystem, Architecture: hcloud.ArchitectureX86, Deprecated: epoch})
	older := f.addImage(t, hcloudtest.Image{Name: "centos-6", Type: hcloud.ImageTypeSystem, Architecture: hcloud.ArchitectureX86, Deprecated: epoch})
	for _, spec := range []config.ImageSpec{"centos-7", "centos-7", "centos-6", "debian-12", "centos-6"} {
		img, err := f.res.Resolve(t.Context(), spec, config.ArchAMD64)
		if err != nil {
			t.Fatalf("Resolve(%q): %v", spec, err)
		}
		if want := spec != "debian-12"; img.Deprecated != want {
			t.Errorf("Resolve(%q).Deprecated = %v; want %v", spec, img.Deprecated, want)
		}
	}
	var warned []int64
	for _, e := range f.logs.FilterLevelExact(zapcore.WarnLevel).All() {
		warned = append(warned, e.ContextMap()["image_id"].(int64))
	}
	if diff := cmp.Diff([]int64{old, older}, warned); diff != "" {
		t.Errorf("deprecation warnings by image ID mismatch (-want +got):\n%s", diff)
	}
}

func TestResolveCancelledCallerReturnsPromptly(t *testing.T) {
	f := newFixture(t)
	f.api.SetLatency(500 * time.Millisecond)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := f.res.Resolve(ctx, "debian-12", config.ArchARM64)
		done <- err
	}()
	// A second caller shares the lookup and keeps waiting.
	shared := make(chan *imageresolve.Image, 1)
	go func() {
		img, err := f.res.Resolve(t.Context(), "debian-12", config.ArchARM64)
		if err != nil {
			t.Errorf("shared caller: Resolve: %v", err)
		}
		shared <- img
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled caller: error = %v; want context.Canceled", err)
		}
		if took := time.Since(start); took > 250*time.Millisecond {
			t.Errorf("cancelled caller returned after %v; want promptly", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled caller did not return")
	}
	if img := <-shared; img == nil || img.ID != debian12ARM {
		t.Errorf("shared caller got %v; want image %d", img, debian12ARM)
	}
	// The lookup finished for the cache too: no second request.
	if _, err := f.res.Resolve(t.Context(), "debian-12", config.ArchARM64); err != nil {
		t.Fatal(err)
	}
	if got := f.api.Count(list); got != 1 {
		t.Errorf("%d list requests; want 1", got)
	}
}

func TestResolveAlreadyCancelled(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.res.Resolve(ctx, "debian-12", config.ArchAMD64); !errors.Is(err, context.Canceled) {
		t.Errorf("Resolve with a cancelled context: error = %v; want context.Canceled", err)
	}
	if diff := cmp.Diff(map[string]int{}, f.imageRequests()); diff != "" {
		t.Errorf("API requests mismatch (-want +got):\n%s", diff)
	}
}

func TestLookupTimeout(t *testing.T) {
	f := newFixture(t, imageresolve.WithLookupTimeout(50*time.Millisecond))
	f.api.SetLatency(5 * time.Second)
	start := time.Now()
	_, err := f.res.Resolve(t.Context(), "debian-12", config.ArchAMD64)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Resolve past the lookup timeout: error = %v; want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Resolve took %v with a 50ms lookup timeout", took)
	}
}

func TestClose(t *testing.T) {
	f := newFixture(t)
	f.api.SetLatency(10 * time.Second)
	done := make(chan error, 1)
	go func() {
		_, err := f.res.Resolve(t.Context(), "debian-12", config.ArchAMD64)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	f.res.Close()
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Close took %v; want it to cancel the running lookup", took)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Resolve interrupted by Close: error = %v; want context.Canceled", err)
	}
	if _, err := f.res.Resolve(t.Context(), "debian-12", config.ArchAMD64); !errors.Is(err, imageresolve.ErrClosed) {
		t.Errorf("Resolve after Close: error = %v; want ErrClosed", err)
	}
	f.res.Close() // a second Close is harmless
}

// BenchmarkResolveCached measures the cost of a cache hit, which is what
// every server of a scale-up pays after the first.
func BenchmarkResolveCached(b *testing.B) {
	clock := testingclock.NewFakeClock(epoch)
	api := hcloudtest.NewServer(hcloudtest.WithClock(clock))
	defer api.Close()
	if _, err := api.AddImage(hcloudtest.Image{Architecture: hcloud.ArchitectureX86, Labels: map[string]string{"role": "worker", "os": "talos"}}); err != nil {
		b.Fatal(err)
	}
	res := imageresolve.New(&api.Client().Image, imageresolve.WithClock(clock))
	defer res.Close()
	ctx := b.Context()
	if _, err := res.Resolve(ctx, "role=worker,os=talos", config.ArchAMD64); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := res.Resolve(ctx, "role=worker,os=talos", config.ArchAMD64); err != nil {
			b.Fatal(err)
		}
	}
	if n := api.Count(list); n != 1 {
		b.Errorf("%d list requests; want 1", n)
	}
}
