package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"flag"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRunDispatch(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"no command", nil, exitUsage, "", "Usage: hcloudscale <command>"},
		{"help", []string{"--help"}, exitOK, "serve", ""},
		{"unknown command", []string{"scael"}, exitUsage, "", `unknown command "scael"`},
		{"serve help", []string{"serve", "-h"}, exitOK, "Usage: hcloudscale serve", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tc.args, &stdout, &stderr, config.MapEnv(nil, nil))
			if code != tc.wantCode || !strings.Contains(stdout.String(), tc.wantStdout) || !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("run(%q) = %d, stdout %q, stderr %q; want %d, stdout containing %q, stderr containing %q",
					tc.args, code, stdout.String(), stderr.String(), tc.wantCode, tc.wantStdout, tc.wantStderr)
			}
		})
	}
}

// TestServeFlagValidation checks the flags in-process. Flag problems are
// exit code 2 and are all reported at once; a configuration problem found
// after the flags passed is exit code 1.
func TestServeFlagValidation(t *testing.T) {
	nodes := "--nodes=0:3:cx23:fsn1:workers"
	for _, tc := range []struct {
		name string
		args []string
		want int
		// stderr must contain each of these.
		stderr []string
	}{
		{"unknown flag", []string{nodes, "--bogus"}, exitUsage, []string{"flag provided but not defined: -bogus", "serve --help"}},
		{"no --nodes: pools may come from the cluster config alone", nil, exitFailure, []string{"--nodes: no pools"}},
		{"positional argument", []string{nodes, "extra"}, exitUsage, []string{`unexpected arguments ["extra"]`}},
		{"all addresses without TLS", []string{nodes, "--listen", ":8086"}, exitUsage, []string{"--listen :8086 is not a loopback address"}},
		{"pod address without TLS", []string{nodes, "--listen", "10.0.0.5:8086"}, exitUsage, []string{"is not a loopback address"}},
		{"host name without TLS", []string{nodes, "--listen", "hcloudscale.kube-system.svc:8086"}, exitUsage, []string{"is not a loopback address"}},
		{"listen without port", []string{nodes, "--listen", "127.0.0.1"}, exitUsage, []string{`--listen "127.0.0.1": want host:port`}},
		{"TLS incomplete", []string{nodes, "--tls-cert", "tls.crt", "--tls-key", "tls.key"}, exitUsage, []string{"go together"}},
		{"client name without TLS", []string{nodes, "--tls-client-name", "cluster-autoscaler"}, exitUsage, []string{"--tls-client-name needs --tls-cert"}},
		{"TLS and insecure", []string{nodes, "--tls-cert", "a", "--tls-key", "b", "--tls-client-ca", "c", "--insecure"}, exitUsage, []string{"--insecure contradicts"}},
		{"bad log settings and timeouts, all reported", []string{nodes, "--log-level", "loud", "--log-format", "xml", "--shutdown-timeout", "0s", "--metrics-listen", "8085",
			"--list-ttl", "0s", "--poll-interval", "-1s", "--unavailable-ttl", "0s", "--spread-group-grace", "-1m"},
			exitUsage, []string{`--log-level "loud"`, `--log-format "xml"`, "--shutdown-timeout 0s: must be positive", `--metrics-listen "8085"`,
				"--list-ttl 0s: must be positive", "--poll-interval -1s: must be positive", "--unavailable-ttl 0s: must be positive", "--spread-group-grace -1m0s: must be positive"}},
		{"poll interval too short", []string{nodes, "--poll-interval", "10ms"}, exitUsage, []string{"--poll-interval 10ms: must be at least 100ms"}},
		{"replace dry run alone", []string{nodes, "--replace-dry-run"}, exitUsage, []string{"--replace-dry-run needs --replace-nodes"}},
		{"replace interval too short", []string{nodes, "--replace-nodes", "--replace-interval", "10ms"}, exitUsage, []string{"--replace-interval 10ms: want at least 1s"}},
		// The flags below pass; the empty environment then fails with 1.
		{"loopback IPv4", []string{nodes, "--listen", "127.0.0.1:0", "--metrics-listen", ""}, exitFailure, []string{"HCLOUD_TOKEN"}},
		{"loopback IPv6", []string{nodes, "--listen", "[::1]:0", "--metrics-listen", ""}, exitFailure, []string{"HCLOUD_TOKEN"}},
		{"localhost", []string{nodes, "--listen", "localhost:0", "--metrics-listen", ""}, exitFailure, []string{"HCLOUD_TOKEN"}},
		{"all addresses with --insecure", []string{nodes, "--listen", ":0", "--insecure", "--metrics-listen", ""}, exitFailure, []string{"HCLOUD_TOKEN"}},
		{"all addresses with TLS, files missing", []string{nodes, "--listen", ":0", "--tls-cert", "/nonexistent/tls.crt", "--tls-key", "/nonexistent/tls.key",
			"--tls-client-ca", "/nonexistent/ca.crt", "--metrics-listen", ""}, exitFailure, []string{"HCLOUD_TOKEN"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runServe(t.Context(), tc.args, &stdout, &stderr, config.MapEnv(nil, nil))
			if code != tc.want {
				t.Errorf("runServe(%q) = %d; want %d; stderr:\n%s", tc.args, code, tc.want, stderr.String())
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr does not contain %q:\n%s", want, stderr.String())
				}
			}
		})
	}
}

