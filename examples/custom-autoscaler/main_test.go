package main

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestDesired(t *testing.T) {
	for _, c := range []struct {
		name                          string
		queue, perNode, minSize, maxN int
		want                          int
	}{
		{"empty queue keeps the minimum", 0, 10, 1, 5, 1},
		{"empty queue, min zero", 0, 10, 0, 5, 0},
		{"one job needs a server", 1, 10, 0, 5, 1},
		{"a full server", 10, 10, 0, 5, 1},
		{"one job more rounds up", 11, 10, 0, 5, 2},
		{"capped at max", 1000, 10, 0, 5, 5},
	} {
		if got := Desired(c.queue, c.perNode, c.minSize, c.maxN); got != c.want {
			t.Errorf("%s: Desired(%d, %d, %d, %d) = %d; want %d", c.name, c.queue, c.perNode, c.minSize, c.maxN, got, c.want)
		}
	}
}

func TestHTTPQueue(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			_, _ = w.Write([]byte("17\n"))
		case "/garbage":
			_, _ = w.Write([]byte("lots"))
		default:
			http.Error(w, "no", http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	for _, c := range []struct {
		path    string
		want    int
		wantErr bool
	}{
		{"/ok", 17, false},
		{"/garbage", 0, true},
		{"/broken", 0, true},
	} {
		got, err := httpQueue(srv.URL + c.path)(context.Background())
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("httpQueue(%s) = %d, %v; want %d, error %v", c.path, got, err, c.want, c.wantErr)
		}
	}
}

// TestAutoscalerConverges runs the loop against the fake API and moves the
// queue: the pool follows it up to its max and back down to its min.
func TestAutoscalerConverges(t *testing.T) {
	api := hcloudtest.NewServer(hcloudtest.WithDefaultActionDuration(0))
	defer api.Close()
	doc := `{"nodeConfigs": {"workers": {"cloudInit": "#cloud-config\n"}}}`
	cfg, err := config.Load(config.MapEnv(map[string]string{
		config.EnvToken:         api.Token(),
		config.EnvEndpoint:      api.URL(),
		config.EnvClusterConfig: base64.StdEncoding.EncodeToString([]byte(doc)),
	}, nil), []string{"1:5:cpx31:fsn1:workers"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := hcloudscale.New(ctx, cfg,
		hcloudscale.WithPollInterval(5*time.Millisecond),
		hcloudscale.WithClientOptions(hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond), MaxRetries: 3})),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()

	var queue atomic.Int64
	a := &autoscaler{
		cluster:  c,
		pool:     c.Pool("workers"),
		queue:    func(context.Context) (int, error) { return int(queue.Load()), nil },
		perNode:  10,
		interval: 10 * time.Millisecond,
		log:      zaptest.NewLogger(t),
	}
	done := make(chan error, 1)
	go func() { done <- a.loop(ctx) }()

	for _, step := range []struct {
		queue int64
		want  int
	}{
		{25, 3},   // ceil(25/10)
		{1000, 5}, // max
		{0, 1},    // min
	} {
		queue.Store(step.queue)
		deadline := time.Now().Add(10 * time.Second)
		for {
			servers, err := api.Servers(config.LabelNodeGroup + "=workers")
			if err != nil {
				t.Fatal(err)
			}
			running := 0
			for _, s := range servers {
				if s.Status == hcloud.ServerStatusRunning {
					running++
				}
			}
			st := a.pool.Status()
			if len(servers) == step.want && running == step.want && st.Running == step.want && st.Target == step.want && st.Deleting == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("queue %d: the project has %d servers (%d running), the pool %+v; want %d running", step.queue, len(servers), running, st, step.want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("loop ended with %v, want context.Canceled", err)
	}
}
