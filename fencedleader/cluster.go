package fencedleader

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/hcloudscale/hcloudscale"
	"github.com/hcloudscale/hcloudscale/pool"
)

// ClusterHooks are the Hooks for a Cluster whose fence is this Leader
// (hcloudscale.WithFence): before leading, list the servers afresh, so
// that what the previous leader created counts against the max size;
// once leading, resume the create flows it left unfinished; when
// leadership ends, drop the claims whose create request was not sent.
func (l *Leader) ClusterHooks(c *hcloudscale.Cluster) Hooks {
	return Hooks{
		BeforeLeading: c.RefreshNow,
		Leading:       func(context.Context) { c.Resume() },
		Stopping:      func() { l.dropUnsent(c) },
	}
}

// dropUnsent removes, in every pool, the claims whose create request has
// not been sent: once this replica stops leading, sending one would be a
// change made without the Lease. The fence would refuse it anyway; this
// makes the pools' target sizes say so at once.
func (l *Leader) dropUnsent(c *hcloudscale.Cluster) {
	for _, p := range c.Pools() {
		// A decrease larger than the claims removes every unsent claim
		// (and the placeholders of failed ones, which this process
		// forgets anyway).
		if err := p.DecreaseTargetSize(context.Background(), -(p.MaxSize() + 1)); err != nil && !errors.Is(err, pool.ErrFenced) {
			l.log.Warn("dropping unsent claims", zap.String("pool", p.Name()), zap.Error(err))
		}
	}
}
