package adapter

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/client-go/informers"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider"
	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider/builder"
	coreoptions "sigs.k8s.io/cluster-autoscaler/pkg/core/options"

	"github.com/hcloudscale/hcloudscale"
)

// StartTimeout bounds the checks against the API when the autoscaler
// builds the provider.
const StartTimeout = 2 * time.Minute

// EnvLabelNodes, set to true (strconv.ParseBool), makes [Register] run the
// node labeller with the autoscaler's Kubernetes client ([WithNodeLabeller]);
// the autoscaler's ClusterRole then needs update on nodes.
const EnvLabelNodes = "HCLOUD_LABEL_NODES"

// Register makes the provider available to the autoscaler as
// --cloud-provider=<name>. Call it once, from an init function of the
// autoscaler build (the builder keeps a process-wide table and exits on a
// name registered twice).
//
// The autoscaler's builder cannot return an error, so this is the one
// place that ends the process: when the configuration or the checks fail,
// it logs every problem through klog and exits with status 1. [New] is
// the constructor that returns the error instead.
func Register(name string) {
	builder.RegisterCloudProvider(name, buildFunc(name, func(code int) { klog.FlushAndExit(klog.ExitFlushTimeout, code) }))
}

// buildFunc is the builder shim behind Register; exit ends the process.
func buildFunc(name string, exit func(code int)) builder.CloudProviderBuilder {
	return func(caOpts *coreoptions.AutoscalerOptions, do cloudprovider.NodeGroupDiscoveryOptions, rl *cloudprovider.ResourceLimiter, _ informers.SharedInformerFactory) cloudprovider.CloudProvider {
		log := NewKlogLogger()
		ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
		defer cancel()
		opts := []Option{
			WithName(name),
			WithResourceLimiter(rl),
			WithLogger(log),
			WithClusterOptions(hcloudscale.WithRegisterer(tolerantRegisterer{legacyregistry.Registerer(), log})),
		}
		if on, _ := strconv.ParseBool(os.Getenv(EnvLabelNodes)); on && caOpts != nil && caOpts.KubeClient != nil {
			opts = append(opts, WithNodeLabeller(caOpts.KubeClient))
		}
		p, err := New(ctx, do, opts...)
		if err != nil {
			problems := leaves(err)
			for _, e := range problems {
				klog.ErrorS(e, "hcloudscale: cannot start", "provider", name)
			}
			klog.ErrorS(nil, "hcloudscale: exiting", "provider", name, "problems", len(problems))
			exit(1)
			return nil
		}
		klog.InfoS("hcloudscale: cloud provider ready", "provider", name, "node_groups", len(p.NodeGroups()))
		return p
	}
}

// leaves flattens errors.Join trees into their single errors, so that
// each problem gets a log line of its own.
func leaves(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	}
	return []error{err}
}

// tolerantRegisterer registers with the autoscaler's registry, whose
// /metrics endpoint serves it, but never makes a collector conflict fatal.
// A build that also links the autoscaler's own Hetzner provider has its
// hcloud_api_* metrics registered already, with other types; hcloud-go
// panics when asked to reuse such a collector. A conflicting collector
// is therefore left unregistered (its series are not exported) and logged;
// a collector registered before with the same type is reused as usual.
type tolerantRegisterer struct {
	prometheus.Registerer
	log *zap.Logger
}

func (r tolerantRegisterer) Register(c prometheus.Collector) error {
	err := r.Registerer.Register(c)
	if err == nil {
		return nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) && reflect.TypeOf(are.ExistingCollector) == reflect.TypeOf(c) {
		return err
	}
	r.log.Warn("metric not exported: it conflicts with one registered by another part of the autoscaler", zap.Error(err))
	return nil
}

func (r tolerantRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}
