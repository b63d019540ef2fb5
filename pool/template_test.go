package pool

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/servercache"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// quantityEqual compares quantities by value: a parsed golden file and a
// computed node spell the same amount differently inside.
var quantityEqual = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

func TestTemplateNodeGolden(t *testing.T) {
	tests := []struct {
		name   string
		golden string
		cfg    func(*config.Pool)
	}{
		{name: "shared x86, defaults", golden: "template-cx23.json", cfg: func(p *config.Pool) {
			p.ServerType, p.Location = "cx23", "fsn1"
			p.Labels = map[string]string{"node-role.kubernetes.io/worker": "", "team": "a"}
			p.Taints = []corev1.Taint{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
		}},
		{name: "arm, max pods and a label override", golden: "template-cax11.json", cfg: func(p *config.Pool) {
			p.ServerType, p.Location = "cax11", "nbg1"
			p.MaxPods = 50
			// Pool labels win over the generated ones.
			p.Labels = map[string]string{"csi.hetzner.cloud/location": "custom"}
		}},
		{name: "dedicated, reserved resources", golden: "template-ccx13.json", cfg: func(p *config.Pool) {
			p.ServerType, p.Location = "ccx13", "ash"
			p.Reserved = config.Reserved{
				CPU:              resource.MustParse("250m"),
				Memory:           resource.MustParse("1Gi"),
				EphemeralStorage: resource.MustParse("5Gi"),
			}
		}},
	}
	e := newEnv(t, envOptions{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := poolConfig("workers", 0, 10)
			tt.cfg(&cfg)
			p := e.newPool(cfg)
			got, err := p.TemplateNode(t.Context())
			if err != nil {
				t.Fatalf("TemplateNode() error: %v", err)
			}
			path := filepath.Join("testdata", tt.golden)
			if *update {
				b, err := json.MarshalIndent(got, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("reading golden file (run with -update to create it): %v", err)
			}
			var want corev1.Node
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatalf("parsing %s: %v", path, err)
			}
			if diff := cmp.Diff(&want, got, quantityEqual); diff != "" {
				t.Errorf("TemplateNode() differs from %s (-want +got):\n%s", path, diff)
			}
		})
	}
}

func TestTemplateNeverPromisesMoreThanCapacity(t *testing.T) {
	e := newEnv(t, envOptions{})
	types, err := e.types.All(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cfg := poolConfig("workers", 0, 1)
	for _, st := range types {
		t.Run(st.Name, func(t *testing.T) {
			node, err := templateNode(&cfg, st)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
				c, a := node.Status.Capacity[r], node.Status.Allocatable[r]
				if a.Sign() <= 0 || a.Cmp(c) >= 0 {
					t.Errorf("%s: allocatable %s, capacity %s; want 0 < allocatable < capacity", r, a.String(), c.String())
				}
			}
			// The memory a real guest reports is below the advertised
			// size; allocatable must stay below that too.
			advertised := node.Status.Capacity[corev1.ResourceMemory]
			if got := node.Status.Allocatable[corev1.ResourceMemory]; got.Value() > advertised.Value()-guestMemoryShortfall(advertised.Value()) {
				t.Errorf("allocatable memory %s exceeds the guest's memory", got.String())
			}
		})
	}
}

func TestReservationFormulas(t *testing.T) {
	cpu := []struct {
		cores int
		want  int64 // millicores
	}{{1, 60}, {2, 70}, {3, 75}, {4, 80}, {8, 90}, {16, 110}, {48, 190}}
	for _, tt := range cpu {
		if got := defaultReservedCPU(tt.cores); got != tt.want {
			t.Errorf("defaultReservedCPU(%d) = %dm; want %dm", tt.cores, got, tt.want)
		}
	}
	mem := []struct {
		gib  int64
		want int64 // MiB, rounded up
	}{
		{2, 512},     // 25% of 2 GiB
		{4, 1024},    // 25% of 4 GiB
		{8, 1844},    // + 20% of 4 GiB: 1843.2
		{16, 2663},   // + 10% of 8 GiB: 2662.4
		{32, 3646},   // + 6% of 16 GiB: 3645.44
		{192, 10855}, // + 6% of 112 GiB + 2% of 64 GiB: 10854.4
	}
	for _, tt := range mem {
		if got := defaultReservedMemory(tt.gib*gib) / mib; got != tt.want {
			t.Errorf("defaultReservedMemory(%d GiB) = %d MiB; want %d MiB", tt.gib, got, tt.want)
		}
	}
}

func TestZone(t *testing.T) {
	for loc, want := range map[string]string{
		"nbg1": "nbg1-dc3", "hel1": "hel1-dc2", "fsn1": "fsn1-dc14",
		"ash": "ash-dc1", "hil": "hil-dc1", "sin": "sin-dc1", "new1": "new1",
	} {
		if got := Zone(loc); got != want {
			t.Errorf("Zone(%q) = %q; want %q", loc, got, want)
		}
	}
}

func TestTemplateNodeErrors(t *testing.T) {
	e := newEnv(t, envOptions{})
	cfg := poolConfig("workers", 0, 1)
	cfg.ServerType = "cx99"
	p := e.newPool(cfg)
	if _, err := p.TemplateNode(t.Context()); err == nil {
		t.Error("TemplateNode() for a missing server type = nil error")
	}
	if _, err := templateNode(&cfg, &servercache.ServerType{Name: "x"}); err == nil {
		t.Error("templateNode() for an unknown architecture = nil error")
	}
}
