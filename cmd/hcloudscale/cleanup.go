package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/actionwait"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/internal/redact"
	"github.com/hcloudscale/hcloudscale/lifecycle"
)

func cleanupHelp(fs *flag.FlagSet) func(io.Writer) {
	return func(w io.Writer) {
		fmt.Fprint(w, `Usage: hcloudscale cleanup --nodes=<min>:<max>:<type>:<location>:<pool> [--nodes=...] [--yes] [flags]

Lists every server of this cluster's pools, grouped by pool, and, with --yes only, deletes
exactly the servers it listed and waits until they are gone: the servers an autoscaler
created, which "terraform destroy" does not know about. Without --yes it is a dry run that
only lists them. --yes never widens the scope. It then reports each server: "deleted"
once it is gone, or "not deleted" with the reason (the delete was refused, its action
failed and the server is still there, or it still ran when --timeout passed); with
-o json, "deleted" and "notDeleted".

A server belongs to the cluster by its labels, as hcloudscale creates them:
  hcloud/node-group=<pool>        for each pool given with --nodes (every pool with --all-pools)
  hcloudscale/cluster=<name>      when a cluster name is set (clusterName, HCLOUD_CLUSTER_NAME)
Without a cluster name, servers labelled for a named cluster are left alone, but nothing
tells this cluster's servers from those of another unnamed cluster in the project (the
upstream provider labels no cluster): the pools given with --nodes are the scope, and
servers of another unnamed cluster with the same pool names are in it. --all-pools without
a cluster name would reach every autoscaled server of every unnamed cluster in the project,
so it is refused unless --every-unnamed-cluster says that this is meant. Servers without
these labels are never touched.

With --yes and a kubeconfig at hand (--kubeconfig, else $KUBECONFIG), it first ends what
the node lifecycle (serve --replace-nodes) left, as "replace --abort" does: each replacement
is finished or rolled back, and the lifecycle's marks, cordons and scale-down protections
leave the nodes, so that nodes whose servers stay (a delete that fails, a pool out of the
scope) serve again. It deletes no server out of the scope: a replacement in a pool out of
it is kept, unprotected. That needs the references the autoscaler needs; when they are gone
it is skipped with a warning (-o json: "rollBackError"), and the deletes go on. What it did
is listed per node (-o json: "rolledBack").

It reads the same environment and --nodes flags as the autoscaler, but does not check
the network, firewalls or other references, which may be gone already.

Flags:
`)
		printFlagsAndEnv(w, fs, "0 success (or nothing to do), 1 a delete failed (reported on stderr), 2 bad usage.",
			"hcloudscale cleanup --nodes=1:5:cpx22:fsn1:workers          # lists, deletes nothing",
			"hcloudscale cleanup --yes --nodes=1:5:cpx22:fsn1:workers    # deletes and waits")
	}
}

// cleanupResult is the output of cleanup.
type cleanupResult struct {
	Selector string          `json:"selector"`
	DryRun   bool            `json:"dryRun"`
	Servers  []cleanupServer `json:"servers"`
	// Deleted names the servers that are gone: their delete action
	// succeeded, or the API no longer knows them.
	Deleted []string `json:"deleted"`
	// NotDeleted are the servers that are still there, with the reason:
	// the delete was refused, its action failed, or it had not finished
	// when --timeout passed.
	NotDeleted []cleanupFailure `json:"notDeleted"`
	// Errors has one line per server of NotDeleted, and a listing error.
	Errors []string `json:"errors"`
	// RolledBack is what cleanup --yes did, with a kubeconfig at hand,
	// to end what the node lifecycle left before the deletes (as replace
	// --abort does); RollBackError says why that could not be done.
	RolledBack    []lifecycle.Undone `json:"rolledBack,omitempty"`
	RollBackError string             `json:"rollBackError,omitempty"`
}

// cleanupFailure is a server that cleanup did not delete.
type cleanupFailure struct {
	ID    int64  `json:"id"`
	Name  string `json:"name"`
	Error string `json:"error"`
}

