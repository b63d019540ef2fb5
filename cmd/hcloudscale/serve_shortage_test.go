package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/externalgrpc/protos"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// serve starts although one pool's server type is sold out: it warns,
// serves the other pools and fails fast on the sold-out one.
func TestServeStartsInShortage(t *testing.T) {
	fake := hcloudtest.NewServer(hcloudtest.WithDefaultActionDuration(50 * time.Millisecond))
	t.Cleanup(fake.Close)
	if err := fake.SetServerTypeAvailable("cax21", "nbg1", false); err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(map[string]any{
		"nodeConfigs": map[string]any{
			"workers": map[string]any{"cloudInit": "#cloud-config\n"},
			"arm":     map[string]any{"cloudInit": "#cloud-config\n"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	env := config.MapEnv(map[string]string{
		config.EnvToken:         fake.Token(),
		config.EnvEndpoint:      fake.URL(),
		config.EnvClusterConfig: base64.StdEncoding.EncodeToString(doc),
	}, nil)
	args := []string{"--nodes", "0:3:cx23:fsn1:workers", "--nodes", "0:3:cax21:nbg1:arm",
		"--listen", "127.0.0.1:0", "--metrics-listen", "", "--shutdown-timeout", "30s"}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stderr := &syncBuffer{}
	exited := make(chan int, 1)
	go func() { exited <- runServe(ctx, args, io.Discard, stderr, env) }()
	serving := waitForLog(t, stderr, exited, "serving")
	if want := `--nodes[1] (arm): server type \"cax21\" is not available in location \"nbg1\" (sold out)`; !strings.Contains(stderr.String(), want) {
		t.Errorf("serve logged no warning containing %s; stderr:\n%s", want, stderr.String())
	}

	conn, err := grpc.NewClient(serving["listen"].(string), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	provider := protos.NewCloudProviderClient(conn)
	callCtx, callCancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer callCancel()

	groups, err := provider.NodeGroups(callCtx, &protos.NodeGroupsRequest{})
	if err != nil || len(groups.GetNodeGroups()) != 2 {
		t.Fatalf("NodeGroups = %v, %v; want both groups", groups.GetNodeGroups(), err)
	}
	before := len(fake.Requests())
	_, err = provider.NodeGroupIncreaseSize(callCtx, &protos.NodeGroupIncreaseSizeRequest{Id: "arm", Delta: 1})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("NodeGroupIncreaseSize of the sold-out pool: %v; want ResourceExhausted", err)
	}
	if n := len(fake.Requests()) - before; n != 0 {
		t.Errorf("the refused increase made %d API requests; want none", n)
	}
	if _, err := provider.NodeGroupIncreaseSize(callCtx, &protos.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 1}); err != nil {
		t.Errorf("NodeGroupIncreaseSize of the other pool: %v", err)
	}
	size, err := provider.NodeGroupTargetSize(callCtx, &protos.NodeGroupTargetSizeRequest{Id: "workers"})
	if err != nil || size.GetTargetSize() != 1 {
		t.Errorf("NodeGroupTargetSize(workers) = %v, %v; want 1", size.GetTargetSize(), err)
	}

	cancel()
	select {
	case code := <-exited:
		if code != exitOK {
			t.Fatalf("runServe after cancellation = %d; want 0; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("runServe did not return after cancellation")
	}
}
