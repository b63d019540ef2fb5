package integration

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestLeaseTheRoleDoesNotAllow starts a replica whose Lease name the
// example Role does not cover (its get and update are limited to the
// Lease "hcloudscale"): serve must fail at start and say which Lease, in
// which namespace, it may not use, instead of standing by for ever.
func TestLeaseTheRoleDoesNotAllow(t *testing.T) {
	c := newCluster(t, clusterOptions{max: 5, createDuration: time.Second})
	r := c.startReplica(t, "replica-a", "", "--leader-elect-resource-name=elsewhere")
	select {
	case <-r.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s still runs 20s after it started with a Lease its Role does not allow; want it to fail at start", r.id)
	}
	if code := exitCode(r.err); code == 0 {
		t.Errorf("%s exited with 0; want a failure", r.id)
	}
	b, err := os.ReadFile(r.logPath)
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	for _, want := range []string{"elsewhere", c.ns} {
		if !strings.Contains(log, want) {
			t.Errorf("%s's log does not name %q:\n%s", r.id, want, log)
		}
	}
	for _, req := range c.hc.Requests() {
		if mutating(req) {
			t.Errorf("%s sent %s %s without a Lease", r.id, req.Method, req.Path)
		}
	}
}
