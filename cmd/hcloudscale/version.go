package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
)

// commit is the source revision of the build. Image builds set it with
// -ldflags "-X main.commit=<sha>"; otherwise it comes from the VCS stamp
// go build leaves in the binary, if any.
var commit = ""

// buildInfo is what `hcloudscale version` prints and
// hcloudscale_build_info reports.
type buildInfo struct {
	Version, Commit, GoVersion string
}

// readBuildInfo returns the version set at link time
// (hcloudscale.Version), else the module version of a `go install
// ...@version`, else "(devel)"; the commit set at link time, else the VCS
// revision (with "-dirty" for a modified tree), else "unknown".
func readBuildInfo() buildInfo {
	b := buildInfo{Version: hcloudscale.Version, Commit: commit, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if ok && b.Version == "" && bi.Main.Version != "" {
		b.Version = bi.Main.Version
	}
	if ok && b.Commit == "" {
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if b.Commit != "" && modified {
			b.Commit += "-dirty"
		}
	}
	if b.Version == "" {
		b.Version = "(devel)"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	return b
}

func (b buildInfo) String() string {
	return fmt.Sprintf("hcloudscale %s (commit %s, %s)", b.Version, b.Commit, b.GoVersion)
}

// runVersion is the version subcommand (and the --version flag).
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer, _ config.Env) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprint(stdout, "Usage: hcloudscale version\n\nPrints the version, commit and Go version of the build (also hcloudscale --version).\n\nEnvironment variables: none are read.\n")
		printExitAndExamples(stdout, "0 success, 2 bad usage.", []string{"hcloudscale version"})
		return exitOK
	}
	if len(args) > 0 {
		fmt.Fprintf(stderr, "hcloudscale version: takes no arguments, got %q\n", args)
		return exitUsage
	}
	fmt.Fprintln(stdout, readBuildInfo())
	return exitOK
}

// newBuildInfoCollector returns hcloudscale_build_info: always 1, with the
// build's version, commit and Go version as labels, so that dashboards
// can tell which build each replica runs.
func newBuildInfoCollector() prometheus.Collector {
	b := readBuildInfo()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "hcloudscale_build_info",
		Help:        "Always 1; the labels name the version, commit and Go version of the running build.",
		ConstLabels: prometheus.Labels{"version": b.Version, "commit": b.Commit, "goversion": b.GoVersion},
	})
	g.Set(1)
	return g
}
