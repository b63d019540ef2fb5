package main

import (
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/lifecycle"
)

func TestReplaceWantsPlan(t *testing.T) {
	for _, args := range [][]string{{}, {"--plan", "--abort"}} {
		r := runCmd(t, runReplace, config.MapEnv(nil, nil), append(args, "--nodes", "0:3:cx23:fsn1:workers")...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "give one of --plan and --abort") || !strings.Contains(r.stderr, "serve --replace-nodes") {
			t.Errorf("replace %v: %d, %q", args, r.code, r.stderr)
		}
	}
}

func TestReplaceHelpNamesEveryReason(t *testing.T) {
	var b strings.Builder
	replaceHelp(flag.NewFlagSet("replace", flag.ContinueOnError))(&b)
	for _, reason := range []string{"drift:<reason>", lifecycle.ReasonExpired, lifecycle.ReasonRemovedPool, lifecycle.ReasonNotReady, "--abort"} {
		if !strings.Contains(b.String(), reason) {
			t.Errorf("replace --help lacks %q:\n%s", reason, b.String())
		}
	}
}

func TestPrintUndone(t *testing.T) {
	var b strings.Builder
	printUndone(&b, nil)
	if !strings.Contains(b.String(), "Nothing of the node lifecycle is left") {
		t.Errorf("nothing undone printed as %q", b.String())
	}
	b.Reset()
	printUndone(&b, []lifecycle.Undone{{Pool: "workers", Node: "workers-a", Replacement: "workers-b", Action: lifecycle.UndoneKept, Error: "boom"}})
	for _, want := range []string{"workers-a", "workers-b", lifecycle.UndoneKept, "boom"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("printUndone lacks %q:\n%s", want, b.String())
		}
	}
}

func TestPrintReplacePlan(t *testing.T) {
	var b strings.Builder
	printReplacePlan(&b, &lifecycle.Plan{Steps: []lifecycle.Step{
		{Pool: "workers", Node: "workers-a", Reasons: []string{"drift:image", "expired"}, State: lifecycle.StateInProgress, Phase: lifecycle.PhaseDraining, Replacement: "workers-b"},
		{Pool: "workers", Node: "workers-c", Reasons: []string{"drift:image"}, State: lifecycle.StateStart, Surge: true, HourlyOld: 0.0112, HourlyNew: 0.0056, PriceKnown: true},
		{Pool: "workers", Node: "workers-d", Reasons: []string{"drift:image"}, State: lifecycle.StateBlocked, Blocked: []string{"paused", "the pool has 1 of 1 replacements in progress (maxInFlight)"}},
		{Pool: "old", Node: "old-a", Reasons: []string{"removed_pool"}, State: lifecycle.StateInProgress, Phase: lifecycle.PhaseDraining},
	}})
	out := b.String()
	for _, want := range []string{
		"workers-a", "drift:image,expired", "in progress: draining", "replacement workers-b",
		"starts", "0.0112→0.0056", "surges above the pool's max size",
		"blocked", "paused; the pool has 1 of 1 replacements in progress (maxInFlight)",
		"drained out (removed pool)",
		"1 start now, 1 blocked, 2 in progress.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	printReplacePlan(&b, &lifecycle.Plan{})
	if !strings.Contains(b.String(), "No node is due") {
		t.Errorf("empty plan: %q", b.String())
	}
}

func TestStatusShowsReplacementsInProgress(t *testing.T) {
	res := &statusResult{Pools: []poolStatus{{Name: "workers", Instances: []instanceStatus{
		{Name: "workers-old", ServerID: 7, State: "running"},
		{Name: "workers-new", ServerID: 9, State: "creating", Replaces: 7},
		{Name: "workers-done", ServerID: 11, State: "running", Replaces: 3}, // its old server is gone
	}}}}
	var b strings.Builder
	printStatus(&b, res, false)
	out := b.String()
	if !strings.Contains(out, "Replacements in progress") || !strings.Contains(out, "workers-new") || !strings.Contains(out, "workers-old") {
		t.Errorf("status lacks the replacement in progress:\n%s", out)
	}
	if strings.Contains(out, "workers-done") {
		t.Errorf("status shows a finished replacement as in progress:\n%s", out)
	}
}

// A standby's metrics say nothing about the configuration that scales:
// status says so rather than NOT RUNNING.
func TestStatusServeMetricsOfAStandby(t *testing.T) {
	for _, tc := range []struct {
		leader string
		want   string
	}{
		{"0", "this serve is a standby"},
		{"1", "NOT RUNNING"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "hcloudscale_leader %s\nhcloudscale_config_reload_success 1\nhcloudscale_config_info{file=\"/c.json\",file_sha256=\"aaa\",running_sha256=\"aaa\"} 1\n", tc.leader)
		}))
		env := config.MapEnv(map[string]string{config.EnvClusterConfigFile: "/c.json"}, map[string]string{"/c.json": `{"nodeConfigs": {}}`})
		st := readConfigStatus(t.Context(), env, srv.URL)
		srv.Close()
		var b strings.Builder
		printConfigStatus(&b, st)
		if !strings.Contains(b.String(), tc.want) || st.Standby != (tc.leader == "0") {
			t.Errorf("hcloudscale_leader %s: standby %v, %q; want %q", tc.leader, st.Standby, b.String(), tc.want)
		}
	}
}
