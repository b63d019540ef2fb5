package hcloudscale

import (
	"context"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"k8s.io/utils/clock"
)

// presenceTTL is how long the answer about a server outside the pools is
// kept. The autoscaler asks about every node each loop; nodes that are not
// ours (control planes) would otherwise cost a request each, every loop.
const presenceTTL = 5 * time.Minute

type serverGetter interface {
	GetByID(ctx context.Context, id int64) (*hcloud.Server, *hcloud.Response, error)
}

// presenceCache answers "does server N exist" for servers the listing does
// not hold.
type presenceCache struct {
	api   serverGetter
	clock clock.Clock

	mu      sync.Mutex // guards entries
	entries map[int64]presence
}

type presence struct {
	exists bool
	at     time.Time
}

func newPresenceCache(api serverGetter, c clock.Clock) *presenceCache {
	return &presenceCache{api: api, clock: c, entries: map[int64]presence{}}
}

func (p *presenceCache) exists(ctx context.Context, id int64) (bool, error) {
	now := p.clock.Now()
	p.mu.Lock()
	e, ok := p.entries[id]
	p.mu.Unlock()
	if ok && now.Sub(e.at) < presenceTTL {
		return e.exists, nil
	}
	s, _, err := p.api.GetByID(ctx, id)
	if err != nil {
		return false, err
	}
	p.mu.Lock()
	p.entries[id] = presence{exists: s != nil, at: now}
	p.mu.Unlock()
	return s != nil, nil
}
