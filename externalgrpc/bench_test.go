package externalgrpc_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// The hot-call benchmarks measure what the autoscaler's externalgrpc client
// costs the server on every loop: NodeGroupForNode once per node and
// NodeGroupGetOptions twice per node, plus TargetSize and Nodes per
// group. The server runs in a child process (this test binary, started with
// benchServeEnv set), so that its CPU time and allocations are read from
// that process alone and the client's work is not counted.
//
//	go test -run '^$' -bench HotCalls -benchtime 3s ./externalgrpc/
//
// reports server-µs/call (user+system CPU of the server process) and
// server-allocs/call next to the client-side ns/op, for grpc-go's server
// with [externalgrpc.Server.ServerOptions], as serve runs it, over mutual
// TLS and in plaintext, and in plaintext with grpc-go's proto codec in
// place of the package's ("plaintext-protocodec"), which shows what the
// codec saves. With
// HCLOUDSCALE_BENCH_SERVE_CPUPROFILE=<file> the server process writes a CPU
// profile (of the last sub-benchmark's process) to that file, with
// HCLOUDSCALE_BENCH_SERVE_MEMPROFILE=<file> a profile of its allocations.

// benchServeEnv makes the test binary serve instead of testing; its value
// is the directory with the TLS material ("" in it means plaintext).
const benchServeEnv = "HCLOUDSCALE_BENCH_SERVE"

// benchNodes is the number of servers of the benchmarked pool.
const benchNodes = 5000

// benchServe runs the server side over the parent's fake project: a pool
// workers with benchNodes servers, a pool batch with autoscaling options, a
// Cluster and the gRPC server as serve builds it (with grpc-go's proto
// codec when benchServeEnv_PROTO_CODEC is set). It prints its address, then answers each
// line "stats" on stdin with "<cpu ns> <mallocs>" and exits when stdin
// closes.
func benchServe(tlsDir string) error {
	endpoint, token := os.Getenv(benchServeEnv+"_ENDPOINT"), os.Getenv(benchServeEnv+"_TOKEN")
	doc, err := json.Marshal(clusterConfig())
	if err != nil {
		return err
	}
	cfg, err := config.Load(config.MapEnv(map[string]string{
		config.EnvToken:         token,
		config.EnvEndpoint:      endpoint,
		config.EnvClusterConfig: base64.StdEncoding.EncodeToString(doc),
	}, nil), []string{"0:6000:cpx21:fsn1:workers", "0:3:cx23:nbg1:batch"})
	if err != nil {
		return err
	}
	ctx := context.Background()
	cluster, err := hcloudscale.New(ctx, cfg, hcloudscale.WithRegisterer(prometheus.NewRegistry()))
	if err != nil {
		return err
	}
	defer cluster.Close(ctx)
	if err := cluster.Refresh(ctx); err != nil {
		return err
	}
	if n := cluster.Pool("workers").TargetSize(); n != benchNodes {
		return fmt.Errorf("pool workers has %d servers, want %d", n, benchNodes)
	}

	srv := externalgrpc.NewServer(cluster, externalgrpc.WithRegisterer(prometheus.NewRegistry()))
	var serverTLS *tls.Config
	if tlsDir != "" {
		serverTLS, err = externalgrpc.ServerTLSConfig(filepath.Join(tlsDir, "server.crt"), filepath.Join(tlsDir, "server.key"), filepath.Join(tlsDir, "ca.crt"))
		if err != nil {
			return err
		}
	}
	opts := srv.ServerOptions(serverTLS)
	if os.Getenv(benchServeEnv+"_PROTO_CODEC") != "" {
		opts = append(opts, grpc.ForceServerCodecV2(encoding.GetCodecV2("proto")))
	}
	gs := grpc.NewServer(opts...)
	protos.RegisterCloudProviderServer(gs, srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = gs.Serve(externalgrpc.DefaultLimits.Listener(lis)) }()
	defer gs.Stop()
	if path := os.Getenv(benchServeEnv + "_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if path := os.Getenv(benchServeEnv + "_MEMPROFILE"); path != "" {
		runtime.MemProfileRate = 512
		defer func() {
			if f, err := os.Create(path); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				_ = f.Close()
			}
		}()
	}
	fmt.Println(lis.Addr().String())

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		runtime.GC()
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return err
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		fmt.Printf("%d %d\n", cpu.Nanoseconds(), ms.Mallocs)
	}
	return nil
}

