package pacer

import (
	"context"
	"net/http"
)

// Priority orders requests when the rate-limit budget runs low.
type Priority int

const (
	// Auto derives the priority from the request method: GET, HEAD and
	// OPTIONS are [Background], every other method is [Foreground].
	Auto Priority = iota
	// Foreground requests change something the cluster waits for: creates,
	// deletes, power actions. They may spend the budget down to the
	// reserve.
	Foreground
	// Background requests can be late without harm: polls, listings,
	// refreshes. They stop earlier, at a larger reserve, so that
	// foreground requests find budget left.
	Background
)

func (p Priority) String() string {
	switch p {
	case Auto:
		return "auto"
	case Foreground:
		return "foreground"
	case Background:
		return "background"
	default:
		return "unknown"
	}
}

type priorityKey struct{}

// WithPriority returns a copy of ctx that makes the requests sent with it
// run at priority p instead of the one their method implies. hcloud-go
// passes the context of each call on to its HTTP requests, so
//
//	client.Server.GetByID(pacer.WithPriority(ctx, pacer.Foreground), id)
//
// marks that one lookup as foreground work.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityOf returns the priority req runs at: the one set with
// [WithPriority] on its context, else the one its method implies. It never
// returns [Auto].
func PriorityOf(req *http.Request) Priority {
	if p, ok := req.Context().Value(priorityKey{}).(Priority); ok && (p == Foreground || p == Background) {
		return p
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return Background
	default:
		return Foreground
	}
}
