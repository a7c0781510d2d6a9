package server

import (
	"context"
	"time"
)

// pruneEvery is how often the reconciler deletes the expired responses
// to idempotent requests.
const pruneEvery = time.Hour

// pruneRequests deletes the stored responses to idempotent requests
// that outlived their retention, at most once per pruneEvery. Every
// replica does it; the delete is idempotent.
func (s *Server) pruneRequests(ctx context.Context) {
	now := time.Now()
	last := s.lastPrune.Load()
	if now.Sub(time.Unix(0, last)) < pruneEvery || !s.lastPrune.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	n, err := s.store.PruneRequests(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("reconcile: prune expired idempotent responses", "error", err)
	case n > 0:
		s.log.Info("pruned expired idempotent responses", "deleted", n)
	}
}