// benchServer is the parent's handle on the child process.
type benchServer struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	addr   string
}

// startBenchServer starts the server process; env is added to the
// parent's environment less GOMAXPROCS.
func startBenchServer(b *testing.B, fake *hcloudtest.Server, tlsDir string, protoCodec bool, env ...string) *benchServer {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOMAXPROCS=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, env...), benchServeEnv+"="+tlsDir,
		benchServeEnv+"_ENDPOINT="+fake.URL(), benchServeEnv+"_TOKEN="+fake.Token())
	if protoCodec {
		cmd.Env = append(cmd.Env, benchServeEnv+"_PROTO_CODEC=1")
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	s := &benchServer{cmd: cmd, stdin: stdin, stdout: bufio.NewReader(stdout)}
	b.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	line, err := s.stdout.ReadString('\n')
	if err != nil {
		b.Fatalf("bench server did not start: %v", err)
	}
	s.addr = strings.TrimSpace(line)
	return s
}

// stats returns the server's CPU time and allocation count so far.
func (s *benchServer) stats(b *testing.B) (cpu time.Duration, mallocs uint64) {
	b.Helper()
	if _, err := io.WriteString(s.stdin, "stats\n"); err != nil {
		b.Fatal(err)
	}
	line, err := s.stdout.ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(line)
	if len(f) != 2 {
		b.Fatalf("bench server stats: %q", line)
	}
	ns, err1 := strconv.ParseInt(f[0], 10, 64)
	m, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("bench server stats: %q", line)
	}
	return time.Duration(ns), m
}

// benchFake is the fake project of the benchmark: benchNodes servers of
// pool workers, whose IDs it returns. The fake runs in the benchmark's
// process, so that its work is not counted as the server's.
func benchFake(b *testing.B) (*hcloudtest.Server, []int64) {
	fake := hcloudtest.NewServer()
	b.Cleanup(fake.Close)
	ids := make([]int64, benchNodes)
	for i := range ids {
		id, err := fake.AddServer(hcloudtest.ServerInfo{
			Name: fmt.Sprintf("workers-%06d", i), ServerType: "cpx21", Location: "fsn1", Status: hcloud.ServerStatusRunning,
			Labels: map[string]string{config.LabelNodeGroup: "workers", config.LabelCluster: clusterName},
		})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = id
	}
	return fake, ids
}

// benchNode is a node as the autoscaler's client sends it: provider ID,
// name, and the labels and annotations of a kubeadm node on Hetzner.
func benchNode(i int, id int64) *protos.ExternalGrpcNode {
	name := fmt.Sprintf("workers-%06d", i)
	return &protos.ExternalGrpcNode{
		ProviderID: fmt.Sprintf("hcloud://%d", id),
		Name:       name,
		Labels: map[string]string{
			"beta.kubernetes.io/arch":                  "amd64",
			"beta.kubernetes.io/os":                    "linux",
			"beta.kubernetes.io/instance-type":         "cpx21",
			"failure-domain.beta.kubernetes.io/region": "fsn1",
			"failure-domain.beta.kubernetes.io/zone":   "fsn1-dc14",
			"kubernetes.io/arch":                       "amd64",
			"kubernetes.io/hostname":                   name,
			"kubernetes.io/os":                         "linux",
			"node.kubernetes.io/instance-type":         "cpx21",
			"topology.kubernetes.io/region":            "fsn1",
			"topology.kubernetes.io/zone":              "fsn1-dc14",
			"csi.hetzner.cloud/location":               "fsn1",
			config.LabelNodeGroup:                      "workers",
			"role":                                     "worker",
		},
		Annotations: map[string]string{
			"kubeadm.alpha.kubernetes.io/cri-socket":                 "unix:///var/run/containerd/containerd.sock",
			"node.alpha.kubernetes.io/ttl":                           "0",
			"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			"alpha.kubernetes.io/provided-node-ip":                   "10.0.1.5",
		},
	}
}

