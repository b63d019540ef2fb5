package config

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file reads and checks the node lifecycle's settings: the cluster
// config's nodeConfigs.<pool>.replace and top-level replace objects
// (ParseClusterConfig), and Pool.Replace and Config.Replace of a Config
// built in code (Config.Validate). Both apply the same check functions.

// replace decodes a pool's replace object and fills in the defaults:
// unlike the other keys of a NodeConfig, the result is what the pool runs
// with (Load copies it to Pool.Replace), since a maxSurge of 0 cannot be
// told from an absent one afterwards.
func (p *problems) replace(path string, raw json.RawMessage) *Replace {
	if k := jsonKind(raw); k != "an object" {
		p.addf(path, "want an object, got %s", k)
		return nil
	}
	r := &Replace{}
	before := len(p.errs)
	var expireSet, jitterSet, surgeSet bool
	p.fieldsWith(path, raw, map[string]func(string, json.RawMessage){
		"drift": func(path string, raw json.RawMessage) {
			seen := map[string]bool{}
			p.array(path, raw, func(path string, raw json.RawMessage) {
				if s, ok := p.str(path, raw); ok {
					p.driftReason(path, s, seen)
					r.Drift = append(r.Drift, s)
				}
			})
		},
		"expireAfter": func(path string, raw json.RawMessage) {
			expireSet = true
			if d, ok := p.duration(path, raw); ok {
				if err := checkExpireAfter(d); err != nil {
					p.add(path, err)
					return
				}
				r.ExpireAfter = d
			}
		},
		"expireJitter": func(path string, raw json.RawMessage) {
			jitterSet = true
			if d, ok := p.duration(path, raw); ok {
				if d < 0 {
					p.addf(path, "%s is negative", ShortDuration(d))
					return
				}
				r.ExpireJitter = d
			}
		},
		"maxSurge":     p.budget(&r.MaxSurge, 0, &surgeSet),
		"maxInFlight":  p.budget(&r.MaxInFlight, 1, nil),
		"joinTimeout":  p.timeout(&r.JoinTimeout),
		"drainTimeout": p.timeout(&r.DrainTimeout),
		"retryAfter":   p.timeout(&r.RetryAfter),
		"windows": func(path string, raw json.RawMessage) {
			r.Windows = p.windows(path, raw)
		},
		"paused": func(path string, raw json.RawMessage) {
			r.Paused, _ = p.boolean(path, raw)
		},
		"repairAfter": func(path string, raw json.RawMessage) {
			if d, ok := p.duration(path, raw); ok {
				if err := checkRepairAfter(d); err != nil {
					p.add(path, err)
					return
				}
				r.RepairAfter = d
			}
		},
		evictUnreplicatedKey: p.override(&r.EvictPods.Unreplicated),
		evictLocalStorageKey: p.override(&r.EvictPods.LocalStorage),
		evictKubeSystemKey:   p.override(&r.EvictPods.KubeSystem),
	}, keyRules{exactCase: true, elsewhere: clusterOnlyReplaceKeys})
	p.replaceDefaults(path, r, expireSet, jitterSet, surgeSet)
	if len(p.errs) == before && !r.Enabled() {
		p.warnf(path, "none of drift, expireAfter and repairAfter is set: the pool replaces no node")
	}
	return r
}

// The keys of EvictPods, in a pool's replace object and the top-level one.
const (
	evictUnreplicatedKey = "evictUnreplicatedPods"
	evictLocalStorageKey = "evictLocalStoragePods"
	evictKubeSystemKey   = "evictKubeSystemPods"
)

// override decodes a boolean into *dst, which stays nil when the key is
// absent (the cluster's value applies).
func (p *problems) override(dst **bool) func(string, json.RawMessage) {
	return func(path string, raw json.RawMessage) {
		if b, ok := p.boolean(path, raw); ok {
			*dst = &b
		}
	}
}

// clusterOnlyReplaceKeys are the settings of the top-level replace object
// that a pool's replace object does not have, with where they go.
var clusterOnlyReplaceKeys = map[string]string{
	"removedPools":       "removed pools are drained out by the top-level replace.removedPools: true (a removed pool has no nodeConfigs entry left to say it)",
	"removedPool":        "removed pools are drained out by the top-level replace.removedPools: true (a removed pool has no nodeConfigs entry left to say it)",
	"repairMaxUnhealthy": "it is a setting of the whole cluster: the top-level replace.repairMaxUnhealthy",
}

