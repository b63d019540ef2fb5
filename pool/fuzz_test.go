package pool_test

import (
	"strings"
	"testing"

	"github.com/hcloudscale/hcloudscale/pool"
)

// FuzzParseClaimID checks that ParseClaimID accepts exactly the IDs that
// ClaimID makes: what it accepts round-trips, what it rejects yields
// nothing, and every ID made from a pool and a server name without a slash
// parses back to them.
func FuzzParseClaimID(f *testing.F) {
	for _, seed := range []struct{ id, pool, name string }{
		{"hcloudscale://workers/workers-0123456789abcdef", "workers", "workers-0123456789abcdef"},
		{"hcloudscale://a/b", "a", "b"},
		{"hcloudscale://workers/", "workers", ""},
		{"hcloudscale:///workers-1", "", "workers-1"},
		{"hcloudscale://workers/a/b", "workers/a", "b"},
		{"hcloudscale://workers", "workers", "x"},
		{"hcloud://4711", "", ""},
		{"HCLOUDSCALE://workers/w-1", "w", "w-1"},
		{"", "", ""},
	} {
		f.Add(seed.id, seed.pool, seed.name)
	}
	f.Fuzz(func(t *testing.T, id, poolName, serverName string) {
		p, name, ok := pool.ParseClaimID(id)
		if ok {
			if p == "" || name == "" || strings.Contains(name, "/") {
				t.Fatalf("ParseClaimID(%q) = %q, %q, true; want a pool and a name without a slash", id, p, name)
			}
			if back := pool.ClaimID(p, name); back != id {
				t.Fatalf("ClaimID(ParseClaimID(%q)) = %q; want the input back", id, back)
			}
		} else if p != "" || name != "" {
			t.Fatalf("ParseClaimID(%q) = %q, %q, false; want empty results with false", id, p, name)
		}

		made := pool.ClaimID(poolName, serverName)
		p, name, ok = pool.ParseClaimID(made)
		wantOK := poolName != "" && serverName != "" && !strings.Contains(poolName, "/") && !strings.Contains(serverName, "/")
		if ok != wantOK {
			t.Fatalf("ParseClaimID(ClaimID(%q, %q)) ok = %t; want %t", poolName, serverName, ok, wantOK)
		}
		if ok && (p != poolName || name != serverName) {
			t.Fatalf("ParseClaimID(ClaimID(%q, %q)) = %q, %q; want them back", poolName, serverName, p, name)
		}
	})
}
