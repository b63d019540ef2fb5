package fencedleader

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// A Holding is who holds a Lease, as a process that does not take part in
// the election sees it.
type Holding struct {
	Holder  string
	Renewed time.Time     // the holder's last renewal, by its clock
	Expires time.Time     // Renewed plus the stored duration, one second of resolution and the write grace
	Left    time.Duration // until Expires, by this process's clock; zero or less: expired
}

// LiveHolder reads the Lease namespace/name and returns its holding when
// a holder has renewed it within its duration plus the second of
// resolution and grace (the holder's write grace, [DefaultWriteGrace] for
// serve's default): that replica, or a write it sent, may still be
// writing. It returns nil when the Lease
// does not exist, was released or has expired. A tool that writes outside
// the election (scaling a pool by hand, deleting servers) should refuse
// while a live holder exists.
func LiveHolder(ctx context.Context, client kubernetes.Interface, namespace, name string, grace time.Duration) (*Holding, error) {
	lease, err := client.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Lease %s/%s: %w", namespace, name, err)
	}
	s := lease.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil {
		return nil, nil
	}
	d := time.Duration(0)
	if s.LeaseDurationSeconds != nil {
		d = time.Duration(*s.LeaseDurationSeconds) * time.Second
	}
	h := &Holding{Holder: *s.HolderIdentity, Renewed: s.RenewTime.Time, Expires: s.RenewTime.Add(d + leaseResolution + grace)}
	h.Left = time.Until(h.Expires)
	if h.Left <= 0 {
		return nil, nil
	}
	return h, nil
}
