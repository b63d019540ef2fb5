package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hcloudscale/hcloudscale/config"
)

// stringsFlag collects every value of a flag that may be repeated.
type stringsFlag []string

func (s *stringsFlag) String() string { return strings.Join(*s, ",") }

func (s *stringsFlag) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// nodesFlag registers the repeated --nodes flag of the autoscaler's
// Hetzner provider.
func nodesFlag(fs *flag.FlagSet) *stringsFlag {
	var nodes stringsFlag
	fs.Var(&nodes, "nodes", "a node pool as `spec` "+config.NodeSpecFormat+"; repeat once per pool (pools may also be declared in the cluster config alone)")
	return &nodes
}

// logFlags are --log-level and --log-format.
type logFlags struct {
	level, format string
}

func (l *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error; debug logs API traffic with secrets redacted")
	fs.StringVar(&l.format, "log-format", "json", "log format: json or console")
}

// check validates the flags without building anything.
func (l *logFlags) check() error {
	var errs []error
	if _, err := zapcore.ParseLevel(l.level); err != nil {
		errs = append(errs, fmt.Errorf("--log-level %q: want debug, info, warn or error", l.level))
	}
	if l.format != "json" && l.format != "console" {
		errs = append(errs, fmt.Errorf("--log-format %q: want json or console", l.format))
	}
	return errors.Join(errs...)
}

// build returns a logger that writes to w. Call check first.
func (l *logFlags) build(w io.Writer) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(l.level)
	if err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", l.level, err)
	}
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	enc := zapcore.NewJSONEncoder(ec)
	if l.format == "console" {
		enc = zapcore.NewConsoleEncoder(ec)
	}
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), level)), nil
}

// parseFlags parses args for a subcommand. It prints the help to stdout
// for -h/--help and the error to stderr otherwise; ok is false when the
// caller should return code.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, help func(io.Writer)) (code int, ok bool) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		help(stdout)
		return exitOK, false
	case err != nil:
		return usageError(stderr, fs.Name(), err), false
	case fs.NArg() > 0:
		return usageError(stderr, fs.Name(), fmt.Errorf("unexpected arguments %q", fs.Args())), false
	}
	return 0, true
}

// usageError reports bad usage of a subcommand and returns exitUsage.
func usageError(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "hcloudscale %s: %s\n", cmd, indent(err))
	fmt.Fprintf(stderr, "Run \"hcloudscale %s --help\" for usage.\n", cmd)
	return exitUsage
}

// indent puts each line of a joined error on its own indented line.
func indent(err error) string {
	lines := strings.Split(err.Error(), "\n")
	if len(lines) == 1 {
		return lines[0]
	}
	return "\n  " + strings.Join(lines, "\n  ")
}

// printFlagsAndEnv ends the help of a command that reads the autoscaler's
// environment: its flags, the environment variables, its exit codes and
// examples.
func printFlagsAndEnv(w io.Writer, fs *flag.FlagSet, exitCodes string, examples ...string) {
	printFlags(w, fs)
	fmt.Fprintln(w)
	fmt.Fprint(w, envHelp)
	printExitAndExamples(w, exitCodes, examples)
}

// printExitAndExamples ends every command's help.
func printExitAndExamples(w io.Writer, exitCodes string, examples []string) {
	fmt.Fprintf(w, "\nExit codes: %s\n", exitCodes)
	if len(examples) > 0 {
		fmt.Fprintf(w, "\nExamples:\n  %s\n", strings.Join(examples, "\n  "))
	}
}

// printFlags writes the flags of fs to w, spelt with two dashes as the
// autoscaler's flags are (the flag package accepts both).
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		dashes := "--"
		if len(f.Name) == 1 {
			dashes = "-" // -o, as written everywhere
		}
		line := "  " + dashes + f.Name
		if name != "" {
			line += " " + name
		}
		line += "\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t")
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "[]" {
			line += fmt.Sprintf(" (default %q)", f.DefValue)
		}
		fmt.Fprintln(w, line)
	})
}

// envHelp describes the environment variables config.Load reads, for the
// help of every subcommand that loads a configuration.
const envHelp = `Environment variables (those of the Cluster Autoscaler's Hetzner provider, and the new ones marked):
  HCLOUD_TOKEN                    API token (required unless HCLOUD_TOKEN_FILE is set; validate offline needs none)
  HCLOUD_TOKEN_FILE               file holding the token, e.g. a mounted Secret (new)
  HCLOUD_ENDPOINT                 API base URL (default https://api.hetzner.cloud/v1)
  HCLOUD_ENDPOINT_INSECURE        true: allow an http HCLOUD_ENDPOINT on a host that is not loopback (new)
  HCLOUD_CLUSTER_CONFIG           cluster config: base64-encoded JSON (nodeConfigs per pool)
  HCLOUD_CLUSTER_CONFIG_FILE      cluster config as a plain JSON file
  HCLOUD_CLOUD_INIT               legacy: base64 cloud-init for every pool
  HCLOUD_IMAGE                    image ID, name or label selector (default ubuntu-24.04)
  HCLOUD_NETWORK                  ID or name of the private network servers join
  HCLOUD_FIREWALL                 firewall IDs or names, comma-separated
  HCLOUD_SSH_KEY                  SSH key IDs or names, comma-separated
  HCLOUD_PUBLIC_IPV4              give servers a public IPv4 address (default true)
  HCLOUD_PUBLIC_IPV6              give servers a public IPv6 address (default true)
  HCLOUD_SERVER_CREATION_TIMEOUT  time to create one server: minutes ("10") or a duration ("90s")
  HCLOUD_CLUSTER_NAME             cluster name that scopes the servers (new)
The package documentation of config (go doc github.com/hcloudscale/hcloudscale/config)
describes every variable and the cluster-config keys.
`
