package pool

import (
	"fmt"
	"strings"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/servercache"
)

// State is an instance's lifecycle state. The values equal the Cluster
// Autoscaler's cloudprovider.InstanceState.
type State int

// The instance states.
const (
	Running  State = 1
	Creating State = 2
	Deleting State = 3
)

func (s State) String() string {
	switch s {
	case Running:
		return "running"
	case Creating:
		return "creating"
	case Deleting:
		return "deleting"
	default:
		return fmt.Sprintf("State(%d)", int(s))
	}
}

// Instance is one unit of a pool as the autoscaler sees it: a server, a
// pending claim for one, or the placeholder of a failed claim.
type Instance struct {
	// ID is the provider ID "hcloud://<server id>" once the server
	// exists; before that, and for failed claims, the claim ID
	// "hcloudscale://<pool>/<server name>" ([ClaimID]).
	ID    string
	State State
	// Error is set for failed claims (State Creating) and for servers in
	// a state that needs attention; nil otherwise.
	Error *ErrorInfo
	// ServerID is 0 while no server exists.
	ServerID int64
	// Name is the server name, which is also the node name.
	Name string
	// Status is the server's last known Hetzner status; empty while no
	// server exists.
	Status hcloud.ServerStatus
	// Offering is the server type and location the instance runs on: the
	// server's as listed, which differ from the node group's for a server
	// whose type changed since (drift reports it); the group's for a
	// claim whose server is not listed yet.
	Offering config.Offering
	// Replaces is the ID of the server this one replaces: set for a claim
	// made by [Pool.Surge] (also once it failed) and for a server that
	// carries a valid config.LabelReplaces label (see [Pool.Surge]); 0
	// otherwise.
	Replaces int64
}

// claimScheme is the scheme of claim IDs.
const claimScheme = "hcloudscale://"

// ClaimID returns the ID of a claim for a server that does not exist (yet):
// "hcloudscale://<pool>/<server name>". It is stable for the claim's
// lifetime, because the autoscaler keys the age of an unregistered instance
// by its ID.
func ClaimID(pool, serverName string) string {
	return claimScheme + pool + "/" + serverName
}

// ParseClaimID splits a claim ID into pool and server name. The
// autoscaler's fake nodes carry the ID as name and provider ID, so a
// Cluster uses this to route them back to their pool.
func ParseClaimID(id string) (pool, name string, ok bool) {
	rest, found := strings.CutPrefix(id, claimScheme)
	if !found {
		return "", "", false
	}
	pool, name, found = strings.Cut(rest, "/")
	if !found || pool == "" || name == "" || strings.Contains(name, "/") {
		return "", "", false
	}
	return pool, name, true
}

// neverRan reports whether a listed server has certainly never run.
// Hetzner shows initializing only while a server is first created (see
// "Server lifecycle" in the package documentation); every other status
// can follow a boot: starting after a power-on or reset, off after a
// shutdown, stopping, rebuilding, migrating, and unknown at any time. So
// the status alone decides, whatever the server's age, and a server that
// this process saw running can never show initializing again.
//
// An off server that a pool with a subnet range created stopped has not
// run either, but that is only known to the create flow that made it (or
// one that resumes it): from a listing it cannot be told from a node that
// someone shut down, so it counts as one that may have run.
func neverRan(s *servercache.Server) bool {
	return s.Status == hcloud.ServerStatusInitializing
}

// failedCreation reports whether a server that no create flow of this
// process owns is a failed creation: it has never run ([neverRan]) and
// its creation began longer than the creation timeout ago. It is the only
// way a listed server is reported Creating with an error, which the
// autoscaler deletes on its next loop without drain and below min size,
// and the only listed server DeleteInstances removes below min.
func failedCreation(s *servercache.Server, now time.Time, creationTimeout time.Duration) bool {
	return neverRan(s) && !s.Created.IsZero() && now.Sub(s.Created) > creationTimeout
}

// serverState maps a server of the pool that no create flow of this
// process owns to its instance state. Servers we are deleting are handled
// by the caller.
//
//   - deleting: Deleting.
//   - initializing: Creating; once it is a [failedCreation], with
//     ErrorInfo Other "not-started": a server that has not finished its
//     first creation by then was left behind by a restart in the middle
//     of its create flow, or Hetzner failed to build it.
//   - starting, running, off, stopping, migrating, rebuilding: Running.
//     Each can follow a boot (a power cycle, reset, shutdown, rebuild or
//     migration of a node of any age); a node that is not ready meanwhile
//     is the autoscaler's unready-node handling, which drains, and min
//     size protects it.
//   - unknown and statuses this version does not know: Running, without
//     ErrorInfo. Only a failed creation carries ErrorInfo: the autoscaler
//     counts an instance with ErrorInfo neither as registered (it has no
//     node) nor as expected to register, so a target that includes it is
//     an "incorrect size" that DecreaseTargetSize cannot fix (see the
//     package documentation, Deleting and shrinking). Without ErrorInfo, a
//     server in status unknown that has a node is handled by the
//     autoscaler's unready-node logic, and one without a node is an
//     unregistered node, removed after max-node-provision-time.
func serverState(s *servercache.Server, now time.Time, creationTimeout time.Duration) (State, *ErrorInfo) {
	switch s.Status {
	case hcloud.ServerStatusDeleting:
		return Deleting, nil
	case hcloud.ServerStatusInitializing:
		if !failedCreation(s, now, creationTimeout) {
			return Creating, nil
		}
		return Creating, &ErrorInfo{
			Class:   Other,
			Code:    CodeNotStarted,
			Message: fmt.Sprintf("server %s is still %s %s after its creation, longer than the creation timeout %s", s.Name, s.Status, now.Sub(s.Created).Round(time.Second), creationTimeout),
		}
	case hcloud.ServerStatusRunning, hcloud.ServerStatusStarting, hcloud.ServerStatusOff,
		hcloud.ServerStatusStopping, hcloud.ServerStatusMigrating, hcloud.ServerStatusRebuilding:
		return Running, nil
	default:
		return Running, nil
	}
}
