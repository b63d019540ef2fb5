package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/fencedleader"
)

// leaseGuard keeps a command that writes outside the election (scale,
// cleanup) from writing beside a serve leader: with a kubeconfig at hand
// (--kubeconfig or $KUBECONFIG) it reads serve's Lease and refuses while
// a live holder has it.
type leaseGuard struct {
	kubeconfig, namespace, name string
	ignore                      bool
}

func registerLeaseGuard(fs *flag.FlagSet) *leaseGuard {
	g := &leaseGuard{}
	fs.StringVar(&g.kubeconfig, "kubeconfig", "", "kubeconfig `file` to read serve's leader Lease with (empty: the file $KUBECONFIG names; neither: the Lease is not read)")
	fs.StringVar(&g.namespace, "leader-elect-resource-namespace", "", "namespace of serve's Lease (empty: $POD_NAMESPACE, else kube-system)")
	fs.StringVar(&g.name, "leader-elect-resource-name", "hcloudscale", "name of serve's Lease")
	fs.BoolVar(&g.ignore, "ignore-leader", false, "write even while a serve replica holds the Lease and may be writing too")
	return g
}

// check returns an error naming the holder while serve's Lease is held;
// nil without a kubeconfig, with --ignore-leader, or when no live holder
// has it.
func (g *leaseGuard) check(ctx context.Context, env config.Env) error {
	if g.ignore {
		return nil
	}
	path := g.path(env)
	if path == "" {
		return nil
	}
	client, err := newKubeClient(path, env)
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w (or pass --ignore-leader)", err)
	}
	lc, err := leaderConfig(fencedleader.Config{Namespace: g.namespace, Identity: "-"}, env)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	h, err := fencedleader.LiveHolder(ctx, client, lc.Namespace, g.name, fencedleader.DefaultWriteGrace)
	if err == nil && h == nil && g.namespace == "" {
		h, lc.Namespace, err = g.elsewhere(ctx, client, lc.Namespace)
	}
	if err != nil {
		return fmt.Errorf("%w; cannot tell whether serve's leader is writing (or pass --ignore-leader)", err)
	}
	if h != nil {
		return fmt.Errorf("serve's leader %q holds Lease %s/%s (renewed %s ago, held %s more) and may be writing: "+
			"stop it or scale it to zero first, or pass --ignore-leader", h.Holder, lc.Namespace, g.name,
			time.Since(h.Renewed).Round(time.Second), h.Left.Round(time.Second))
	}
	return nil
}

// path is the kubeconfig at hand: --kubeconfig, else $KUBECONFIG; "" for
// none.
func (g *leaseGuard) path(env config.Env) string {
	if g.kubeconfig == "" && env.Lookup != nil {
		v, _ := env.Lookup("KUBECONFIG")
		return v
	}
	return g.kubeconfig
}

// elsewhere looks for serve's Lease in every namespace when the one it
// defaulted to has none (the chart keeps it in the release's namespace):
// it returns the first live holding and its namespace. A client that may
// not list Leases across namespaces gets an error naming the flag.
func (g *leaseGuard) elsewhere(ctx context.Context, client kubernetes.Interface, tried string) (*fencedleader.Holding, string, error) {
	list, err := client.CoordinationV1().Leases(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", g.name).String(),
	})
	if err != nil {
		return nil, tried, fmt.Errorf("no Lease %s/%s, and listing Leases named %s in other namespaces: %w; pass --leader-elect-resource-namespace with serve's namespace",
			tried, g.name, g.name, err)
	}
	for _, l := range list.Items {
		h, err := fencedleader.LiveHolder(ctx, client, l.Namespace, g.name, fencedleader.DefaultWriteGrace)
		if err != nil || h != nil {
			return h, l.Namespace, err
		}
	}
	return nil, tried, nil
}
