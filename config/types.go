package config

import (
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Label keys that hcloudscale puts on the servers it creates.
const (
	// LabelNodeGroup names the pool a server belongs to. It is the label the
	// upstream Hetzner provider uses, so servers it created are adopted.
	LabelNodeGroup = "hcloud/node-group"
	// LabelCluster scopes servers to one cluster when Config.ClusterName is
	// set, so that two clusters can share a Hetzner Cloud project.
	LabelCluster = "hcloudscale/cluster"
	// LabelUserDataHash holds a hash of the user data a server was
	// created with (pool.UserDataHash), so that a server whose pool's
	// cloud-init changed since is told apart without the user data, which
	// the API does not return.
	LabelUserDataHash = "hcloudscale/user-data-hash"
	// LabelSpreadPool marks a spread placement group that hcloudscale
	// created for a pool with SpreadGroups; the value is the pool's name.
	// Only groups with it (and the cluster label, with a cluster name)
	// are filled or deleted.
	LabelSpreadPool = "hcloudscale/spread-pool"
	// LabelOffering marks a server created for one of a pool's offerings
	// after the first; the value is that offering, "<serverType>-<location>"
	// ([Offering.String]). A server that still runs on it while the pool
	// no longer lists it is kept in a removed node group of that offering,
	// after a restart as after a reload; a server without it (created for
	// the first offering, or by the upstream provider) falls back to the
	// pool's first node group instead.
	LabelOffering = "hcloudscale/offering"
)

// InCluster reports whether server labels place a server in the named
// cluster. Scoping holds both ways: a named cluster owns only servers
// labelled LabelCluster=<name>; an unnamed cluster ("") owns only servers
// without LabelCluster, since those with it belong to a named cluster.
func InCluster(labels map[string]string, cluster string) bool {
	got, ok := labels[LabelCluster]
	if cluster == "" {
		return !ok
	}
	return ok && got == cluster
}

// Arch is a CPU architecture as Kubernetes names it.
type Arch string

// The architectures Hetzner Cloud offers.
const (
	ArchAMD64 Arch = "amd64" // Hetzner "x86"
	ArchARM64 Arch = "arm64" // Hetzner "arm"
)

// Secret is a string that never shows its value when printed, logged or
// marshalled. Call Reveal to use it.
type Secret string

// Source says which configuration source a Config was built from.
type Source string

// The configuration sources, in upstream's order of precedence.
const (
	SourceClusterConfig     Source = "HCLOUD_CLUSTER_CONFIG"
	SourceClusterConfigFile Source = "HCLOUD_CLUSTER_CONFIG_FILE"
	SourceLegacyCloudInit   Source = "HCLOUD_CLOUD_INIT"
)

// ImageSpec is an image reference as a user writes it: a numeric image ID,
// an image name, or a label selector for snapshots. Empty means unset.
type ImageSpec string

// ImagesForArch holds one image spec per architecture.
type ImagesForArch struct {
	AMD64 ImageSpec `json:"amd64,omitempty"`
	ARM64 ImageSpec `json:"arm64,omitempty"`
}

// Reserved is what a pool's template subtracts from a server's capacity.
// A zero quantity means "not set".
type Reserved struct {
	CPU              resource.Quantity
	Memory           resource.Quantity
	EphemeralStorage resource.Quantity
}

// Autoscaling holds the per-pool options of the Cluster Autoscaler. A nil
// pointer field means "use the autoscaler's default".
type Autoscaling struct {
	ScaleDownUtilizationThreshold    *float64
	ScaleDownGPUUtilizationThreshold *float64
	ScaleDownUnneededTime            *time.Duration
	ScaleDownUnreadyTime             *time.Duration
	MaxNodeProvisionTime             *time.Duration
	MaxNodeStartupTime               *time.Duration
	ZeroOrMaxNodeScaling             *bool
	AllowNonAtomicScaleUpToMax       *bool
	IgnoreDaemonSetsUtilization      *bool
}

// Config is a validated configuration: everything hcloudscale needs to run,
// resolved so that no later package reparses anything.
type Config struct {
	Token    Secret
	Endpoint string // the API base URL; DefaultEndpoint when unset
	// EndpointInsecure allows an http:// Endpoint on a host that is not
	// loopback (HCLOUD_ENDPOINT_INSECURE), such as an in-cluster API
	// proxy. The token then travels in clear.
	EndpointInsecure bool

	// Source is the configuration source that won; Warnings holds what the
	// caller should print (ignored sources, unused nodeConfigs entries, ...).
	Source   Source
	Warnings []string

	ClusterName string // empty: no cluster scoping label

	Network         string   // ID or name; empty: none
	Firewalls       []string // global firewalls (HCLOUD_FIREWALL), IDs or names
	SSHKeys         []string // IDs or names
	PublicIPv4      bool
	PublicIPv6      bool
	CreationTimeout time.Duration

	// DefaultImage is HCLOUD_IMAGE, or DefaultImage when unset.
	DefaultImage ImageSpec
	// Images is the global imagesForArch of the cluster config.
	Images ImagesForArch
	// DefaultSubnetIPRange is the cluster config's defaultSubnetIPRange.
	DefaultSubnetIPRange netip.Prefix

	// Replace holds the cluster-wide settings of the node lifecycle (the
	// cluster config's replace object). Load and Defaults fill in
	// MaxInFlight; in a Config built in code a zero MaxInFlight means
	// DefaultClusterReplaceMaxInFlight.
	Replace ClusterReplace

	// Pools in the order of the --nodes specs, then the pools declared in
	// the cluster config only, by name.
	Pools []Pool
}

// Pool is the resolved view of one node pool.
type Pool struct {
	Name       string
	MinSize    int
	MaxSize    int
	ServerType string // lower-case
	Location   string // lower-case
	// Offerings lists, in the order a scale-up tries them, every server
	// type and location the pool may run on; the first is always
	// {ServerType, Location}. Empty: the pool has that one offering.
	// Each offering is a node group of its own (see [Pool.OfferingGroups]).
	Offerings []Offering
	// Family is, in a node group of one offering (OfferingGroups), the
	// name of its pool; empty in a pool as configured, which is the
	// family of its own name.
	Family string
	// Origin names the setting that declares the pool, for messages:
	// "--nodes[2] (workers)" or "nodeConfigs.workers"; in a node group of
	// a later offering (OfferingGroups), the offering's key
	// ("nodeConfigs.workers.offerings[1]"). Empty for a pool built in
	// code; Validate does not read it.
	Origin string
	// OfferingOrigins names, for messages, the key each of Offerings was
	// written at, in the same order: "nodeConfigs.workers.offerings[1]";
	// "" for the first offering when the list leaves it out (Origin
	// declares it). Nil for a pool built in code; Validate does not read
	// it.
	OfferingOrigins []string

	CloudInit Secret
	// CloudInitTemplate says CloudInit is a template (package cloudinit),
	// rendered per server at create.
	CloudInitTemplate bool
	// Images is the image spec per architecture after the precedence
	// pool imagesForArch > global imagesForArch > HCLOUD_IMAGE.
	Images ImagesForArch
	// InheritedImages lists the architectures whose image comes from the
	// global imagesForArch although the pool has an imagesForArch of its
	// own: upstream let the pool's object replace the global one and booted
	// the newest snapshot of such an architecture. hcloudscale.New, which
	// knows the pool's architecture, warns about it.
	InheritedImages []Arch
	// SnapshotImages lists the architectures for which the upstream
	// provider, given the same cluster config, sent no image name and so
	// booted the newest snapshot of the project, where this pool's servers
	// boot Images' spec (HCLOUD_IMAGE or DefaultImage). Servers adopted
	// from upstream run that snapshot, so image drift makes every one of
	// them due.
	SnapshotImages []Arch

	// Labels and Taints go into the scale-from-zero template.
	Labels map[string]string
	Taints []corev1.Taint
	// ServerLabels are the Hetzner labels of created servers, already merged
	// with LabelNodeGroup (and LabelCluster when a cluster name is set).
	ServerLabels map[string]string

	Network        string       // Config.Network
	SubnetIPRange  netip.Prefix // pool subnetIPRange, else defaultSubnetIPRange; only with a network
	Firewalls      []string     // global + pool, de-duplicated, in order
	PlacementGroup string       // ID or name; empty: none
	// SpreadGroups has the pool create and own spread placement groups
	// (at most ten servers each) instead of one fixed PlacementGroup.
	SpreadGroups bool
	SSHKeys      []string
	PublicIPv4   bool
	PublicIPv6   bool

	MaxPods     int // 0: DefaultMaxPods
	Reserved    Reserved
	Autoscaling *Autoscaling // nil: the pool sets no autoscaling options
	// Replace is the pool's node lifecycle, with defaults filled in; nil:
	// the pool replaces no node.
	Replace *Replace
}
