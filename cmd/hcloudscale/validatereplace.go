package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hcloudscale/hcloudscale/config"
)

// replacePlan is a pool's node lifecycle as validate understood it, with
// the defaults filled in and the windows that apply to it.
type replacePlan struct {
	Drift        []string `json:"drift"`
	ExpireAfter  string   `json:"expireAfter,omitempty"`
	ExpireJitter string   `json:"expireJitter,omitempty"`
	RepairAfter  string   `json:"repairAfter,omitempty"`
	MaxSurge     int      `json:"maxSurge"`
	MaxInFlight  int      `json:"maxInFlight"`
	JoinTimeout  string   `json:"joinTimeout"`
	DrainTimeout string   `json:"drainTimeout"`
	RetryAfter   string   `json:"retryAfter"`
	Paused       bool     `json:"paused"`
	windowsPlan
	// AdoptedImageDrift lists the architectures whose servers adopted from
	// the upstream provider all count as drifted (config.Pool.SnapshotImages
	// with image drift); Warning says what to do.
	AdoptedImageDrift []string `json:"adoptedImageDrift,omitempty"`
	Warning           string   `json:"warning,omitempty"`
}

// windowsPlan is the maintenance windows that hold replacements, where
// they come from ("pool", "cluster" or "none": any time) and when they
// are next open.
type windowsPlan struct {
	WindowsFrom string       `json:"windowsFrom"`
	Windows     []windowPlan `json:"windows,omitempty"`
	OpenNow     bool         `json:"openNow"`
	NextOpen    *time.Time   `json:"nextOpen,omitempty"`
}

type windowPlan struct {
	Schedule string `json:"schedule"`
	Duration string `json:"duration"`
	TimeZone string `json:"timeZone"`
}

// clusterReplacePlan is the top-level replace object as understood.
type clusterReplacePlan struct {
	MaxInFlight        int    `json:"maxInFlight"`
	RemovedPools       bool   `json:"removedPools"`
	Paused             bool   `json:"paused"`
	RepairMaxUnhealthy string `json:"repairMaxUnhealthy"`
	windowsPlan
}

