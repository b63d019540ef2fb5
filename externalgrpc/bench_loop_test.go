package externalgrpc_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
)

// BenchmarkLoopGOMAXPROCS measures the server's CPU time for the calls
// one autoscaler loop makes at benchNodes nodes with the current core
// (NodeGroupForNode once and NodeGroupGetOptions four times per node,
// plus NodeGroups, NodeGroupTargetSize and NodeGroupNodes), over mutual
// TLS and one connection, as its externalgrpc client makes them: one
// server process with GOMAXPROCS=1 and one with the runtime's default,
// loops interleaved (ABBA) so that a busy machine weighs on both alike.
//
//	go test -run '^$' -bench LoopGOMAXPROCS -benchtime 6x ./externalgrpc/
//
// Each iteration is one loop against each server; the metrics are the
// medians of server CPU (user + system, from rusage) and of wall time
// per loop.
func BenchmarkLoopGOMAXPROCS(b *testing.B) {
	if testing.Short() {
		b.Skip("starts two server processes with 5,000 servers")
	}
	p := newPKI(b)
	fake, ids := benchFake(b)
	nodes := make([]*protos.ExternalGrpcNode, benchNodes)
	for i := range nodes {
		nodes[i] = benchNode(i, ids[i])
	}
	type variant struct {
		name   string
		srv    *benchServer
		client protos.CloudProviderClient
		cpu    []time.Duration
		wall   []time.Duration
	}
	variants := []*variant{{name: "gomaxprocs1"}, {name: "default"}}
	for _, v := range variants {
		var env []string
		if v.name == "gomaxprocs1" {
			env = []string{"GOMAXPROCS=1"}
		}
		v.srv = startBenchServer(b, fake, p.dir, false, env...)
		conn, err := grpc.NewClient(v.srv.addr, grpc.WithTransportCredentials(credentials.NewTLS(p.clientTLS(true))))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = conn.Close() })
		v.client = protos.NewCloudProviderClient(conn)
		if err := benchLoop(v.client, nodes[:200]); err != nil { // warm up
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		order := variants
		if i%2 == 1 {
			order = []*variant{variants[1], variants[0]}
		}
		for _, v := range order {
			cpu0, _ := v.srv.stats(b)
			start := time.Now()
			if err := benchLoop(v.client, nodes); err != nil {
				b.Fatal(err)
			}
			v.wall = append(v.wall, time.Since(start))
			cpu1, _ := v.srv.stats(b)
			v.cpu = append(v.cpu, cpu1-cpu0)
		}
		b.Logf("loop %d: server CPU %s with GOMAXPROCS=1, %s with the default (%.2f)", i+1,
			variants[0].cpu[i].Round(time.Millisecond), variants[1].cpu[i].Round(time.Millisecond),
			variants[0].cpu[i].Seconds()/variants[1].cpu[i].Seconds())
	}
	b.StopTimer()
	median := func(d []time.Duration) time.Duration { d = slices.Clone(d); slices.Sort(d); return d[len(d)/2] }
	for _, v := range variants {
		b.ReportMetric(float64(median(v.cpu).Milliseconds()), v.name+"-server-ms/loop")
		b.ReportMetric(float64(median(v.wall).Milliseconds()), v.name+"-wall-ms/loop")
	}
}

// benchLoop makes one loop's calls for nodes, each with its own 5 s
// timeout (the autoscaler's grpc_timeout).
func benchLoop(client protos.CloudProviderClient, nodes []*protos.ExternalGrpcNode) error {
	call := func(f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return f(ctx)
	}
	if err := call(func(ctx context.Context) error {
		_, err := client.NodeGroups(ctx, &protos.NodeGroupsRequest{})
		return err
	}); err != nil {
		return err
	}
	defaults := &protos.NodeGroupAutoscalingOptions{}
	for _, n := range nodes {
		if err := call(func(ctx context.Context) error {
			resp, err := client.NodeGroupForNode(ctx, &protos.NodeGroupForNodeRequest{Node: n})
			if err == nil && resp.GetNodeGroup().GetId() != "workers" {
				err = fmt.Errorf("node %s: group %q", n.GetName(), resp.GetNodeGroup().GetId())
			}
			return err
		}); err != nil {
			return err
		}
		for range 4 {
			err := call(func(ctx context.Context) error {
				_, err := client.NodeGroupGetOptions(ctx, &protos.NodeGroupAutoscalingOptionsRequest{Id: "workers", Defaults: defaults})
				return err
			})
			if status.Code(err) != codes.Unimplemented {
				return fmt.Errorf("NodeGroupGetOptions of a pool without options: %v", err)
			}
		}
	}
	return call(func(ctx context.Context) error {
		if _, err := client.NodeGroupTargetSize(ctx, &protos.NodeGroupTargetSizeRequest{Id: "workers"}); err != nil {
			return err
		}
		_, err := client.NodeGroupNodes(ctx, &protos.NodeGroupNodesRequest{Id: "workers"})
		return err
	})
}
