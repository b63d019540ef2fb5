package config

import "time"

// Defaults for settings the user leaves unset.
const (
	// DefaultEndpoint is the Hetzner Cloud API base URL (HCLOUD_ENDPOINT).
	DefaultEndpoint = "https://api.hetzner.cloud/v1"

	// DefaultImage is used when neither the cluster config nor HCLOUD_IMAGE
	// names an image. Upstream defaults to ubuntu-20.04, whose standard
	// support ended in 2025; a new server should boot a supported LTS
	// release that Hetzner offers for both amd64 and arm64.
	DefaultImage ImageSpec = "ubuntu-24.04"

	// DefaultCreationTimeout bounds the whole create flow of one server
	// (HCLOUD_SERVER_CREATION_TIMEOUT), as upstream's 5 minutes.
	DefaultCreationTimeout = 5 * time.Minute

	// DefaultMaxPods is the pod capacity of a template node when the pool
	// sets no maxPods; it is the kubelet's default.
	DefaultMaxPods = 110

	// DefaultPublicIPv4 and DefaultPublicIPv6 apply when HCLOUD_PUBLIC_IPV4
	// and HCLOUD_PUBLIC_IPV6 are unset.
	DefaultPublicIPv4 = true
	DefaultPublicIPv6 = true
)

// Limits the Hetzner Cloud API and Kubernetes impose, checked up front so
// that a mistake fails at start-up rather than at the first scale-up.
const (
	// MaxCloudInitBytes is the size limit of a server's user data.
	MaxCloudInitBytes = 32 * 1024
	// MaxFileBytes is the most Load reads of a file setting
	// (HCLOUD_TOKEN_FILE, HCLOUD_CLUSTER_CONFIG_FILE): a cluster config
	// with the user data of many pools is well below it, and a wrong
	// path to a large file is an error instead of memory spent.
	MaxFileBytes = 4 << 20

	// MaxPlacementGroupServers is how many servers a spread placement group
	// holds.
	MaxPlacementGroupServers = 10

	// MaxPoolNameLength keeps a server name (pool name, "-", up to 16 hex
	// digits) within the 63 characters of a hostname label.
	MaxPoolNameLength = 63 - 1 - 16

	// MinMaxPods and MaxMaxPods bound a pool's maxPods.
	MinMaxPods = 1
	MaxMaxPods = 1000
)
