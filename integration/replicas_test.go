package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
	"github.com/hcloudscale/hcloudscale/integration/apiserver"
)

func TestMain(m *testing.M) {
	code := apiserver.Main(m)
	if binary.dir != "" {
		_ = os.RemoveAll(binary.dir)
	}
	os.Exit(code)
}

// binary is hcloudscale built once per test binary from this repository.
var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// envBinary names an hcloudscale binary to test instead of building one
// from this repository.
const envBinary = "HCLOUDSCALE_BINARY"

// hcloudscaleBinary builds cmd/hcloudscale of this repository on first use,
// unless $HCLOUDSCALE_BINARY names a binary.
func hcloudscaleBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(envBinary); p != "" {
		return p
	}
	binary.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..")
		if binary.dir, binary.err = os.MkdirTemp("", "hcloudscale-bin-"); binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "hcloudscale")
		cmd := exec.Command("go", "build", "-o", binary.path, "./cmd/hcloudscale")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			binary.err = fmt.Errorf("go build ./cmd/hcloudscale: %w\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

// replica is one `hcloudscale serve --leader-elect` process.
type replica struct {
	id      string // its identity in the Lease
	token   string // its Hetzner token
	grpc    string // host:port of its externalgrpc service
	metrics string // host:port of its /metrics
	logPath string

	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has exited
	err    error         // its exit, once exited is closed

	conn   *grpc.ClientConn
	client protos.CloudProviderClient
}

// replicaConfig is how a replica is started.
type replicaConfig struct {
	id, token  string
	kubeconfig string
	namespace  string // of the Lease
	endpoint   string // Hetzner API
	extraEnv   []string
	extraArgs  []string
	nodes      string // the --nodes spec
}

// Lease timings of every replica: short, so a takeover after a lost
// leader comes within seconds.
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 500 * time.Millisecond
	// writeGrace is how long a replica that takes the Lease over waits
	// before it lists: the fake API carries a request out at once.
	writeGrace = 2 * time.Second
)

// startReplica starts a replica; it is stopped (SIGKILL if it does not
// stop on SIGTERM, or is stopped with SIGSTOP) when the test ends, and its
// log is shown if the test failed.
func startReplica(t *testing.T, c replicaConfig) *replica {
	t.Helper()
	bin := hcloudscaleBinary(t)
	ports := freePorts(t, 2)
	r := &replica{
		id:      c.id,
		token:   c.token,
		grpc:    fmt.Sprintf("127.0.0.1:%d", ports[0]),
		metrics: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		logPath: filepath.Join(t.TempDir(), c.id+".log"),
		exited:  make(chan struct{}),
	}
	args := []string{"serve",
		"--nodes=" + c.nodes,
		"--listen=" + r.grpc,
		"--metrics-listen=" + r.metrics,
		"--leader-elect",
		"--leader-elect-resource-namespace=" + c.namespace,
		"--leader-elect-identity=" + c.id,
		"--leader-elect-lease-duration=" + leaseDuration.String(),
		"--leader-elect-renew-deadline=" + renewDeadline.String(),
		"--leader-elect-retry-period=" + retryPeriod.String(),
		"--leader-elect-write-grace=" + writeGrace.String(),
		"--poll-interval=200ms",
		"--drain-timeout=2s",
		"--shutdown-timeout=30s",
		"--log-level=info",
	}
	args = append(args, c.extraArgs...)
	f, err := os.Create(r.logPath)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(bin, args...)
	r.cmd.Stdout, r.cmd.Stderr = f, f
	r.cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"KUBECONFIG=" + c.kubeconfig,
		"HCLOUD_TOKEN=" + c.token,
		"HCLOUD_ENDPOINT=" + c.endpoint,
	}, c.extraEnv...)
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		_ = f.Close()
		t.Fatal(err)
	}
	go func() {
		r.err = r.cmd.Wait()
		_ = f.Close()
		close(r.exited)
	}()
	t.Cleanup(func() {
		r.stop()
		if r.conn != nil {
			_ = r.conn.Close()
		}
		if t.Failed() {
			t.Logf("log of %s (%v):\n%s", r.id, r.err, tail(r.logPath, 12000))
		}
	})
	conn, err := grpc.NewClient(r.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	r.conn, r.client = conn, protos.NewCloudProviderClient(conn)
	return r
}

// stop ends the process: SIGCONT (in case it was stopped), SIGTERM, and
// SIGKILL after 40 s; it waits for the exit.
func (r *replica) stop() {
	select {
	case <-r.exited:
		return
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGCONT)
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(40 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
}

func (r *replica) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: signal %v: %v", r.id, sig, err)
	}
}

