package pool_test

import (
	"fmt"

	"github.com/hcloudscale/hcloudscale/pool"
)

// The autoscaler names the fake node of a claim after the instance ID; a
// Cluster routes it back to its pool.
func ExampleParseClaimID() {
	id := pool.ClaimID("workers", "workers-00c0ffee00c0ffee")
	fmt.Println(id)
	p, name, ok := pool.ParseClaimID(id)
	fmt.Println(p, name, ok)
	_, _, ok = pool.ParseClaimID("hcloud://4711")
	fmt.Println(ok)
	// Output:
	// hcloudscale://workers/workers-00c0ffee00c0ffee
	// workers workers-00c0ffee00c0ffee true
	// false
}

func ExampleZone() {
	for _, loc := range []string{"fsn1", "nbg1", "ash", "new1"} {
		fmt.Println(loc, pool.Zone(loc))
	}
	// Output:
	// fsn1 fsn1-dc14
	// nbg1 nbg1-dc3
	// ash ash-dc1
	// new1 new1
}
