package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/pool"
)

func scaleHelp(fs *flag.FlagSet) func(io.Writer) {
	return func(w io.Writer) {
		fmt.Fprint(w, `Usage: hcloudscale scale POOL N --nodes=<min>:<max>:<type>:<location>:<pool> [--nodes=...] [flags]

Sets the size of a pool by hand, within its min and max size, and waits until the pool
has N running servers (and no server of it is being created or deleted), printing
progress. Growing creates servers as the autoscaler would (same names, labels and
settings); shrinking deletes servers with errors first, then servers still being
created, then the newest.

With --no-wait it returns once the API accepted every create and delete request. The
servers' creation then goes on at Hetzner; servers of a pool with a subnet range are
created stopped and must be attached and powered on by hcloudscale, so for such a pool
scale waits for that in any case.

Interrupted (Ctrl-C), it lists the servers still being created and says what happens to
them: create requests already sent go on at Hetzner, and the servers carry the pool's
labels. A pool with a subnet range creates its servers stopped and attaches them itself:
they stay off and unattached until "scale" (or serve) runs again for the pool, and
"cleanup --yes" deletes them. With -o json, "created" counts the servers that exist at
the end ("createdServers"), "requested" what was asked for; "deleted" names the servers
the API no longer shows, "notDeleted" those it still shows (being deleted, or kept by a
failed delete).

Do not scale a pool by hand while an autoscaler manages it: the autoscaler may undo it.
scale finishes the unfinished create flows of POOL only; those of other pools are left to
the autoscaler (or serve) that may be running.

Shrinking prints the servers it deletes before deleting them. Only the pool's servers are
in scope: with a cluster name, those labelled with it; without one, those without any
cluster label (servers of named clusters are never touched), which cannot be told apart
from another unnamed cluster's servers of the same pool name: set a cluster name when
clusters share a project. For that reason scaling to 0 without a cluster name is refused
unless --every-unnamed-cluster says that this is meant.

Flags:
`)
		printFlagsAndEnv(w, fs, "0 the pool reached the size, 1 failure or timeout (reported on stderr), 2 bad usage.",
			"hcloudscale scale workers 3 --nodes=1:5:cpx22:fsn1:workers")
	}
}

// scaleResult is the output of scale.
type scaleResult struct {
	Pool string `json:"pool"`
	From int    `json:"from"`
	To   int    `json:"to"`
	// Requested is how many servers the scale-up asked for; Created how
	// many of them exist at the end (running or still being created),
	// by name in CreatedServers.
	Requested      int      `json:"requested"`
	Created        int      `json:"created"`
	CreatedServers []string `json:"createdServers"`
	// Deleted names the servers the scale-down deleted that are gone;
	// NotDeleted those that are still there (being deleted, or back
	// after a failed delete).
	Deleted    []string `json:"deleted"`
	NotDeleted []string `json:"notDeleted"`
	Waited     bool     `json:"waited"`
	Seconds    float64  `json:"seconds"`
	Target     int      `json:"target"`
	Running    int      `json:"running"`
	Creating   int      `json:"creating"`
	Deleting   int      `json:"deleting"`
	Failed     int      `json:"failed"`
	Errors     []string `json:"errors"`
}

