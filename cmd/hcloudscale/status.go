package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/pool"
	"github.com/hcloudscale/hcloudscale/servercache"
)

func statusHelp(fs *flag.FlagSet) func(io.Writer) {
	return func(w io.Writer) {
		fmt.Fprint(w, `Usage: hcloudscale status --nodes=<min>:<max>:<type>:<location>:<pool> [--nodes=...] [flags]

Shows each pool as the autoscaler sees it: min, max and target size, its servers by
state, the instances that need attention with their errors (servers that never started,
servers in status unknown, stopped servers of a subnet pool that are not attached to the
network: an interrupted create, shown as creating), whether the pool's server type can be ordered in its location,
the servers that differ from what the pool's configuration would create now (server type,
location, image, placement group, network, firewalls, labels, user data: nothing replaces
them by itself), and the API rate-limit budget left. A section "Replacements in
progress" lists the servers the node lifecycle (serve --replace-nodes) created to replace
others that still exist, with the server each replaces and its state ("replaces" in
-o json); replace --plan shows what the lifecycle would do next. With --serve-metrics it
also says whether a running serve runs the content of HCLOUD_CLUSTER_CONFIG_FILE.

status builds its own view from the API (one server listing, which is all the pools'
servers: a few requests). Pending creates and the placeholders of failed creates of a
running autoscaler live in that process's memory; its metrics (hcloudscale_pool_*) show
them.

Flags:
`)
		printFlagsAndEnv(w, fs, "0 success, 1 failure (reported on stderr), 2 bad usage.",
			"hcloudscale status --nodes=1:5:cpx22:fsn1:workers",
			"hcloudscale status --instances -o json --cluster-config cluster-config.json")
	}
}

// statusResult is the output of status.
type statusResult struct {
	ClusterName string          `json:"clusterName,omitempty"`
	Pools       []poolStatus    `json:"pools"`
	RateLimit   rateLimitStatus `json:"rateLimit"`
	Warnings    []string        `json:"warnings"`
	// Config is set with --serve-metrics.
	Config *configStatus `json:"config,omitempty"`
}

type poolStatus struct {
	Name string `json:"name"`
	// Removed is true for a pool that is no longer configured but still
	// has servers: no scale-up, the autoscaler deletes its nodes as they
	// become unneeded.
	Removed bool `json:"removed,omitempty"`
	// Pool is the configured pool the node group belongs to: the same as
	// Name, or for a later offering's group the part before '@'.
	Pool string `json:"pool"`
	// Available says whether the group's offering may be scaled up now:
	// configured, and no capacity error or sold-out catalogue entry
	// remembered for it.
	Available  bool   `json:"available"`
	ServerType string `json:"serverType"`
	Location   string `json:"location"`
	MinSize    int    `json:"minSize"`
	MaxSize    int    `json:"maxSize"`
	Target     int    `json:"target"`
	Running    int    `json:"running"`
	Creating   int    `json:"creating"`
	Deleting   int    `json:"deleting"`
	// Failed counts the failed creations (instances with an error);
	// Creating leaves them out, so that each instance is counted once.
	Failed        int `json:"failed"`
	PendingClaims int `json:"pendingClaims"`
	// Drifted counts the servers that differ from the pool's
	// configuration (see instanceStatus.Drift).
	Drifted int `json:"drifted"`
	// Offering is "available", or "deprecated" with OrderableUntil, as
	// the server-type catalogue says for the pool's location.
	Offering       string                `json:"offering"`
	OrderableUntil *time.Time            `json:"orderableUntil,omitempty"`
	Instances      []instanceStatus      `json:"instances"`
	Unavailable    []unavailableOffering `json:"unavailable"`
	// SpreadGroups are the placement groups of a pool with spreadGroups
	// and how many of the ten slots of each are taken.
	SpreadGroups []spreadGroupStatus `json:"spreadGroups,omitempty"`
}

type spreadGroupStatus struct {
	ID      int64  `json:"id"`
	Name    string `json:"name"`
	Servers int    `json:"servers"`
}

