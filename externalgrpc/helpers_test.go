package externalgrpc_test

import (
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
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

func TestMain(m *testing.M) {
	if dir, ok := os.LookupEnv(benchServeEnv); ok {
		// A child process of BenchmarkHotCalls: serve, do not test.
		if err := benchServe(dir); err != nil {
			fmt.Fprintln(os.Stderr, "bench server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// epoch is where every manual clock starts.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const clusterName = "e2e"

// The pools of every test: workers sets no autoscaling options, batch
// does, arm has a min size of 1 and one server from the start.
var nodeSpecs = []string{
	"0:5:cpx21:fsn1:workers",
	"0:3:cx23:nbg1:batch",
	"1:3:cax11:hel1:arm",
}

func clusterConfig() map[string]any {
	return map[string]any{
		"clusterName":   clusterName,
		"imagesForArch": map[string]string{"amd64": "ubuntu-24.04", "arm64": "ubuntu-24.04"},
		"nodeConfigs": map[string]any{
			"workers": map[string]any{"cloudInit": "#cloud-config\n", "labels": map[string]string{"role": "worker"}},
			"batch": map[string]any{
				"cloudInit": "#cloud-config\n",
				"autoscaling": map[string]any{
					"scaleDownUtilizationThreshold": 0.7,
					"scaleDownUnneededTime":         "20m",
					"ignoreDaemonSetsUtilization":   true,
				},
			},
			"arm": map[string]any{"cloudInit": "#cloud-config\n"},
		},
	}
}

// env is a fake Hetzner project, a Cluster over it, and the real gRPC
// server on loopback with a client generated from our proto.
type env struct {
	t       *testing.T
	fake    *hcloudtest.Server
	clock   *hcloudtest.ManualClock
	cluster *hcloudscale.Cluster
	client  protos.CloudProviderClient
	reg     *prometheus.Registry
	addr    string
	// armServer is the ID of the arm pool's server.
	armServer int64
	// controlPlane is the ID of a server of no pool.
	controlPlane int64
}

type envOptions struct {
	// serverTLS and clientTLS switch the connection to TLS.
	serverTLS *tls.Config
	clientTLS *tls.Config
	// callTimeout is the server's WithCallTimeout; 0 keeps the default.
	callTimeout time.Duration
	// gate is the server's WithGate; nil lets every call in.
	gate externalgrpc.Gate
	// logger is the server's WithLogger; nil logs to the test.
	logger *zap.Logger
}

func newEnv(t *testing.T, eo envOptions) *env {
	t.Helper()
	clock := hcloudtest.NewManualClock(epoch)
	fake := hcloudtest.NewServer(hcloudtest.WithClock(clock))
	t.Cleanup(fake.Close)
	e := &env{t: t, fake: fake, clock: clock, reg: prometheus.NewRegistry()}

	var err error
	e.armServer, err = fake.AddServer(armServer("arm-0000000000000001"))
	if err != nil {
		t.Fatal(err)
	}
	e.controlPlane, err = fake.AddServer(hcloudtest.ServerInfo{Name: "control-plane-1", ServerType: "cpx21", Location: "fsn1", Status: hcloud.ServerStatusRunning})
	if err != nil {
		t.Fatal(err)
	}

	doc, err := json.Marshal(clusterConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.MapEnv(map[string]string{
		config.EnvToken:         fake.Token(),
		config.EnvEndpoint:      fake.URL(),
		config.EnvClusterConfig: base64.StdEncoding.EncodeToString(doc),
	}, nil), nodeSpecs)
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	log := zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
	e.cluster, err = hcloudscale.New(t.Context(), cfg,
		hcloudscale.WithLogger(log),
		hcloudscale.WithClock(hcloudtest.WallWaits(clock)),
		hcloudscale.WithPollInterval(time.Millisecond),
		hcloudscale.WithRegisterer(e.reg),
		hcloudscale.WithClientOptions(
			hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond), MaxRetries: 3}),
			hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond)}),
		),
	)
	if err != nil {
		t.Fatalf("hcloudscale.New: %v", err)
	}
	t.Cleanup(func() {
		// Creates in flight reach a safe point only as the fake's clock
		// moves.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		closed := make(chan error, 1)
		go func() { closed <- e.cluster.Close(ctx) }()
		for {
			select {
			case err := <-closed:
				if err != nil {
					t.Errorf("Cluster.Close: %v", err)
				}
				return
			case <-time.After(time.Millisecond):
				clock.Advance(100 * time.Millisecond)
			}
		}
	})

	if eo.logger != nil {
		log = eo.logger
	}
	srv := externalgrpc.NewServer(e.cluster, externalgrpc.WithLogger(log), externalgrpc.WithRegisterer(e.reg),
		externalgrpc.WithCallTimeout(eo.callTimeout), externalgrpc.WithGate(eo.gate))
	gs := grpc.NewServer(srv.ServerOptions(eo.serverTLS)...)
	protos.RegisterCloudProviderServer(gs, srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = lis.Addr().String()
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(externalgrpc.DefaultLimits.Listener(lis))
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-served
	})
	e.client = e.dial(eo.clientTLS)
	return e
}

