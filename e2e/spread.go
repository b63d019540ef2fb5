package e2e

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/config"
	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// spreadGrace is how long an empty spread group stays in SpreadPastTen
// (10 minutes in production): as the scenario's other timings, a tenth
// or less.
const spreadGrace = 3 * time.Second

// SpreadPastTen: a pool with spreadGroups at zero; 25 pending pods that
// each need a node of their own. The provider creates the pool's spread
// placement groups as it grows: the 25 servers land in three groups, no
// group ever holds more than ten and no create fails (for a full group or
// any other reason; both checked after every loop). With the pods gone the pool returns to zero and,
// once they have been empty for the grace, the groups are deleted: no
// group, server or node is left.
func SpreadPastTen(t *testing.T, kind Provider) {
	const n = 25
	role := map[string]string{"role": "spread"}
	w := newWorld(t, kind, []poolSpec{{name: "spread", serverType: "cx23", location: "fsn1", max: 30, labels: role, spread: true}},
		func(w *world) { w.spreadGrace = spreadGrace })
	// member holds the group of every server seen, by server ID.
	member := map[int64]int64{}
	check := func() {
		w.atMost("spread", n)
		maps.Copy(member, w.spreadMembers(maxSpreadMembers))
		if failed := w.failedCreates(); failed != 0 {
			t.Fatalf("%d failed creates: a create must never go to a full group\n%s", failed, w.describe())
		}
	}
	w.addPods(pods("app", n, WithNodeSelector(role))...)
	start := time.Now()
	w.loopUntil("pods bound in the spread pool", 2*time.Minute, func() bool { return w.boundOn("app-", "spread") == n }, check)
	up := time.Since(start)
	sizes := w.checkSpreadGroups(n, member)
	created := w.requestsAnswered("POST /placement_groups", http.StatusCreated)

	w.deletePods("app-")
	start = time.Now()
	var empty time.Time
	w.loopUntil("the pool back to zero and its groups deleted", 2*time.Minute, func() bool {
		if empty.IsZero() && len(w.servers("spread")) == 0 && w.target("spread") == 0 {
			empty = time.Now()
		}
		return !empty.IsZero() && w.requestsAnswered("DELETE /placement_groups/{id}", http.StatusNoContent) == created
	}, check)
	down, deleted := empty.Sub(start), time.Since(empty)
	if left := w.spreadGroups(); len(left) != 0 {
		t.Errorf("%d spread groups left: %v", len(left), left)
	}
	if refused := w.requestsAnswered("DELETE /placement_groups/{id}", 0); refused != 0 {
		t.Errorf("%d deletes of a spread group refused: a group was deleted while servers were in it", refused)
	}
	kept := w.emptyFor(member)
	if kept < spreadGrace {
		t.Errorf("a group was deleted %v after the delete of its last server, before the grace of %v", kept, spreadGrace)
	}
	w.noLeak()
	w.record(fmt.Sprintf("spread-past-ten groups=%v scale_up_s=%.1f scale_down_s=%.1f groups_deleted_after_s=%.1f shortest_kept_empty_s=%.1f",
		sizes, up.Seconds(), down.Seconds(), deleted.Seconds(), kept.Seconds()))
}

// checkSpreadGroups checks the spread groups of a pool of n servers: as
// few as hold them, labelled for the cluster, each created once. It
// returns the servers of each group, ascending.
func (w *world) checkSpreadGroups(n int, member map[int64]int64) []int {
	w.t.Helper()
	groups := w.spreadGroups()
	fill := map[int64]int{}
	for _, s := range w.servers("spread") {
		fill[s.PlacementGroup]++
	}
	var sizes []int
	for _, g := range groups {
		sizes = append(sizes, fill[g.ID])
		if g.Labels[config.LabelCluster] != clusterName {
			w.t.Errorf("group %s is labelled %v; want the cluster label %s", g.Name, g.Labels, clusterName)
		}
	}
	slices.Sort(sizes)
	used := map[int64]bool{}
	for _, g := range member {
		used[g] = true
	}
	want := (n + maxSpreadMembers - 1) / maxSpreadMembers
	if len(groups) != want || len(used) != want {
		w.t.Errorf("%d spread groups with %v servers (%d ever used): want %d for %d servers\n%s", len(groups), sizes, len(used), want, n, w.describe())
	}
	if created := w.requestsAnswered("POST /placement_groups", http.StatusCreated); created != len(groups) {
		w.t.Errorf("%d spread groups created, %d exist", created, len(groups))
	}
	return sizes
}

// maxSpreadMembers is how many servers Hetzner puts in one spread group.
const maxSpreadMembers = hcloudtest.MaxPlacementGroupServers

// spreadMembers returns the placement group of each server of the pool
// spread, by server ID, and fails the test as soon as a group holds more
// than max of them or a server is in none.
func (w *world) spreadMembers(max int) map[int64]int64 {
	w.t.Helper()
	member, fill := map[int64]int64{}, map[int64]int{}
	for _, s := range w.servers("spread") {
		if s.PlacementGroup == 0 {
			w.t.Fatalf("server %s is in no placement group\n%s", s.Name, w.describe())
		}
		member[s.ID] = s.PlacementGroup
		fill[s.PlacementGroup]++
	}
	for id, k := range fill {
		if k > max {
			w.t.Fatalf("placement group %d holds %d servers, more than %d\n%s", id, k, max, w.describe())
		}
	}
	return member
}

// emptyFor returns the shortest time, by the fake's request log, between
// the delete request of a group's last server and the group's delete.
func (w *world) emptyFor(member map[int64]int64) time.Duration {
	w.t.Helper()
	lastServer, groupDeleted := map[int64]time.Time{}, map[int64]time.Time{}
	for _, r := range w.fake.Requests() {
		id, err := strconv.ParseInt(r.Path[strings.LastIndexByte(r.Path, '/')+1:], 10, 64)
		switch {
		case err != nil || r.Status >= http.StatusBadRequest:
		case r.Template == "DELETE /servers/{id}" && member[id] != 0:
			lastServer[member[id]] = r.Time
		case r.Template == "DELETE /placement_groups/{id}":
			groupDeleted[id] = r.Time
		}
	}
	shortest := time.Duration(-1)
	for g, at := range groupDeleted {
		last, ok := lastServer[g]
		if !ok {
			w.t.Errorf("group %d deleted, but no delete of a server of it was seen", g)
			continue
		}
		if d := at.Sub(last); shortest < 0 || d < shortest {
			shortest = d
		}
	}
	return shortest
}

// spreadGroups lists, through the API, the spread groups the provider
// created for the pool spread.
func (w *world) spreadGroups() []*hcloud.PlacementGroup {
	w.t.Helper()
	groups, err := w.fake.Client().PlacementGroup.AllWithOpts(w.ctx, hcloud.PlacementGroupListOpts{
		ListOpts: hcloud.ListOpts{LabelSelector: config.LabelSpreadPool + "=spread"},
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return groups
}

// requestsAnswered counts the requests of template that the fake answered
// with status; status 0 counts those it refused (4xx and 5xx).
func (w *world) requestsAnswered(template string, status int) int {
	n := 0
	for _, r := range w.fake.Requests() {
		if r.Template == template && (r.Status == status || status == 0 && r.Status >= http.StatusBadRequest) {
			n++
		}
	}
	return n
}
