package config

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	// The time-zone database is embedded so that a window's timeZone
	// loads on a machine without one: the scratch image hcloudscale
	// ships in, and the images of programs built on this package.
	_ "time/tzdata"
	"unicode"

	"github.com/robfig/cron/v3"
)

// Defaults of the node lifecycle (see Replace and ClusterReplace).
const (
	DefaultReplaceMaxSurge     = 1
	DefaultReplaceMaxInFlight  = 1
	DefaultReplaceJoinTimeout  = 10 * time.Minute
	DefaultReplaceDrainTimeout = 15 * time.Minute
	// DefaultReplaceRetryAfter is how long a pool whose last replacement
	// stopped (a replacement that did not join, a drain that did not
	// finish) starts no new one.
	DefaultReplaceRetryAfter = time.Hour
	// DefaultClusterReplaceMaxInFlight is the cluster-wide cap of
	// replacements in progress.
	DefaultClusterReplaceMaxInFlight = 1

	// MinReplaceExpireAfter is the shortest expireAfter: a shorter one
	// would replace nodes about as fast as they join.
	MinReplaceExpireAfter = 10 * time.Minute
	// MinReplaceRepairAfter is the shortest repairAfter: a kubelet
	// restart or a reboot leaves a node NotReady for a minute or two,
	// and Kubernetes evicts the pods of an unreachable node after 5
	// minutes.
	MinReplaceRepairAfter = 5 * time.Minute
	// MaxReplaceBudget bounds maxSurge and maxInFlight (of a pool and of
	// the cluster).
	MaxReplaceBudget = 1000
)

// DriftReasons are the names of the drift reasons a pool can replace
// nodes for (Replace.Drift): those package pool reports, in its order,
// then DriftNodeTaints, which the node lifecycle reads from the nodes.
var DriftReasons = []string{
	"server_type", "location", "image", "placement_group",
	"network", "firewalls", "labels", "user_data", DriftOffering, DriftNodeTaints,
}

// DriftOffering is the drift of a server of a pool with several offerings
// that runs on a later offering while an earlier one is available: its
// replacement is created on the first available offering. Only a pool
// whose drift lists it reports it: a node on a later offering is not
// drift otherwise.
const DriftOffering = "offering"

// DriftNodeTaints is the drift of a node that lacks a taint of its pool
// (key and effect): a NoExecute taint added to a pool, which the node
// labeller does not put on a node that already runs, reaches the pool's
// nodes through their replacement.
const DriftNodeTaints = "node_taints"

// Replace is a pool's node lifecycle: which nodes are replaced and how
// fast. A nil *Replace (the key absent) replaces nothing; so does a
// Replace with neither Drift nor ExpireAfter.
type Replace struct {
	// Drift lists the drift reasons (DriftReasons) that make a node due;
	// empty: drift replaces nothing.
	Drift []string
	// ExpireAfter makes a node due at this age (from its server's
	// creation), plus a jitter of up to ExpireJitter that is fixed per
	// server, so that a pool created at once does not expire at once.
	// Zero: nodes do not expire.
	ExpireAfter  time.Duration
	ExpireJitter time.Duration
	// MaxSurge is how many replacements may take the pool above its max
	// size at once (DefaultReplaceMaxSurge; 0: a pool at its max waits).
	MaxSurge int
	// MaxInFlight is how many nodes of the pool are in replacement at
	// once (DefaultReplaceMaxInFlight).
	MaxInFlight int
	// JoinTimeout bounds the wait for the replacement's node to be
	// registered, Ready and schedulable (DefaultReplaceJoinTimeout).
	JoinTimeout time.Duration
	// DrainTimeout bounds the drain of the old node
	// (DefaultReplaceDrainTimeout).
	DrainTimeout time.Duration
	// RetryAfter is how long the pool starts nothing new after a
	// replacement of it stopped (DefaultReplaceRetryAfter).
	RetryAfter time.Duration
	// Windows are the maintenance windows in which replacements start;
	// none: the cluster's windows (ClusterReplace.Windows), and with
	// none there either, any time.
	Windows []Window
	// Paused starts nothing new in the pool; replacements in progress
	// finish.
	Paused bool
	// RepairAfter makes a node due for repair once it has not been Ready
	// (its Ready condition False or Unknown, as when its server is off)
	// for this long. A repair surges as every replacement does, is not
	// held by the maintenance windows, and deletes the old server
	// without a drain: the pods of a node that is not Ready cannot stop
	// there. ClusterReplace.RepairMaxUnhealthy holds repairs during a
	// wider outage. Zero: no repair.
	RepairAfter time.Duration
	// EvictPods overrides, per kind, which pods the pool's drains evict
	// although the Cluster Autoscaler would not remove their node; a nil
	// field takes the cluster's (ClusterReplace.EvictPods).
	EvictPods EvictPodsOverride
}

