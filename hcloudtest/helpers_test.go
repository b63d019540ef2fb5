package hcloudtest_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"go.uber.org/goleak"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// TestMain fails the package if any goroutine outlives the tests: every
// server must be closed and Close must leave nothing behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// epoch is the manual clock's start in every test.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newFake starts a fake with a manual clock and returns it with a client.
func newFake(t *testing.T, opts ...hcloudtest.Option) (*hcloudtest.Server, *hcloud.Client, *hcloudtest.ManualClock) {
	t.Helper()
	clock := hcloudtest.NewManualClock(epoch)
	s := hcloudtest.NewServer(append([]hcloudtest.Option{hcloudtest.WithClock(clock)}, opts...)...)
	t.Cleanup(s.Close)
	return s, s.Client(), clock
}

// waitFor runs client.Action.WaitFor while advancing the manual clock in
// steps, as time would pass for a real client.
func waitFor(t *testing.T, client *hcloud.Client, clock *hcloudtest.ManualClock, actions ...*hcloud.Action) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- client.Action.WaitFor(ctx, actions...) }()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			clock.Advance(250 * time.Millisecond)
		}
	}
}

func mustCreate(t *testing.T, client *hcloud.Client, opts hcloud.ServerCreateOpts) hcloud.ServerCreateResult {
	t.Helper()
	res, _, err := client.Server.Create(t.Context(), opts)
	if err != nil {
		t.Fatalf("Server.Create(%q) error: %v", opts.Name, err)
	}
	return res
}

func basicCreateOpts(name string, labels map[string]string) hcloud.ServerCreateOpts {
	return hcloud.ServerCreateOpts{
		Name:       name,
		ServerType: &hcloud.ServerType{Name: "cx23"},
		Image:      &hcloud.Image{Name: "ubuntu-24.04"},
		Location:   &hcloud.Location{Name: "fsn1"},
		Labels:     labels,
	}
}

func ptr[T any](v T) *T { return &v }

func readAll(t *testing.T, resp *hcloud.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// getRaw sends GET path with the server's token and returns the body; it
// fails the test on any status but 200.
func getRaw(t *testing.T, s *hcloudtest.Server, path string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.Token())
	req.Close = true // no idle connection outlives the test
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", path, resp.StatusCode, b)
	}
	return string(b)
}
