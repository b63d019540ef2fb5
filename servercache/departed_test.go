package servercache

import (
	"testing"
	"time"
)

func TestDepartedRemembersRemovedServersForTheRetention(t *testing.T) {
	fake, client, clock := newFake(t)
	ids := addServers(t, fake, "workers", 2, poolLabels("workers", ""))
	c := New(&client.Server, WithClock(clock))
	defer c.Close()
	snap, err := c.Get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	gone := snap.ByID(ids[0])
	kept := snap.ByID(ids[1])
	if _, ok := c.Departed(gone.ProviderID(), ""); ok {
		t.Fatal("Departed answers for a server that is still listed")
	}
	c.Remove(gone.ID)
	if c.Current().ByID(gone.ID) != nil {
		t.Fatal("Remove left the server in the snapshot")
	}
	for _, lookup := range [][2]string{{gone.ProviderID(), ""}, {"", gone.Name}} {
		if pool, ok := c.Departed(lookup[0], lookup[1]); !ok || pool != "workers" {
			t.Errorf("Departed(%q, %q) = %q, %v; want workers", lookup[0], lookup[1], pool, ok)
		}
	}
	for _, lookup := range [][2]string{{kept.ProviderID(), ""}, {"", kept.Name}, {"hcloud://999999", ""}, {"hrobot://1", gone.Name}} {
		if pool, ok := c.Departed(lookup[0], lookup[1]); ok {
			t.Errorf("Departed(%q, %q) = %q; want nothing", lookup[0], lookup[1], pool)
		}
	}
	clock.Step(DepartedRetention - time.Second)
	if _, ok := c.Departed(gone.ProviderID(), ""); !ok {
		t.Error("Departed forgot the server within the retention")
	}
	clock.Step(2 * time.Second)
	if pool, ok := c.Departed(gone.ProviderID(), ""); ok {
		t.Errorf("Departed = %q after the retention; want nothing", pool)
	}
}
