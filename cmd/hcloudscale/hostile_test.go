package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// The hostile-client test runs attacks on serve's --listen address
// against the real binary, one fresh process per attack, in plaintext and
// over mutual TLS (the attacker holds a client certificate, the worst
// case). For each it checks that the process lives, that its resident
// memory (VmRSS in /proc/<pid>/status, what a pod's memory limit sees)
// grows by at most hostileRSSBound over its idle size, and that a
// well-behaved client, connected before the attack, gets every answer
// within the autoscaler's 5 s deadline.
//
//	go test -run TestServeHostileClients -v ./cmd/hcloudscale/
//
// HCLOUDSCALE_HOSTILE_SERVE=<binary> runs another build of hcloudscale
// instead of building this one, and HCLOUDSCALE_HOSTILE_SERVE_ARGS adds
// arguments to serve's, to measure older servers with the same attacks.
const (
	// hostileRSSBound is the growth of the server's resident memory
	// over its idle size that fails an attack.
	hostileRSSBound = 64 << 20
	// hostileRSSAbort ends an attack early, so that a server without
	// limits does not take the machine's memory.
	hostileRSSAbort = 512 << 20
	// hostileAttackTime bounds each attack.
	hostileAttackTime = 2 * time.Second
	// hostileServers is the size of the pool, which makes a
	// NodeGroupNodes answer about 60 KB.
	hostileServers = 2000
)

// attack is one hostile client. It runs until ctx ends and keeps within
// the counts it states.
type attack struct {
	name string
	run  func(ctx context.Context, a *attacker) error
}

func hostileAttacks() []attack {
	return []attack{
		{"held request bodies", attackHeldBodies},
		{"client never reads", attackNeverReads},
		{"zero window", attackZeroWindow},
		{"rapid reset", attackRapidReset},
		{"PING flood", attackPingFlood},
		{"SETTINGS flood", attackSettingsFlood},
		{"CONTINUATION flood", attackContinuationFlood},
		{"idle and half-open connections", attackIdleConns},
		{"oversized messages", attackOversized},
	}
}

func TestServeHostileClients(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the serve binary")
	}
	bin := hostileServeBinary(t)
	fake := hcloudtest.NewServer()
	t.Cleanup(fake.Close)
	for i := range hostileServers {
		if _, err := fake.AddServer(hcloudtest.ServerInfo{
			Name: fmt.Sprintf("workers-%06d", i), ServerType: "cpx21", Location: "fsn1", Status: hcloud.ServerStatusRunning,
			Labels: map[string]string{config.LabelNodeGroup: "workers"},
		}); err != nil {
			t.Fatal(err)
		}
	}
	p := newTestPKI(t)
	for _, mtls := range []bool{false, true} {
		name := "plaintext"
		if mtls {
			name = "mutual TLS"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, a := range hostileAttacks() {
				t.Run(a.name, func(t *testing.T) { runAttack(t, bin, fake, p, mtls, a) })
			}
		})
	}
}

// hostileServeBinary builds hcloudscale into a temporary directory, or
// returns $HCLOUDSCALE_HOSTILE_SERVE.
func hostileServeBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("HCLOUDSCALE_HOSTILE_SERVE"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "hcloudscale")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// servedProcess is a serve process under attack.
type servedProcess struct {
	cmd    *exec.Cmd
	addr   string
	exited chan struct{}
	err    error // Wait's, once exited is closed
	stderr *syncBuffer
}

