package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hcloudscale/hcloudscale/config"
)

// TestDemo runs the README's first command in-process and checks that the
// scenario happened as narrated: the numbers in these lines come from the
// pools and the fake API, not from the narration.
func TestDemo(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	var stdout, stderr bytes.Buffer
	began := time.Now()
	code := runDemo(context.Background(), []string{"--fast"}, &stdout, &stderr, config.Env{})
	if code != exitOK {
		t.Fatalf("runDemo --fast = %d, want %d; stderr:\n%s\nstdout:\n%s", code, exitOK, stderr.String(), stdout.String())
	}
	if took := time.Since(began); took > 20*time.Second {
		t.Errorf("runDemo --fast took %s, want well under 20s", took)
	}
	out := stdout.String()

	for _, c := range []struct {
		name string
		re   string
	}{
		{"the config is checked by New", `hcloudscale\.New looked up .*\n.*: \d+ requests in`},
		{"three pools are listed", `(?m)^  workers-fsn1\s+cpx31\s+amd64\s+fsn1\s+0\s+10\s+\d+\.\d{4}$`},
		{"IncreaseSize returns without an API request", `IncreaseSize\(3\) returned after \S+ with 0 API requests; target size 3\.`},
		// The demo runs on the wall clock: on a loaded machine one server
		// may already be starting before the last create lands, so any
		// number initializing while the pool reports 3 creating shows it.
		{"servers pass initializing on the way", `workers-fsn1 target 3, 3 creating\s+Hetzner: [^\n]*\b\d+ initializing`},
		{"the scale-up completes", `3 servers running after`},
		{"a capacity error becomes an OutOfResources placeholder", `(?s)placeholder hcloudscale://arm-nbg1/arm-nbg1-[0-9a-f]+  state creating, OutOfResources: resource_unavailable\n.*placeholder hcloudscale://arm-nbg1/arm-nbg1-[0-9a-f]+  state creating, OutOfResources: resource_unavailable`},
		{"placeholders are deleted without API requests", `DeleteInstances removed 2 placeholders with 0 API requests; target size 0`},
		{"the sold-out offering fails at once", `IncreaseSize on arm-nbg1 fails at once, with 0 API requests:\n\s+pool "arm-nbg1": server type cax21 in location nbg1 unavailable`},
		{"the fail-over pool scales up", `2 servers running in arm-hel1 after`},
		{"the scale-down completes", `deleted after`},
		{"one worker is left", `(?m)^  workers-fsn1\s+1\s+1 running$`},
		{"the Arm pools are empty", `(?m)^  arm-hel1\s+0\s+none$`},
		{"the image change is planned", `(?m)^     workers-fsn1\s+workers-fsn1-[0-9a-f]+\s+drift:image\s+starts\s`},
		{"the replacement surges first", `lifecycle: workers-fsn1-[0-9a-f]+ surging`},
		{"the old node is drained", `target 2, 2 running\s+Hetzner: 2 running; lifecycle: workers-fsn1-[0-9a-f]+ draining`},
		{"the old server is deleted", `lifecycle: workers-fsn1-[0-9a-f]+ deleting`},
		{"the roll ends without drift, two servers at most", `replaced after \S+: no server of workers-fsn1 differs from its configuration; it had 2 servers`},
		{"creates are counted: 3 + 2 refused + 2 + 1 replacement", `(?m)^    POST /servers\s+8$`},
		{"deletes are counted: 4 + the replaced server", `(?m)^    DELETE /servers/\{id\}\s+5$`},
		{"the rate-limit budget is reported", `Rate-limit budget left: about \d+ of 3600`},
	} {
		if !regexp.MustCompile(c.re).MatchString(out) {
			t.Errorf("%s: output does not match %q; output:\n%s", c.name, c.re, out)
		}
	}
	if stderr.Len() > 0 {
		t.Errorf("stderr = %q, want nothing", stderr.String())
	}
}

