package hcloudtest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// TestPrimaryIPsUnderRandomInterleavings runs clients that create and
// delete servers and Primary IPs, power servers off and move IPs between
// them, all at once, and checks between rounds what must always hold:
//
//   - a Primary IP's assignee exists and names that IP as its IPv4 or
//     IPv6, and a server's IPv4 and IPv6 are IPs assigned to it (no IP is
//     on two servers, none points at a deleted one);
//   - once every server is gone, no IP is assigned, and an IP made with a
//     server (auto_delete) is left only if it was unassigned before;
//   - the fake never answers 500.
func TestPrimaryIPsUnderRandomInterleavings(t *testing.T) {
	s, client, clock := newFake(t, hcloudtest.WithRateLimit(0, 0), hcloudtest.WithDefaultActionDuration(300*time.Millisecond))
	ctx := t.Context()
	var unassigned sync.Map // IDs of IPs a client unassigned
	for round := range 3 {
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				for range 25 {
					randomIPOp(ctx, client, clock, rng, &unassigned)
				}
			})
		}
		wg.Wait()
		clock.Advance(10 * time.Second)
		checkIPAssignments(t, client)
	}
	servers, err := client.Server.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, srv := range servers {
		if _, _, err := client.Server.DeleteWithResult(ctx, srv); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(10 * time.Second)
	ips, err := client.PrimaryIP.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ip := range ips {
		_, wasUnassigned := unassigned.Load(ip.ID)
		if ip.AssigneeID != 0 || (ip.AutoDelete && !wasUnassigned) {
			t.Errorf("after every server's delete: Primary IP %d assigned to %d, auto_delete %t; want unassigned, and gone if deleted with its server", ip.ID, ip.AssigneeID, ip.AutoDelete)
		}
	}
	succeeded := map[string]int{}
	for _, r := range s.Requests() {
		if r.Status >= 500 {
			t.Errorf("%s %s answered %d", r.Method, r.Path, r.Status)
		}
		if r.Status < 300 && r.Method != "GET" {
			succeeded[r.Template]++
		}
	}
	t.Logf("changes that succeeded: %v", succeeded)
}

// randomIPOp does one random thing a client may do to servers and
// Primary IPs; API errors are part of the game.
func randomIPOp(ctx context.Context, client *hcloud.Client, clock *hcloudtest.ManualClock, rng *rand.Rand, unassigned *sync.Map) {
	locations := []string{"fsn1", "hel1"}
	pick := func(n int) int { return rng.IntN(max(n, 1)) }
	servers, _, _ := client.Server.List(ctx, hcloud.ServerListOpts{})
	ips, _, _ := client.PrimaryIP.List(ctx, hcloud.PrimaryIPListOpts{})
	switch rng.IntN(8) {
	case 0, 1:
		opts := basicCreateOpts(fmt.Sprintf("s-%x", rng.Uint32()), nil)
		opts.Location = &hcloud.Location{Name: locations[pick(2)]}
		if rng.IntN(3) == 0 {
			opts.Location = nil
		}
		pub := &hcloud.ServerCreatePublicNet{EnableIPv4: rng.IntN(4) > 0, EnableIPv6: true}
		if len(ips) > 0 && rng.IntN(2) == 0 {
			ip := ips[pick(len(ips))]
			if ip.Type == hcloud.PrimaryIPTypeIPv4 {
				pub.IPv4 = ip
			} else {
				pub.IPv6 = ip
			}
		}
		opts.PublicNet = pub
		_, _, _ = client.Server.Create(ctx, opts)
	case 2:
		if len(servers) > 0 {
			_, _, _ = client.Server.DeleteWithResult(ctx, servers[pick(len(servers))])
		}
	case 3:
		if len(servers) > 0 {
			_, _, _ = client.Server.Poweroff(ctx, servers[pick(len(servers))])
		}
	case 4:
		if len(ips) > 0 {
			ip := ips[pick(len(ips))]
			if _, _, err := client.PrimaryIP.Unassign(ctx, ip.ID); err == nil {
				unassigned.Store(ip.ID, true)
			}
		}
	case 5:
		// Mostly a free IP to a server that is off, so that some succeed.
		free := slices.DeleteFunc(slices.Clone(ips), func(ip *hcloud.PrimaryIP) bool { return ip.AssigneeID != 0 && rng.IntN(4) > 0 })
		off := slices.DeleteFunc(slices.Clone(servers), func(s *hcloud.Server) bool { return s.Status != hcloud.ServerStatusOff && rng.IntN(4) > 0 })
		if len(free) > 0 && len(off) > 0 {
			opts := hcloud.PrimaryIPAssignOpts{ID: free[pick(len(free))].ID, AssigneeID: off[pick(len(off))].ID, AssigneeType: "server"}
			_, _, _ = client.PrimaryIP.Assign(ctx, opts)
		}
	case 6:
		typ := []hcloud.PrimaryIPType{hcloud.PrimaryIPTypeIPv4, hcloud.PrimaryIPTypeIPv6}[pick(2)]
		name := fmt.Sprintf("ip-%x", rng.Uint32())
		_, _, _ = client.PrimaryIP.Create(ctx, hcloud.PrimaryIPCreateOpts{Name: name, Type: typ, Location: locations[pick(2)]})
	case 7:
		if len(ips) > 0 {
			_, _ = client.PrimaryIP.Delete(ctx, ips[pick(len(ips))])
		}
	}
	clock.Advance(time.Duration(rng.IntN(400)) * time.Millisecond)
}

// checkIPAssignments checks that servers and Primary IPs agree on who has
// which IP; it runs while no client acts.
func checkIPAssignments(t *testing.T, client *hcloud.Client) {
	t.Helper()
	servers, err := client.Server.All(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ips, err := client.PrimaryIP.All(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	byID := map[int64]*hcloud.PrimaryIP{}
	for _, ip := range ips {
		byID[ip.ID] = ip
	}
	has := map[int64]*hcloud.Server{}
	for _, srv := range servers {
		has[srv.ID] = srv
		for _, id := range []int64{srv.PublicNet.IPv4.ID, srv.PublicNet.IPv6.ID} {
			if ip, ok := byID[id]; id != 0 && (!ok || ip.AssigneeID != srv.ID) {
				t.Errorf("server %d names Primary IP %d, which is %+v", srv.ID, id, ip)
			}
		}
	}
	for _, ip := range ips {
		if ip.AssigneeID == 0 {
			continue
		}
		srv, ok := has[ip.AssigneeID]
		switch {
		case !ok:
			t.Errorf("Primary IP %d is assigned to server %d, which does not exist", ip.ID, ip.AssigneeID)
		case ip.Type == hcloud.PrimaryIPTypeIPv4 && srv.PublicNet.IPv4.ID != ip.ID, ip.Type == hcloud.PrimaryIPTypeIPv6 && srv.PublicNet.IPv6.ID != ip.ID:
			t.Errorf("Primary IP %d is assigned to server %d, whose public net is %+v", ip.ID, srv.ID, srv.PublicNet)
		}
	}
}