// TestServeHelp checks that --help names every flag and every
// environment variable that configuration reads.
func TestServeHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runServe(t.Context(), []string{"--help"}, &stdout, &stderr, config.MapEnv(nil, nil)); code != exitOK {
		t.Fatalf("runServe(--help) = %d; want 0; stderr: %s", code, stderr.String())
	}
	help := stdout.String()
	fs, _ := newServeFlags()
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(help, "--"+f.Name+" ") && !strings.Contains(help, "--"+f.Name+"\n") {
			t.Errorf("help does not document --%s", f.Name)
		}
	})
	for _, v := range []string{
		config.EnvToken, config.EnvTokenFile, config.EnvEndpoint, config.EnvClusterConfig, config.EnvClusterConfigFile,
		config.EnvCloudInit, config.EnvImage, config.EnvNetwork, config.EnvFirewall, config.EnvSSHKey,
		config.EnvPublicIPv4, config.EnvPublicIPv6, config.EnvServerCreationTimeout, config.EnvClusterName,
	} {
		if !strings.Contains(help, v+" ") {
			t.Errorf("help does not document %s", v)
		}
	}
}

// TestServeLifecycle starts the real command against hcloudtest, with and
// without mutual TLS: health reports SERVING, calls and metrics work, and
// on cancellation (SIGTERM) the command waits for a create in flight to
// finish before it exits with 0.
func TestServeLifecycle(t *testing.T) {
	for _, mtls := range []bool{false, true} {
		name := "plaintext"
		if mtls {
			name = "mutual TLS"
		}
		t.Run(name, func(t *testing.T) { testServeLifecycle(t, mtls) })
	}
}