// timeout decodes a positive duration into dst.
func (p *problems) timeout(dst *time.Duration) func(string, json.RawMessage) {
	return func(path string, raw json.RawMessage) {
		if d, ok := p.duration(path, raw); ok {
			if err := checkPositive(d); err != nil {
				p.add(path, err)
				return
			}
			*dst = d
		}
	}
}

// budget decodes a count of at least lowest into dst; set, if not nil,
// records that the key was given.
func (p *problems) budget(dst *int, lowest int, set *bool) func(string, json.RawMessage) {
	return func(path string, raw json.RawMessage) {
		if set != nil {
			*set = true
		}
		if n, ok := p.integer(path, raw); ok {
			if err := checkBudget(n, lowest); err != nil {
				p.add(path, err)
				return
			}
			*dst = n
		}
	}
}

// replaceDefaults checks the jitter against expireAfter and fills in
// the defaults of what a pool's replace object left out.
func (p *problems) replaceDefaults(path string, r *Replace, expireSet, jitterSet, surgeSet bool) {
	switch {
	case jitterSet && !expireSet:
		p.addf(path+".expireJitter", "set, but expireAfter is not: nodes do not expire, so there is no expiry to spread")
	case jitterSet && r.ExpireAfter > 0:
		p.add(path+".expireJitter", checkJitter(r.ExpireJitter, r.ExpireAfter))
	case r.ExpireAfter > 0:
		r.ExpireJitter = r.ExpireAfter / 10
	}
	if !surgeSet {
		r.MaxSurge = DefaultReplaceMaxSurge
	}
	r.MaxInFlight = cmp.Or(r.MaxInFlight, DefaultReplaceMaxInFlight)
	r.JoinTimeout = cmp.Or(r.JoinTimeout, DefaultReplaceJoinTimeout)
	r.DrainTimeout = cmp.Or(r.DrainTimeout, DefaultReplaceDrainTimeout)
	r.RetryAfter = cmp.Or(r.RetryAfter, DefaultReplaceRetryAfter)
}

// clusterReplace decodes the top-level replace object, with the defaults
// filled in.
func (p *problems) clusterReplace(path string, raw json.RawMessage) *ClusterReplace {
	if k := jsonKind(raw); k != "an object" {
		p.addf(path, "want an object, got %s", k)
		return nil
	}
	r := &ClusterReplace{}
	flag := func(dst *bool) func(string, json.RawMessage) {
		return func(path string, raw json.RawMessage) { *dst, _ = p.boolean(path, raw) }
	}
	p.fieldsWith(path, raw, map[string]func(string, json.RawMessage){
		"maxInFlight": func(path string, raw json.RawMessage) {
			if n, ok := p.integer(path, raw); ok {
				if err := checkBudget(n, 1); err != nil {
					p.add(path, err)
					return
				}
				r.MaxInFlight = n
			}
		},
		"removedPools": flag(&r.RemovedPools),
		"windows": func(path string, raw json.RawMessage) {
			r.Windows = p.windows(path, raw)
		},
		"paused": flag(&r.Paused),
		"repairMaxUnhealthy": func(path string, raw json.RawMessage) {
			r.RepairMaxUnhealthy = p.limit(path, raw)
		},
		evictUnreplicatedKey: flag(&r.EvictPods.Unreplicated),
		evictLocalStorageKey: flag(&r.EvictPods.LocalStorage),
		evictKubeSystemKey:   flag(&r.EvictPods.KubeSystem),
	}, keyRules{exactCase: true})
	r.MaxInFlight = cmp.Or(r.MaxInFlight, DefaultClusterReplaceMaxInFlight)
	r.RepairMaxUnhealthy = cmp.Or(r.RepairMaxUnhealthy, DefaultRepairMaxUnhealthy)
	return r
}

// limit decodes a count of nodes (a JSON number) or a percentage of them
// (a string such as "20%").
func (p *problems) limit(path string, raw json.RawMessage) Limit {
	if jsonKind(raw) == "a string" {
		s, _ := p.str(path, raw)
		num, isPercent := strings.CutSuffix(s, "%")
		n, err := strconv.Atoi(num)
		if !isPercent || err != nil {
			p.addf(path, "%q is neither a count such as 3 nor a percentage such as \"20%%\"", s)
			return Limit{}
		}
		l := Limit{Value: n, Percent: true}
		p.add(path, checkLimit(l))
		return l
	}
	n, ok := p.integer(path, raw)
	if !ok {
		return Limit{}
	}
	l := Limit{Value: n}
	p.add(path, checkLimit(l))
	return l
}

