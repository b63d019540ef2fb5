// Package externalgrpc runs the end-to-end scenarios of package e2e
// against the autoscaler's own externalgrpc client talking to
// `hcloudscale serve`, a subprocess with mutual TLS as deployed, and
// against the autoscaler's built-in hetzner provider, for comparison.
package externalgrpc

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/cluster-autoscaler/pkg/cloudprovider"

	"github.com/hcloudscale/hcloudscale/e2e"
	"github.com/hcloudscale/hcloudscale/e2e/externalgrpc/caclient"
)

var (
	klogFile = flag.String("klog", "", "file for the autoscaler's log (default: a new file in the temporary directory, named at the start)")
	binary   = flag.String("hcloudscale", "", "hcloudscale binary to serve with (default: built from this checkout)")
)

// work holds the binary, the certificates and the logs of serve.
var work string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(func() int {
		var done func()
		var err error
		if work, done, err = caclient.Prepare(*klogFile, "hcloudscale-e2e-serve-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer done()
		if *binary == "" {
			*binary = filepath.Join(work, "hcloudscale")
			// The main module alone: serve needs nothing of the autoscaler.
			cmd := exec.Command("go", "build", "-o", *binary, "./cmd/hcloudscale")
			cmd.Dir = filepath.Join("..", "..")
			cmd.Env = append(os.Environ(), "GOWORK=off")
			if out, err := cmd.CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "build hcloudscale: %v\n%s", err, out)
				return 1
			}
		}
		return m.Run()
	}())
}

// TestServe runs every scenario against the autoscaler's externalgrpc
// client and `hcloudscale serve`.
func TestServe(t *testing.T) {
	for _, sc := range e2e.Scenarios {
		t.Run(sc.Name, func(t *testing.T) { sc.Run(t, &servedKind{}) })
	}
}

// TestServeOfferings runs the scenarios of the per-pool settings the
// built-in provider does not have (offerings, spread groups, public IPs
// per pool) against the externalgrpc client and `hcloudscale serve`.
func TestServeOfferings(t *testing.T) {
	for _, sc := range e2e.OfferingScenarios {
		t.Run(sc.Name, func(t *testing.T) { sc.Run(t, &servedKind{}) })
	}
}

// servedKind is `hcloudscale serve` in a subprocess with mutual TLS, and
// the autoscaler's externalgrpc client built as its builder builds it
// (BuildExternalGrpc with a --cloud-config file). A restart starts a new
// serve on the same address; the client reconnects.
type servedKind struct {
	addr, metricsAddr string
	n                 int
}

func (*servedKind) Name() string { return "externalgrpc" }

// served is a client with the serve process behind it.
type served struct {
	cloudprovider.CloudProvider
	cmd     *exec.Cmd
	done    chan error
	metrics string // URL of serve's /metrics
}

// RPCs is the number of externalgrpc calls serve has answered so far: the
// sum of its hcloudscale_externalgrpc_requests_total.
func (p *served) RPCs() (int64, error) {
	resp, err := http.Get(p.metrics)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", p.metrics, resp.Status)
	}
	var n float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "hcloudscale_externalgrpc_requests_total{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", p.metrics, line, err)
		}
		n += v
	}
	return int64(n), sc.Err()
}

// CPUTime is the CPU time (user and system) serve has used so far, from
// /proc/<pid>/stat, in clock ticks of 10 ms (Linux's USER_HZ).
func (p *served) CPUTime() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from after it. utime and stime are fields 14 and 15.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", p.cmd.Process.Pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", p.cmd.Process.Pid, len(f))
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", p.cmd.Process.Pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

func (k *servedKind) Start(t *testing.T, s e2e.Setup) (cloudprovider.CloudProvider, error) {
	if k.addr == "" {
		// A restarted serve listens on the same addresses.
		addrs, err := freeAddrs(2)
		if err != nil {
			return nil, err
		}
		k.addr, k.metricsAddr = addrs[0], addrs[1]
	}
	k.n++
	logPath := filepath.Join(work, fmt.Sprintf("%s-%d.log", strings.ReplaceAll(t.Name(), "/", "_"), k.n))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--listen", k.addr, "--metrics-listen", k.metricsAddr,
		"--tls-cert", filepath.Join(work, "server.crt"), "--tls-key", filepath.Join(work, "server.key"),
		"--tls-client-ca", filepath.Join(work, "ca.crt"), "--log-format", "console"}
	if s.ListTTL > 0 {
		args = append(args, "--list-ttl", s.ListTTL.String())
	}
	if s.Interval > 0 {
		args = append(args, "--poll-interval", s.Interval.String())
	}
	if s.UnavailableTTL > 0 {
		args = append(args, "--unavailable-ttl", s.UnavailableTTL.String())
	}
	if s.SpreadGrace > 0 {
		args = append(args, "--spread-group-grace", s.SpreadGrace.String())
	}
	for _, n := range s.Nodes {
		args = append(args, "--nodes", n)
	}
	args = append(args, strings.Fields(os.Getenv("E2E_SERVE_ARGS"))...)
	cmd := exec.Command(*binary, args...)
	cmd.Env = os.Environ()
	for k, v := range s.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); _ = logFile.Close() }()
	p := &served{cmd: cmd, done: done, metrics: "http://" + k.metricsAddr + "/metrics"}
	if err := waitListening(k.addr, done); err != nil {
		_ = k.Stop(p)
		out, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("serve: %w\n%s", err, out)
	}

	if p.CloudProvider, err = caclient.Build(work, k.addr); err != nil {
		_ = k.Stop(p)
		return nil, err
	}
	return p, nil
}

// freeAddrs returns n loopback addresses with distinct ports free at the
// moment: the listeners stay open until all are chosen.
func freeAddrs(n int) ([]string, error) {
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

// Stop kills serve: a crash, nothing handed over.
func (*servedKind) Stop(cp cloudprovider.CloudProvider) error {
	p := cp.(*served)
	_ = p.cmd.Process.Kill()
	<-p.done
	p.done <- errors.New("stopped")
	return nil
}

// waitListening waits until addr accepts connections or the process ends.
func waitListening(addr string, done chan error) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("exited: %v", err)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			_ = c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not listening after 30 s", addr)
}

// TestServeAtScale measures the loop at the cluster sizes listed in
// $E2E_SCALE (e.g. "1000,5000"); it is skipped without. $E2E_SERVE_ARGS
// (split at spaces) is appended to serve's arguments, e.g.
// "--log-level debug".
func TestServeAtScale(t *testing.T) {
	for _, size := range e2e.ScaleSizes(t) {
		t.Run(fmt.Sprint(size), func(t *testing.T) { e2e.LoopAtScale(t, &servedKind{}, size, 10) })
	}
}
