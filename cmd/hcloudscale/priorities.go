package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/hcloudscale/hcloudscale/config"
)

// priorityConfigMap is the ConfigMap the autoscaler's priority expander
// reads, in the autoscaler's namespace.
const priorityConfigMap = "cluster-autoscaler-priority-expander"

func prioritiesHelp(fs *flag.FlagSet) func(io.Writer) {
	return func(w io.Writer) {
		fmt.Fprint(w, `Usage: hcloudscale priorities --nodes=<min>:<max>:<type>:<location>:<pool> [--nodes=...] [--configmap] [flags]

Prints the priority expander's "priorities" for the configuration: every pool's first
offering at 100, its second at 99 and so on (pools with offerings, see docs/configuration.md),
and '.*' at 1 so that node groups of other providers stay usable. With the autoscaler's
--expander=priority,... the autoscaler then tries a pool's offerings in the order written.
With the official autoscaler chart, put the output in expanderPriorities. --configmap prints
the whole ConfigMap `+priorityConfigMap+` instead, for the namespace --namespace.
Offline: it needs no token.

Flags:
`)
		printFlagsAndEnv(w, fs, "0 printed, 1 the configuration has problems, 2 bad usage.",
			"hcloudscale priorities --cluster-config cluster-config.json --nodes=1:5:cpx22:fsn1:workers",
			"hcloudscale priorities --configmap --namespace autoscaler --nodes=1:5:cpx22:fsn1:workers | kubectl apply -f -")
	}
}

// runPriorities is "hcloudscale priorities".
func runPriorities(_ context.Context, args []string, stdout, stderr io.Writer, env config.Env) int {
	fs := flag.NewFlagSet("priorities", flag.ContinueOnError)
	cf := registerConfigFlags(fs)
	configMap := fs.Bool("configmap", false, "print the whole ConfigMap "+priorityConfigMap)
	namespace := fs.String("namespace", "kube-system", "the `namespace` of the ConfigMap (the autoscaler's)")
	if code, ok := parseFlags(fs, args, stdout, stderr, prioritiesHelp(fs)); !ok {
		return code
	}
	env, _ = offlineToken(cf.env(env))
	cfg, err := config.Load(env, *cf.nodes)
	if err != nil {
		return reportConfigError(stderr, "priorities", "configuration", err)
	}
	yaml := config.PrioritiesYAML(cfg.Priorities())
	if !*configMap {
		fmt.Fprint(stdout, yaml)
		return exitOK
	}
	fmt.Fprintf(stdout, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %q\ndata:\n  priorities: |\n", priorityConfigMap, *namespace)
	for _, line := range strings.SplitAfter(strings.TrimSuffix(yaml, "\n"), "\n") {
		fmt.Fprintf(stdout, "    %s", line)
	}
	fmt.Fprintln(stdout)
	return exitOK
}