func startServed(t *testing.T, bin string, fake *hcloudtest.Server, p *testPKI, mtls bool) *servedProcess {
	t.Helper()
	doc, err := json.Marshal(map[string]any{
		"nodeConfigs": map[string]any{"workers": map[string]any{"cloudInit": "#cloud-config\n"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"serve", "--nodes", fmt.Sprintf("0:%d:cpx21:fsn1:workers", 2*hostileServers), "--listen", "127.0.0.1:0",
		"--metrics-listen", "", "--list-ttl", "90s", "--log-level", "info"}
	if mtls {
		args = append(args, "--tls-cert", p.serverCert, "--tls-key", p.serverKey, "--tls-client-ca", p.caFile)
	}
	args = append(args, strings.Fields(os.Getenv("HCLOUDSCALE_HOSTILE_SERVE_ARGS"))...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(),
		config.EnvToken+"="+fake.Token(),
		config.EnvEndpoint+"="+fake.URL(),
		config.EnvClusterConfig+"="+base64.StdEncoding.EncodeToString(doc))
	sp := &servedProcess{cmd: cmd, exited: make(chan struct{}), stderr: &syncBuffer{}}
	cmd.Stderr = sp.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sp.err = cmd.Wait()
		close(sp.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-sp.exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-sp.exited
		}
	})
	// Start-up checks the configuration against the fake, which shares
	// the machine with the rest of the test suite: it is not what is
	// measured, so it gets time.
	deadline := time.Now().Add(30 * time.Second)
	for sp.addr == "" {
		sc := bufio.NewScanner(strings.NewReader(sp.stderr.String()))
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "serving" {
				sp.addr, _ = line["listen"].(string)
			}
		}
		select {
		case <-sp.exited:
			t.Fatalf("serve exited before serving (%v); stderr:\n%s", sp.err, sp.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start; stderr:\n%s", sp.stderr.String())
		}
	}
	return sp
}

// rss is the process's resident memory.
func (sp *servedProcess) rss() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", sp.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

func runAttack(t *testing.T, bin string, fake *hcloudtest.Server, p *testPKI, mtls bool, at attack) {
	sp := startServed(t, bin, fake, p, mtls)
	creds := insecure.NewCredentials()
	var clientTLS *tls.Config
	if mtls {
		clientTLS = &tls.Config{RootCAs: p.roots, Certificates: []tls.Certificate{p.client}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
		creds = credentials.NewTLS(clientTLS)
	}
	conn, err := grpc.NewClient(sp.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := protos.NewCloudProviderClient(conn)
	callWithin := func(d time.Duration) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(t.Context(), d)
		defer cancel()
		start := time.Now()
		res, err := client.NodeGroupTargetSize(ctx, &protos.NodeGroupTargetSizeRequest{Id: "workers"})
		if err == nil && res.GetTargetSize() != hostileServers {
			err = fmt.Errorf("target size %d; want %d", res.GetTargetSize(), hostileServers)
		}
		return time.Since(start), err
	}
	// The autoscaler's deadline.
	call := func() (time.Duration, error) { return callWithin(5 * time.Second) }
	// The first call connects and lists the servers; it is not measured.
	if _, err := callWithin(20 * time.Second); err != nil {
		t.Fatalf("before the attack: %v", err)
	}
	for range 20 {
		if _, err := call(); err != nil {
			t.Fatalf("before the attack: %v", err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	base, err := sp.rss()
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), hostileAttackTime)
	defer cancel()
	var peak atomic.Int64
	peak.Store(base)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		stop := time.After(hostileAttackTime + 300*time.Millisecond)
		for {
			select {
			case <-tick.C:
			case <-stop:
				return
			case <-sp.exited:
				return
			}
			if r, err := sp.rss(); err == nil && r > peak.Load() {
				peak.Store(r)
				if r-base > hostileRSSAbort {
					cancel()
				}
			}
		}
	}()
	a := &attacker{addr: sp.addr, tls: clientTLS}
	attacked := make(chan error, 1)
	go func() { attacked <- at.run(ctx, a) }()

	var calls, failed int
	var slowest time.Duration
	for ctx.Err() == nil {
		took, err := call()
		calls++
		slowest = max(slowest, took)
		if err != nil {
			failed++
			if failed <= 3 {
				t.Errorf("well-behaved client during the attack: %v after %v", err, took.Round(time.Millisecond))
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	attackErr := <-attacked
	<-sampled
	a.closeAll()
	if _, err := call(); err != nil {
		t.Errorf("well-behaved client after the attack: %v", err)
	}
	select {
	case <-sp.exited:
		t.Fatalf("serve exited during the attack (%v); stderr:\n%s", sp.err, sp.stderr.String())
	default:
	}
	growth := peak.Load() - base
	t.Logf("%s: VmRSS %d MiB idle, peak +%d MiB; well-behaved client %d calls, %d failed, slowest %v; attacker: %s (%v)",
		at.name, base>>20, growth>>20, calls, failed, slowest.Round(time.Millisecond), a.stats(), attackErr)
	if growth > hostileRSSBound {
		t.Errorf("%s: the server's VmRSS grew by %d MiB (from %d MiB); want at most %d MiB", at.name, growth>>20, base>>20, hostileRSSBound>>20)
	}
}

// attacker dials the server and keeps the connections it opens, to
// close them after the attack.
type attacker struct {
	addr string
	tls  *tls.Config // nil: plaintext

	mu    sync.Mutex
	conns []net.Conn
	// counters of what was done, for the log
	dialed, refused, streams, frames atomic.Int64
}

func (a *attacker) stats() string {
	return fmt.Sprintf("%d connections (%d not accepted), %d streams, %d frames", a.dialed.Load(), a.refused.Load(), a.streams.Load(), a.frames.Load())
}

// dialTCP opens a TCP connection that stays open until the attack ends.
func (a *attacker) dialTCP(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", a.addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl.Add(time.Second))
	}
	a.mu.Lock()
	a.conns = append(a.conns, c)
	a.mu.Unlock()
	a.dialed.Add(1)
	return c, nil
}

// dialH2 opens a connection and sends the HTTP/2 preface and settings.
// A connection the server does not take within a second (beyond its
// connection limit) counts as refused.
func (a *attacker) dialH2(ctx context.Context, settings ...http2.Setting) (*h2conn, error) {
	c, err := a.dialTCP(ctx)
	if err != nil {
		return nil, err
	}
	hctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if a.tls != nil {
		cfg := a.tls.Clone()
		cfg.NextProtos = []string{"h2"}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(hctx); err != nil {
			a.refused.Add(1)
			return nil, err
		}
		c = tc
	}
	h := &h2conn{a: a, c: c, fr: http2.NewFramer(c, c), connWin: 65535, initWin: 65535, win: map[uint32]int64{}, gone: map[uint32]bool{}, next: 1}
	h.cond = sync.NewCond(&h.mu)
	h.enc = hpack.NewEncoder(&h.hbuf)
	h.scheme = "http"
	if a.tls != nil {
		h.scheme = "https"
	}
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		return nil, err
	}
	if err := h.fr.WriteSettings(settings...); err != nil {
		return nil, err
	}
	return h, nil
}

func (a *attacker) closeAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.conns {
		_ = c.Close()
	}
}

// h2conn is one attacking HTTP/2 connection. Its sends keep to the
// server's flow-control windows when read runs; without it, to the
// initial connection window.
type h2conn struct {
	a      *attacker
	c      net.Conn
	fr     *http2.Framer
	wmu    sync.Mutex // guards writes on fr, enc and hbuf
	enc    *hpack.Encoder
	hbuf   bytes.Buffer
	scheme string

	mu      sync.Mutex // guards the fields below
	cond    *sync.Cond
	connWin int64
	initWin int64
	win     map[uint32]int64
	gone    map[uint32]bool // reset by the server
	closed  bool
	next    uint32
}

// read reads the server's frames until the connection ends, keeping the
// windows, acknowledging settings and, with ackPings, pings.
func (h *h2conn) read(ackPings bool) {
	defer func() {
		h.mu.Lock()
		h.closed = true
		h.cond.Broadcast()
		h.mu.Unlock()
	}()
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			h.mu.Lock()
			if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
				for id := range h.win {
					h.win[id] += int64(v) - h.initWin
				}
				h.initWin = int64(v)
			}
			h.mu.Unlock()
			h.wmu.Lock()
			err = h.fr.WriteSettingsAck()
			h.wmu.Unlock()
		case *http2.WindowUpdateFrame:
			h.mu.Lock()
			if f.StreamID == 0 {
				h.connWin += int64(f.Increment)
			} else {
				h.win[f.StreamID] += int64(f.Increment)
			}
			h.mu.Unlock()
		case *http2.RSTStreamFrame:
			h.mu.Lock()
			h.gone[f.StreamID] = true
			h.mu.Unlock()
		case *http2.PingFrame:
			if ackPings && !f.IsAck() {
				h.wmu.Lock()
				err = h.fr.WritePing(true, f.Data)
				h.wmu.Unlock()
			}
		case *http2.GoAwayFrame:
			return
		}
		if err != nil {
			return
		}
		h.mu.Lock()
		h.cond.Broadcast()
		h.mu.Unlock()
	}
}

