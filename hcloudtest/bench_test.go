package hcloudtest_test

import (
	"fmt"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/hcloudscale/hcloudscale/hcloudtest"
)

// BenchmarkListServers measures one label-selected listing of 500 servers
// in pages of 50 through the real client, the request a server cache makes
// once per refresh.
func BenchmarkListServers(b *testing.B) {
	s := hcloudtest.NewServer(hcloudtest.WithRateLimit(0, 0))
	defer s.Close()
	for i := range 500 {
		if _, err := s.AddServer(hcloudtest.ServerInfo{Name: fmt.Sprintf("n-%d", i), Labels: map[string]string{"pool": fmt.Sprint(i % 2)}}); err != nil {
			b.Fatal(err)
		}
	}
	client := s.Client()
	opts := hcloud.ServerListOpts{ListOpts: hcloud.ListOpts{LabelSelector: "pool=1"}}
	b.ReportAllocs()
	for b.Loop() {
		list, err := client.Server.AllWithOpts(b.Context(), opts)
		if err != nil || len(list) != 250 {
			b.Fatalf("AllWithOpts = %d, %v; want 250", len(list), err)
		}
	}
}

// BenchmarkCreateServer measures POST /servers, including the name check
// and the create response.
func BenchmarkCreateServer(b *testing.B) {
	s := hcloudtest.NewServer(hcloudtest.WithRateLimit(0, 0))
	defer s.Close()
	client := s.Client()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		_, _, err := client.Server.Create(b.Context(), basicCreateOpts(fmt.Sprintf("b-%d", i), nil))
		if err != nil {
			b.Fatal(err)
		}
	}
}