// runScale is "hcloudscale scale POOL N".
func runScale(ctx context.Context, args []string, stdout, stderr io.Writer, env config.Env) int {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	cf := registerConfigFlags(fs)
	output := outputFlag(fs)
	noWait := fs.Bool("no-wait", false, "return once the API accepted the create and delete requests")
	timeout := fs.Duration("timeout", 15*time.Minute, "how long to wait for the pool to reach the size")
	everyUnnamed := fs.Bool("every-unnamed-cluster", false, "with N 0 and no cluster name: accept that the scope is the pool's servers of every unnamed cluster in the project")
	guard := registerLeaseGuard(fs)
	pos, code, ok := parseArgs(fs, args, stdout, stderr, scaleHelp(fs))
	if !ok {
		return code
	}
	name, n, err := scaleArgs(pos)
	if err != nil {
		return usageError(stderr, "scale", err)
	}
	if *timeout <= 0 {
		return usageError(stderr, "scale", fmt.Errorf("--timeout %s: want a positive duration", *timeout))
	}
	log, cfg, code := cf.load(stderr, "scale", *output, env)
	if code != 0 {
		return code
	}
	pc, err := scaleTarget(cfg, name, n, *everyUnnamed)
	if err != nil {
		return usageError(stderr, "scale", err)
	}
	if err := guard.check(ctx, env); err != nil {
		fmt.Fprintf(stderr, "hcloudscale scale: %v\n", err)
		return exitFailure
	}

	// Only the scaled pool's unfinished create flows are finished: an
	// autoscaler may be running and own the other pools' flows.
	c, err := hcloudscale.New(ctx, cfg, hcloudscale.WithLogger(log), hcloudscale.WithoutResume())
	if err != nil {
		return reportConfigError(stderr, "scale", "checking the configuration against the API", err)
	}
	c.Pool(name).Resume()
	progress := stdout
	if *output == outputJSON {
		progress = stderr
	}
	s := &scaler{cluster: c, pool: c.Pool(name), out: progress}
	res, err := s.scale(ctx, n, !*noWait || pc.SubnetIPRange.IsValid(), *timeout)
	// Creates in flight are left to Hetzner: their servers carry the
	// pool's labels, so the autoscaler adopts them.
	if cerr := closeCluster(c, time.Second); cerr != nil && !errors.Is(cerr, context.DeadlineExceeded) {
		log.Warn("closing the cluster", zap.Error(cerr))
	}
	return reportScale(stdout, stderr, *output, res, err)
}

// scaleArgs reads the POOL and N arguments.
func scaleArgs(pos []string) (string, int, error) {
	if len(pos) != 2 {
		return "", 0, fmt.Errorf("want POOL and N, got %d arguments", len(pos))
	}
	n, err := strconv.Atoi(pos[1])
	if err != nil || n < 0 {
		return "", 0, fmt.Errorf("N %q: want a non-negative integer", pos[1])
	}
	return pos[0], n, nil
}

// scaleTarget finds the pool to scale and checks that n is within its
// sizes and, for 0 without a cluster name, that the wider scope was
// accepted with --every-unnamed-cluster (and that flag nowhere else).
func scaleTarget(cfg *config.Config, name string, n int, everyUnnamed bool) (*config.Pool, error) {
	pc := cfg.Pool(name)
	if pc == nil {
		var names []string
		for _, p := range cfg.Pools {
			names = append(names, p.Name)
		}
		return nil, fmt.Errorf("pool %q is not configured; the pools are %s", name, strings.Join(names, ", "))
	}
	if n < pc.MinSize || n > pc.MaxSize {
		return nil, fmt.Errorf("pool %s: size %d is outside its min size %d and max size %d", name, n, pc.MinSize, pc.MaxSize)
	}
	if n == 0 && cfg.ClusterName == "" && !everyUnnamed {
		return nil, fmt.Errorf("pool %s: scaling to 0 without a cluster name deletes every server labelled %s=%s without %s, "+
			"which includes another unnamed cluster's pool of that name in the same project; set the cluster name, or add --every-unnamed-cluster if that is meant",
			name, config.LabelNodeGroup, name, config.LabelCluster)
	}
	if everyUnnamed && (n != 0 || cfg.ClusterName != "") {
		return nil, errors.New("--every-unnamed-cluster only goes with N 0 and no cluster name")
	}
	return pc, nil
}

// reportScale writes the result as JSON if asked for and the error on
// stderr, and returns the exit code.
func reportScale(stdout, stderr io.Writer, output string, res *scaleResult, err error) int {
	if output == outputJSON {
		if jerr := writeJSON(stdout, res); jerr != nil {
			fmt.Fprintf(stderr, "hcloudscale scale: %v\n", jerr)
			return exitFailure
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "hcloudscale scale: %s\n", indent(err))
		return exitFailure
	}
	return exitOK
}