// headerBlock encodes a request's headers to the gRPC method, plus extra.
func (h *h2conn) headerBlock(method string, extra ...hpack.HeaderField) []byte {
	h.hbuf.Reset()
	for _, f := range append([]hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: h.scheme},
		{Name: ":path", Value: "/" + protos.CloudProvider_ServiceDesc.ServiceName + "/" + method},
		{Name: ":authority", Value: h.a.addr}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	}, extra...) {
		_ = h.enc.WriteField(f)
	}
	return bytes.Clone(h.hbuf.Bytes())
}

// open starts a stream with the request headers of method.
func (h *h2conn) open(method string, endStream bool) (uint32, error) {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	h.mu.Lock()
	id := h.next
	h.next += 2
	h.win[id] = h.initWin
	h.mu.Unlock()
	h.a.streams.Add(1)
	h.a.frames.Add(1)
	return id, h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.headerBlock(method), EndHeaders: true, EndStream: endStream})
}

// take reserves up to n bytes of the windows of stream id; 0 when none
// is open (or the stream is gone).
func (h *h2conn) take(id uint32, n int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone[id] || h.closed {
		return 0
	}
	n = int(min(int64(n), h.connWin, h.win[id]))
	if n <= 0 {
		return 0
	}
	h.connWin -= int64(n)
	h.win[id] -= int64(n)
	return n
}

