// Package fencedleader gives a process that runs as one of several
// replicas a leader that writes only while it holds a Kubernetes Lease:
// one writer to the Hetzner Cloud API, whatever pauses, partitions,
// slow requests and hand-overs come between.
//
// It is client-go's leader election (k8s.io/client-go/tools/leaderelection
// with a resourcelock.LeaseLock) with a write fence on top. A [Leader] is
// the Cluster's [hcloudscale.Fence]: every request that changes servers
// (create and each of its retries, delete, power on, attach) asks it just
// before it goes to the network, and gets a Permit that bounds how long it
// may be on the wire. [Leader.Enter] gates changes, [Leader.Context] is
// the leadership context for other writes (Kubernetes ones, say), and
// [Leader.ClusterHooks] lists the servers before the first write.
//
// # Guarantee
//
// A write can take effect only while its sender holds the Lease. With
// lease duration L (whole seconds), renew deadline D, retry period P and
// write grace G, each time measured from when client-go took the renew
// time of this replica's last successful acquisition or renewal (r), which
// it sends after, by this replica's own monotonic clock (and by the wall
// clock where that says more):
//
//  1. A write is let through only before r + D, checked at the one place
//     every such request passes, below every retry and rate-limit hold.
//  2. It must be written whole before r + W, the write window, W = L − 1 s
//     − L/10: its context ends then, and its connection (HTTP/1.1, one
//     request at a time) asks again before each write of its bytes, so a
//     slow dial, TLS handshake or upload sends nothing after it. A
//     standby takes the Lease over no earlier than r + L − 1 s by its
//     clock (see Timings); the tenth of L covers a standby's clock running
//     up to 10% fast.
//  3. A replica that takes the Lease over from a holder that did not
//     release it waits G before it lists and writes, so that a write sent
//     before step 2's bound and carried out by the API within G is in its
//     listing. When the holder is unknown, it waits L + G: a replica that
//     creates the Lease (someone deleted it, and its holder, cut off from
//     the API server, may still write) or finds it held under its own
//     identity by another process (a restarted container, or a second
//     replica with the same identity). It does not release the Lease
//     before that wait is over, also when it is handed over or stopped
//     during it: the next holder of a released Lease leads at once.
//  4. A write whose answer was lost (a timeout after it was written, or a
//     502, 503 or 504, which a gateway sends without knowing the outcome)
//     may still be carried out: the fence stays closed and the Lease
//     unreleased until G after it ended. On [Leader.HandOver] the Lease is
//     released only once every write sent has its answer or is past that
//     grace, so the next replica leads at once, without step 3's wait.
//
// A Lease renewed under this replica's identity at a time this process
// did not renew it means two replicas share an identity: the Leader stops
// leading for good, logs it as an error and reports [ErrSameIdentity] by
// [Leader.Lost] and [Leader.Err]; it does not release the Lease.
//
// # Assumptions
//
// The API carries out a request it has received within G, as every
// replica's clock counts it (the 10% below applies to L, not to G). The
// replicas' clocks advance at rates within 10% of each other. Only the replicas of
// one Leader configuration write the Lease (deleting it is covered by step
// 3; editing its holder is not). Writes go through a Cluster built with
// this Leader as its fence, over hcloudscale's own transport or an
// *http.Transport (see hcloudscale.WithTransport: HTTP and HTTPS proxies are
// covered, a connection the fence cannot check refuses the write).
//
// # Timings
//
// client-go v0.37.2 stores the lease duration in whole seconds, truncated:
// tools/leaderelection/leaderelection.go:449 sets LeaseDurationSeconds to
// int(LeaseDuration / time.Second), so 1.9 s is stored as 1 s and 900 ms
// as 0 s. A standby measures the Lease from when it observed a change of
// the record (leaderelection.go:487-491, setObservedRecord at :556-563)
// for the stored seconds (isLeaseValid, leaderelection.go:548-553). It
// compares the record as LeaseLock.Get marshals it
// (tools/leaderelection/resourcelock/leaselock.go:48-49), with the renew
// time a metav1.Time, which marshals to whole seconds
// (k8s.io/apimachinery pkg/apis/meta/v1/time.go:170): renewals within one
// second look alike, so a standby's timer may start up to a second before
// the renew time of the leader's last renewal. Hence [Config.Validate] refuses a lease
// duration that is fractional or below 2 s, and the write window is
// L − 1 s − L/10. r is when the renew time was taken, not when it was
// sent: when the fast path's update fails, tryAcquireOrRenew reads the
// Lease before it sends the renew time it took first (:446, :470, :508),
// up to a renew deadline later, and a standby that saw an earlier renewal
// of the same second times the Lease from that one. The renew deadline
// and one retry period must fit in
// it (D + P ≤ W), so that the writes let through last have time to be
// written: the defaults, L 15 s, D 10 s, P 2 s, G 5 s, give W 12.5 s.
//
// client-go's release (tryRelease, leaderelection.go:326-358) reads the
// Lease but asks whether it leads of the record it observed before, and
// retries on a conflict: a release held back by step 4 while another
// replica took the Lease over would clear the new holder's hold. The
// Leader releases only a Lease that the read just before shows held
// under its identity.
//
// client-go also creates a missing Lease and leads at once
// (leaderelection.go:470-484), and treats a Lease held under its own
// identity as its own (leaderelection.go:456, 492): step 3 and the
// identity check above cover both.
//
// # Use
//
// Build the Leader, give it to the Cluster as its fence, start it with the
// Cluster's hooks, and hand the Lease over on the way out:
//
//	lead, err := fencedleader.New(fencedleader.DefaultConfig("ns", "my-autoscaler", podName), kube)
//	cluster, err := hcloudscale.New(ctx, cfg, hcloudscale.WithFence(lead), hcloudscale.WithResumeWhen(lead.Leading))
//	err = lead.Start(ctx, lead.ClusterHooks(cluster))
//	defer lead.HandOver(time.Minute)
//
// Then act only under [Leader.Context]; see the example.
package fencedleader
