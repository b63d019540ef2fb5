package servercache

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/config"
)

// ProviderIDPrefix is the scheme of the provider IDs that
// hcloud-cloud-controller-manager sets on the nodes of Hetzner Cloud servers.
const ProviderIDPrefix = "hcloud://"

// Server is the compact, read-only record of one server of the cluster. It
// keeps only what scaling decisions need, not the whole API object: a
// snapshot of 10,000 servers stays a few MiB instead of about a hundred.
type Server struct {
	ID         int64
	Name       string
	Pool       string // the value of the config.LabelNodeGroup label
	Status     hcloud.ServerStatus
	ServerType string
	Location   string
	Created    time.Time

	// What a server was built with, for telling servers that differ from
	// their pool's configuration (pool.Pool.Drift). Zero: none, or unknown
	// (ImageID 0 for an image deleted since).
	ImageID          int64
	PlacementGroupID int64
	NetworkIDs       []int64
	FirewallIDs      []int64
	Labels           map[string]string
}

// ProviderID returns the Kubernetes provider ID of the server's node,
// "hcloud://<id>".
func (s *Server) ProviderID() string {
	return ProviderIDPrefix + strconv.FormatInt(s.ID, 10)
}

// ParseProviderID returns the server ID of a provider ID of the form
// "hcloud://<id>", where id is a positive decimal number without sign or
// leading zeros, the form [Server.ProviderID] writes.
//
// Everything else reports ok == false and is not an error: Robot servers
// ("hrobot://<n>" and the legacy "hcloud://bm-<n>"), other clouds' schemes,
// and garbage all belong to no pool. Rejecting non-canonical numbers keeps
// the round trip exact, since the autoscaler matches instances to nodes by
// comparing provider ID strings. It does not allocate.
func ParseProviderID(providerID string) (id int64, ok bool) {
	digits, found := strings.CutPrefix(providerID, ProviderIDPrefix)
	if !found || digits == "" || digits[0] == '0' {
		return 0, false
	}
	// strconv.ParseInt would do, but it allocates a *NumError for every
	// rejected input, and lookups must stay allocation-free.
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if id > (math.MaxInt64-d)/10 {
			return 0, false
		}
		id = id*10 + d
	}
	return id, true
}

// FromHCloud converts an API server into its compact record. Pool is empty
// when the server lacks the config.LabelNodeGroup label; such a record is
// ignored by [Cache.Upsert]. Created is normalised to UTC so that records do
// not each keep the fixed time zone the JSON decoder allocated.
func FromHCloud(s *hcloud.Server) Server {
	srv := Server{
		ID:      s.ID,
		Name:    s.Name,
		Pool:    s.Labels[config.LabelNodeGroup],
		Status:  s.Status,
		Created: s.Created.UTC(),
	}
	if s.ServerType != nil {
		srv.ServerType = s.ServerType.Name
	}
	if s.Location != nil {
		srv.Location = s.Location.Name
	}
	if s.Image != nil {
		srv.ImageID = s.Image.ID
	}
	if s.PlacementGroup != nil {
		srv.PlacementGroupID = s.PlacementGroup.ID
	}
	for _, n := range s.PrivateNet {
		if n.Network != nil {
			srv.NetworkIDs = append(srv.NetworkIDs, n.Network.ID)
		}
	}
	for _, fw := range s.PublicNet.Firewalls {
		if fw != nil && fw.Firewall.ID != 0 {
			srv.FirewallIDs = append(srv.FirewallIDs, fw.Firewall.ID)
		}
	}
	srv.Labels = s.Labels
	return srv
}
