package apiserver

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// startTimeout bounds how long etcd and kube-apiserver may take to become
// ready.
const startTimeout = 90 * time.Second

// adminUser is the user of the admin token, in group system:masters.
const adminUser = "hcloudscale-integration-admin"

// Server is a running kube-apiserver with its etcd.
type Server struct {
	// URL is the API server's address, https://127.0.0.1:<port>.
	URL string
	// Dir holds the server's files: etcd's data, certificates, the logs
	// of both processes (etcd.log, kube-apiserver.log) and the audit log
	// (audit.log).
	Dir string

	adminToken string
	caPEM      []byte
	auditLog   string
	procs      []*process // etcd first
}

// Start starts etcd and kube-apiserver for t, and what opts add, and
// stops them when t ends. It skips t when etcd is not installed, unless
// $HCLOUDSCALE_INTEGRATION is 1, and fails t when anything else goes
// wrong.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	var o startOptions
	for _, opt := range opts {
		opt(&o)
	}
	s, err := start(t.TempDir(), t.Logf, o)
	if err != nil {
		failOrSkip(t, err)
	}
	t.Cleanup(s.stop)
	return s
}

// shared is the Server of Shared, started on first use and stopped by
// Main.
var shared struct {
	mu      sync.Mutex
	main    bool // Main runs the tests
	s       *Server
	err     error
	started bool
	dir     string
}

// Main runs the tests of a package that uses [Shared] and stops the
// shared server after them; call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(apiserver.Main(m)) }
func Main(m *testing.M) int {
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.s != nil {
		shared.s.stop()
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	return code
}

// Shared returns the Server that the tests of this binary share, starting
// it on the first call. [Main] must run the tests, so that the server is
// stopped after the last. Tests that share it should keep apart by
// namespace.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.main {
		t.Fatal("apiserver.Shared needs TestMain to call apiserver.Main")
	}
	if !shared.started {
		shared.started = true
		shared.dir, shared.err = os.MkdirTemp("", "apiserver-")
		if shared.err == nil {
			shared.s, shared.err = start(shared.dir, t.Logf, startOptions{})
		}
	}
	if shared.err != nil {
		failOrSkip(t, shared.err)
	}
	return shared.s
}

func failOrSkip(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, errMissing) && os.Getenv(EnvRequired) != "1" {
		t.Skipf("%v (set %s=1 to make this a failure)", err, EnvRequired)
	}
	t.Fatal(err)
}

// start runs etcd and kube-apiserver with their files in dir.
func start(dir string, logf func(string, ...any), o startOptions) (_ *Server, err error) {
	etcdBin, err := etcdBinary()
	if err != nil {
		return nil, err
	}
	kasBin, err := controlPlaneBinary(kubeAPIServer, logf)
	if err != nil {
		return nil, err
	}
	creds, err := writeCredentials(dir)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	s := &Server{Dir: dir, caPEM: creds.caPEM, auditLog: filepath.Join(dir, "audit.log"), adminToken: randomToken()}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	s.URL = "https://127.0.0.1:" + strconv.Itoa(ports[2])

	if err := s.startEtcd(etcdBin, etcdURL, peerURL); err != nil {
		return nil, err
	}
	kas, err := s.startAPIServer(kasBin, creds, etcdURL, ports[2])
	if err != nil {
		return nil, err
	}

	started := time.Now()
	if err := s.waitReady(kas); err != nil {
		return nil, err
	}
	logf("kube-apiserver ready at %s in %s (files in %s)", s.URL, time.Since(started).Round(time.Millisecond), dir)
	return s, s.startExtras(o, logf)
}

// startEtcd starts etcd in s.Dir, serving clients at etcdURL.
func (s *Server) startEtcd(bin, etcdURL, peerURL string) error {
	etcd, err := startProcess(filepath.Join(s.Dir, "etcd.log"), bin,
		"--name=integration",
		"--data-dir="+filepath.Join(s.Dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=integration="+peerURL,
		"--unsafe-no-fsync",
	)
	if err != nil {
		return err
	}
	s.procs = append(s.procs, etcd)
	return nil
}

// startAPIServer writes the static tokens and the audit policy into s.Dir
// and starts kube-apiserver on port with RBAC, the tokens and a blocking
// JSON audit log.
func (s *Server) startAPIServer(bin string, creds *credentials, etcdURL string, port int) (*process, error) {
	tokens := filepath.Join(s.Dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", s.adminToken, adminUser, adminUser)), 0o600); err != nil {
		return nil, err
	}
	policy := filepath.Join(s.Dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, err
	}
	kas, err := startProcess(filepath.Join(s.Dir, "kube-apiserver.log"), bin,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--tls-cert-file="+creds.servingCert,
		"--tls-private-key-file="+creds.servingKey,
		"--cert-dir="+filepath.Join(s.Dir, "certs"),
		"--service-cluster-ip-range=10.96.0.0/24",
		"--service-account-issuer="+s.URL,
		"--service-account-key-file="+creds.serviceAccountPublic,
		"--service-account-signing-key-file="+creds.serviceAccountKey,
		"--authorization-mode=RBAC",
		"--token-auth-file="+tokens,
		"--disable-admission-plugins=ServiceAccount",
		"--endpoint-reconciler-type=none",
		"--audit-policy-file="+policy,
		"--audit-log-path="+s.auditLog,
		"--audit-log-mode=blocking",
		"--audit-log-format=json",
		"--profiling=false",
	)
	if err != nil {
		return nil, err
	}
	s.procs = append(s.procs, kas)
	return kas, nil
}

// waitReady polls /readyz until it answers ok, kas exits or startTimeout
// passes.
func (s *Server) waitReady(kas *process) error {
	cfg := s.AdminConfig()
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(startTimeout)
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-kas.exited:
			return fmt.Errorf("kube-apiserver exited before it was ready: %v\n%s", kas.err, kas.logTail())
		default:
		}
		resp, err := client.Get(s.URL + "/readyz")
		if err == nil {
			var b strings.Builder
			_, _ = fmt.Fprint(&b, resp.Status)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = b.String()
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready after %s (last: %s)\n%s\netcd:\n%s",
		startTimeout, last, kas.logTail(), s.procs[0].logTail())
}

// stop stops the processes in the reverse order of their start (etcd
// last) and waits for each.
func (s *Server) stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].stop(10 * time.Second)
	}
	s.procs = nil
}

// freePorts returns n distinct free TCP ports of 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