// planWindows describes windows at now; from names their origin.
func planWindows(from string, ws []config.Window, now time.Time) windowsPlan {
	wp := windowsPlan{WindowsFrom: from}
	if len(ws) == 0 {
		wp.WindowsFrom = "none"
	}
	for _, w := range ws {
		wp.Windows = append(wp.Windows, windowPlan{Schedule: w.Schedule, Duration: config.ShortDuration(w.Duration), TimeZone: cmpOr(w.TimeZone, "UTC")})
	}
	open, next := config.OpenAny(ws, now)
	wp.OpenNow = open
	if !open && !next.IsZero() {
		wp.NextOpen = &next
	}
	return wp
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// planReplace is the lifecycle part of a pool's plan; nil when the pool
// replaces nothing.
// arch, when known (validate --online), is the pool's architecture.
func planReplace(p *config.Pool, cluster *config.ClusterReplace, arch string, now time.Time) *replacePlan {
	r := p.Replace
	if !r.Enabled() {
		return nil
	}
	rp := &replacePlan{
		Drift: append([]string{}, r.Drift...), MaxSurge: r.MaxSurge, MaxInFlight: r.MaxInFlight,
		JoinTimeout: config.ShortDuration(r.JoinTimeout), DrainTimeout: config.ShortDuration(r.DrainTimeout), RetryAfter: config.ShortDuration(r.RetryAfter),
		Paused: r.Paused,
	}
	if r.ExpireAfter > 0 {
		rp.ExpireAfter, rp.ExpireJitter = config.ShortDuration(r.ExpireAfter), config.ShortDuration(r.ExpireJitter)
	}
	if r.RepairAfter > 0 {
		rp.RepairAfter = config.ShortDuration(r.RepairAfter)
	}
	if len(r.Windows) > 0 || len(cluster.Windows) == 0 {
		rp.windowsPlan = planWindows("pool", r.Windows, now)
		if len(r.Windows) == 0 {
			rp.WindowsFrom = "none"
		}
	} else {
		rp.windowsPlan = planWindows("cluster", cluster.Windows, now)
	}
	if slices.Contains(r.Drift, "image") {
		for _, a := range p.SnapshotImages {
			if arch == "" || arch == string(a) {
				rp.AdoptedImageDrift = append(rp.AdoptedImageDrift, string(a))
			}
		}
	}
	if len(rp.AdoptedImageDrift) > 0 {
		archs := strings.Join(rp.AdoptedImageDrift, " and ")
		if arch == "" {
			archs += " (if the pool's server type is; validate --online knows)"
		}
		rp.Warning = fmt.Sprintf(`drift "image" replaces every server adopted from the upstream provider, for %s: upstream booted the newest snapshot (no imagesForArch entry), these servers boot %q, which a cloud-init written for the snapshot may never join; set imagesForArch.%s to the snapshot's label selector, or to %q to mean it`,
			archs, p.Images.ForArch(config.Arch(rp.AdoptedImageDrift[0])), rp.AdoptedImageDrift[0], p.Images.ForArch(config.Arch(rp.AdoptedImageDrift[0])))
	}
	return rp
}

// planClusterReplace is the top-level replace object's plan, with the
// defaults filled in; nil when no pool replaces nodes and removed pools
// are left alone.
func planClusterReplace(cfg *config.Config, now time.Time) *clusterReplacePlan {
	r := &cfg.Replace
	if !r.RemovedPools && !slices.ContainsFunc(cfg.Pools, func(p config.Pool) bool { return p.Replace.Enabled() }) {
		return nil
	}
	limit := r.RepairMaxUnhealthy
	if limit == (config.Limit{}) {
		limit = config.DefaultRepairMaxUnhealthy
	}
	return &clusterReplacePlan{
		MaxInFlight: cmp.Or(r.MaxInFlight, config.DefaultClusterReplaceMaxInFlight), RemovedPools: r.RemovedPools, Paused: r.Paused,
		RepairMaxUnhealthy: limit.String(), windowsPlan: planWindows("cluster", r.Windows, now),
	}
}

// planLifecycle fills in the node lifecycle's part of the result, and
// puts the warning of each pool whose image drift would replace every
// server adopted from upstream first, where it cannot be missed.
func planLifecycle(cfg *config.Config, res *validateResult, now time.Time) {
	res.Replace = planClusterReplace(cfg, now)
	var loud []string
	for i := range cfg.Pools {
		p := &cfg.Pools[i]
		rp := planReplace(p, &cfg.Replace, res.Pools[i].Arch, now)
		res.Pools[i].Replace = rp
		if rp != nil && rp.Warning != "" {
			loud = append(loud, fmt.Sprintf("nodeConfigs.%s.replace.drift: %s", p.Name, rp.Warning))
			res.AdoptedImageDrift = append(res.AdoptedImageDrift, p.Name)
		}
	}
	res.Warnings = append(loud, res.Warnings...)
}

// replaceRows adds the rows of a pool's lifecycle to its plan's table.
func replaceRows(kv func(string, any), r *replacePlan) {
	if r == nil {
		kv("replace", "-")
		return
	}
	var why []string
	if len(r.Drift) > 0 {
		why = append(why, "drift "+strings.Join(r.Drift, ", "))
	}
	if r.ExpireAfter != "" {
		why = append(why, fmt.Sprintf("expired after %s (+ up to %s per server)", r.ExpireAfter, r.ExpireJitter))
	}
	if r.RepairAfter != "" {
		why = append(why, "repair:not_ready after "+r.RepairAfter)
	}
	state := ""
	if r.Paused {
		state = " (paused)"
	}
	kv("replace", strings.Join(why, "; ")+state)
	kv("budgets", fmt.Sprintf("maxSurge %d, maxInFlight %d; joinTimeout %s, drainTimeout %s, retryAfter %s",
		r.MaxSurge, r.MaxInFlight, r.JoinTimeout, r.DrainTimeout, r.RetryAfter))
	kv("windows", windowsText(&r.windowsPlan))
	if r.Warning != "" {
		kv("WARNING", r.Warning)
	}
}

// windowsText describes windows and when they next open.
func windowsText(w *windowsPlan) string {
	if w.WindowsFrom == "none" {
		return "none: any time"
	}
	parts := make([]string, len(w.Windows))
	for i, win := range w.Windows {
		parts[i] = fmt.Sprintf("%q for %s in %s", win.Schedule, win.Duration, win.TimeZone)
	}
	s := fmt.Sprintf("%s (%s's)", strings.Join(parts, ", "), w.WindowsFrom)
	switch {
	case w.OpenNow:
		s += ": open now"
	case w.NextOpen != nil:
		next := *w.NextOpen
		// In the windows' time zone when they share one.
		if loc, err := time.LoadLocation(w.Windows[0].TimeZone); err == nil && !slices.ContainsFunc(w.Windows, func(x windowPlan) bool { return x.TimeZone != w.Windows[0].TimeZone }) {
			next = next.In(loc)
		}
		s += ": next opens " + next.Format("2006-01-02 15:04 MST")
	default:
		s += ": does not open within a year"
	}
	return s
}

// printClusterReplace writes the top-level replace object's plan.
func printClusterReplace(tb *table, r *clusterReplacePlan) {
	tb.row("  replace", fmt.Sprintf("maxInFlight %d across pools, removedPools %t, repairMaxUnhealthy %s%s",
		r.MaxInFlight, r.RemovedPools, r.RepairMaxUnhealthy, map[bool]string{true: " (paused)"}[r.Paused]))
	tb.row("  windows", windowsText(&r.windowsPlan))
}
