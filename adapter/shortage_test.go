package adapter

import (
	"errors"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider"
	caerrors "sigs.k8s.io/cluster-autoscaler/pkg/utils/errors"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
	"github.com/hcloudscale/hcloudscale/pool"
)

// The adapter starts although one pool's server type is sold out: the
// other groups scale and the sold-out one fails fast.
func TestNewStartsInShortage(t *testing.T) {
	clock := hcloudtest.NewManualClock(epoch)
	fake := hcloudtest.NewServer(hcloudtest.WithClock(clock))
	t.Cleanup(fake.Close)
	if err := fake.SetServerTypeAvailable("cx23", "nbg1", false); err != nil {
		t.Fatal(err)
	}
	p, err := New(t.Context(), cloudprovider.NodeGroupDiscoveryOptions{NodeGroupSpecs: nodeSpecs},
		WithEnv(testEnv(t, fake, nil)),
		WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))),
		WithClusterOptions(clusterOptions(clock)...),
	)
	if err != nil {
		t.Fatalf("New with a sold-out server type: %v", err)
	}
	e := &env{t: t, fake: fake, clock: clock, provider: p}
	t.Cleanup(func() { e.cleanup() })

	if n := len(p.NodeGroups()); n != 3 {
		t.Fatalf("%d node groups; want all 3", n)
	}
	before := len(fake.Requests())
	err = e.group("batch").IncreaseSize(1)
	var aerr caerrors.AutoscalerError
	if !errors.As(err, &aerr) || aerr.Type() != caerrors.TransientError || !errors.Is(err, pool.ErrOfferingUnavailable) {
		t.Errorf("IncreaseSize of the sold-out group = %v; want a TransientError matching pool.ErrOfferingUnavailable", err)
	}
	if n := len(fake.Requests()) - before; n != 0 {
		t.Errorf("the refused increase made %d API requests; want none", n)
	}
	if err := e.group("workers").IncreaseSize(1); err != nil {
		t.Errorf("IncreaseSize of another group: %v", err)
	}
	e.eventually("the create request of the other group", 0, func() bool { return fake.Count("POST /servers") == 1 })
}
