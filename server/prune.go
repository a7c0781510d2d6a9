package server

import (
	"context"
	"log/slog"
	"sort"
	"time"

	"github.com/intendhq/intend/internal/store"
)

// defaultPruneEvery is how often the reconciler starts a prune pass.
const defaultPruneEvery = time.Hour

// prune starts a prune pass in the background at most once per
// Config.PruneEvery, never while one runs (a backlog can take longer than
// the period). The pass deletes what every environment's retention
// settings let go (store.PruneEnvironment), the expired responses to
// idempotent requests and, with Config.AuditRetention, the audit rows
// past it. It runs on every replica's reconciler, but only
// the replica that holds the prune lock prunes; a pass that finds it
// taken does nothing.
func (s *Server) prune(ctx context.Context, envs []store.Environment) {
	now := time.Now()
	last := s.lastPrune.Load()
	if now.Sub(time.Unix(0, last)) < s.cfg.PruneEvery || !s.lastPrune.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	if !s.pruning.CompareAndSwap(false, true) {
		return
	}
	s.wg.Go(func() {
		defer s.pruning.Store(false)
		s.prunePass(ctx, envs)
	})
}

// prunePass is one prune pass under the prune lock.
func (s *Server) prunePass(ctx context.Context, envs []store.Environment) {
	unlock, ok, err := s.store.TryPruneLock(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("prune: take the prune lock", "error", err)
		}
		return
	}
	if !ok {
		s.log.Debug("prune: another replica prunes")
		return
	}
	defer unlock()
	start := time.Now()
	total := store.Pruned{}
	for _, e := range envs {
		t0 := time.Now()
		p, err := s.store.PruneEnvironment(ctx, e, store.PruneOptions{})
		s.countPruned(p, total)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Warn("prune: environment", "environment", e.Name, "error", err)
		}
		if n := p.Total(); n > 0 {
			s.log.Info("pruned history past its retention", append([]any{"environment", e.Name, "deleted", n,
				"duration", time.Since(t0).Round(time.Millisecond)}, prunedAttrs(p)...)...)
		}
	}
	n, err := s.store.PruneRequests(ctx)
	s.countPruned(store.Pruned{store.TableIdempotent: n}, total)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("prune: expired idempotent responses", "error", err)
	}
	if n > 0 {
		s.log.Info("pruned expired idempotent responses", "deleted", n)
	}
	if keep := s.cfg.AuditRetention; keep > 0 {
		n, err := s.store.PruneAudit(ctx, time.Now().Add(-keep), 0)
		s.countPruned(store.Pruned{store.TableAudit: n}, total)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("prune: the audit trail", "error", err)
		}
		if n > 0 {
			s.log.Info("pruned the audit trail past its retention", "deleted", n, "audit_retention", keep)
		}
	}
	s.log.Debug("prune pass done", "environments", len(envs), "deleted", total.Total(),
		"duration", time.Since(start).Round(time.Millisecond))
}

// countPruned adds p to intend_pruned_rows_total and to total.
func (s *Server) countPruned(p, total store.Pruned) {
	for table, n := range p {
		if n > 0 {
			s.pruned.WithLabelValues(table).Add(float64(n))
			total[table] += n
		}
	}
}

// prunedAttrs are the log attributes of a prune's counts: one per table
// that lost rows, keyed by the table's name, in name order.
func prunedAttrs(p store.Pruned) []any {
	tables := make([]string, 0, len(p))
	for t, n := range p {
		if n > 0 {
			tables = append(tables, t)
		}
	}
	sort.Strings(tables)
	out := make([]any, 0, len(tables))
	for _, t := range tables {
		out = append(out, slog.Int64(t, p[t]))
	}
	return out
}