func BenchmarkHotCalls(b *testing.B) {
	if testing.Short() {
		b.Skip("starts a server process with 5,000 servers")
	}
	p := newPKI(b)
	fake, ids := benchFake(b)
	for _, name := range []string{"mtls", "plaintext", "plaintext-protocodec"} {
		b.Run(name, func(b *testing.B) {
			tlsDir, creds := "", insecure.NewCredentials()
			if name == "mtls" {
				tlsDir, creds = p.dir, credentials.NewTLS(p.clientTLS(true))
			}
			srv := startBenchServer(b, fake, tlsDir, strings.HasSuffix(name, "-protocodec"))
			conn, err := grpc.NewClient(srv.addr, grpc.WithTransportCredentials(creds))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = conn.Close() })
			client := protos.NewCloudProviderClient(conn)
			nodes := make([]*protos.ExternalGrpcNode, 1000)
			for i := range nodes {
				j := i * (benchNodes / len(nodes))
				nodes[i] = benchNode(j, ids[j])
			}
			defaults := &protos.NodeGroupAutoscalingOptions{}
			calls := []struct {
				name string
				call func(ctx context.Context, i int) error
			}{
				{"NodeGroupForNode", func(ctx context.Context, i int) error {
					resp, err := client.NodeGroupForNode(ctx, &protos.NodeGroupForNodeRequest{Node: nodes[i%len(nodes)]})
					if err == nil && resp.GetNodeGroup().GetId() != "workers" {
						err = fmt.Errorf("node %s: group %q", nodes[i%len(nodes)].GetName(), resp.GetNodeGroup().GetId())
					}
					return err
				}},
				{"NodeGroupGetOptions-unset", func(ctx context.Context, _ int) error {
					_, err := client.NodeGroupGetOptions(ctx, &protos.NodeGroupAutoscalingOptionsRequest{Id: "workers", Defaults: defaults})
					if err == nil {
						err = fmt.Errorf("pool without options answered")
					} else if status.Code(err) == codes.Unimplemented {
						err = nil
					}
					return err
				}},
				{"NodeGroupGetOptions-set", func(ctx context.Context, _ int) error {
					_, err := client.NodeGroupGetOptions(ctx, &protos.NodeGroupAutoscalingOptionsRequest{Id: "batch", Defaults: defaults})
					return err
				}},
				{"NodeGroupTargetSize", func(ctx context.Context, _ int) error {
					resp, err := client.NodeGroupTargetSize(ctx, &protos.NodeGroupTargetSizeRequest{Id: "workers"})
					if err == nil && resp.GetTargetSize() != benchNodes {
						err = fmt.Errorf("target size %d", resp.GetTargetSize())
					}
					return err
				}},
				{"NodeGroupNodes", func(ctx context.Context, _ int) error {
					resp, err := client.NodeGroupNodes(ctx, &protos.NodeGroupNodesRequest{Id: "workers"})
					if err == nil && len(resp.GetInstances()) != benchNodes {
						err = fmt.Errorf("%d instances", len(resp.GetInstances()))
					}
					return err
				}},
			}
			for _, c := range calls {
				b.Run(c.name, func(b *testing.B) {
					// Each call with its own 5 s timeout, as the
					// autoscaler's client makes them (its grpc_timeout).
					call := func(i int) error {
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						defer cancel()
						return c.call(ctx, i)
					}
					for i := range 200 { // warm the connection and the server's caches
						if err := call(i); err != nil {
							b.Fatal(err)
						}
					}
					cpu0, m0 := srv.stats(b)
					b.ResetTimer()
					for i := range b.N {
						if err := call(i); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					cpu1, m1 := srv.stats(b)
					b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "server-µs/call")
					b.ReportMetric(float64(m1-m0)/float64(b.N), "server-allocs/call")
				})
			}
		})
	}
}
