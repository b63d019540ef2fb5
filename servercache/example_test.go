package servercache_test

import (
	"fmt"

	"github.com/hcloudscale/hcloudscale/servercache"
)

func ExampleParseProviderID() {
	for _, providerID := range []string{
		"hcloud://4711",    // a Hetzner Cloud server
		"hrobot://4711",    // a Robot (dedicated) server
		"hcloud://bm-4711", // the legacy form of a Robot server
		"hcloud://04711",   // not the form hcloud-cloud-controller-manager writes
		"",                 // a node without a provider ID yet
	} {
		id, ok := servercache.ParseProviderID(providerID)
		fmt.Printf("%q: %d %v\n", providerID, id, ok)
	}
	// Output:
	// "hcloud://4711": 4711 true
	// "hrobot://4711": 0 false
	// "hcloud://bm-4711": 0 false
	// "hcloud://04711": 0 false
	// "": 0 false
}

func ExampleServer_ProviderID() {
	srv := servercache.Server{ID: 4711, Name: "workers-1a2b3c", Pool: "workers"}
	fmt.Println(srv.ProviderID())
	// Output:
	// hcloud://4711
}