// windows decodes an array of maintenance windows, each
// {"schedule": cron, "duration": duration, "timeZone": IANA name}, and
// compiles them.
func (p *problems) windows(path string, raw json.RawMessage) []Window {
	var out []Window
	p.array(path, raw, func(path string, raw json.RawMessage) {
		if k := jsonKind(raw); k != "an object" {
			p.addf(path, "want an object such as {\"schedule\": \"0 2 * * *\", \"duration\": \"3h\"}, got %s", k)
			return
		}
		before := len(p.errs)
		var schedule, timeZone string
		var duration time.Duration
		// given holds the parts present, ok those decoded: each decoded
		// part is checked on its own, so that every fault shows at once.
		given, ok := map[string]bool{}, map[string]bool{}
		p.fieldsWith(path, raw, map[string]func(string, json.RawMessage){
			"schedule": func(path string, raw json.RawMessage) {
				given["schedule"] = true
				schedule, ok["schedule"] = p.str(path, raw)
			},
			"duration": func(path string, raw json.RawMessage) {
				given["duration"] = true
				duration, ok["duration"] = p.duration(path, raw)
			},
			"timeZone": func(path string, raw json.RawMessage) {
				timeZone, ok["timeZone"] = p.str(path, raw)
			},
		}, keyRules{exactCase: true})
		if !given["schedule"] {
			p.addf(path+".schedule", "required: a cron expression of the times the window opens, such as \"0 2 * * 1-5\"")
		}
		if !given["duration"] {
			p.addf(path+".duration", "required: how long the window stays open, such as \"3h\"")
		}
		w, faults := compileWindow(schedule, duration, timeZone)
		for _, f := range faults {
			if ok[f.part] {
				p.add(path+"."+f.part, f.err)
			}
		}
		if len(p.errs) == before {
			out = append(out, w)
			if w.alwaysOpen(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
				p.warnf(path, "%q opens the window again before its %s are over: it never closes, as if there were no window; give a duration shorter than the time between two openings",
					schedule, ShortDuration(duration))
			}
		}
	})
	return out
}

// duration decodes a Go duration string such as "720h" or "1h30m".
func (p *problems) duration(path string, raw json.RawMessage) (time.Duration, bool) {
	s, ok := p.str(path, raw)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		hint := ""
		if strings.HasSuffix(s, "d") {
			hint = " (there is no unit d: write 720h for 30 days)"
		}
		p.addf(path, "%q is not a duration such as 720h, 10m or 1h30m%s", s, hint)
		return 0, false
	}
	return d, true
}

// driftAliases are names of drift reasons that people write for the one
// DriftReasons names.
var driftAliases = map[string]string{
	"cloudinit": "user_data", "cloud_init": "user_data", "cloud-init": "user_data", "cloudInit": "user_data",
	"type": "server_type", "placement": "placement_group", "firewall": "firewalls", "serverlabels": "labels",
	"offerings": DriftOffering, "fallback": DriftOffering,
}

// driftReason checks one entry of a drift list; seen holds the entries
// before it.
func (p *problems) driftReason(path, name string, seen map[string]bool) {
	switch {
	case seen[name]:
		p.addf(path, "%q is listed twice", name)
	case !slices.Contains(DriftReasons, name):
		hint := ""
		s := driftAliases[name]
		if s == "" {
			s = suggest(name, DriftReasons)
		}
		if s != "" {
			hint = fmt.Sprintf(", did you mean %q", s)
		}
		p.addf(path, "%q is not a drift reason%s; want one of %s", name, hint, strings.Join(DriftReasons, ", "))
	}
	seen[name] = true
}

