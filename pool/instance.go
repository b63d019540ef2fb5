package pool

import (
	"fmt"
	"strings"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

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
}

// ClaimScheme is the scheme of claim IDs.
const ClaimScheme = "hcloudscale://"

// ClaimID returns the ID of a claim for a server that does not exist (yet):
// "hcloudscale://<pool>/<server name>". It is stable for the claim's
// lifetime, because the autoscaler keys the age of an unregistered instance
// by its ID.
func ClaimID(pool, serverName string) string {
	return ClaimScheme + pool + "/" + serverName
}

// ParseClaimID splits a claim ID into pool and server name. The
// autoscaler's fake nodes carry the ID as name and provider ID, so a
// Cluster uses this to route them back to their pool.
func ParseClaimID(id string) (pool, name string, ok bool) {
	rest, found := strings.CutPrefix(id, ClaimScheme)
	if !found {
		return "", "", false
	}
	pool, name, found = strings.Cut(rest, "/")
	if !found || pool == "" || name == "" || strings.Contains(name, "/") {
		return "", "", false
	}
	return pool, name, true
}

// serverState maps a server of the pool that no create flow of this
// process owns to its instance state. Servers we are deleting are handled
// by the caller.
//
//   - deleting: Deleting.
//   - initializing, starting: Creating; after the creation timeout (counted
//     from the server's creation) with ErrorInfo Other "not-started",
//     because a server that has not started by then was left behind by a
//     restart in the middle of its create flow, and the autoscaler deletes
//     Creating instances with an error.
//   - off: the same as initializing when stoppedCreates (the pool creates
//     servers stopped, so an off server past the timeout may never have
//     been powered on); otherwise Running: servers of such a pool were
//     started at creation, so an off server was stopped later, its node is
//     NotReady and the autoscaler's unready-node handling applies, not
//     deletion as a failed creation.
//   - stopping, running, migrating, rebuilding: Running.
//   - unknown and statuses this version does not know: Running, without
//     ErrorInfo. Only a failed creation carries ErrorInfo: the autoscaler
//     counts an instance with ErrorInfo neither as registered (it has no
//     node) nor as expected to register, so a target that includes it is
//     an "incorrect size" that DecreaseTargetSize cannot fix (see the
//     package documentation, Deleting and shrinking). Without ErrorInfo, a
//     server in status unknown that has a node is handled by the
//     autoscaler's unready-node logic, and one without a node is an
//     unregistered node, removed after max-node-provision-time.
func serverState(s *servercache.Server, now time.Time, creationTimeout time.Duration, stoppedCreates bool) (State, *ErrorInfo) {
	stale := !s.Created.IsZero() && now.Sub(s.Created) > creationTimeout
	notStarted := func() (State, *ErrorInfo) {
		if !stale {
			return Creating, nil
		}
		return Creating, &ErrorInfo{
			Class:   Other,
			Code:    CodeNotStarted,
			Message: fmt.Sprintf("server %s is still %s %s after its creation, longer than the creation timeout %s", s.Name, s.Status, now.Sub(s.Created).Round(time.Second), creationTimeout),
		}
	}
	switch s.Status {
	case hcloud.ServerStatusDeleting:
		return Deleting, nil
	case hcloud.ServerStatusInitializing, hcloud.ServerStatusStarting:
		return notStarted()
	case hcloud.ServerStatusOff:
		if stoppedCreates {
			return notStarted()
		}
		return Running, nil
	case hcloud.ServerStatusRunning, hcloud.ServerStatusStopping,
		hcloud.ServerStatusMigrating, hcloud.ServerStatusRebuilding:
		return Running, nil
	default:
		return Running, nil
	}
}