// wait waits for a window update, the connection's end or ctx, at most
// d.
func (h *h2conn) wait(ctx context.Context, d time.Duration) {
	t := time.AfterFunc(d, func() {
		h.mu.Lock()
		h.cond.Broadcast()
		h.mu.Unlock()
	})
	defer t.Stop()
	stop := context.AfterFunc(ctx, func() {
		h.mu.Lock()
		h.cond.Broadcast()
		h.mu.Unlock()
	})
	defer stop()
	h.mu.Lock()
	if !h.closed && ctx.Err() == nil {
		h.cond.Wait()
	}
	h.mu.Unlock()
}

func (h *h2conn) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// send writes b on stream id as the windows allow, ending the stream
// after it with end; it gives up when ctx ends or the stream or the
// connection does.
func (h *h2conn) send(ctx context.Context, id uint32, b []byte, end bool) error {
	for len(b) > 0 || end {
		n := h.take(id, min(len(b), 16<<10))
		if n == 0 && len(b) > 0 {
			h.mu.Lock()
			stop := h.gone[id] || h.closed
			h.mu.Unlock()
			if stop || ctx.Err() != nil {
				return errors.New("stream or connection ended")
			}
			h.wait(ctx, 50*time.Millisecond)
			continue
		}
		last := end && n == len(b)
		h.wmu.Lock()
		err := h.fr.WriteData(id, last, b[:n])
		h.wmu.Unlock()
		h.a.frames.Add(1)
		if err != nil {
			return err
		}
		b = b[n:]
		if last {
			return nil
		}
	}
	return nil
}

// grpcMessage frames msg as a gRPC message.
func grpcMessage(msg proto.Message) []byte {
	b, err := proto.Marshal(msg)
	if err != nil {
		panic(err)
	}
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b))), b...)
}

// grpcPrefix is a gRPC message prefix announcing n bytes.
func grpcPrefix(n int) []byte {
	return binary.BigEndian.AppendUint32([]byte{0}, uint32(n))
}