type cleanupServer struct {
	ID         int64     `json:"id"`
	Name       string    `json:"name"`
	Pool       string    `json:"pool"`
	Cluster    string    `json:"cluster,omitempty"`
	Status     string    `json:"status"`
	ServerType string    `json:"serverType"`
	Location   string    `json:"location"`
	Created    time.Time `json:"created"`
}

// cleanupConcurrency bounds the delete requests in flight.
const cleanupConcurrency = 10

// runCleanup is "hcloudscale cleanup".
func runCleanup(ctx context.Context, args []string, stdout, stderr io.Writer, env config.Env) int {
	fs := flag.NewFlagSet("cleanup", flag.ContinueOnError)
	cf := registerConfigFlags(fs)
	output := outputFlag(fs)
	yes := fs.Bool("yes", false, "delete the servers listed (without it, only list them)")
	allPools := fs.Bool("all-pools", false, "include servers of pools that are no longer configured (any hcloud/node-group label; with a cluster name only this cluster's, without one needs --every-unnamed-cluster)")
	everyUnnamed := fs.Bool("every-unnamed-cluster", false, "with --all-pools and no cluster name: accept that the scope is every autoscaled server of every unnamed cluster in the project, not only this cluster's")
	timeout := fs.Duration("timeout", 10*time.Minute, "how long to wait for the deletes")
	guard := registerLeaseGuard(fs)
	if code, ok := parseFlags(fs, args, stdout, stderr, cleanupHelp(fs)); !ok {
		return code
	}
	if *timeout <= 0 {
		return usageError(stderr, "cleanup", fmt.Errorf("--timeout %s: want a positive duration", *timeout))
	}
	log, cfg, code := cf.load(stderr, "cleanup", *output, env)
	if code != 0 {
		return code
	}
	if err := checkCleanupScope(cfg, *allPools, *everyUnnamed); err != nil {
		return usageError(stderr, "cleanup", err)
	}
	if *yes {
		if err := guard.check(ctx, env); err != nil {
			fmt.Fprintf(stderr, "hcloudscale cleanup: %v\n", err)
			return exitFailure
		}
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	client := cleanupClient(cfg, log)
	res := &cleanupResult{Selector: cleanupSelector(cfg, *allPools), DryRun: !*yes, Servers: []cleanupServer{}, Deleted: []string{}, NotDeleted: []cleanupFailure{}, Errors: []string{}}
	human := *output == outputTable
	if path := guard.path(env); *yes && path != "" {
		rollBackBeforeCleanup(ctx, cfg, path, env, log, res, func(pool string) bool { return *allPools || cfg.Pool(pool) != nil })
		if human {
			printRolledBack(stdout, stderr, res)
		}
	}
	servers, err := listCleanupServers(ctx, client, cfg, *allPools, res.Selector)
	if err != nil {
		fmt.Fprintf(stderr, "hcloudscale cleanup: %v\n", err)
		return exitFailure
	}
	for _, s := range servers {
		res.Servers = append(res.Servers, cleanupServerOf(s))
	}

	if human {
		printCleanupList(stdout, res)
	}
	if *yes && len(servers) > 0 {
		deleteServers(ctx, client, servers, res, log, func(format string, args ...any) {
			if human {
				fmt.Fprintf(stdout, format, args...)
			}
		})
	}
	if !human {
		if err := writeJSON(stdout, res); err != nil {
			fmt.Fprintf(stderr, "hcloudscale cleanup: %v\n", err)
			return exitFailure
		}
	}
	return reportCleanupErrors(stderr, res.Errors)
}

// rollBackBeforeCleanup ends what the node lifecycle left, as replace
// --abort does (lifecycle.Controller.RollBack), before the servers are
// listed and deleted: a replacement finished or rolled back, the
// lifecycle's marks, cordons and scale-down protections removed from the
// nodes. Its server deletes stay within cleanup's scope (inScope): a
// replacement in a pool out of it (a pool removed from the configuration,
// without --all-pools) is rolled back and kept. It runs before the listing,
// so a server it deleted is not deleted twice. It is
// best effort: a Cluster cannot be built once the network or other
// references are gone, and the servers go anyway.
func rollBackBeforeCleanup(ctx context.Context, cfg *config.Config, kubeconfig string, env config.Env, log *zap.Logger, res *cleanupResult, inScope func(pool string) bool) {
	fail := func(err error) { res.RollBackError = err.Error() }
	kube, err := newKubeClient(kubeconfig, env)
	if err != nil {
		fail(err)
		return
	}
	c, err := hcloudscale.New(ctx, cfg, hcloudscale.WithLogger(log), hcloudscale.WithLenientChecks(), hcloudscale.WithoutResume())
	if err != nil {
		fail(err)
		return
	}
	defer func() { _ = closeCluster(c, 5*time.Second) }()
	ctrl, err := lifecycle.New(c, kube, lifecycle.WithLogger(log), lifecycle.WithRollBackDeletes(inScope))
	if err != nil {
		fail(err)
		return
	}
	defer ctrl.Close()
	res.RolledBack, err = ctrl.RollBack(ctx)
	if err != nil {
		fail(err)
	}
}

// printRolledBack reports what rollBackBeforeCleanup did: a line per
// node, or why it could not, as a warning.
func printRolledBack(stdout, stderr io.Writer, res *cleanupResult) {
	if res.RollBackError != "" {
		fmt.Fprintf(stderr, "hcloudscale cleanup: warning: what the node lifecycle left was not (all) rolled back: %s\n", res.RollBackError)
	}
	if len(res.RolledBack) > 0 {
		fmt.Fprintln(stdout, "The node lifecycle's replacements, ended before the deletes:")
		printUndone(stdout, res.RolledBack)
	}
}

// checkCleanupScope refuses an --all-pools that would reach beyond this
// cluster without --every-unnamed-cluster, and that flag anywhere else.
func checkCleanupScope(cfg *config.Config, allPools, everyUnnamed bool) error {
	if allPools && cfg.ClusterName == "" && !everyUnnamed {
		return errors.New("--all-pools without a cluster name selects every autoscaled server of every unnamed cluster in the project (any hcloud/node-group label without hcloudscale/cluster), not only this cluster's; " +
			"list this cluster's pools with --nodes instead, set the cluster name, or add --every-unnamed-cluster if that is meant")
	}
	if everyUnnamed && (!allPools || cfg.ClusterName != "") {
		return errors.New("--every-unnamed-cluster only goes with --all-pools and no cluster name")
	}
	return nil
}

// listCleanupServers lists the servers the selector matches and keeps
// those in the cleanup's scope, by pool then ID. The listing is trusted no
// further than the selector: a server outside the scope is never deleted,
// whatever an API answers.
func listCleanupServers(ctx context.Context, client *hcloud.Client, cfg *config.Config, allPools bool, selector string) ([]*hcloud.Server, error) {
	servers, err := client.Server.AllWithOpts(ctx, hcloud.ServerListOpts{
		ListOpts: hcloud.ListOpts{LabelSelector: selector, PerPage: 50},
	})
	if hcloud.IsError(err, hcloud.ErrorCodeUnauthorized) {
		return nil, fmt.Errorf("%s: the API refused the token (%w): check %s (or %s) and that the token is of this project",
			config.EnvToken, err, config.EnvToken, config.EnvTokenFile)
	}
	if err != nil {
		return nil, fmt.Errorf("listing servers with label selector %q: %w", selector, err)
	}
	servers = slices.DeleteFunc(servers, func(s *hcloud.Server) bool { return !inCleanupScope(cfg, allPools, s.Labels) })
	slices.SortFunc(servers, func(a, b *hcloud.Server) int {
		return cmp.Or(cmp.Compare(a.Labels[config.LabelNodeGroup], b.Labels[config.LabelNodeGroup]), cmp.Compare(a.ID, b.ID))
	})
	return servers, nil
}

// cleanupServerOf is how cleanup lists a server.
func cleanupServerOf(s *hcloud.Server) cleanupServer {
	cs := cleanupServer{
		ID: s.ID, Name: s.Name, Pool: s.Labels[config.LabelNodeGroup], Cluster: s.Labels[config.LabelCluster],
		Status: string(s.Status), Created: s.Created.UTC(),
	}
	if s.ServerType != nil {
		cs.ServerType = s.ServerType.Name
	}
	if s.Location != nil {
		cs.Location = s.Location.Name
	}
	return cs
}

// reportCleanupErrors lists the failures on stderr and returns the exit
// code.
func reportCleanupErrors(stderr io.Writer, errs []string) int {
	if len(errs) == 0 {
		return exitOK
	}
	fmt.Fprintf(stderr, "hcloudscale cleanup: %s:\n", plural(len(errs), "failure"))
	for _, e := range errs {
		fmt.Fprintf(stderr, "  %s\n", e)
	}
	return exitFailure
}

// cleanupClient is a plain API client: cleanup must work after the
// network, firewalls and keys are gone, so it does not build a Cluster,
// which checks them. With --log-level debug it logs the API traffic,
// redacted, as the Cluster's client does.
func cleanupClient(cfg *config.Config, log *zap.Logger) *hcloud.Client {
	endpoint := cfg.Endpoint
	if endpoint == "" {
		endpoint = config.DefaultEndpoint
	}
	version := hcloudscale.Version
	if version == "" {
		version = "(devel)"
	}
	return hcloud.NewClient(
		hcloud.WithToken(cfg.Token.Reveal()),
		hcloud.WithEndpoint(endpoint),
		hcloud.WithApplication("hcloudscale", version),
		hcloud.WithHTTPClient(&http.Client{Transport: redact.NewDebugTransport(http.DefaultTransport, log.Named("api"))}),
	)
}

// cleanupSelector selects the cluster's servers: those of its pools (or of
// any pool), scoped by the cluster label when the cluster has a name, and
// excluding servers of named clusters when it has none.
func cleanupSelector(cfg *config.Config, allPools bool) string {
	sel := config.LabelNodeGroup
	if !allPools {
		names := make([]string, len(cfg.Pools))
		for i, p := range cfg.Pools {
			names[i] = p.Name
		}
		sel += " in (" + strings.Join(names, ",") + ")"
	}
	if cfg.ClusterName != "" {
		return sel + "," + config.LabelCluster + "=" + cfg.ClusterName
	}
	return sel + ",!" + config.LabelCluster
}

// inCleanupScope is the selector's rule, checked again on each server.
func inCleanupScope(cfg *config.Config, allPools bool, labels map[string]string) bool {
	pool := labels[config.LabelNodeGroup]
	if pool == "" || !config.InCluster(labels, cfg.ClusterName) {
		return false
	}
	return allPools || cfg.Pool(pool) != nil
}

// printCleanupList lists the servers grouped by pool (they are sorted by
// pool), so that what a delete would reach is seen before it happens.
func printCleanupList(w io.Writer, res *cleanupResult) {
	fmt.Fprintf(w, "Servers with label selector %q: %d\n", res.Selector, len(res.Servers))
	for i := 0; i < len(res.Servers); {
		j := i
		for j < len(res.Servers) && res.Servers[j].Pool == res.Servers[i].Pool {
			j++
		}
		fmt.Fprintf(w, "Pool %s: %s\n", res.Servers[i].Pool, plural(j-i, "server"))
		tb := newTable(w, "  NAME", "ID", "STATUS", "TYPE", "LOCATION", "CREATED")
		for _, s := range res.Servers[i:j] {
			tb.row("  "+s.Name, s.ID, s.Status, s.ServerType, s.Location, s.Created.Format(time.RFC3339))
		}
		tb.flush()
		i = j
	}
	if res.DryRun && len(res.Servers) > 0 {
		fmt.Fprintf(w, "Dry run: nothing was deleted. Run again with --yes to delete %s.\n", plural(len(res.Servers), "server"))
	}
}

// deleteServers deletes servers, a bounded number at a time, waits for
// each one's delete action (the waiter polls them together) and reports
// what became of each server: deleted, or still there with the reason.
// A server counts as deleted only once its delete action succeeded or the
// API no longer knows it; after a failed action the server is looked up,
// since only the API knows whether it is still there.
func deleteServers(ctx context.Context, client *hcloud.Client, servers []*hcloud.Server, res *cleanupResult, log *zap.Logger, printf func(string, ...any)) {
	began := time.Now()
	printf("Deleting %s...\n", plural(len(servers), "server"))
	waiter := actionwait.New(&client.Action, actionwait.WithLogger(log))
	defer waiter.Close()
	outcomes := make([]error, len(servers)) // nil: deleted
	var sent errgroup.Group
	sent.SetLimit(cleanupConcurrency)
	var waits sync.WaitGroup
	for i, s := range servers {
		if s.Status == hcloud.ServerStatusDeleting {
			// Being deleted already: wait for it like for our own.
			waits.Go(func() { outcomes[i] = awaitDeleted(ctx, client, s, nil, waiter) })
			continue
		}
		sent.Go(func() error {
			r, _, err := client.Server.DeleteWithResult(ctx, s)
			switch {
			case hcloud.IsError(err, hcloud.ErrorCodeNotFound): // gone already
			case err != nil:
				outcomes[i] = fmt.Errorf("delete refused, the server is still there: %w", err)
			default:
				waits.Go(func() { outcomes[i] = awaitDeleted(ctx, client, s, r.Action, waiter) })
			}
			return nil
		})
	}
	_ = sent.Wait()
	waits.Wait()

	for i, s := range servers {
		if err := outcomes[i]; err != nil {
			res.NotDeleted = append(res.NotDeleted, cleanupFailure{ID: s.ID, Name: s.Name, Error: err.Error()})
			res.Errors = append(res.Errors, fmt.Sprintf("%s (%d): %v", s.Name, s.ID, err))
			printf("  not deleted  %s (%d): %v\n", s.Name, s.ID, err)
			continue
		}
		res.Deleted = append(res.Deleted, s.Name)
		printf("  deleted      %s (%d)\n", s.Name, s.ID)
	}
	slices.Sort(res.Deleted)
	if len(res.NotDeleted) == 0 {
		printf("Deleted %s in %s.\n", plural(len(res.Deleted), "server"), since(began))
	} else {
		printf("Deleted %d of %s in %s; %d not deleted (above).\n", len(res.Deleted), plural(len(servers), "server"), since(began), len(res.NotDeleted))
	}
}

// awaitDeleted waits for a server's delete action (nil for a delete that
// was under way before cleanup) and returns nil once the server is gone,
// or why it is not.
func awaitDeleted(ctx context.Context, client *hcloud.Client, s *hcloud.Server, action *hcloud.Action, waiter *actionwait.Waiter) error {
	var waitErr error
	if action != nil {
		waitErr = waiter.Wait(ctx, action)
		if waitErr == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("still being deleted when --timeout passed (delete action %d); run cleanup again to see whether it is gone", action.ID)
		}
	}
	// The action failed, or it was not ours: ask the API.
	for {
		cur, _, err := client.Server.GetByID(ctx, s.ID)
		switch {
		case err != nil && ctx.Err() != nil:
			return errors.New("still being deleted when --timeout passed; run cleanup again to see whether it is gone")
		case err != nil && waitErr != nil:
			return fmt.Errorf("delete action failed (%v); looking the server up: %w", waitErr, err)
		case err != nil:
			return fmt.Errorf("looking the server up: %w", err)
		case cur == nil:
			return nil
		case waitErr != nil:
			return fmt.Errorf("delete action failed, the server is still there (status %s): %w", cur.Status, waitErr)
		case cur.Status != hcloud.ServerStatusDeleting:
			return fmt.Errorf("the delete under way before cleanup ended, the server is still there (status %s)", cur.Status)
		}
		select { // someone else's delete still runs
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
