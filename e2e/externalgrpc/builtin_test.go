package externalgrpc

import (
	"fmt"
	"testing"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/hetzner"
	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider"

	"github.com/hcloudscale/hcloudscale/e2e"
)

// TestBuiltin runs every scenario against the autoscaler's built-in
// hetzner provider, for comparison. It reads HCLOUD_* from the process
// environment, so these tests must not run in parallel with each other.
func TestBuiltin(t *testing.T) {
	for _, sc := range e2e.Scenarios {
		t.Run(sc.Name, func(t *testing.T) { sc.Run(t, builtinKind{}) })
	}
}

// TestBuiltinAtScale measures the loop over the built-in provider at the
// cluster sizes listed in $E2E_SCALE (e.g. "1000,5000"); it is skipped
// without.
func TestBuiltinAtScale(t *testing.T) {
	for _, size := range e2e.ScaleSizes(t) {
		t.Run(fmt.Sprint(size), func(t *testing.T) { e2e.LoopAtScale(t, builtinKind{}, size, 10) })
	}
}

// builtinKind is the built-in provider, built as the autoscaler's builder
// builds it. It keeps no state worth stopping: a restart is a new one.
type builtinKind struct{}

func (builtinKind) Name() string { return "built-in" }

func (builtinKind) Start(t *testing.T, s e2e.Setup) (cloudprovider.CloudProvider, error) {
	for k, v := range s.Env {
		t.Setenv(k, v)
	}
	return hetzner.BuildHetzner(nil, cloudprovider.NodeGroupDiscoveryOptions{NodeGroupSpecs: s.Nodes},
		cloudprovider.NewResourceLimiter(nil, nil)), nil
}

func (builtinKind) Stop(p cloudprovider.CloudProvider) error { return p.Cleanup() }
