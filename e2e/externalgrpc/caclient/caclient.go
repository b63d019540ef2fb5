// Package caclient sets up the suites of module e2e/externalgrpc: the
// autoscaler's log, certificates as cert-manager issues them, and the
// autoscaler's externalgrpc client built as its builder builds it.
package caclient

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/externalgrpc"
	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider"
	caconfig "sigs.k8s.io/cluster-autoscaler/pkg/config"
	coreoptions "sigs.k8s.io/cluster-autoscaler/pkg/core/options"

	"github.com/hcloudscale/hcloudscale/e2e"
)

// Prepare sends the autoscaler's log to klogFile (see e2e.LogTo) and
// writes a CA, a server and a client certificate into a new temporary
// directory named with prefix, which it names on stderr. done flushes
// the log.
func Prepare(klogFile, prefix string) (dir string, done func(), err error) {
	closeLog, err := e2e.LogTo(klogFile)
	if err != nil {
		return "", nil, err
	}
	if dir, err = os.MkdirTemp("", prefix); err != nil {
		closeLog()
		return "", nil, err
	}
	fmt.Fprintf(os.Stderr, "certificates and logs: %s\n", dir)
	if err := e2e.WriteCertificates(dir); err != nil {
		closeLog()
		return "", nil, err
	}
	return dir, closeLog, nil
}

// Build writes the autoscaler's --cloud-config for a server at addr, with
// the client certificate Prepare wrote into dir, and returns the
// autoscaler's externalgrpc client built from it (BuildExternalGrpc).
func Build(dir, addr string) (cloudprovider.CloudProvider, error) {
	cloudConfig := filepath.Join(dir, "cloud-config.yaml")
	doc := fmt.Sprintf("address: %q\nkey: %q\ncert: %q\ncacert: %q\n", addr,
		filepath.Join(dir, "client.key"), filepath.Join(dir, "client.crt"), filepath.Join(dir, "ca.crt"))
	if err := os.WriteFile(cloudConfig, []byte(doc), 0o600); err != nil {
		return nil, err
	}
	opts := &coreoptions.AutoscalerOptions{AutoscalingOptions: caconfig.AutoscalingOptions{CloudConfig: cloudConfig}}
	return externalgrpc.BuildExternalGrpc(opts, cloudprovider.NodeGroupDiscoveryOptions{},
		cloudprovider.NewResourceLimiter(nil, nil)), nil
}