// scaler sets one pool's size.
type scaler struct {
	cluster *hcloudscale.Cluster
	pool    *pool.Pool
	out     io.Writer
	// found holds the claims without a server ID whose server the API
	// showed after an interruption: their create request was answered
	// too late for the pool to hear of it.
	found map[string]bool
}

// pollEvery is how often scale looks at the pool while it waits; it reads
// memory, not the API.
const pollEvery = 100 * time.Millisecond

func (s *scaler) scale(ctx context.Context, n int, wait bool, timeout time.Duration) (*scaleResult, error) {
	p := s.pool
	began := time.Now()
	res := &scaleResult{Pool: p.Name(), From: p.TargetSize(), To: n, CreatedServers: []string{}, Deleted: []string{}, NotDeleted: []string{}, Errors: []string{}}
	before := map[string]bool{}
	for _, in := range p.Instances() {
		before[in.Name] = true
	}
	defer func() {
		// What exists, not what was asked for: a failed create's
		// server is deleted by its flow.
		if res.Requested > 0 {
			for _, in := range p.Instances() {
				if (in.ServerID != 0 || s.found[in.Name]) && in.Error == nil && in.State != pool.Deleting && !before[in.Name] {
					res.CreatedServers = append(res.CreatedServers, in.Name)
				}
			}
			slices.Sort(res.CreatedServers)
			res.Created = len(res.CreatedServers)
		}
		// What is gone, as the API says, not what was asked to go; the
		// pool shows a server whose delete it has not seen end as
		// deleting. A server that cannot be looked up counts as there.
		if len(res.Deleted) > 0 {
			lookCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			asked := res.Deleted
			res.Deleted = []string{}
			for _, name := range asked {
				if srv, _, err := s.cluster.Client().Server.GetByName(lookCtx, name); err != nil || srv != nil {
					res.NotDeleted = append(res.NotDeleted, name)
				} else {
					res.Deleted = append(res.Deleted, name)
				}
			}
		}
		st := p.Status()
		res.Seconds = time.Since(began).Seconds()
		res.Target, res.Running, res.Creating, res.Deleting, res.Failed = st.Target, st.Running, creatingOnly(st), st.Deleting, st.Failed
	}()

	var err error
	switch from := res.From; {
	case n > from:
		err = s.grow(ctx, res, n)
	case n < from:
		err = s.shrink(ctx, res, n)
	default:
		fmt.Fprintf(s.out, "%s: target size is %d already\n", p.Name(), n)
	}
	if err != nil {
		return res, err
	}

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res.Waited = wait
	err = s.watch(ctx, sizeReached(p.Name(), res, n, wait))
	s.dropFailedCreates(ctx)
	if errors.Is(err, context.Canceled) {
		return res, s.interrupted(n)
	}
	if err != nil {
		return res, err
	}
	if wait {
		fmt.Fprintf(s.out, "%s: %s running after %s\n", p.Name(), plural(n, "server"), since(began))
	} else {
		fmt.Fprintf(s.out, "%s: requests accepted after %s; not waiting for the servers\n", p.Name(), since(began))
	}
	return res, nil
}