func testServeLifecycle(t *testing.T, mtls bool) {
	fake := hcloudtest.NewServer(hcloudtest.WithDefaultActionDuration(200 * time.Millisecond))
	t.Cleanup(fake.Close)
	doc, err := json.Marshal(map[string]any{
		"nodeConfigs": map[string]any{"workers": map[string]any{"cloudInit": "#cloud-config\n"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	env := config.MapEnv(map[string]string{
		config.EnvToken:         fake.Token(),
		config.EnvEndpoint:      fake.URL(),
		config.EnvClusterConfig: base64.StdEncoding.EncodeToString(doc),
	}, nil)
	args := []string{"--nodes", "0:3:cx23:fsn1:workers", "--listen", "127.0.0.1:0", "--health-listen", "127.0.0.1:0",
		"--metrics-listen", "127.0.0.1:0", "--shutdown-timeout", "30s", "--list-ttl", "90s", "--poll-interval", "250ms"}
	clientCreds := insecure.NewCredentials()
	var noCertCreds credentials.TransportCredentials
	if mtls {
		p := newTestPKI(t)
		args = append(args, "--tls-cert", p.serverCert, "--tls-key", p.serverKey, "--tls-client-ca", p.caFile, "--tls-client-name", testClientName)
		clientCreds = credentials.NewTLS(&tls.Config{RootCAs: p.roots, Certificates: []tls.Certificate{p.client}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
		noCertCreds = credentials.NewTLS(&tls.Config{RootCAs: p.roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stderr := &syncBuffer{}
	exited := make(chan int, 1)
	go func() { exited <- runServe(ctx, args, io.Discard, stderr, env) }()

	serving := waitForLog(t, stderr, exited, "serving")
	if serving["list_ttl"] != "1m30s" || serving["poll_interval"] != "250ms" {
		t.Errorf("serving with list_ttl %v and poll_interval %v; want the flags' 1m30s and 250ms", serving["list_ttl"], serving["poll_interval"])
	}
	if serving["gomaxprocs"] != float64(runtime.GOMAXPROCS(0)) {
		t.Errorf("serving reports gomaxprocs %v; want %d", serving["gomaxprocs"], runtime.GOMAXPROCS(0))
	}
	dial := func(addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	callCtx := func() context.Context {
		c, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		t.Cleanup(cancel)
		return c
	}

	health := healthpb.NewHealthClient(dial(serving["health_listen"].(string), insecure.NewCredentials()))
	for _, svc := range []string{"", protos.CloudProvider_ServiceDesc.ServiceName} {
		res, err := health.Check(callCtx(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q = %v, %v; want SERVING", svc, res.GetStatus(), err)
		}
	}

	mainConn := dial(serving["listen"].(string), clientCreds)
	if res, err := healthpb.NewHealthClient(mainConn).Check(callCtx(), &healthpb.HealthCheckRequest{}); err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health on --listen = %v, %v; want SERVING", res.GetStatus(), err)
	}
	provider := protos.NewCloudProviderClient(mainConn)
	groups, err := provider.NodeGroups(callCtx(), &protos.NodeGroupsRequest{})
	if err != nil || len(groups.GetNodeGroups()) != 1 || groups.GetNodeGroups()[0].GetId() != "workers" {
		t.Fatalf("NodeGroups = %v, %v; want the workers group", groups.GetNodeGroups(), err)
	}
	if noCertCreds != nil {
		_, err := protos.NewCloudProviderClient(dial(serving["listen"].(string), noCertCreds)).NodeGroups(callCtx(), &protos.NodeGroupsRequest{})
		if status.Code(err) != codes.Unavailable {
			t.Errorf("NodeGroups without a client certificate: %v; want Unavailable", err)
		}
		waitForMetric(t, "http://"+serving["metrics_listen"].(string)+"/metrics", `hcloudscale_tls_handshake_failures_total{reason="no_certificate"} 1`)
		waitForMetric(t, "http://"+serving["metrics_listen"].(string)+"/metrics", `hcloudscale_tls_certificate_expiry_timestamp_seconds{cert="server"}`)
	}

	metrics := get(t, "http://"+serving["metrics_listen"].(string)+"/metrics")
	for _, want := range []string{
		`hcloudscale_externalgrpc_requests_total{code="OK",method="NodeGroups"} 1`,
		"go_goroutines",
		"hcloud_api_requests_total",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics do not contain %q", want)
		}
	}

	if _, err := provider.NodeGroupIncreaseSize(callCtx(), &protos.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 1}); err != nil {
		t.Fatalf("NodeGroupIncreaseSize: %v", err)
	}
	cancel() // SIGTERM
	select {
	case code := <-exited:
		if code != exitOK {
			t.Fatalf("runServe after cancellation = %d; want 0; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("runServe did not return after cancellation")
	}
	servers, err := fake.Servers(config.LabelNodeGroup + "=workers")
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 1 || servers[0].Status != hcloud.ServerStatusRunning {
		t.Errorf("servers after shutdown = %+v; want one running: the shutdown waits for creates in flight", servers)
	}
	if _, err := health.Check(callCtx(), &healthpb.HealthCheckRequest{}); err == nil {
		t.Error("health check after shutdown succeeded; want the listener closed")
	}
}

// waitForLog waits for the JSON log line with msg and returns its fields.
func waitForLog(t *testing.T, stderr *syncBuffer, exited <-chan int, msg string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		sc := bufio.NewScanner(strings.NewReader(stderr.String()))
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == msg {
				return line
			}
		}
		select {
		case code := <-exited:
			t.Fatalf("runServe exited with %d before logging %q; stderr:\n%s", code, msg, stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatalf("no %q log line; stderr:\n%s", msg, stderr.String())
	return nil
}

func get(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// syncBuffer is a bytes.Buffer that the command writes while the test
// reads.
type syncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testPKI is a throwaway CA with a server certificate for 127.0.0.1 on
// disk and a client certificate in memory.
type testPKI struct {
	caFile, serverCert, serverKey string
	roots                         *x509.CertPool
	client                        tls.Certificate
}

// testClientName is the DNS name of newTestPKI's certificates, the one
// --tls-client-name accepts.
const testClientName = "cluster-autoscaler.test"

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{caFile: filepath.Join(dir, "ca.crt"), roots: x509.NewCertPool()}
	p.roots.AddCert(ca)
	writeFile(t, p.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))

	leaf := func(serial int64, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{testClientName}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	}
	certPEM, keyPEM := leaf(2, x509.ExtKeyUsageServerAuth)
	p.serverCert, p.serverKey = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeFile(t, p.serverCert, certPEM)
	writeFile(t, p.serverKey, keyPEM)
	certPEM, keyPEM = leaf(3, x509.ExtKeyUsageClientAuth)
	if p.client, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeFile(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitForMetric fetches url until its text contains want, for up to 5 s:
// a refused handshake is counted just after the client sees the refusal.
func waitForMetric(t *testing.T, url, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(get(t, url), want) {
		if time.Now().After(deadline) {
			t.Fatalf("metrics do not contain %q", want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