// validateReplace checks a pool's Replace built in code: the ranges the
// cluster config's replace object is held to, with the defaults filled in
// (a zero MaxInFlight or timeout is an error).
func (p *problems) validateReplace(path string, r *Replace) {
	seen := map[string]bool{}
	for i, name := range r.Drift {
		p.driftReason(indexPath(path+".drift", i), name, seen)
	}
	if r.ExpireAfter != 0 {
		p.add(path+".expireAfter", checkExpireAfter(r.ExpireAfter))
	}
	switch {
	case r.ExpireJitter < 0:
		p.addf(path+".expireJitter", "%s is negative", ShortDuration(r.ExpireJitter))
	case r.ExpireJitter > 0 && r.ExpireAfter == 0:
		p.addf(path+".expireJitter", "set without expireAfter")
	case r.ExpireAfter > 0:
		p.add(path+".expireJitter", checkJitter(r.ExpireJitter, r.ExpireAfter))
	}
	p.add(path+".maxSurge", checkBudget(r.MaxSurge, 0))
	p.add(path+".maxInFlight", checkBudget(r.MaxInFlight, 1))
	p.add(path+".joinTimeout", checkPositive(r.JoinTimeout))
	p.add(path+".drainTimeout", checkPositive(r.DrainTimeout))
	p.add(path+".retryAfter", checkPositive(r.RetryAfter))
	if r.RepairAfter != 0 {
		p.add(path+".repairAfter", checkRepairAfter(r.RepairAfter))
	}
	p.validateWindows(path+".windows", r.Windows)
}

// validateClusterReplace checks Config.Replace; a zero MaxInFlight means
// DefaultClusterReplaceMaxInFlight.
func (p *problems) validateClusterReplace(path string, r *ClusterReplace) {
	if r.MaxInFlight != 0 {
		p.add(path+".maxInFlight", checkBudget(r.MaxInFlight, 1))
	}
	if r.RepairMaxUnhealthy != (Limit{}) {
		p.add(path+".repairMaxUnhealthy", checkLimit(r.RepairMaxUnhealthy))
	}
	p.validateWindows(path+".windows", r.Windows)
}

// validateWindows compiles each window from its exported fields, as a
// Window built in code has not been compiled.
func (p *problems) validateWindows(path string, windows []Window) {
	for i, w := range windows {
		_, faults := compileWindow(w.Schedule, w.Duration, w.TimeZone)
		for _, f := range faults {
			p.add(indexPath(path, i)+"."+f.part, f.err)
		}
	}
}

func checkBudget(n, lowest int) error {
	if n < lowest || n > MaxReplaceBudget {
		return fmt.Errorf("%d is out of range %d..%d", n, lowest, MaxReplaceBudget)
	}
	return nil
}

func checkPositive(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%s is not positive", ShortDuration(d))
	}
	return nil
}

func checkExpireAfter(d time.Duration) error {
	if err := checkPositive(d); err != nil {
		return err
	}
	if d < MinReplaceExpireAfter {
		return fmt.Errorf("%s is shorter than the minimum %s", ShortDuration(d), ShortDuration(MinReplaceExpireAfter))
	}
	return nil
}

func checkRepairAfter(d time.Duration) error {
	if err := checkPositive(d); err != nil {
		return err
	}
	if d < MinReplaceRepairAfter {
		return fmt.Errorf("%s is shorter than the minimum %s", ShortDuration(d), ShortDuration(MinReplaceRepairAfter))
	}
	return nil
}

// checkLimit wants a count of 1 to MaxReplaceBudget nodes, or 1-100%:
// a limit of none would hold every repair.
func checkLimit(l Limit) error {
	switch {
	case l.Percent && (l.Value < 1 || l.Value > 100):
		return fmt.Errorf("%s is out of range 1%%..100%%", l)
	case !l.Percent && (l.Value < 1 || l.Value > MaxReplaceBudget):
		return fmt.Errorf("%s is out of range 1..%d", l, MaxReplaceBudget)
	}
	return nil
}

func checkJitter(jitter, expireAfter time.Duration) error {
	if jitter > expireAfter {
		return fmt.Errorf("%s is above expireAfter %s", ShortDuration(jitter), ShortDuration(expireAfter))
	}
	return nil
}

// ShortDuration formats d without trailing zero units: 10m, not 10m0s;
// 3h, not 3h0m0s.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// clone copies r, its lists included, so that pools share nothing with
// the parsed document.
func (r *Replace) clone() *Replace {
	if r == nil {
		return nil
	}
	c := *r
	c.Drift = slices.Clone(r.Drift)
	for _, f := range []**bool{&c.EvictPods.Unreplicated, &c.EvictPods.LocalStorage, &c.EvictPods.KubeSystem} {
		if *f != nil {
			v := **f
			*f = &v
		}
	}
	c.Windows = slices.Clone(r.Windows)
	return &c
}
