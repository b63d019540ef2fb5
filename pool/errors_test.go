package pool

import (
	"errors"
	"testing"
)

// TestRefusalsAreTyped checks that each request a pool refuses matches its
// sentinel, which the externalgrpc server maps to status codes.
func TestRefusalsAreTyped(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := scaled(t, e, "workers", 2, 3, 2)
	ins := p.Instances()
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"increase by zero", func() error { return p.IncreaseSize(t.Context(), 0) }, ErrInvalidDelta},
		{"increase past max", func() error { return p.IncreaseSize(t.Context(), 2) }, ErrAboveMax},
		{"decrease by a positive delta", func() error { return p.DecreaseTargetSize(t.Context(), 1) }, ErrInvalidDelta},
		{"delete below min", func() error { return p.DeleteInstances(t.Context(), []string{ins[0].ID}) }, ErrBelowMin},
		{"delete a foreign node", func() error { return p.DeleteInstances(t.Context(), []string{"hcloud://999999"}) }, ErrNotInPool},
	} {
		if err := tc.call(); !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v; want one matching %v", tc.name, err, tc.want)
		}
	}
	if got := e.fake.Count("DELETE /servers/{id}") + e.fake.Count("POST /servers"); got != 2 {
		t.Errorf("create and delete requests = %d; want only the 2 creates of the set-up", got)
	}
}

// TestPlaceholdersDoNotCountTowardsMin: with one server and one failed
// placeholder at min 1, the server may not be deleted (the placeholder
// holds no capacity), while the placeholder may.
func TestPlaceholdersDoNotCountTowardsMin(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := scaled(t, e, "workers", 1, 5, 1)
	server := p.Instances()[0]
	e.fake.SetUnavailable("cx23", "fsn1", true)
	if err := p.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	e.settle(p)
	var placeholder Instance
	for _, in := range p.Instances() {
		if in.Error != nil {
			placeholder = in
		}
	}
	if placeholder.ID == "" || p.TargetSize() != 2 {
		t.Fatalf("Instances() = %+v, TargetSize() = %d; want a server and a placeholder", p.Instances(), p.TargetSize())
	}
	if err := p.DeleteInstances(t.Context(), []string{server.ID}); !errors.Is(err, ErrBelowMin) {
		t.Errorf("deleting the only server at min 1 beside a placeholder: %v; want ErrBelowMin", err)
	}
	if err := p.DeleteInstances(t.Context(), []string{placeholder.ID}); err != nil {
		t.Errorf("deleting the placeholder: %v", err)
	}
	if got := e.fake.Count("DELETE /servers/{id}"); got != 0 {
		t.Errorf("DELETE requests = %d; want 0", got)
	}
}