type instanceStatus struct {
	ID       string       `json:"id"`
	Name     string       `json:"name"`
	ServerID int64        `json:"serverID,omitempty"`
	State    string       `json:"state"`
	Status   string       `json:"status,omitempty"`
	Error    *errorStatus `json:"error,omitempty"`
	// Offering is the server type and location the instance runs on,
	// "<serverType>-<location>": its node group's, but for a server whose
	// type changed since it was created.
	Offering string `json:"offering"`
	// Drift says what differs between the server and what the pool's
	// configuration would create now ("reason: detail"); the node
	// lifecycle replaces it where the pool's replace enables the reason.
	Drift []string `json:"drift,omitempty"`
	// Replaces is the ID of the server this one replaces (the node
	// lifecycle's surge); while that server exists the replacement is in
	// progress.
	Replaces int64 `json:"replaces,omitempty"`
}

// errorStatus is an instance's error info; for a server in Hetzner status
// unknown, which is no failure (it counts as running and is never deleted
// for it), it has the code unknown-status and no class.
type errorStatus struct {
	Class   string `json:"class,omitempty"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

type unavailableOffering struct {
	ServerType     string    `json:"serverType"`
	Location       string    `json:"location"`
	PlacementGroup string    `json:"placementGroup,omitempty"`
	Code           string    `json:"code"`
	Message        string    `json:"message"`
	Until          time.Time `json:"until"`
}

// rateLimitStatus is hcloudscale.RateLimit for scripts.
type rateLimitStatus struct {
	Limit         int        `json:"limit"`
	Remaining     int        `json:"remaining"`
	Estimated     int        `json:"estimated"`
	Reset         *time.Time `json:"reset,omitempty"`
	WaitedSeconds float64    `json:"waitedSeconds"`
	Got429        int        `json:"got429"`
}

func newRateLimitStatus(rl hcloudscale.RateLimit) rateLimitStatus {
	s := rateLimitStatus{
		Limit: rl.Limit, Remaining: rl.Remaining, Estimated: rl.Estimated,
		WaitedSeconds: rl.Waited.Seconds(), Got429: rl.Got429,
	}
	if !rl.Reset.IsZero() {
		r := rl.Reset.UTC()
		s.Reset = &r
	}
	return s
}

// runStatus is "hcloudscale status".
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer, env config.Env) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	cf := registerConfigFlags(fs)
	output := outputFlag(fs)
	all := fs.Bool("instances", false, "list every instance of every pool, not only those with an error")
	serveMetrics := fs.String("serve-metrics", "", "URL of a running serve's /metrics: show whether it runs the content of HCLOUD_CLUSTER_CONFIG_FILE (serve reloads the file; one that does not load leaves it on the last good one)")
	if code, ok := parseFlags(fs, args, stdout, stderr, statusHelp(fs)); !ok {
		return code
	}
	log, cfg, code := cf.load(stderr, "status", *output, env)
	if code != 0 {
		if *serveMetrics != "" {
			// A file that does not load is what a running serve
			// refused too: say what it runs instead.
			printConfigStatus(stderr, readConfigStatus(ctx, env, *serveMetrics))
		}
		return code
	}
	// A sold-out type or a missing image is what an operator runs status
	// to look at: it is shown as a warning, not a refusal.
	c, err := hcloudscale.New(ctx, cfg, hcloudscale.WithLogger(log), hcloudscale.WithLenientChecks(), hcloudscale.WithoutResume())
	if err != nil {
		return reportConfigError(stderr, "status", "checking the configuration against the API", err)
	}
	defer func() { _ = closeCluster(c, time.Second) }()

	res, err := clusterStatus(ctx, c)
	if err != nil {
		fmt.Fprintf(stderr, "hcloudscale status: %v\n", err)
		return exitFailure
	}
	if *serveMetrics != "" {
		res.Config = readConfigStatus(ctx, env, *serveMetrics)
	}
	if *output == outputJSON {
		if err := writeJSON(stdout, res); err != nil {
			fmt.Fprintf(stderr, "hcloudscale status: %v\n", err)
			return exitFailure
		}
		return exitOK
	}
	printStatus(stdout, res, *all)
	return exitOK
}

// clusterStatus collects the status of every pool of c.
func clusterStatus(ctx context.Context, c *hcloudscale.Cluster) (*statusResult, error) {
	if err := c.Refresh(ctx); err != nil {
		return nil, err
	}
	types, err := c.ServerTypes(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing server types: %w", err)
	}
	byName := make(map[string]*servercache.ServerType, len(types))
	for _, t := range types {
		byName[t.Name] = t
	}
	res := &statusResult{
		ClusterName: c.Config().ClusterName,
		Pools:       []poolStatus{},
		Warnings:    append([]string{}, c.Warnings()...),
	}
	drift, err := c.Drift(ctx)
	if err != nil {
		res.Warnings = append(res.Warnings, "drift: "+err.Error())
	}
	for _, p := range c.Pools() {
		if err := p.LoadSpreadGroups(ctx); err != nil {
			return nil, err
		}
		ps := newPoolStatus(p, byName[p.Config().ServerType])
		if err := markUnfinished(ctx, c, p, &ps); err != nil {
			return nil, err
		}
		addDrift(&ps, drift[p.Name()])
		res.Pools = append(res.Pools, ps)
	}
	res.RateLimit = newRateLimitStatus(c.RateLimit())
	return res, nil
}

func newPoolStatus(p *pool.Pool, t *servercache.ServerType) poolStatus {
	pc := p.Config()
	st := p.Status()
	ps := poolStatus{
		Name: p.Name(), Removed: p.Removed(), Pool: pc.FamilyName(), Available: p.Available(),
		ServerType: pc.ServerType, Location: pc.Location,
		MinSize: st.MinSize, MaxSize: st.MaxSize, Target: st.Target,
		Running: st.Running, Creating: creatingOnly(st), Deleting: st.Deleting, Failed: st.Failed,
		PendingClaims: st.PendingClaims,
		Offering:      offering(t, pc.Location),
		Instances:     []instanceStatus{},
		Unavailable:   []unavailableOffering{},
	}
	if t != nil {
		if loc := t.Locations[pc.Location]; loc.Deprecated && !loc.UnavailableAfter.IsZero() {
			u := loc.UnavailableAfter.UTC()
			ps.OrderableUntil = &u
		}
	}
	for _, in := range p.Instances() {
		ps.Instances = append(ps.Instances, newInstanceStatus(in))
	}
	for _, g := range p.SpreadGroups() {
		ps.SpreadGroups = append(ps.SpreadGroups, spreadGroupStatus{ID: g.ID, Name: g.Name, Servers: g.Servers})
	}
	for _, u := range st.Unavailable {
		ps.Unavailable = append(ps.Unavailable, unavailableOffering{
			ServerType: u.ServerType, Location: u.Location, PlacementGroup: u.PlacementGroup,
			Code: u.Code, Message: u.Message, Until: u.Until.UTC(),
		})
	}
	return ps
}

// addDrift marks the drifted servers of ps.
func addDrift(ps *poolStatus, drift []pool.Drift) {
	byID := map[int64]*pool.Drift{}
	for i := range drift {
		if drift[i].Drifted() {
			byID[drift[i].ServerID] = &drift[i]
		}
	}
	for i := range ps.Instances {
		d := byID[ps.Instances[i].ServerID]
		if d == nil || ps.Instances[i].ServerID == 0 {
			continue
		}
		ps.Drifted++
		for j, r := range d.Reasons {
			ps.Instances[i].Drift = append(ps.Instances[i].Drift, string(r)+": "+d.Details[j])
		}
	}
}

func newInstanceStatus(in pool.Instance) instanceStatus {
	is := instanceStatus{ID: in.ID, Name: in.Name, ServerID: in.ServerID, State: in.State.String(), Status: string(in.Status), Replaces: in.Replaces,
		Offering: in.Offering.String()}
	switch {
	case in.Error != nil:
		is.Error = &errorStatus{Class: in.Error.Class.String(), Code: in.Error.Code, Message: in.Error.Message}
	case in.Status == hcloud.ServerStatusUnknown:
		is.Error = &errorStatus{Code: codeUnknownStatus,
			Message: "Hetzner reports the server's status as unknown; it counts as running and is not deleted for it"}
	}
	return is
}

// codeUnfinished marks a server of a subnet pool that is off and not
// attached to the network: a create flow that was interrupted.
const codeUnfinished = "unfinished-create"

// markUnfinished shows the servers of a subnet pool that are off and not
// attached to the pool's network as creating, not running: the pool
// creates its servers stopped and attaches them before it powers them on,
// so such a server is most likely a create that an interrupted process
// left half done (or one someone stopped and detached: a resumed flow
// finishes it only if its action history shows it never ran). status does
// not resume creates; it says what does. It looks up each stopped server of such a pool (one request each).
func markUnfinished(ctx context.Context, c *hcloudscale.Cluster, p *pool.Pool, ps *poolStatus) error {
	pc := p.Config()
	if !pc.SubnetIPRange.IsValid() || pc.Network == "" {
		return nil
	}
	var network *hcloud.Network
	for i := range ps.Instances {
		in := &ps.Instances[i]
		if in.State != pool.Running.String() || in.Status != string(hcloud.ServerStatusOff) || in.Error != nil {
			continue
		}
		if network == nil {
			n, _, err := c.Client().Network.Get(ctx, pc.Network)
			if err != nil {
				return fmt.Errorf("pool %s: looking up network %q: %w", p.Name(), pc.Network, err)
			}
			if n == nil {
				return nil // checked at the start; gone since
			}
			network = n
		}
		srv, _, err := c.Client().Server.GetByID(ctx, in.ServerID)
		if err != nil {
			return fmt.Errorf("pool %s: looking up server %s: %w", p.Name(), in.Name, err)
		}
		if srv == nil || slices.ContainsFunc(srv.PrivateNet, func(pn hcloud.ServerPrivateNet) bool { return pn.Network != nil && pn.Network.ID == network.ID }) {
			continue
		}
		in.State = pool.Creating.String()
		in.Error = &errorStatus{Code: codeUnfinished, Message: fmt.Sprintf(
			"created stopped and not attached to network %s: an interrupted create; \"hcloudscale scale %s <N>\" or serve finishes it (attach, power on) if its action history shows it never ran, \"hcloudscale cleanup --yes\" deletes it",
			pc.Network, p.Name())}
		ps.Running--
		ps.Creating++
	}
	return nil
}

// codeUnknownStatus marks a server in Hetzner status unknown.
const codeUnknownStatus = "unknown-status"

// creatingOnly counts the instances being created without the failed
// creations, which are in state Creating too but counted as failed.
func creatingOnly(st pool.Status) int {
	n := st.Creating
	for _, in := range st.Errors {
		if in.State == pool.Creating {
			n--
		}
	}
	return n
}

// offering says whether the catalogue offers the type in the location.
func offering(t *servercache.ServerType, location string) string {
	if t == nil {
		return "unknown server type"
	}
	loc, ok := t.Locations[location]
	switch {
	case !ok:
		return "not offered"
	case !loc.Available:
		return "unavailable"
	case loc.Deprecated:
		return "deprecated"
	}
	return "available"
}

func printStatus(w io.Writer, res *statusResult, all bool) {
	if res.ClusterName != "" {
		fmt.Fprintf(w, "Cluster %s\n\n", res.ClusterName)
	}
	tb := newTable(w, "POOL", "TYPE", "LOCATION", "MIN", "MAX", "TARGET", "RUNNING", "CREATING", "DELETING", "FAILED", "OFFERING")
	for _, p := range res.Pools {
		off := p.Offering
		if p.OrderableUntil != nil {
			off += " until " + p.OrderableUntil.Format(time.DateOnly)
		}
		if !p.Available && !p.Removed && off != "unavailable" {
			off += ", sold out (capacity error)"
		}
		name := p.Name
		if p.Removed {
			name += " (removed)"
		}
		tb.row(name, p.ServerType, p.Location, p.MinSize, p.MaxSize, p.Target, p.Running, p.Creating, p.Deleting, p.Failed, off)
	}
	tb.flush()

	printOfferings(w, res)
	printInstances(w, res, all)
	printDrifted(w, res)
	printReplacements(w, res)
	printUnavailable(w, res)
	printSpreadGroups(w, res)

	if len(res.Warnings) > 0 {
		fmt.Fprintf(w, "\nWarnings\n")
		for _, warn := range res.Warnings {
			fmt.Fprintf(w, "  %s\n", warn)
		}
	}

	printConfigStatus(w, res.Config)

	rl := res.RateLimit
	fmt.Fprintf(w, "\nAPI budget: %d of %d requests left", rl.Remaining, rl.Limit)
	if rl.Reset != nil {
		fmt.Fprintf(w, ", full again at %s", rl.Reset.Local().Format(time.TimeOnly))
	}
	fmt.Fprintln(w)
}

// printInstances lists the instances with errors (all: every instance).
func printInstances(w io.Writer, res *statusResult, all bool) {
	var rows [][]any
	for _, p := range res.Pools {
		for _, in := range p.Instances {
			if !all && in.Error == nil {
				continue
			}
			errText := "-"
			if in.Error != nil {
				errText = strings.TrimSpace(in.Error.Class+" "+in.Error.Code) + ": " + in.Error.Message
			}
			rows = append(rows, []any{p.Name, in.Name, in.ID, in.State, orDash(in.Status), errText})
		}
	}
	if len(rows) > 0 {
		if all {
			fmt.Fprintf(w, "\nInstances\n")
		} else {
			fmt.Fprintf(w, "\nInstances with errors\n")
		}
		tb := newTable(w, "  POOL", "NAME", "ID", "STATE", "HETZNER", "ERROR")
		for _, r := range rows {
			r[0] = "  " + r[0].(string)
			tb.row(r...)
		}
		tb.flush()
	}

}

// printDrifted lists the servers that differ from their pool's config.
func printDrifted(w io.Writer, res *statusResult) {
	var drifted [][]any
	for _, p := range res.Pools {
		for _, in := range p.Instances {
			if len(in.Drift) > 0 {
				drifted = append(drifted, []any{"  " + p.Name, in.Name, strings.Join(in.Drift, "; ")})
			}
		}
	}
	if len(drifted) > 0 {
		fmt.Fprintf(w, "\nServers that differ from their pool's configuration (replaced where the pool's replace enables the reason: hcloudscale replace --plan)\n")
		tb := newTable(w, "  POOL", "NAME", "DIFFERS")
		for _, r := range drifted {
			tb.row(r...)
		}
		tb.flush()
	}

}

// printReplacements lists the node lifecycle's replacements in progress:
// the servers that replace a server that still exists.
func printReplacements(w io.Writer, res *statusResult) {
	names := map[int64]string{}
	for _, p := range res.Pools {
		for _, in := range p.Instances {
			if in.ServerID != 0 {
				names[in.ServerID] = in.Name
			}
		}
	}
	var tb *table
	for _, p := range res.Pools {
		for _, in := range p.Instances {
			old, ok := names[in.Replaces]
			if in.Replaces == 0 || !ok {
				continue
			}
			if tb == nil {
				fmt.Fprintf(w, "\nReplacements in progress\n")
				tb = newTable(w, "  POOL", "NAME", "REPLACES", "STATE")
			}
			tb.row("  "+p.Name, in.Name, old, in.State)
		}
	}
	if tb != nil {
		tb.flush()
	}
}

// printSpreadGroups lists the spread groups of each pool with their fill.
func printSpreadGroups(w io.Writer, res *statusResult) {
	header := false
	for _, p := range res.Pools {
		if len(p.SpreadGroups) == 0 {
			continue
		}
		if !header {
			fmt.Fprintf(w, "\nSpread placement groups\n")
			header = true
		}
		var groups []string
		for _, g := range p.SpreadGroups {
			groups = append(groups, fmt.Sprintf("%s %d/%d", g.Name, g.Servers, pool.MaxSpreadMembers))
		}
		fmt.Fprintf(w, "  %s: %s\n", p.Name, strings.Join(groups, ", "))
	}
}

// printUnavailable lists the offerings marked unavailable.
func printUnavailable(w io.Writer, res *statusResult) {
	var unavailable []string
	for _, p := range res.Pools {
		for _, u := range p.Unavailable {
			what := u.ServerType + " in " + u.Location
			if u.PlacementGroup != "" {
				what = "placement group " + u.PlacementGroup
			}
			unavailable = append(unavailable, fmt.Sprintf("  %s: %s until %s (%s: %s)", p.Name, what, u.Until.Format(time.TimeOnly), u.Code, u.Message))
		}
	}
	if len(unavailable) > 0 {
		fmt.Fprintf(w, "\nUnavailable offerings\n")
		for _, u := range unavailable {
			fmt.Fprintln(w, u)
		}
	}

}