// waitExit waits up to d for the process to exit and returns its exit
// error; it fails t if the process is still running then.
func (r *replica) waitExit(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-r.exited:
		return r.err
	case <-time.After(d):
		t.Fatalf("%s still runs %s after it was told to stop", r.id, d)
		return nil
	}
}

// leaderGauge matches the hcloudscale_leader line of /metrics.
var leaderGauge = regexp.MustCompile(`(?m)^hcloudscale_leader ([0-9.e+-]+)$`)

// leads reports whether /metrics says the replica leads (changes are let
// in); false when it cannot be read.
func (r *replica) leads() bool {
	client := http.Client{Timeout: time.Second}
	resp, err := client.Get("http://" + r.metrics + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return false
	}
	m := leaderGauge.FindSubmatch(b)
	return m != nil && string(m[1]) == "1"
}

// waitLeads polls /metrics every 20 ms until the replica leads or d has
// passed; it returns when it saw it lead, or fails t.
func (r *replica) waitLeads(t *testing.T, d time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if r.leads() {
			return time.Now()
		}
		select {
		case <-r.exited:
			t.Fatalf("%s exited (%v) before it led", r.id, r.err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("%s does not lead %s later", r.id, d)
	return time.Time{}
}

// increase asks the replica for delta more servers in pool, as the
// autoscaler does, retrying while it is unavailable (not leading yet,
// for instance) for up to 10 s.
func (r *replica) increase(t *testing.T, pool string, delta int) {
	t.Helper()
	var err error
	for range 50 {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err = r.client.NodeGroupIncreaseSize(ctx, &protos.NodeGroupIncreaseSizeRequest{Id: pool, Delta: int32(delta)})
		cancel()
		if err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: NodeGroupIncreaseSize(%s, %d): %v", r.id, pool, delta, err)
}

// targetSize returns the replica's target size of pool.
func (r *replica) targetSize(t *testing.T, pool string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	res, err := r.client.NodeGroupTargetSize(ctx, &protos.NodeGroupTargetSizeRequest{Id: pool})
	if err != nil {
		t.Fatalf("%s: NodeGroupTargetSize(%s): %v", r.id, pool, err)
	}
	return int(res.GetTargetSize())
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// forwarder passes TCP connections from a port of 127.0.0.1 to target
// until cut: then it closes every connection it carries and refuses new
// ones, as a network partition between one replica and the API server.
type forwarder struct {
	target string
	l      net.Listener
	wg     sync.WaitGroup

	mu    sync.Mutex // guards cut and conns
	cut   bool
	conns map[net.Conn]struct{}
}

func newForwarder(t *testing.T, target string) *forwarder {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{target: target, l: l, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	t.Cleanup(func() {
		_ = l.Close()
		f.setCut(true)
		f.wg.Wait()
	})
	return f
}

// addr is the forwarder's host:port.
func (f *forwarder) addr() string { return f.l.Addr().String() }

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.l.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		if f.cut {
			f.mu.Unlock()
			_ = c.Close()
			continue
		}
		f.conns[c] = struct{}{}
		f.mu.Unlock()
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.pipe(c)
		}()
	}
}

func (f *forwarder) pipe(c net.Conn) {
	up, err := net.DialTimeout("tcp", f.target, 5*time.Second)
	if err != nil {
		f.drop(c)
		return
	}
	f.mu.Lock()
	if f.cut {
		f.mu.Unlock()
		_ = up.Close()
		f.drop(c)
		return
	}
	f.conns[up] = struct{}{}
	f.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	f.drop(c)
	f.drop(up)
	<-done
}

func (f *forwarder) drop(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	_ = c.Close()
}

// setCut cuts (true) or restores (false) the link.
func (f *forwarder) setCut(cut bool) {
	f.mu.Lock()
	f.cut = cut
	var open []net.Conn
	if cut {
		for c := range f.conns {
			open = append(open, c)
		}
	}
	f.mu.Unlock()
	for _, c := range open {
		_ = c.Close()
	}
}

// errExit is how a replica exits: nil for 0.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// namespaceFor makes a namespace name of a test's name.
func namespaceFor(t *testing.T) string {
	name := strings.ToLower(t.Name())
	name = regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(name, "-")
	name = strings.Trim(name, "-")
	if len(name) > 50 {
		name = name[:50]
	}
	return strings.Trim(name, "-")
}
