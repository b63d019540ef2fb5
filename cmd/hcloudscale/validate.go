package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/imageresolve"
	"github.com/hcloudscale/hcloudscale/servercache"
)

func validateHelp(fs *flag.FlagSet) func(io.Writer) {
	return func(w io.Writer) {
		fmt.Fprint(w, `Usage: hcloudscale validate --nodes=<min>:<max>:<type>:<location>:<pool> [--nodes=...] [--online] [flags]

Checks a configuration before it is deployed: the --nodes flags and the environment
variables of the Cluster Autoscaler's Hetzner provider, read exactly as the provider
(or hcloudscale serve) will read them. Every problem is printed at once, each with the
setting it concerns (an environment variable, a --nodes flag or a cluster-config JSON
path), followed by the resolved plan per pool: with its node lifecycle (replace, the
defaults filled in, the maintenance windows that apply and when they next open), and the
source of the cluster config it read. Offline it needs no token.

With --online it also does everything the provider checks at start against the API:
the token, the network and that each subnet range is one of its subnets, every firewall,
SSH key and placement group (and the room left in each group), that each pool's server
type exists and is offered in its location, and an image for the type's architecture.
The plan then shows the architecture, the image each pool's servers will boot and the
price per hour from the catalogue.

--cluster-config FILE checks FILE as the cluster-config file (HCLOUD_CLUSTER_CONFIG_FILE,
in place of HCLOUD_CLUSTER_CONFIG and that variable), the other settings from the
environment: a change to serve's reloaded file can be checked before it is applied, since
a file serve refuses is also one it cannot start with.

A shortage is a warning, not a problem, since the autoscaler starts with it too: a server
type sold out in its location (that pool fails fast until Hetzner offers it again) and a
placement group with less room than its pools' max sizes (other servers sit in it). So are
deprecations and every case where hcloudscale does something different from the upstream
provider with the same input. With --strict every warning is a problem (exit code 1), for
a CI check that wants none.

--online only reads. It makes one request per reference (network, firewall, SSH key,
placement group) and two per pool image spec, a few more (server types, pricing), and one
per 50 servers of this cluster for the server listing: about 13 requests with no servers,
32 with 1,000 and 210 with 10,000 for a typical configuration, of the project's 3,600 per
hour.

A pool's cloudInit declared a template (cloudInitTemplate) is parsed and rendered for the
pool, for both architectures and with the longest server name: a syntax error, an unknown
field and a rendering over 32 KiB are problems. A pool with labels or taints is a warning
when its nodes will not get them: when its cloud-init is no template that prints them and
the node labeller does not run (say --label-nodes when it will, as with serve --label-nodes),
or when it has labels the kubelet may not set and the labeller does not run.
Placeholders left in a cloud-init (capitals between double underscores, such as the
examples' __BOOTSTRAP_TOKEN__) are a warning naming the pool and the placeholders.

Flags:
`)
		printFlagsAndEnv(w, fs, "0 valid (warnings may be printed), 1 problems found, 2 bad usage.",
			"hcloudscale validate --cluster-config cluster-config.json --nodes=1:5:cpx22:fsn1:workers",
			"HCLOUD_TOKEN=... hcloudscale validate --online --strict -o json --nodes=1:5:cpx22:fsn1:workers")
	}
}

// validateResult is the output of validate.
type validateResult struct {
	Valid    bool      `json:"valid"`
	Online   bool      `json:"online"`
	Problems []problem `json:"problems"`
	Warnings []string  `json:"warnings"`
	// Notes are remarks that are neither problems nor warnings.
	Notes []string `json:"notes,omitempty"`
	// Source is the cluster config's source (config.Source), SourceFile
	// the file it was read from.
	Source     string              `json:"source,omitempty"`
	SourceFile string              `json:"sourceFile,omitempty"`
	Cluster    string              `json:"clusterName,omitempty"`
	Replace    *clusterReplacePlan `json:"replace,omitempty"`
	Pools      []poolPlan          `json:"pools,omitempty"`
	// AdoptedImageDrift names the pools whose image drift replaces every
	// server adopted from the upstream provider (their warning is first).
	AdoptedImageDrift []string `json:"adoptedImageDrift,omitempty"`
}

