// Package config reads and validates the settings of hcloudscale: the
// environment variables, --nodes specs and cluster-config JSON of the
// Cluster Autoscaler's Hetzner provider, so that switching from it needs no
// configuration change. The result is a [Config]: a resolved view per
// [Pool] that later packages use without parsing anything again.
//
// The package does no I/O of its own: [Load] reads variables and files
// through an injected [Env], and only [LoadFromOS] (through [OSEnv]) touches
// the process environment. It never exits: every problem is returned, all at
// once, joined with [errors.Join], each a [*FieldError] whose path names the
// variable (HCLOUD_PUBLIC_IPV4), flag (--nodes[2]) or JSON path
// (nodeConfigs.pool1.taints[0].effect) at fault. [FieldErrors] lists them.
// Problems that do not stop loading end up in [Config.Warnings].
//
// # Environment variables
//
// Surrounding whitespace is removed from every value, and an empty value
// counts as unset, as upstream.
//
//   - HCLOUD_TOKEN: the API token; required unless HCLOUD_TOKEN_FILE is set.
//     It may not contain whitespace or control characters, which would make
//     every request fail.
//   - HCLOUD_TOKEN_FILE (new): a file holding the token, e.g. a mounted
//     Kubernetes secret; surrounding whitespace is trimmed. When both are set
//     they must hold the same token.
//   - HCLOUD_ENDPOINT: the API base URL, default [DefaultEndpoint]. It must use
//     https, except that http is allowed for loopback hosts (127.0.0.0/8, ::1,
//     localhost), where a local fake API runs, and for any host with
//     HCLOUD_ENDPOINT_INSECURE=true (an in-cluster API proxy; a warning says
//     that the token travels in clear). A trailing "/" is dropped.
//   - HCLOUD_ENDPOINT_INSECURE (new): true allows an http HCLOUD_ENDPOINT
//     on any host ([Config.EndpointInsecure]). Upstream accepted any URL.
//   - HCLOUD_CLUSTER_CONFIG: the cluster config, base64-encoded JSON (standard
//     alphabet; line breaks ignored).
//   - HCLOUD_CLUSTER_CONFIG_FILE: a file holding the cluster config as plain
//     JSON: base64 text or a UTF-8 byte order mark is an error that says
//     so. Files are read up to [MaxFileBytes] (4 MiB); a larger one is an
//     error.
//   - HCLOUD_CLOUD_INIT: legacy format: base64 cloud-init for every pool.
//     What it decodes to must be valid UTF-8 (not gzip-compressed), as
//     any user data.
//   - HCLOUD_IMAGE: the image spec used when the cluster config names none,
//     default [DefaultImage] (ubuntu-24.04; upstream's ubuntu-20.04 is out of
//     standard support). Unlike upstream it is the final fallback in the JSON
//     format too, as upstream's README claims. Where this makes servers boot
//     another image than upstream would have (upstream sent an empty name in
//     the JSON format for an architecture without imagesForArch, and so
//     booted the newest snapshot; ubuntu-20.04 in the legacy format), a
//     warning names the pools and the image.
//   - HCLOUD_NETWORK: ID or name of the private network servers join.
//   - HCLOUD_FIREWALL: IDs or names of firewalls for every server,
//     comma-separated (upstream: one); entries are trimmed, empty ones
//     dropped and repeats removed.
//   - HCLOUD_SSH_KEY: IDs or names of SSH keys, comma-separated as
//     HCLOUD_FIREWALL (upstream: one).
//   - HCLOUD_PUBLIC_IPV4, HCLOUD_PUBLIC_IPV6: whether servers get public
//     addresses, parsed with [strconv.ParseBool], default true. Both false is
//     an error unless HCLOUD_NETWORK is set: such a server has no network.
//   - HCLOUD_SERVER_CREATION_TIMEOUT: how long creating one server may take:
//     whole minutes as upstream ("10"), or a Go duration ("90s"); it must be
//     positive and at most 24 hours. Default [DefaultCreationTimeout]
//     (5 minutes). 0 means the default, with a warning, as upstream.
//     Upstream silently used 5 minutes for values it could not parse;
//     here they are errors.
//   - HCLOUD_CLUSTER_NAME (new): the cluster name, as the JSON clusterName,
//     so that the legacy format can use it too. When both are set they must
//     be equal.
//
// # Configuration sources
//
// Upstream's precedence holds: HCLOUD_CLUSTER_CONFIG, then
// HCLOUD_CLUSTER_CONFIG_FILE, then the legacy HCLOUD_CLOUD_INIT (with
// HCLOUD_IMAGE). When more than one is set, a warning names the source used
// and the ones ignored. [Config.Source] records the winner. In the legacy
// format every pool gets the same cloud-init and image and there are no
// labels, taints, placement groups, per-pool firewalls or subnets.
//
// # The --nodes specs
//
// Each pool is one --nodes value "min:max:type:location:name", parsed by
// [ParseNodeSpec] with upstream's semantics: the value is split into at most
// five fields (a colon belongs to the name), sizes are decimal integers, the
// server type and location are lower-cased, the name is kept as written.
// Added checks: 0 <= min <= max (0:0 parks a pool, with a warning); the name consists of
// lower-case letters, digits and '-', starts and ends with a letter or
// digit, and has at most [MaxPoolNameLength] (46) characters, so that
// "<name>-<16 hex digits>" is a valid hostname and node name; a name may be
// used once (upstream let a later spec replace an earlier one silently).
// At least one pool is required: a --nodes spec, or a pool declared in the
// cluster config (below).
//
// # Cluster-config JSON
//
// [ParseClusterConfig] reads the document. Keys should be written as below;
// as upstream, a key that differs from a known one only in case
// ("NodeConfigs", "CloudInit") is taken for it, here with a warning naming
// the canonical spelling, and two keys of one object that differ only in
// case are an error. Upstream ignored unknown keys, so that a typo such as
// "taints:" silently did nothing. Here an unknown or duplicate key is an
// error naming its path, with the key it probably means ("did you mean
// \"taints\""). Pool names (the keys of nodeConfigs) and label keys are
// case-sensitive, as upstream. A null value
// counts as absent. Upstream's internal keys isUsingNewFormat and
// legacyConfig, which upstream decoded and ignored, are ignored with a
// warning.
//
//	{
//	  "clusterName": "prod",                  // new, optional
//	  "cloudInitTemplate": true,              // new, optional
//	  "imagesForArch": {"amd64": "ubuntu-24.04", "arm64": "ubuntu-24.04"},
//	  "defaultSubnetIPRange": "10.0.0.0/16",
//	  "replace": {"maxInFlight": 2, "removedPools": true},  // new, optional
//	  "nodeConfigs": {
//	    "pool1": {
//	      "serverType": "cpx31",                // new: the --nodes fields,
//	      "location": "fsn1",                   // for a pool without a
//	      "minSize": 0,                         // --nodes spec
//	      "maxSize": 10,
//	      "cloudInit": "#cloud-config\n...",  // plain text, not base64
//	      "cloudInitTemplate": true,            // new
//	      "labels": {"node.kubernetes.io/role": "worker"},
//	      "serverLabels": {"environment": "prod"},
//	      "taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}],
//	      "imagesForArch": {"arm64": "k8s-image=arm"},
//	      "subnetIPRange": "10.0.1.0/24",
//	      "firewalls": ["workers", "123456"],
//	      "placementGroup": "pool1-spread",
//	      "maxPods": 110,                       // new
//	      "reserved": {"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "1Gi"}, // new
//	      "autoscaling": {"scaleDownUtilizationThreshold": 0.5, "scaleDownUnneededTime": "10m"}, // new
//	      "replace": {"drift": ["image", "user_data"], "expireAfter": "720h", // new
//	                  "windows": [{"schedule": "0 2 * * 1-5", "duration": "3h", "timeZone": "Europe/Berlin"}]}
//	    }
//	  }
//	}
//
// Fields and their checks:
//
//   - clusterName (new): scopes the servers of this cluster with the server
//     label [LabelCluster], so that two clusters can share a Hetzner project.
//     Scoping holds both ways ([InCluster]): without a cluster name, servers
//     labelled for a named cluster are not this cluster's.
//     A valid Hetzner label value; "" is unset.
//   - imagesForArch: image spec per architecture (amd64, arm64). A spec is an
//     image ID, an image name, or a label selector for snapshots;
//     [CheckImageSpec] says what is well formed. An empty spec is unset, with a
//     warning (upstream picked the newest snapshot of the project for it).
//   - defaultSubnetIPRange: the subnet of HCLOUD_NETWORK for every pool. An
//     IPv4 CIDR written as its network address; set without HCLOUD_NETWORK it
//     is an error, since it would be ignored.
//   - nodeConfigs: one entry per pool, keyed by pool name. In this format
//     every --nodes pool needs an entry; an entry that neither a --nodes
//     pool uses nor declares a pool (below) is a warning.
//   - nodeConfigs.<pool>.serverType, location, minSize, maxSize (new): the
//     fields of a --nodes spec, so that a pool can be declared in the file
//     alone, and be added, resized or removed by editing the file. An entry
//     with any of them and no --nodes spec of the same name declares a pool:
//     serverType, location and maxSize are required, minSize defaults to 0,
//     the key must be a pool name as for --nodes, and server type and
//     location are lower-cased. Such pools follow the --nodes pools in
//     [Config.Pools], by name. A pool given by both may repeat any of the
//     fields in the file, but each must equal the --nodes value: otherwise
//     the error names both settings ("nodeConfigs.workers.maxSize,
//     --nodes[0] (workers)"). [Pool.Origin] names the setting that declares
//     a pool.
//   - cloudInitTemplate (new): true makes every pool's cloudInit a
//     template (see below), unless the pool's own cloudInitTemplate says
//     otherwise. Default false.
//   - nodeConfigs.<pool>.cloudInit: user data, plain text, at most
//     [MaxCloudInitBytes] (32 KiB), valid UTF-8: the API carries user
//     data as a JSON string, so gzip-compressed or other binary user data
//     is an error. The keys below are those of a pool
//     entry too.
//   - cloudInitTemplate (new, in a pool entry): whether this pool's
//     cloudInit is a template, overriding the top-level key.
//   - labels: Kubernetes labels of the pool's template node (key and value
//     syntax of Kubernetes). As upstream, they are not applied to the nodes
//     by themselves: a cloud-init template prints them for the kubelet, and
//     the node labeller (package nodelabel) adds the ones the kubelet may
//     not set.
//   - serverLabels: Hetzner labels of created servers ([CheckServerLabel]): the
//     hetzner.cloud/ prefix is reserved, and [LabelNodeGroup] and
//     [LabelCluster] are set by hcloudscale and cannot be given.
//   - taints: {key, value, effect} for the template node: key and value with
//     Kubernetes label syntax, effect one of NoSchedule, PreferNoSchedule,
//     NoExecute; no two taints with the same key and effect. A timeAdded key,
//     which upstream's decoding accepted, is ignored with a warning.
//   - imagesForArch (in a pool entry): the pool's image specs. The image of an architecture is
//     the pool's spec, else the global imagesForArch spec, else HCLOUD_IMAGE,
//     else [DefaultImage]. Upstream replaced the whole global object with
//     the pool's; here an architecture the pool leaves out falls through to
//     the next level.
//   - subnetIPRange: the pool's subnet of HCLOUD_NETWORK, overriding
//     defaultSubnetIPRange. An IPv4 CIDR written as the network address; an
//     error without HCLOUD_NETWORK. Hetzner subnets of one network cannot
//     overlap, so a pool range that differs from defaultSubnetIPRange but
//     overlaps it (compared as prefixes) is a warning: at most one of them
//     can be a subnet of the network. Upstream's README example does this,
//     and upstream's loose check (network address and mask byte length only)
//     let it pass. That each range is a subnet of the network, with the same
//     prefix length, is checked against the API by hcloudscale.New.
//   - firewalls: IDs or names, applied after HCLOUD_FIREWALL; the pool's list
//     is the global one plus these, repeats removed, in order.
//   - placementGroup: ID or name of an existing spread placement group. The
//     max sizes of all pools naming the same group add up to at most
//     [MaxPlacementGroupServers] (10). Groups are compared by the string
//     given.
//   - maxPods (new): pod capacity of the template node, [MinMaxPods] to
//     [MaxMaxPods] (1 to 1000); unset means [DefaultMaxPods] (110).
//   - reserved (new): "cpu", "memory" and "ephemeral-storage" (the
//     Kubernetes resource names, as in the kubelet's --kube-reserved)
//     subtracted from the capacity of the template node; non-negative
//     Kubernetes quantities such as "100m" or "1Gi".
//   - autoscaling (new): the Cluster Autoscaler's per-pool options:
//     scaleDownUtilizationThreshold and scaleDownGpuUtilizationThreshold
//     (0 to 1), scaleDownUnneededTime, scaleDownUnreadyTime,
//     maxNodeProvisionTime and maxNodeStartupTime (positive Go durations
//     such as "10m"), zeroOrMaxNodeScaling, allowNonAtomicScaleUpToMax and
//     ignoreDaemonSetsUtilization (booleans). Unset options keep the
//     autoscaler's defaults.
//   - replace (new, in a pool entry and at the top level): the node
//     lifecycle, read into [Pool.Replace] and [Config.Replace] with the
//     defaults filled in; docs/keeping-nodes-current.md describes it. A
//     pool's object: drift, a list of [DriftReasons] without repeats;
//     expireAfter, at least [MinReplaceExpireAfter]; expireJitter, 0 to
//     expireAfter, only with expireAfter (default a tenth of it); maxSurge,
//     0 to [MaxReplaceBudget]; maxInFlight, 1 to [MaxReplaceBudget];
//     joinTimeout, drainTimeout and retryAfter, positive; windows; paused;
//     evictUnreplicatedPods, evictLocalStoragePods and evictKubeSystemPods,
//     booleans into [Replace.EvictPods] (absent: the top-level value).
//     An object with neither drift nor expireAfter replaces nothing (a
//     warning). The top-level object: maxInFlight, removedPools, windows,
//     paused, and the three evict keys into [ClusterReplace.EvictPods]. A
//     window is {"schedule", "duration", "timeZone"}, checked by
//     [ParseWindow]; durations are Go durations such as "720h". The
//     time-zone database is embedded (time/tzdata), so a timeZone loads on a
//     machine without one, such as a scratch image; the machine's own
//     database, when it has one, is read first.
//
// # Cloud-init templates
//
// A cloudInit declared a template (cloudInitTemplate) is rendered for each
// server when it is created, with the pool, server name, cluster name,
// location, server type, architecture, the pool's labels and taints, and
// helpers that print them for the kubelet, k3s, kubeadm and Talos; package
// cloudinit describes the syntax: Go templates with the delimiters <% and
// %>, so that cloud-init's Jinja ({{ }}, {% %}) and shell ${...} stay
// plain text. A cloudInit that is not declared a template is sent as
// written, byte for byte, whatever text it contains.
//
// Load reports a template that does not parse, names a function or field
// that does not exist, or fails to render for the pool, as an error of
// nodeConfigs.<pool>.cloudInit, all of them at once. The size limit
// applies to the largest rendering (for both architectures, with a server
// name of the greatest length) instead of the template's text. Neither the
// template nor a rendering is quoted in errors or logs.
//
// IDs and names of networks, firewalls, SSH keys and placement groups must
// be non-empty, without control characters or surrounding spaces. Whether
// they exist is checked when the API is reached, not here.
//
// # Secrets
//
// The token and cloud-init user data are [Secret] values: fmt (every verb,
// %#v included), encoding/json, text marshalling, log/slog and zap show
// "[redacted]" (or "" when empty), so printing or logging a Config is safe.
// [Secret.Reveal] returns the value where it is sent.
//
// # Reloading
//
// Load is a pure function of its Env and --nodes specs, so a changed
// configuration file is loaded again the same way: [Env.WithFile] makes the
// file read as the content already read (and hashed) by the caller. What
// may change between two loads, and how a running Cluster applies it, is
// hcloudscale.Cluster.Reconfigure's business; with --nodes unchanged, the
// file can add, resize and remove the pools it declares, and change every
// other pool setting.
//
// # Configurations built in code
//
// Library users can build a Config without Load, starting from [Defaults],
// and check it with [Config.Validate], which applies the same rules to the
// resolved view. Load runs Validate on its result too.
package config