// EvictPods says which pods a drain evicts although the Cluster
// Autoscaler, with its defaults, would not remove their node (its
// drainability rules); each is a loss someone accepts. The zero value
// evicts none of them: such a pod holds its node's replacement, which
// the plan reports.
type EvictPods struct {
	// Unreplicated: pods no controller owns. Nothing recreates them.
	Unreplicated bool
	// LocalStorage: pods with a hostPath volume or an emptyDir not in
	// memory. The data in it is lost.
	LocalStorage bool
	// KubeSystem: pods of kube-system that no PodDisruptionBudget
	// covers, also within their first hour (the autoscaler evicts them
	// after it).
	KubeSystem bool
}

// EvictPodsOverride is a pool's EvictPods: a nil field takes the
// cluster's value.
type EvictPodsOverride struct {
	Unreplicated, LocalStorage, KubeSystem *bool
}

// Over returns the pool's EvictPods: each field set in o, else the
// cluster's.
func (o EvictPodsOverride) Over(cluster EvictPods) EvictPods {
	pick := func(v *bool, def bool) bool {
		if v != nil {
			return *v
		}
		return def
	}
	return EvictPods{
		Unreplicated: pick(o.Unreplicated, cluster.Unreplicated),
		LocalStorage: pick(o.LocalStorage, cluster.LocalStorage),
		KubeSystem:   pick(o.KubeSystem, cluster.KubeSystem),
	}
}

// Enabled reports whether the pool replaces nodes for any reason.
func (r *Replace) Enabled() bool {
	return r != nil && (len(r.Drift) > 0 || r.ExpireAfter > 0 || r.RepairAfter > 0)
}

// ClusterReplace holds the settings of the node lifecycle that apply to
// the whole cluster (the cluster config's top-level replace object).
type ClusterReplace struct {
	// MaxInFlight caps replacements in progress across all pools
	// (DefaultClusterReplaceMaxInFlight).
	MaxInFlight int
	// RemovedPools drains the nodes of pools no longer in the
	// configuration out, one budgeted step at a time (their pods move to
	// the remaining pools; nothing is created in a removed pool).
	RemovedPools bool
	// Windows are the maintenance windows of pools that name none, and
	// of removed pools.
	Windows []Window
	// Paused starts nothing new anywhere.
	Paused bool
	// RepairMaxUnhealthy holds every repair while more nodes of the
	// cluster's pools than this are unhealthy (not Ready, or their
	// server not running): then the cause is wider than a node (a
	// Hetzner location, the network, the control plane), and replacing
	// nodes would not mend it. The zero Limit is
	// DefaultRepairMaxUnhealthy.
	RepairMaxUnhealthy Limit
	// EvictPods is what the drains of every pool that does not say
	// otherwise, and of removed pools, evict beyond the autoscaler's
	// rules.
	EvictPods EvictPods
}

// DefaultRepairMaxUnhealthy is ClusterReplace.RepairMaxUnhealthy's
// default: 20% of the nodes, rounded up.
var DefaultRepairMaxUnhealthy = Limit{Value: 20, Percent: true}

// Limit is a number of nodes, or a percentage of them (Percent).
type Limit struct {
	Value   int
	Percent bool
}

// Of returns the number of nodes the limit allows out of total: a
// percentage rounds up, so that 20% of 3 nodes is 1.
func (l Limit) Of(total int) int {
	if !l.Percent {
		return l.Value
	}
	return (total*l.Value + 99) / 100
}

// String formats the limit as the cluster config writes it: 3 or "20%".
func (l Limit) String() string {
	if l.Percent {
		return fmt.Sprintf("%d%%", l.Value)
	}
	return fmt.Sprint(l.Value)
}

// Window is a maintenance window: it opens at each time Schedule (a
// five-field cron expression, or a descriptor such as @daily) names in
// TimeZone and stays open for Duration.
type Window struct {
	Schedule string
	Duration time.Duration
	TimeZone string // IANA name; empty: UTC

	spec cron.Schedule
	loc  *time.Location
}

// ParseWindow checks and compiles a window. Errors name the part at
// fault but no setting: the caller adds the path. Everything wrong with
// the window is reported at once.
func ParseWindow(schedule string, duration time.Duration, timeZone string) (Window, error) {
	w, faults := compileWindow(schedule, duration, timeZone)
	errs := make([]error, len(faults))
	for i, f := range faults {
		errs[i] = fmt.Errorf("%s %w", f.part, f.err)
	}
	return w, errors.Join(errs...)
}