// interrupted says what an interrupted scale leaves under way and what
// the next command does about it. Create requests already sent go on at
// Hetzner; their servers carry the pool's labels, so the next command that
// manages the pool adopts them. A pool with a subnet range creates its
// servers stopped and attaches them itself: those are left off, not
// attached, until a command that manages the pool resumes them.
func (s *scaler) interrupted(n int) error {
	p := s.pool
	var sent, unsent, deleting []string
	// A create request in flight at the interruption may have created
	// its server all the same: ask the API, briefly, whatever the
	// interrupted context says.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.found = map[string]bool{}
	for _, in := range p.Instances() {
		switch {
		case in.Error != nil:
		case in.State == pool.Creating && in.ServerID != 0:
			sent = append(sent, in.Name)
		case in.State == pool.Creating:
			if srv, _, err := s.cluster.Client().Server.GetByName(ctx, in.Name); err == nil && srv != nil {
				s.found[in.Name] = true
				sent = append(sent, in.Name)
				continue
			}
			unsent = append(unsent, in.Name)
		case in.State == pool.Deleting:
			deleting = append(deleting, in.Name)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "pool %s: interrupted before the pool reached %d servers", p.Name(), n)
	if len(sent)+len(unsent)+len(deleting) == 0 {
		b.WriteString("; nothing is under way")
		return errors.New(b.String())
	}
	if len(sent) > 0 {
		fmt.Fprintf(&b, "\n%s still being created at Hetzner: %s", plural(len(sent), "server"), strings.Join(sent, ", "))
		if p.Config().SubnetIPRange.IsValid() {
			fmt.Fprintf(&b, "\nthe pool has a subnet range: its servers are created stopped and hcloudscale attaches them to the network and powers them on, "+
				"so these stay off and unattached (and are paid for) until a command that manages the pool finishes them: "+
				"run \"hcloudscale scale %s %d\" again (or serve) to finish them (one whose action history shows that someone started, stopped "+
				"or detached it is left alone), or \"hcloudscale cleanup --yes\" to delete the pool's servers",
				p.Name(), n)
		} else {
			fmt.Fprintf(&b, "\nHetzner finishes them; they carry the pool's labels, so the next \"hcloudscale scale %s\" or the autoscaler counts them", p.Name())
		}
	}
	if len(unsent) > 0 {
		fmt.Fprintf(&b, "\n%s not created (the create request was not sent, or the server did not exist yet when looked up; one that shows up later carries the pool's labels and is adopted by the next command): %s",
			plural(len(unsent), "server"), strings.Join(unsent, ", "))
	}
	if len(deleting) > 0 {
		fmt.Fprintf(&b, "\n%s being deleted: Hetzner finishes the deletes: %s", plural(len(deleting), "server"), strings.Join(deleting, ", "))
	}
	return errors.New(b.String())
}

// grow asks the pool for the servers up to n.
func (s *scaler) grow(ctx context.Context, res *scaleResult, n int) error {
	p, from := s.pool, res.From
	if err := p.IncreaseSize(ctx, n-from); err != nil {
		return fmt.Errorf("pool %s: %w", p.Name(), err)
	}
	res.Requested = n - from
	fmt.Fprintf(s.out, "%s: creating %s (target %d -> %d)\n", p.Name(), plural(n-from, "server"), from, n)
	return nil
}

// shrink lowers the pool's target to n and deletes the servers above it,
// printing which before it does.
func (s *scaler) shrink(ctx context.Context, res *scaleResult, n int) error {
	p, from := s.pool, res.From
	// Claims without a server go first and cost nothing; this process
	// has none unless it created them, but the call is exact either way.
	if err := p.DecreaseTargetSize(ctx, n-from); err != nil {
		return fmt.Errorf("pool %s: %w", p.Name(), err)
	}
	victims := shrinkOrder(p.Instances())
	victims = victims[:min(len(victims), p.TargetSize()-n)]
	var ids, names []string
	for _, in := range victims {
		ids = append(ids, in.ID)
		names = append(names, in.Name)
	}
	// What is deleted is printed before it is: the pool's servers,
	// scoped as the pool sees them (a cluster without a name cannot
	// tell its servers from another unnamed cluster's of the same
	// pool name; servers of named clusters are never the pool's).
	fmt.Fprintf(s.out, "%s: deleting %s (target %d -> %d): %s\n", p.Name(), plural(len(victims), "server"), from, n, strings.Join(names, ", "))
	if n == 0 && s.cluster.Config().ClusterName == "" {
		fmt.Fprintf(s.out, "%s: no cluster name is set: these are the servers labelled %s=%s without %s, which may include another unnamed cluster's\n",
			p.Name(), config.LabelNodeGroup, p.Name(), config.LabelCluster)
	}
	if len(ids) > 0 {
		if err := p.DeleteInstances(ctx, ids); err != nil {
			return fmt.Errorf("pool %s: %w", p.Name(), err)
		}
	}
	res.Deleted = append(res.Deleted, names...)
	return nil
}

// sizeReached is watch's done for a scale to n: with wait, when n servers
// run and nothing else is under way; without, once every create request
// was accepted. Failed creates end the watch with an error once the other
// creates have settled, and are recorded in res.
func sizeReached(poolName string, res *scaleResult, n int, wait bool) func(pool.Status, []pool.Instance) (bool, error) {
	return func(st pool.Status, ins []pool.Instance) (bool, error) {
		if failed := failedCreates(ins); len(failed) > 0 {
			if slices.ContainsFunc(ins, func(in pool.Instance) bool { return in.ServerID == 0 && in.Error == nil }) {
				// Other creates are still being requested: report
				// every failure at once, when they have settled.
				return false, nil
			}
			for _, in := range failed {
				res.Errors = append(res.Errors, fmt.Sprintf("%s: %s %s: %s", in.Name, in.Error.Class, in.Error.Code, in.Error.Message))
			}
			return true, fmt.Errorf("pool %s: %s failed:\n%s", poolName, plural(len(failed), "create"), strings.Join(res.Errors, "\n"))
		}
		if !wait {
			// Every create request was sent and accepted.
			return !slices.ContainsFunc(ins, func(in pool.Instance) bool { return in.ServerID == 0 }), nil
		}
		return st.Target == n && st.Running == n && st.Creating == 0 && st.Deleting == 0, nil
	}
}

// dropFailedCreates removes the placeholders of failed creates: a
// placeholder lives in this process only, and without it the pool's
// target is what exists.
func (s *scaler) dropFailedCreates(ctx context.Context) {
	failed := failedCreates(s.pool.Instances())
	if len(failed) == 0 {
		return
	}
	var ids []string
	for _, in := range failed {
		ids = append(ids, in.ID)
	}
	_ = s.pool.DeleteInstances(context.WithoutCancel(ctx), ids)
}

// watch prints the pool's state whenever it changes, until done says so
// or ctx ends.
func (s *scaler) watch(ctx context.Context, done func(pool.Status, []pool.Instance) (bool, error)) error {
	began := time.Now()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	last := ""
	for {
		ins := s.pool.Instances()
		st := s.pool.Status()
		if line := statusLine(st); line != last {
			last = line
			fmt.Fprintf(s.out, "  [%5.1fs] %s\n", time.Since(began).Seconds(), line)
		}
		if ok, err := done(st, ins); ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("pool %s: timed out after %s: %s", s.pool.Name(), since(began), statusLine(s.pool.Status()))
			}
			return fmt.Errorf("pool %s: %w", s.pool.Name(), ctx.Err())
		case <-tick.C:
		}
	}
}

