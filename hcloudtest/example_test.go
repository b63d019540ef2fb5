package hcloudtest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// powerOnPool is the code under test: it powers on the servers of a pool
// that are off and waits until they run.
func powerOnPool(ctx context.Context, client *hcloud.Client, pool string) (int, error) {
	servers, err := client.Server.AllWithOpts(ctx, hcloud.ServerListOpts{
		ListOpts: hcloud.ListOpts{LabelSelector: "pool=" + pool},
		Status:   []hcloud.ServerStatus{hcloud.ServerStatusOff},
	})
	if err != nil {
		return 0, fmt.Errorf("list pool %s: %w", pool, err)
	}
	var actions []*hcloud.Action
	for _, srv := range servers {
		a, _, err := client.Server.Poweron(ctx, srv)
		if err != nil {
			return 0, fmt.Errorf("power on %s: %w", srv.Name, err)
		}
		actions = append(actions, a)
	}
	if err := client.Action.WaitFor(ctx, actions...); err != nil {
		return 0, fmt.Errorf("wait for power on: %w", err)
	}
	return len(actions), nil
}

// A test sets up the project directly, runs its code against the real
// client and checks the outcome and the API calls it cost.
func Example() {
	fake := hcloudtest.NewServer(hcloudtest.WithDefaultActionDuration(0))
	defer fake.Close()
	for _, s := range []hcloudtest.ServerInfo{
		{Name: "a-1", Status: hcloud.ServerStatusOff, Labels: map[string]string{"pool": "a"}},
		{Name: "a-2", Status: hcloud.ServerStatusRunning, Labels: map[string]string{"pool": "a"}},
		{Name: "b-1", Status: hcloud.ServerStatusOff, Labels: map[string]string{"pool": "b"}},
	} {
		if _, err := fake.AddServer(s); err != nil {
			fmt.Println(err)
			return
		}
	}

	n, err := powerOnPool(context.Background(), fake.Client(), "a")
	fmt.Println("powered on:", n, err)
	fmt.Println("poweron requests:", fake.Count("POST /servers/{id}/actions/poweron"))
	servers, _ := fake.Servers("")
	for _, s := range servers {
		fmt.Println(s.Name, s.Status)
	}
	// Output:
	// powered on: 1 <nil>
	// poweron requests: 1
	// a-1 running
	// a-2 running
	// b-1 off
}

// A lost response to a create, retried by hcloud-go, becomes a
// uniqueness_error although the server exists: code that names its
// servers deterministically can adopt it.
func ExampleServer_FailRequest() {
	fake := hcloudtest.NewServer()
	defer fake.Close()
	fake.FailRequest("POST /servers", 1, hcloudtest.RequestFault{Code: "timeout", AfterEffect: true})

	client := fake.Client()
	_, _, err := client.Server.Create(context.Background(), hcloud.ServerCreateOpts{
		Name:       "pool-a-1",
		ServerType: &hcloud.ServerType{Name: "cx23"},
		Image:      &hcloud.Image{Name: "ubuntu-24.04"},
	})
	fmt.Println(hcloud.IsError(err, hcloud.ErrorCodeUniquenessError))
	existing, _, _ := client.Server.GetByName(context.Background(), "pool-a-1")
	fmt.Println("exists:", existing != nil)
	fmt.Println("attempts:", fake.Count("POST /servers"))
	// Output:
	// true
	// exists: true
	// attempts: 2
}

// With a manual clock, actions finish exactly when the test says so.
func ExampleManualClock() {
	clock := hcloudtest.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fake := hcloudtest.NewServer(
		hcloudtest.WithClock(clock),
		hcloudtest.WithActionDuration("create_server", 30*time.Second),
		hcloudtest.WithActionDuration("start_server", 10*time.Second),
	)
	defer fake.Close()

	client := fake.Client()
	ctx := context.Background()
	res, _, err := client.Server.Create(ctx, hcloud.ServerCreateOpts{
		Name:       "slow",
		ServerType: &hcloud.ServerType{Name: "cax11"},
		Image:      &hcloud.Image{Name: "debian-12"},
		Location:   &hcloud.Location{Name: "hel1"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, step := range []time.Duration{0, 30 * time.Second, 10 * time.Second} {
		clock.Advance(step)
		srv, _, _ := client.Server.GetByID(ctx, res.Server.ID)
		fmt.Println(clock.Now().Format(time.TimeOnly), srv.Status)
	}
	// Output:
	// 00:00:00 initializing
	// 00:00:30 starting
	// 00:00:40 running
}