// windowFault is one thing wrong with a window: the part at fault
// ("schedule", "duration" or "timeZone", the JSON keys of a window) apart
// from its error, so that it can be reported at that part's path.
type windowFault struct {
	part string
	err  error
}

// compileWindow is ParseWindow, returning every fault of the window, in
// the order of its JSON keys; w is compiled only when there is none.
func compileWindow(schedule string, duration time.Duration, timeZone string) (w Window, faults []windowFault) {
	w = Window{Schedule: schedule, Duration: duration, TimeZone: timeZone}
	add := func(part string, err error) {
		if err != nil {
			faults = append(faults, windowFault{part, err})
		}
	}
	spec, err := parseSchedule(schedule)
	add("schedule", err)
	if duration <= 0 {
		add("duration", fmt.Errorf("%s is not positive", ShortDuration(duration)))
	}
	loc, err := windowLocation(timeZone)
	add("timeZone", err)
	if len(faults) == 0 {
		w.spec, w.loc = spec, loc
	}
	return w, faults
}

// parseSchedule compiles a window's cron expression.
func parseSchedule(schedule string) (cron.Schedule, error) {
	// cron reads a leading TZ= or CRON_TZ= as a time zone up to the first
	// space, and panics when there is none: refuse it before cron sees it.
	if strings.HasPrefix(schedule, "TZ=") || strings.HasPrefix(schedule, "CRON_TZ=") {
		return nil, fmt.Errorf("%q: set the time zone with timeZone, not in the schedule", schedule)
	}
	spec, err := cron.ParseStandard(schedule)
	if err != nil {
		return nil, fmt.Errorf("%q: %v (want five fields: minute hour day-of-month month day-of-week, such as \"0 2 * * 1-5\")", schedule, err)
	}
	cs, ok := spec.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("%q: @every has no fixed start; name the times, such as \"0 */6 * * *\"", schedule)
	}
	if cs.Location != time.Local {
		return nil, fmt.Errorf("%q: set the time zone with timeZone, not in the schedule", schedule)
	}
	// cron gives up after five years: a schedule such as "0 0 30 2 *"
	// (February 30) never opens.
	if spec.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, fmt.Errorf("%q never fires", schedule)
	}
	return spec, nil
}

// windowLocation loads a window's time zone; empty is UTC. The error
// keeps the cause, and suggests the name as the database spells it when
// only its capitals are wrong.
func windowLocation(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	loc, err := loadLocation(name)
	if err == nil {
		return loc, nil
	}
	example := "Europe/Berlin"
	if name == example {
		example = "America/New_York"
	}
	hint := ""
	if s := zoneSpelling(name); s != "" {
		hint = fmt.Sprintf(", did you mean %q", s)
	}
	return nil, fmt.Errorf("%q cannot be used: %v%s; want an IANA time zone name such as %s or UTC", name, err, hint, example)
}

// zoneSpelling returns name capitalised as most zones of the database
// are (each word after a "/", "_" or "-": Europe/Berlin,
// America/New_York) when a zone of that spelling exists, and "" otherwise.
func zoneSpelling(name string) string {
	b := []byte(strings.ToLower(name))
	for i := range b {
		if i == 0 || strings.IndexByte("/_-", b[i-1]) >= 0 {
			b[i] = byte(unicode.ToUpper(rune(b[i])))
		}
	}
	s := string(b)
	if s == name || strings.EqualFold(s, "Local") {
		return ""
	}
	if _, err := loadLocation(s); err != nil {
		return ""
	}
	return s
}

// locations caches time zones by name, so that two loads of one
// configuration share each *time.Location and compare deeply equal.
var locations sync.Map // string -> *time.Location

