package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/adapter"
	"github.com/hcloudscale/hcloudscale/config"
)

var klogFile = flag.String("klog", "", "file for the autoscaler's log (default: a new file in the temporary directory, named at the start)")

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(func() int {
		closeLog, err := LogTo(*klogFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer closeLog()
		return m.Run()
	}())
}

// TestAdapter runs every scenario against the in-process adapter.
func TestAdapter(t *testing.T) {
	for _, sc := range Scenarios {
		t.Run(sc.Name, func(t *testing.T) { sc.Run(t, adapterKind{}) })
	}
}

// TestAdapterLifecycle runs the node lifecycle's scenarios on the
// in-process adapter's Cluster, beside the autoscaler's loop.
func TestAdapterLifecycle(t *testing.T) {
	for _, sc := range LifecycleScenarios {
		t.Run(sc.Name, func(t *testing.T) { sc.Run(t, adapterKind{}) })
	}
}

// TestAdapterOfferings runs the scenarios of pools with offerings.
func TestAdapterOfferings(t *testing.T) {
	for _, sc := range OfferingScenarios {
		t.Run(sc.Name, func(t *testing.T) { sc.Run(t, adapterKind{}) })
	}
}

// Cluster returns the Cluster of an adapter the kind started.
func (adapterKind) Cluster(p any) *hcloudscale.Cluster { return p.(*adapter.Provider).Cluster() }

// adapterKind is our in-process adapter, started the way the
// autoscaler's builder starts it (adapter.New with the --nodes specs),
// with the scenario's short timings.
type adapterKind struct{}

func (adapterKind) Name() string { return "in-process" }

func (adapterKind) Start(t *testing.T, s Setup) (cloudprovider.CloudProvider, error) {
	log := ProviderLog()
	return adapter.New(context.Background(), cloudprovider.NodeGroupDiscoveryOptions{NodeGroupSpecs: s.Nodes},
		// Files are read from disk: a scenario may declare its pools in
		// a cluster-config file that changes under the provider.
		adapter.WithEnv(config.Env{Lookup: func(k string) (string, bool) { v, ok := s.Env[k]; return v, ok }, ReadFile: os.ReadFile}),
		adapter.WithLogger(log),
		// Cleanup cancels creates in flight at once, which is as close
		// to a crash as one process can come.
		adapter.WithCloseTimeout(time.Millisecond),
		adapter.WithClusterOptions(
			hcloudscale.WithRegisterer(prometheus.NewRegistry()),
			hcloudscale.WithPollInterval(s.Interval),
			hcloudscale.WithListTTL(s.ListTTL),
			hcloudscale.WithUnavailableTTL(s.UnavailableTTL),
			hcloudscale.WithSpreadGrace(s.SpreadGrace),
			hcloudscale.WithClientOptions(
				hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: hcloud.ConstantBackoff(50 * time.Millisecond), MaxRetries: 3}),
				hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(s.Interval)}),
			),
		),
	)
}

func (adapterKind) Stop(p cloudprovider.CloudProvider) error { return p.Cleanup() }

// TestAdapterAtScale measures the loop at the cluster sizes listed in
// $E2E_SCALE (e.g. "1000,5000"); it is skipped without.
func TestAdapterAtScale(t *testing.T) {
	for _, size := range ScaleSizes(t) {
		t.Run(fmt.Sprint(size), func(t *testing.T) { LoopAtScale(t, adapterKind{}, size, 10) })
	}
}