// statusLine is "target 3, 1 running, 2 creating".
func statusLine(st pool.Status) string {
	var b strings.Builder
	fmt.Fprintf(&b, "target %d", st.Target)
	for _, c := range []struct {
		n    int
		what string
	}{{st.Running, "running"}, {creatingOnly(st), "creating"}, {st.Deleting, "deleting"}, {st.Failed, "failed"}} {
		if c.n > 0 {
			fmt.Fprintf(&b, ", %d %s", c.n, c.what)
		}
	}
	return b.String()
}

// failedCreates are the placeholders of claims whose create failed.
func failedCreates(ins []pool.Instance) []pool.Instance {
	var out []pool.Instance
	for _, in := range ins {
		if in.Error != nil && in.ServerID == 0 {
			out = append(out, in)
		}
	}
	return out
}

// shrinkOrder lists the instances a shrink removes, in order: those with
// an error, then those still being created, then running servers from the
// newest. Instances being deleted already are left out.
func shrinkOrder(ins []pool.Instance) []pool.Instance {
	rank := func(in pool.Instance) int {
		switch {
		case in.Error != nil:
			return 0
		case in.State == pool.Creating:
			return 1
		}
		return 2
	}
	out := slices.DeleteFunc(slices.Clone(ins), func(in pool.Instance) bool { return in.State == pool.Deleting })
	slices.SortStableFunc(out, func(a, b pool.Instance) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(b.ServerID, a.ServerID))
	})
	return out
}