// attackHeldBodies opens 100 streams on one connection, each announcing a
// message of just under 1 MiB, and sends the bodies but the last byte as
// the windows allow, holding them open.
func attackHeldBodies(ctx context.Context, a *attacker) error {
	h, err := a.dialH2(ctx)
	if err != nil {
		return err
	}
	go h.read(true)
	const size = 1<<20 - 64
	body := append(grpcPrefix(size), make([]byte, size-1)...)
	sent := map[uint32]int{}
	var ids []uint32
	for range 100 {
		id, err := h.open("NodeGroupForNode", false)
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	for ctx.Err() == nil && !h.isClosed() {
		progress := false
		for _, id := range ids {
			if sent[id] == len(body) {
				continue
			}
			n := h.take(id, min(len(body)-sent[id], 16<<10))
			if n == 0 {
				continue
			}
			h.wmu.Lock()
			err := h.fr.WriteData(id, false, body[sent[id]:sent[id]+n])
			h.wmu.Unlock()
			a.frames.Add(1)
			if err != nil {
				return err
			}
			sent[id] += n
			progress = true
		}
		if !progress {
			h.wait(ctx, 50*time.Millisecond)
		}
	}
	<-ctx.Done()
	return nil
}

// nodesRequests sends complete NodeGroupNodes requests, whose answers are
// about 60 KB, on h, at most max of them or as far as the connection
// window allows.
func nodesRequests(ctx context.Context, h *h2conn, max int) error {
	msg := grpcMessage(&protos.NodeGroupNodesRequest{Id: "workers"})
	for range max {
		if ctx.Err() != nil {
			return nil
		}
		id, err := h.open("NodeGroupNodes", false)
		if err != nil {
			return err
		}
		if h.take(id, len(msg)) < len(msg) {
			return nil // the connection window is spent
		}
		h.wmu.Lock()
		err = h.fr.WriteData(id, true, msg)
		h.wmu.Unlock()
		h.a.frames.Add(1)
		if err != nil {
			return err
		}
	}
	return nil
}

// attackNeverReads sends requests for large answers on four connections
// and never reads a byte: up to 4,000 requests per connection, as far as
// the initial connection window allows.
func attackNeverReads(ctx context.Context, a *attacker) error {
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if h, err := a.dialH2(ctx); err == nil {
				_ = nodesRequests(ctx, h, 4000)
			}
		})
	}
	wg.Wait()
	<-ctx.Done()
	return nil
}

// attackZeroWindow sets a stream window of 0, so that no answer can be
// sent, and sends up to 20,000 requests for large answers on one
// connection, reading and answering everything else.
func attackZeroWindow(ctx context.Context, a *attacker) error {
	h, err := a.dialH2(ctx, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	if err != nil {
		return err
	}
	go h.read(true)
	msg := grpcMessage(&protos.NodeGroupNodesRequest{Id: "workers"})
	for range 20000 {
		if ctx.Err() != nil || h.isClosed() {
			break
		}
		id, err := h.open("NodeGroupNodes", false)
		if err != nil {
			return err
		}
		if err := h.send(ctx, id, msg, true); err != nil && h.isClosed() {
			break
		}
	}
	<-ctx.Done()
	return nil
}

// attackRapidReset sends up to 50,000 requests for large answers on one
// connection, each cancelled right after it is sent.
func attackRapidReset(ctx context.Context, a *attacker) error {
	h, err := a.dialH2(ctx)
	if err != nil {
		return err
	}
	go h.read(true)
	msg := grpcMessage(&protos.NodeGroupNodesRequest{Id: "workers"})
	for range 50000 {
		if ctx.Err() != nil || h.isClosed() {
			break
		}
		id, err := h.open("NodeGroupNodes", false)
		if err != nil {
			return err
		}
		if err := h.send(ctx, id, msg, true); err != nil {
			continue
		}
		h.wmu.Lock()
		err = h.fr.WriteRSTStream(id, http2.ErrCodeCancel)
		h.wmu.Unlock()
		a.frames.Add(1)
		if err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

// attackPingFlood sends PINGs as fast as the connection takes them, on up
// to 50 connections one after the other, up to 100,000 on each.
func attackPingFlood(ctx context.Context, a *attacker) error {
	for range 50 {
		if ctx.Err() != nil {
			break
		}
		h, err := a.dialH2(ctx)
		if err != nil {
			continue
		}
		go h.read(false)
		for i := range 100000 {
			if ctx.Err() != nil || h.isClosed() {
				break
			}
			h.wmu.Lock()
			err = h.fr.WritePing(false, [8]byte{byte(i), byte(i >> 8), byte(i >> 16)})
			h.wmu.Unlock()
			a.frames.Add(1)
			if err != nil {
				break
			}
		}
	}
	<-ctx.Done()
	return nil
}

// attackSettingsFlood sends SETTINGS frames on two connections that never
// read, up to 200,000 on each.
func attackSettingsFlood(ctx context.Context, a *attacker) error {
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			h, err := a.dialH2(ctx)
			if err != nil {
				return
			}
			for i := range 200000 {
				if ctx.Err() != nil {
					return
				}
				if err := h.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65535 + uint32(i%2)},
					http2.Setting{ID: http2.SettingMaxFrameSize, Val: 16384}); err != nil {
					return
				}
				a.frames.Add(1)
			}
		})
	}
	wg.Wait()
	<-ctx.Done()
	return nil
}

