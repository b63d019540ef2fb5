package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
)

// configFlags are the flags of the subcommands that read a configuration
// as the autoscaler's provider does: the pools and the logging.
type configFlags struct {
	nodes         *stringsFlag
	log           logFlags
	clusterConfig string
}

func registerConfigFlags(fs *flag.FlagSet) *configFlags {
	f := &configFlags{nodes: nodesFlag(fs)}
	// Quieter defaults than serve: these commands report on stdout, and
	// the log (stderr) is for diagnosing them.
	fs.StringVar(&f.log.level, "log-level", "error", "log level: debug, info, warn or error; debug logs API traffic with secrets redacted")
	fs.StringVar(&f.log.format, "log-format", "console", "log format: json or console")
	fs.StringVar(&f.clusterConfig, "cluster-config", "", "read this `file` as the cluster-config file (HCLOUD_CLUSTER_CONFIG_FILE), in place of HCLOUD_CLUSTER_CONFIG and that variable")
	return f
}

// env is env with --cluster-config applied.
func (f *configFlags) env(env config.Env) config.Env {
	if f.clusterConfig == "" {
		return env
	}
	return withClusterConfigFile(env, f.clusterConfig)
}

// parseArgs parses args like parseFlags, but allows flags and positional
// arguments in any order ("scale workers 3 --no-wait"), which the flag
// package alone does not. It returns the positional arguments; ok is false
// when the caller should return code.
func parseArgs(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, help func(io.Writer)) (positional []string, code int, ok bool) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for {
		err := fs.Parse(args)
		switch {
		case errors.Is(err, flag.ErrHelp):
			help(stdout)
			return nil, exitOK, false
		case err != nil:
			return nil, usageError(stderr, fs.Name(), err), false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, 0, true
		}
		// fs.Parse consumed a "--" terminator if the remaining args
		// follow one: then everything left is positional.
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(positional, rest...), 0, true
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// load checks the --output value, builds the logger and loads the
// configuration, as every command that acts on the pools starts. On a
// problem it reports it on stderr and returns the exit code; code is 0
// otherwise.
func (f *configFlags) load(stderr io.Writer, cmd, output string, env config.Env) (log *zap.Logger, cfg *config.Config, code int) {
	if err := checkOutput(output); err != nil {
		return nil, nil, usageError(stderr, cmd, err)
	}
	log, err := f.logger(stderr)
	if err != nil {
		return nil, nil, usageError(stderr, cmd, err)
	}
	cfg, err = config.Load(f.env(env), *f.nodes)
	if err != nil {
		return nil, nil, reportConfigError(stderr, cmd, "configuration", err)
	}
	return log, cfg, 0
}

// logger builds the logger of a subcommand from its flags.
func (f *configFlags) logger(stderr io.Writer) (*zap.Logger, error) {
	if err := f.log.check(); err != nil {
		return nil, err
	}
	return f.log.build(stderr)
}

// closeCluster stops the Cluster, giving work in flight d to finish.
func closeCluster(c *hcloudscale.Cluster, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.Close(ctx)
}

// problem is one thing wrong with a configuration, with the setting it
// concerns: an environment variable, a --nodes flag or a cluster-config
// JSON path.
type problem struct {
	Setting string `json:"setting,omitempty"`
	Message string `json:"message"`
}

func (p problem) String() string {
	if p.Setting == "" {
		return p.Message
	}
	return p.Setting + ": " + p.Message
}

// settingPrefix recognises the setting that errors of hcloudscale.New
// start with ("HCLOUD_FIREWALL[0]: ...", "--nodes[0] (workers): ...",
// "nodeConfigs.workers.placementGroup: ...", or two settings of one value:
// "--nodes[0] (workers), nodeConfigs.workers.offerings[0]: ..."). Those
// are plain errors, not config.FieldErrors, so the setting is taken from
// the text.
var settingPrefix = regexp.MustCompile(`^` + oneSetting + `(, ` + oneSetting + `)*$`)

const oneSetting = `(HCLOUD_[A-Z0-9_]+(\[\d+\])?|--nodes( [a-z0-9-]+|\[\d+\]( \([^),]*\))?)?|nodeConfigs\.[^ :,]+|defaultSubnetIPRange|imagesForArch[^ :,]*|clusterName)`

// problems flattens an error of config.Load or hcloudscale.New into one
// problem per setting, in the order they were found.
func problems(err error) []problem {
	var out []problem
	var walk func(error)
	walk = func(err error) {
		if fe, ok := err.(*config.FieldError); ok {
			out = append(out, problem{Setting: fe.Path, Message: fe.Err.Error()})
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		msg := err.Error()
		if setting, rest, ok := strings.Cut(msg, ": "); ok && settingPrefix.MatchString(setting) {
			out = append(out, problem{Setting: setting, Message: rest})
			return
		}
		out = append(out, problem{Message: msg})
	}
	if err != nil {
		walk(err)
	}
	return out
}

// printProblems writes one line per problem.
func printProblems(w io.Writer, ps []problem) {
	for _, p := range ps {
		fmt.Fprintf(w, "  %s\n", p)
	}
}

// reportConfigError prints a failed config.Load or hcloudscale.New and
// returns exitFailure.
func reportConfigError(stderr io.Writer, cmd, what string, err error) int {
	ps := problems(err)
	fmt.Fprintf(stderr, "hcloudscale %s: %s: %s\n", cmd, what, plural(len(ps), "problem"))
	printProblems(stderr, ps)
	return exitFailure
}