// poolPlan is what hcloudscale will do for one pool. The fields after
// MaxPods are filled with --online only.
type poolPlan struct {
	Name           string               `json:"name"`
	MinSize        int                  `json:"minSize"`
	MaxSize        int                  `json:"maxSize"`
	ServerType     string               `json:"serverType"`
	Location       string               `json:"location"`
	ImageSpecs     config.ImagesForArch `json:"imageSpecs"`
	Network        string               `json:"network,omitempty"`
	SubnetIPRange  string               `json:"subnetIPRange,omitempty"`
	Firewalls      []string             `json:"firewalls,omitempty"`
	PlacementGroup string               `json:"placementGroup,omitempty"`
	SSHKeys        []string             `json:"sshKeys,omitempty"`
	PublicIPv4     bool                 `json:"publicIPv4"`
	PublicIPv6     bool                 `json:"publicIPv6"`
	Labels         map[string]string    `json:"labels,omitempty"`
	Taints         []string             `json:"taints,omitempty"`
	ServerLabels   map[string]string    `json:"serverLabels"`
	CloudInitBytes int                  `json:"cloudInitBytes"`
	MaxPods        int                  `json:"maxPods"`
	Reserved       map[string]string    `json:"reserved,omitempty"`
	Autoscaling    map[string]string    `json:"autoscaling,omitempty"`
	Replace        *replacePlan         `json:"replace,omitempty"`

	Arch             string     `json:"arch,omitempty"`
	Cores            int        `json:"cores,omitempty"`
	MemoryGB         float64    `json:"memoryGB,omitempty"`
	Image            *imagePlan `json:"image,omitempty"`
	PriceHourlyNet   *float64   `json:"priceHourlyNet,omitempty"`
	PriceHourlyGross *float64   `json:"priceHourlyGross,omitempty"`
	Currency         string     `json:"currency,omitempty"`
}