// TestDemoKeep runs demo --keep and points status and replace --plan, as
// the demo prints them, at what it keeps running: the plan finds nothing
// due, then the node of an image changed back in the printed config file;
// the terminal closing (SIGHUP) stops the demo as Ctrl-C does, and it
// removes its files.
func TestDemoKeep(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := interruptContext()
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- runDemo(ctx, []string{"--fast", "--keep"}, &stdout, &stderr, config.Env{}) }()
	// The shell of someone moving from the upstream provider still has its
	// variables, one of which outranks the config file the demo prints.
	shell := map[string]string{config.EnvClusterConfig: "e30=", config.EnvImage: "debian-12", "KUBECONFIG": "/nonexistent"}
	vars := waitForExports(t, &stdout, done, shell)
	env := config.Env{Lookup: func(name string) (string, bool) { v, ok := vars[name]; return v, ok }, ReadFile: os.ReadFile}
	nodes := regexp.MustCompile(`go run \./cmd/hcloudscale replace --plan (.*)`).FindStringSubmatch(stdout.String())
	if nodes == nil {
		t.Fatalf("no replace --plan command printed:\n%s", stdout.String())
	}
	args := strings.Fields(nodes[1])
	if r := runCmd(t, runStatus, env, args...); r.code != exitOK || !strings.Contains(r.stdout, "workers-fsn1") {
		t.Errorf("status = %d: %s%s; want the pools", r.code, r.stdout, r.stderr)
	}
	if r := runCmd(t, runReplace, env, append([]string{"--plan"}, args...)...); r.code != exitOK || !strings.Contains(r.stdout, "No node is due") {
		t.Errorf("replace --plan after the roll = %d: %s%s; want nothing due", r.code, r.stdout, r.stderr)
	}
	// scale reads serve's Lease in the simulated cluster, as in a real one.
	if r := runCmd(t, runScale, env, append([]string{"workers-fsn1", "1"}, args...)...); r.code != exitOK {
		t.Errorf("scale workers-fsn1 1 = %d: %s%s; want it done", r.code, r.stdout, r.stderr)
	}
	path := vars[config.EnvClusterConfigFile]
	if err := os.WriteFile(path, []byte(demoClusterConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCmd(t, runReplace, env, append([]string{"--plan"}, args...)...)
	if r.code != exitOK || !regexp.MustCompile(`(?m)^workers-fsn1\s+workers-fsn1-[0-9a-f]+\s+drift:image\s+starts`).MatchString(r.stdout) {
		t.Errorf("replace --plan with the old image = %d: %s%s; want the worker's node due for drift:image", r.code, r.stdout, r.stderr)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != exitOK {
		t.Errorf("demo --keep after SIGHUP = %d; want %d; stderr %s", code, exitOK, stderr.String())
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the demo's config file after SIGHUP: %v; want it removed", err)
	}
}

// waitForExports waits until the demo printed its environment and
// returns shell with the printed export and unset lines applied.
func waitForExports(t *testing.T, stdout *syncBuffer, done <-chan int, shell map[string]string) map[string]string {
	t.Helper()
	exportRE := regexp.MustCompile(`(?m)^  export (\w+)=(\S+)$`)
	deadline := time.After(30 * time.Second)
	for !strings.Contains(stdout.String(), "export KUBECONFIG=") {
		select {
		case code := <-done:
			t.Fatalf("demo --keep ended with %d before it printed its environment:\n%s", code, stdout.String())
		case <-deadline:
			t.Fatalf("demo --keep printed no environment in 30s:\n%s", stdout.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^  unset (.+)$`).FindAllStringSubmatch(stdout.String(), -1) {
		for _, name := range strings.Fields(m[1]) {
			delete(shell, name)
		}
	}
	for _, m := range exportRE.FindAllStringSubmatch(stdout.String(), -1) {
		shell[m[1]] = m[2]
	}
	return shell
}

// slowScaleUpLog is a log writer that holds up the first "scale-up
// requested" entry, the last thing IncreaseSize does before it returns, so
// that the create flows it started send their requests meanwhile.
type slowScaleUpLog struct {
	mu      sync.Mutex // guards buf and delayed
	buf     bytes.Buffer
	delayed bool
}

func (w *slowScaleUpLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	first := !w.delayed && bytes.Contains(p, []byte("scale-up requested"))
	if first {
		w.delayed = true
	}
	w.mu.Unlock()
	if first {
		time.Sleep(300 * time.Millisecond)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// TestDemoCountsOnlyTheCallsRequests checks that the narrated request
// count of IncreaseSize is what the call cost, not what the background
// create flows sent before it returned.
func TestDemoCountsOnlyTheCallsRequests(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	var stdout bytes.Buffer
	stderr := &slowScaleUpLog{}
	code := runDemo(context.Background(), []string{"--fast", "--log-level=info"}, &stdout, stderr, config.Env{})
	if code != exitOK {
		t.Fatalf("runDemo --fast = %d, want %d; stdout:\n%s", code, exitOK, stdout.String())
	}
	want := regexp.MustCompile(`IncreaseSize\(3\) returned after \S+ with 0 API requests; target size 3\.`)
	if !want.MatchString(stdout.String()) {
		t.Errorf("output does not match %q while the create flows ran before IncreaseSize returned; output:\n%s", want, stdout.String())
	}
}

func TestDemoUsage(t *testing.T) {
	for _, c := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"help", []string{"--help"}, exitOK, "Usage: hcloudscale demo", ""},
		{"unknown flag", []string{"--bogus"}, exitUsage, "", "flag provided but not defined: -bogus"},
		{"argument", []string{"now"}, exitUsage, "", `unexpected arguments ["now"]`},
		{"bad log level", []string{"--log-level=loud"}, exitUsage, "", `--log-level "loud"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runDemo(context.Background(), c.args, &stdout, &stderr, config.Env{})
			if code != c.wantCode {
				t.Errorf("runDemo(%q) = %d, want %d; stderr: %s", c.args, code, c.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), c.wantStdout) {
				t.Errorf("runDemo(%q) stdout = %q, want it to contain %q", c.args, stdout.String(), c.wantStdout)
			}
			if !strings.Contains(stderr.String(), c.wantStderr) {
				t.Errorf("runDemo(%q) stderr = %q, want it to contain %q", c.args, stderr.String(), c.wantStderr)
			}
		})
	}
}

// TestDemoHelpTellsTheREADMEsDuration checks that demo --help promises
// the durations the README measured.
func TestDemoHelpTellsTheREADMEsDuration(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile("in about (\\d+) seconds after\\s+the first build \\(`--fast`: about (\\d+)\\)").FindStringSubmatch(string(readme))
	if want == nil {
		t.Fatal("the README says nothing of how long the demo takes")
	}
	r := runCmd(t, runDemo, config.Env{}, "--help")
	got := regexp.MustCompile(`takes about (\S+) seconds \(about (\S+) with --fast\)`).FindStringSubmatch(strings.Join(strings.Fields(r.stdout), " "))
	if got == nil || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("demo --help: %q; want about %s seconds, %s with --fast, as the README says", got, want[1], want[2])
	}
}