// attackContinuationFlood opens streams whose header blocks are 1 MiB of
// CONTINUATION frames, and keeps them open; when the server ends the
// connection it opens another, up to 20 connections and 300 streams each.
func attackContinuationFlood(ctx context.Context, a *attacker) error {
	pad := strings.Repeat("x", 4<<10)
	for range 20 {
		if ctx.Err() != nil {
			break
		}
		h, err := a.dialH2(ctx)
		if err != nil {
			continue
		}
		go h.read(true)
		for s := range 300 {
			if ctx.Err() != nil || h.isClosed() {
				break
			}
			var extra []hpack.HeaderField
			for i := range 256 {
				extra = append(extra, hpack.HeaderField{Name: fmt.Sprintf("x-pad-%d-%d", s, i), Value: pad, Sensitive: true})
			}
			h.wmu.Lock()
			block := h.headerBlock("NodeGroupForNode", extra...)
			h.mu.Lock()
			id := h.next
			h.next += 2
			h.mu.Unlock()
			err = h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:16<<10]})
			for rest := block[16<<10:]; err == nil && len(rest) > 0; {
				n := min(len(rest), 16<<10)
				err = h.fr.WriteContinuation(id, n == len(rest), rest[:n])
				rest = rest[n:]
				a.frames.Add(1)
			}
			h.wmu.Unlock()
			a.streams.Add(1)
			if err != nil {
				break
			}
		}
	}
	<-ctx.Done()
	return nil
}

// attackIdleConns opens 1,000 connections at once: half send nothing
// (half-open), half send the HTTP/2 preface and settings and then nothing.
func attackIdleConns(ctx context.Context, a *attacker) error {
	var wg sync.WaitGroup
	for i := range 1000 {
		wg.Go(func() {
			if i%2 == 0 {
				_, _ = a.dialTCP(ctx)
				return
			}
			_, _ = a.dialH2(ctx)
		})
	}
	wg.Wait()
	<-ctx.Done()
	return nil
}

// attackOversized sends 30 requests at once on one connection, each
// announcing a message of 4 MiB less a byte (grpc-go's default limit) and
// sending all of it.
func attackOversized(ctx context.Context, a *attacker) error {
	h, err := a.dialH2(ctx)
	if err != nil {
		return err
	}
	go h.read(true)
	const size = 4<<20 - 1
	body := append(grpcPrefix(size), make([]byte, size)...)
	var wg sync.WaitGroup
	for range 30 {
		id, err := h.open("PricingPodPrice", false)
		if err != nil {
			return err
		}
		wg.Go(func() { _ = h.send(ctx, id, body, true) })
	}
	wg.Wait()
	<-ctx.Done()
	return nil
}
