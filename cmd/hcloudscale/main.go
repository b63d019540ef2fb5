// Command hcloudscale runs hcloudscale outside the Cluster Autoscaler
// binary. Each subcommand lives in its own file and has the signature of
// [command.run], so that tests call it in-process with their own
// arguments, output and environment.
//
// Exit codes: 0 success, 1 a failure that was reported, 2 bad usage.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/hcloudscale/hcloudscale/config"
)

// Exit codes of every subcommand.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// command is one subcommand. run gets the arguments after the subcommand
// name; ctx ends at SIGTERM, SIGINT or SIGHUP.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer, env config.Env) int
}

func commands() []command {
	return []command{
		{name: "demo", summary: "scale pools against an in-memory Hetzner Cloud API: no token, no cluster", run: runDemo},
		{name: "serve", summary: "serve the Cluster Autoscaler's externalgrpc protocol", run: runServe},
		{name: "validate", summary: "check a configuration, offline or against the API (--online), and print the plan per pool", run: runValidate},
		{name: "priorities", summary: "print the priority expander's ConfigMap that makes the autoscaler try each pool's offerings in order", run: runPriorities},
		{name: "status", summary: "show pools, servers by state, errors and the API budget left", run: runStatus},
		{name: "replace", summary: "show which nodes the node lifecycle replaces now, why, and what blocks the rest (--plan)", run: runReplace},
		{name: "scale", summary: "set a pool's size by hand and wait until its servers run", run: runScale},
		{name: "cleanup", summary: "list this cluster's servers and, with --yes, delete them (after terraform destroy)", run: runCleanup},
		{name: "version", summary: "print the version, commit and Go version (also --version)", run: runVersion},
	}
}

func main() {
	ctx, stop := interruptContext()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, config.OSEnv())
	stop()
	os.Exit(code)
}

// interruptContext is done at the first SIGTERM, SIGINT or SIGHUP (the
// terminal closed), so that a command stops as it would on Ctrl-C and
// removes what it made (demo --keep its files); after that first
// signal, a second one ends the process at once.
func interruptContext() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt, syscall.SIGHUP)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}

// run dispatches to the subcommand named by args[0].
func run(ctx context.Context, args []string, stdout, stderr io.Writer, env config.Env) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return exitOK
	case "-version", "--version":
		return runVersion(ctx, args[1:], stdout, stderr, env)
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr, env)
		}
	}
	fmt.Fprintf(stderr, "hcloudscale: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: hcloudscale <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "hcloudscale <command> --help" for the flags and environment variables of a command.`)
}