// armServer is a running server of the arm pool.
func armServer(name string) hcloudtest.ServerInfo {
	return hcloudtest.ServerInfo{Name: name, ServerType: "cax11", Location: "hel1", Status: hcloud.ServerStatusRunning,
		Labels: map[string]string{config.LabelNodeGroup: "arm", config.LabelCluster: clusterName}}
}

// dial connects a client, over TLS when cfg is set.
func (e *env) dial(cfg *tls.Config) protos.CloudProviderClient {
	e.t.Helper()
	creds := insecure.NewCredentials()
	if cfg != nil {
		creds = credentials.NewTLS(cfg)
	}
	conn, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = conn.Close() })
	return protos.NewCloudProviderClient(conn)
}

// ctx is the autoscaler's per-call deadline.
func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(e.t.Context(), 5*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

// eventually polls cond in wall-clock time, advancing the fake's clock by
// step before each poll (0: not at all), and fails after 10 s.
func (e *env) eventually(what string, step time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		if step > 0 {
			e.clock.Advance(step)
		}
		time.Sleep(time.Millisecond)
	}
}

// nodes calls NodeGroupNodes.
func (e *env) nodes(group string) []*protos.Instance {
	e.t.Helper()
	res, err := e.client.NodeGroupNodes(e.ctx(), &protos.NodeGroupNodesRequest{Id: group})
	if err != nil {
		e.t.Fatalf("NodeGroupNodes(%q): %v", group, err)
	}
	return res.GetInstances()
}

// targetSize calls NodeGroupTargetSize.
func (e *env) targetSize(group string) int32 {
	e.t.Helper()
	res, err := e.client.NodeGroupTargetSize(e.ctx(), &protos.NodeGroupTargetSizeRequest{Id: group})
	if err != nil {
		e.t.Fatalf("NodeGroupTargetSize(%q): %v", group, err)
	}
	return res.GetTargetSize()
}

// servers returns the fake's servers of a pool.
func (e *env) servers(pool string) []hcloudtest.ServerInfo {
	e.t.Helper()
	out, err := e.fake.Servers(config.LabelNodeGroup + "=" + pool)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// pki is a throwaway certificate authority with a server and a client
// certificate, written to files as a mounted Secret would hold them.
type pki struct {
	dir                   string
	ca                    *x509.Certificate
	caKey                 *ecdsa.PrivateKey
	caFile                string
	serverCert, serverKey string
	clientCert, clientKey string
	clientPair            tls.Certificate
	pool                  *x509.CertPool
	serial                int64
}

func newPKI(t testing.TB) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir(), serial: 1}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(p.serial),
		Subject:               pkix.Name{CommonName: "hcloudscale test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, err = x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p.caKey = key
	p.caFile = filepath.Join(p.dir, "ca.crt")
	writePEM(t, p.caFile, "CERTIFICATE", der)
	p.pool = x509.NewCertPool()
	p.pool.AddCert(p.ca)
	p.serverCert, p.serverKey = p.issue(t, "server", x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = p.issue(t, "client", x509.ExtKeyUsageClientAuth)
	p.clientPair, err = tls.LoadX509KeyPair(p.clientCert, p.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// issue signs a leaf certificate for 127.0.0.1, valid for an hour either
// side of now, and writes it and its key to <name>.crt and <name>.key; it
// returns the two paths.
func (p *pki) issue(t testing.TB, name string, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	now := time.Now()
	return p.write(t, name, p.sign(t, leafSpec{commonName: name, usage: usage, notBefore: now.Add(-time.Hour), notAfter: now.Add(time.Hour)}))
}

// leafSpec is what sign puts into a leaf certificate besides 127.0.0.1.
type leafSpec struct {
	commonName          string
	dnsNames, uris      []string
	usage               x509.ExtKeyUsage
	notBefore, notAfter time.Time
}

// sign issues a leaf certificate of the CA with a new key, as
// cert-manager renews with rotationPolicy Always.
func (p *pki) sign(t testing.TB, spec leafSpec) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      pkix.Name{CommonName: spec.commonName},
		NotBefore:    spec.notBefore,
		NotAfter:     spec.notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{spec.usage},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     spec.dnsNames,
	}
	for _, u := range spec.uris {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// write writes c and its key to <name>.crt and <name>.key and returns
// the two paths.
func (p *pki) write(t testing.TB, name string, c tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	keyDER, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", c.Certificate[0])
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// clientTLS is the autoscaler's side: it verifies the server against the
// CA and presents the client certificate when withCert is set.
func (p *pki) clientTLS(withCert bool) *tls.Config {
	cfg := &tls.Config{RootCAs: p.pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if withCert {
		cfg.Certificates = []tls.Certificate{p.clientPair}
	}
	return cfg
}