// loadLocation is time.LoadLocation, cached, without "Local": the
// machine's zone is no setting of a cluster config.
func loadLocation(name string) (*time.Location, error) {
	if l, ok := locations.Load(name); ok {
		return l.(*time.Location), nil
	}
	if name == "Local" {
		return nil, fmt.Errorf("that is the machine's time zone, not one of the cluster")
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	actual, _ := locations.LoadOrStore(name, l)
	return actual.(*time.Location), nil
}

// Equal reports whether two windows have the same schedule, duration and
// time zone, compiled or not (go-cmp uses it).
func (w Window) Equal(o Window) bool {
	return w.Schedule == o.Schedule && w.Duration == o.Duration && w.TimeZone == o.TimeZone
}

// Open reports whether the window is open at now and, when it is not,
// when it opens next (zero if never within a year).
//
// The schedule names wall-clock times of TimeZone, and the window stays
// open for Duration of real time. A start that a daylight-saving change
// skips (02:30 when clocks go from 02:00 to 03:00) opens the window when
// the skipped time ends, so that a window in that hour still opens that
// day; a start in an hour that occurs twice opens it once.
func (w Window) Open(now time.Time) (open bool, next time.Time) {
	if w.spec == nil {
		if pw, err := ParseWindow(w.Schedule, w.Duration, w.TimeZone); err == nil {
			w = pw
		} else {
			return false, time.Time{}
		}
	}
	// The window is open when a start falls in (now-Duration, now]: find
	// the first start after now-Duration. The schedule runs on wall-clock
	// times written as UTC, whose instants only grow with them; it begins
	// early enough for a start that a clock change moved.
	after := now.Add(-w.Duration)
	wall := wallClock(after.Add(-windowSlack), w.loc)
	for {
		wall = w.spec.Next(wall)
		if wall.IsZero() {
			return false, time.Time{}
		}
		start := w.instant(wall)
		if !start.After(after) {
			continue
		}
		switch {
		case !start.After(now):
			return true, time.Time{}
		case start.Sub(now) > 366*24*time.Hour:
			return false, time.Time{}
		}
		return false, start.UTC()
	}
}

// alwaysOpen reports whether the compiled window never closes during
// the year from start: every opening comes before the window opened
// before it has closed.
//
// A window shorter than a day can only be so when every day has openings,
// and then each day has them at the same wall-clock times (a schedule's
// minutes and hours do not depend on the day), so two days tell, and the
// days around each clock change of the time zone, whose gaps are longer
// or shorter in real time. A longer window is walked for the whole year.
func (w Window) alwaysOpen(start time.Time) bool {
	if w.spec == nil || w.Duration <= 0 {
		return false
	}
	end := start.Add(366 * 24 * time.Hour)
	if w.Duration >= 24*time.Hour {
		return w.covers(start, end)
	}
	spans := [][2]time.Time{{start, start.Add(48 * time.Hour)}}
	midnight := wallClock(start, w.loc).Truncate(24 * time.Hour)
	for day := midnight; day.Before(wallClock(end, w.loc)); day = day.AddDate(0, 0, 1) {
		next := w.spec.Next(day.Add(-time.Second))
		if next.IsZero() || !next.Before(day.AddDate(0, 0, 1)) {
			return false
		}
		from, to := w.instant(day), w.instant(day.AddDate(0, 0, 1))
		if to.Sub(from) != 24*time.Hour {
			spans = append(spans, [2]time.Time{from.Add(-24 * time.Hour), to.Add(24 * time.Hour)})
		}
	}
	for _, s := range spans {
		if !w.covers(s[0], s[1]) {
			return false
		}
	}
	return true
}

// covers reports whether the window is open from start to end. It walks
// the openings in steps of half the duration, checking just before each
// opening that ends a step without one whether the window had closed (at
// once when the last opening seen still holds it open); false when that
// takes too long to tell (a window of seconds).
func (w Window) covers(start, end time.Time) bool {
	step := w.Duration / 2
	var last time.Time // the latest opening seen, before x
	for x, n := start, 0; x.Before(end); n++ {
		if n == 20000 {
			return false
		}
		wall := w.spec.Next(wallClock(x.Add(-time.Second), w.loc))
		if wall.IsZero() {
			return false
		}
		next := w.instant(wall)
		if next.Sub(x) < step {
			x, last = x.Add(step), next
			continue
		}
		if last.IsZero() || !last.Add(w.Duration).After(next.Add(-time.Second)) {
			if open, _ := w.Open(next.Add(-time.Second)); !open {
				return false
			}
		}
		x, last = next, next
	}
	return true
}

// windowSlack exceeds any daylight-saving shift of a time zone.
const windowSlack = 3 * time.Hour

// wallClock returns the wall-clock time of t in loc, written as UTC.
func wallClock(t time.Time, loc *time.Location) time.Time {
	t = t.In(loc)
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
}

// instant returns when the wall-clock time wall (written as UTC) occurs in
// the window's time zone; a time that a clock change skips occurs when the
// skipped time ends.
func (w Window) instant(wall time.Time) time.Time {
	t := time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), wall.Second(), 0, w.loc)
	got := wallClock(t, w.loc)
	if got.Equal(wall) {
		return t
	}
	// time.Date moved the skipped time out of the gap, to one side or the
	// other: the gap's end is where the zone after it begins.
	start, end := t.ZoneBounds()
	if got.After(wall) {
		return start
	}
	return end
}

// OpenAny reports whether any of windows is open at now (true when there
// are none) and otherwise the earliest next opening.
func OpenAny(windows []Window, now time.Time) (open bool, next time.Time) {
	if len(windows) == 0 {
		return true, time.Time{}
	}
	for _, w := range windows {
		o, n := w.Open(now)
		if o {
			return true, time.Time{}
		}
		if !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	return false, next
}