// imagePlan is the image a pool's servers boot, resolved from its spec.
type imagePlan struct {
	ID          int64  `json:"id"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	Type        string `json:"type"`
	Deprecated  bool   `json:"deprecated,omitempty"`
}

// runValidate is "hcloudscale validate".
func runValidate(ctx context.Context, args []string, stdout, stderr io.Writer, env config.Env) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	cf := registerConfigFlags(fs)
	online := fs.Bool("online", false, "also check against the API (token, references, server types, images, placement-group room) and resolve images and prices")
	strict := fs.Bool("strict", false, "report every warning as a problem (exit code 1): sold-out server types, placement groups short of room, deprecations, differences from the upstream provider")
	labelNodes := fs.Bool("label-nodes", false, "the node labeller will run (serve --label-nodes or the adapter's option): do not warn about labels and taints left to it")
	output := outputFlag(fs)
	if code, ok := parseFlags(fs, args, stdout, stderr, validateHelp(fs)); !ok {
		return code
	}
	env = cf.env(env)
	if err := checkOutput(*output); err != nil {
		return usageError(stderr, "validate", err)
	}
	log, err := cf.logger(stderr)
	if err != nil {
		return usageError(stderr, "validate", err)
	}

	res := validateResult{Online: *online, Problems: []problem{}, Warnings: []string{}}
	if !*online {
		env, res.Notes = offlineToken(env)
	}
	cfg, err := config.Load(env, *cf.nodes)
	if err != nil {
		res.Problems = problems(err)
	} else {
		res.Source, res.Cluster = string(cfg.Source), cfg.ClusterName
		if cfg.Source == config.SourceClusterConfigFile {
			res.SourceFile, _ = env.Lookup(config.EnvClusterConfigFile)
		}
		res.Warnings = append(res.Warnings, cfg.Warnings...)
		for i := range cfg.Pools {
			res.Pools = append(res.Pools, planPool(&cfg.Pools[i]))
		}
		if *online {
			if err := checkOnline(ctx, cfg, &res, log); err != nil {
				res.Problems = problems(err)
			}
		}
		res.Warnings = append(res.Warnings, config.NodeLabelWarnings(cfg, *labelNodes)...)
		res.Warnings = append(res.Warnings, placeholderWarnings(cfg)...)
		planLifecycle(cfg, &res, time.Now())
	}
	if *strict {
		for _, w := range res.Warnings {
			res.Problems = append(res.Problems, problems(errors.New(w))...)
		}
		res.Warnings = []string{}
	}
	res.Valid = len(res.Problems) == 0

	if *output == outputJSON {
		if err := writeJSON(stdout, res); err != nil {
			fmt.Fprintf(stderr, "hcloudscale validate: %v\n", err)
			return exitFailure
		}
	} else {
		printValidate(stdout, &res)
	}
	if !res.Valid {
		return exitFailure
	}
	return exitOK
}

// planPool is the part of a pool's plan that needs no API.
func planPool(p *config.Pool) poolPlan {
	pp := poolPlan{
		Name: p.Name, MinSize: p.MinSize, MaxSize: p.MaxSize,
		ServerType: p.ServerType, Location: p.Location, ImageSpecs: p.Images,
		Network: p.Network, Firewalls: p.Firewalls, PlacementGroup: p.PlacementGroup,
		SSHKeys: p.SSHKeys, PublicIPv4: p.PublicIPv4, PublicIPv6: p.PublicIPv6,
		Labels: p.Labels, ServerLabels: p.ServerLabels,
		CloudInitBytes: len(p.CloudInit.Reveal()), MaxPods: p.MaxPods,
	}
	if p.SubnetIPRange.IsValid() {
		pp.SubnetIPRange = p.SubnetIPRange.String()
	}
	if pp.MaxPods == 0 {
		pp.MaxPods = config.DefaultMaxPods
	}
	for _, t := range p.Taints {
		pp.Taints = append(pp.Taints, t.ToString())
	}
	pp.Reserved = map[string]string{}
	for name, q := range map[string]resource.Quantity{
		"cpu": p.Reserved.CPU, "memory": p.Reserved.Memory, "ephemeral-storage": p.Reserved.EphemeralStorage,
	} {
		if !q.IsZero() {
			pp.Reserved[name] = q.String()
		}
	}
	pp.Autoscaling = autoscalingSettings(p.Autoscaling)
	return pp
}

// autoscalingSettings lists the autoscaler options a pool sets, by their
// cluster-config key.
func autoscalingSettings(a *config.Autoscaling) map[string]string {
	out := map[string]string{}
	if a == nil {
		return out
	}
	float := func(k string, v *float64) {
		if v != nil {
			out[k] = strconv.FormatFloat(*v, 'g', -1, 64)
		}
	}
	duration := func(k string, v *time.Duration) {
		if v != nil {
			out[k] = v.String()
		}
	}
	boolean := func(k string, v *bool) {
		if v != nil {
			out[k] = strconv.FormatBool(*v)
		}
	}
	float("scaleDownUtilizationThreshold", a.ScaleDownUtilizationThreshold)
	float("scaleDownGpuUtilizationThreshold", a.ScaleDownGPUUtilizationThreshold)
	duration("scaleDownUnneededTime", a.ScaleDownUnneededTime)
	duration("scaleDownUnreadyTime", a.ScaleDownUnreadyTime)
	duration("maxNodeProvisionTime", a.MaxNodeProvisionTime)
	duration("maxNodeStartupTime", a.MaxNodeStartupTime)
	boolean("zeroOrMaxNodeScaling", a.ZeroOrMaxNodeScaling)
	boolean("allowNonAtomicScaleUpToMax", a.AllowNonAtomicScaleUpToMax)
	boolean("ignoreDaemonSetsUtilization", a.IgnoreDaemonSetsUtilization)
	return out
}

// checkOnline builds a Cluster, which checks everything against the API,
// and fills in the resolved parts of the plan.
func checkOnline(ctx context.Context, cfg *config.Config, res *validateResult, log *zap.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, onlineTimeout)
	defer cancel()
	c, err := hcloudscale.New(ctx, cfg, hcloudscale.WithLogger(log), hcloudscale.WithoutResume())
	if err != nil {
		return err
	}
	var errs []error
	defer func() {
		// Nothing is in flight: Close only stops the poller.
		_ = closeCluster(c, time.Second)
	}()
	res.Warnings = append([]string{}, c.Warnings()...)

	types, err := c.ServerTypes(ctx)
	if err != nil {
		return fmt.Errorf("listing server types: %w", err)
	}
	byName := make(map[string]*servercache.ServerType, len(types))
	for _, t := range types {
		byName[t.Name] = t
	}
	pricing, _, err := c.Client().Pricing.Get(ctx)
	if err != nil {
		return fmt.Errorf("reading the pricing: %w", err)
	}
	// The Cluster resolved every image already but keeps the result to
	// itself; a resolver of our own costs one request per spec.
	images := imageresolve.New(&c.Client().Image, imageresolve.WithLogger(log))
	defer images.Close()
	for i := range cfg.Pools {
		p, pp := &cfg.Pools[i], &res.Pools[i]
		t := byName[p.ServerType]
		if t == nil {
			// New checked that it exists; a catalogue change since is
			// worth saying.
			errs = append(errs, fmt.Errorf("%s: server type %q does not exist", poolSetting(i, p), p.ServerType))
			continue
		}
		pp.Arch, pp.Cores, pp.MemoryGB = string(t.Arch), t.Cores, t.MemoryGB
		if loc, ok := t.Locations[p.Location]; ok && loc.HasPrice {
			net, gross := loc.PriceHourlyNet, loc.PriceHourlyGross
			pp.PriceHourlyNet, pp.PriceHourlyGross, pp.Currency = &net, &gross, pricing.Currency
		}
		img, err := images.ResolvePool(ctx, p, t.Arch)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: image for %s: %w", poolSetting(i, p), t.Arch, err))
			continue
		}
		pp.Image = &imagePlan{ID: img.ID, Name: img.Name, Description: img.Description, Type: img.Type, Deprecated: img.Deprecated}
	}
	return errors.Join(errs...)
}

// onlineTimeout bounds the requests of validate --online.
const onlineTimeout = time.Minute

func printValidate(w io.Writer, res *validateResult) {
	if len(res.Problems) > 0 {
		fmt.Fprintf(w, "%s:\n", capitalise(plural(len(res.Problems), "problem")))
		printProblems(w, res.Problems)
	}
	if len(res.Warnings) > 0 {
		if len(res.Problems) > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s:\n", capitalise(plural(len(res.Warnings), "warning")))
		for _, warn := range res.Warnings {
			fmt.Fprintf(w, "  %s\n", warn)
		}
	}
	if len(res.Pools) > 0 && (len(res.Problems) > 0 || len(res.Warnings) > 0) {
		fmt.Fprintln(w)
	}
	if res.Replace != nil {
		fmt.Fprintln(w, "Node lifecycle (top-level replace)")
		tb := newTable(w)
		printClusterReplace(tb, res.Replace)
		tb.flush()
		fmt.Fprintln(w)
	}
	for i, p := range res.Pools {
		if i > 0 {
			fmt.Fprintln(w)
		}
		printPlan(w, &p)
	}
	if len(res.Pools) > 0 {
		fmt.Fprintln(w)
	}
	for _, n := range res.Notes {
		fmt.Fprintf(w, "Note: %s\n", n)
	}
	switch {
	case !res.Valid:
		fmt.Fprintf(w, "The configuration is not valid: fix the %s above (%s).\n", plural(len(res.Problems), "problem"), sourceText(res))
	case res.Online:
		fmt.Fprintf(w, "The configuration is valid, checked against the API (%s).\n", poolCount(res))
	default:
		fmt.Fprintf(w, "The configuration is valid (%s); add --online to check it against the API.\n", poolCount(res))
	}
	if len(res.AdoptedImageDrift) > 0 {
		fmt.Fprintf(w, "But read the first warning: image drift in %s replaces every server adopted from the upstream provider.\n", strings.Join(res.AdoptedImageDrift, ", "))
	}
}

// sourceText names where the cluster config was read from.
func sourceText(res *validateResult) string {
	switch {
	case res.SourceFile != "":
		return fmt.Sprintf("cluster config from %s=%s", res.Source, res.SourceFile)
	case res.Source != "":
		return "cluster config from " + res.Source
	}
	return "no cluster config: " + config.EnvClusterConfig + ", " + config.EnvClusterConfigFile + " and " + config.EnvCloudInit + " are unset"
}

// offlineToken lets an offline check go without a token, which it never
// uses: when neither HCLOUD_TOKEN nor HCLOUD_TOKEN_FILE is set, env gets a
// stand-in, and the note says so.
func offlineToken(env config.Env) (config.Env, []string) {
	for _, name := range []string{config.EnvToken, config.EnvTokenFile} {
		if v, _ := lookupEnv(env, name); strings.TrimSpace(v) != "" {
			return env, nil
		}
	}
	lookup := env.Lookup
	env.Lookup = func(name string) (string, bool) {
		if name == config.EnvToken {
			return "offline-check-without-a-token", true
		}
		return lookupEnv(config.Env{Lookup: lookup}, name)
	}
	return env, []string{config.EnvToken + " is not set: an offline check needs none; serve, status, replace and validate --online do."}
}

func lookupEnv(env config.Env, name string) (string, bool) {
	if env.Lookup == nil {
		return "", false
	}
	return env.Lookup(name)
}

func poolCount(res *validateResult) string {
	s := plural(len(res.Pools), "pool") + ", " + sourceText(res)
	if res.Cluster != "" {
		s += fmt.Sprintf(", cluster %q", res.Cluster)
	}
	return s
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// printPlan writes one pool's plan as aligned "key value" lines.
func printPlan(w io.Writer, p *poolPlan) {
	fmt.Fprintf(w, "Pool %s\n", p.Name)
	tb := newTable(w)
	kv := func(k string, v any) { tb.row("  "+k, v) }
	kv("size", fmt.Sprintf("min %d, max %d", p.MinSize, p.MaxSize))
	st := fmt.Sprintf("%s in %s", p.ServerType, p.Location)
	if p.Arch != "" {
		st += fmt.Sprintf(" (%s, %d cores, %g GB)", p.Arch, p.Cores, p.MemoryGB)
	}
	kv("server type", st)
	if p.Image != nil {
		img := fmt.Sprintf("%d", p.Image.ID)
		if p.Image.Name != "" {
			img += " " + p.Image.Name
		} else if p.Image.Description != "" {
			img += fmt.Sprintf(" %q", p.Image.Description)
		}
		img += " (" + p.Image.Type
		if p.Image.Deprecated {
			img += ", deprecated"
		}
		img += ") from spec " + string(p.ImageSpecs.ForArch(config.Arch(p.Arch)))
		kv("image", img)
	} else {
		kv("image specs", fmt.Sprintf("amd64 %s, arm64 %s", p.ImageSpecs.AMD64, p.ImageSpecs.ARM64))
	}
	if p.PriceHourlyNet != nil {
		kv("price", fmt.Sprintf("%.4f %s per hour net, %.4f gross", *p.PriceHourlyNet, p.Currency, *p.PriceHourlyGross))
	}
	nw := orDash(p.Network)
	if p.SubnetIPRange != "" {
		nw += ", subnet " + p.SubnetIPRange
	}
	kv("network", nw)
	kv("public IPs", fmt.Sprintf("IPv4 %s, IPv6 %s", yesNo(p.PublicIPv4), yesNo(p.PublicIPv6)))
	kv("firewalls", orDash(strings.Join(p.Firewalls, ", ")))
	kv("SSH keys", orDash(strings.Join(p.SSHKeys, ", ")))
	kv("placement group", orDash(p.PlacementGroup))
	kv("labels", orDash(joinLabels(p.Labels)))
	kv("taints", orDash(strings.Join(p.Taints, ", ")))
	kv("server labels", orDash(joinLabels(p.ServerLabels)))
	kv("max pods", p.MaxPods)
	kv("reserved", orDash(joinLabels(p.Reserved)))
	kv("autoscaling", orDash(joinLabels(p.Autoscaling)))
	kv("cloud-init", plural(p.CloudInitBytes, "byte"))
	replaceRows(kv, p.Replace)
	tb.flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// joinLabels writes labels as "k=v, k=v", sorted by key.
func joinLabels(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ", ")
}

// poolSetting names the setting that declares the i-th pool: its --nodes
// flag, or its nodeConfigs entry for a pool of the cluster config alone.
func poolSetting(i int, p *config.Pool) string {
	if p.Origin != "" {
		return p.Origin
	}
	return config.PoolSetting(i, p.Name)
}

// withClusterConfigFile is env with path as HCLOUD_CLUSTER_CONFIG_FILE and
// no HCLOUD_CLUSTER_CONFIG.
func withClusterConfigFile(env config.Env, path string) config.Env {
	lookup := env.Lookup
	env.Lookup = func(name string) (string, bool) {
		switch name {
		case config.EnvClusterConfigFile:
			return path, true
		case config.EnvClusterConfig:
			return "", false
		}
		if lookup == nil {
			return "", false
		}
		return lookup(name)
	}
	return env
}

// placeholder matches the tokens example cloud-inits leave to replace,
// such as __BOOTSTRAP_TOKEN__: capitals between double underscores.
var placeholder = regexp.MustCompile(`__[A-Z][A-Z0-9_]*[A-Z0-9]__`)

// placeholderWarnings names the placeholders left in each pool's
// cloud-init (their names only: the cloud-init is secret): a server
// booted with them never joins.
func placeholderWarnings(cfg *config.Config) []string {
	var out []string
	for i := range cfg.Pools {
		p := &cfg.Pools[i]
		found := placeholder.FindAllString(string(p.CloudInit), -1)
		if len(found) == 0 {
			continue
		}
		slices.Sort(found)
		out = append(out, fmt.Sprintf("%s: the cloud-init of pool %s still has the placeholders %s: replace them, or its servers never join",
			config.CloudInitSetting(cfg, p.Name), p.Name, strings.Join(slices.Compact(found), ", ")))
	}
	return out
}
