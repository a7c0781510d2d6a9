package server

import (
	"context"
	"time"

	"github.com/intendhq/intend/internal/store"
)

// defaultInstanceReconcileEvery is how often the reconciler looks for live
// service instances whose workflow does not run.
const defaultInstanceReconcileEvery = 2 * time.Minute

// reconcileInstances restarts, from PostgreSQL, the workflow of every live
// service instance that has none running, and has the running ones that
// are behind PostgreSQL sync (engine.LSM.RestartInstances), at most once
// per InstanceReconcileEvery; every replica does it.
func (s *Server) reconcileInstances(ctx context.Context, envs []store.Environment) {
	now := time.Now()
	last := s.lastInstances.Load()
	if now.Sub(time.Unix(0, last)) < s.cfg.InstanceReconcileEvery || !s.lastInstances.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	for _, e := range envs {
		if e.DecommissionVersion != nil {
			// Its instances' workflows were stopped for good: the purge
			// removes their resources, the clear the instances.
			continue
		}
		n, err := s.lsm.RestartInstances(ctx, e, s.cfg.InstanceReconcileEvery, s.log)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("reconcile: service instance workflows", "environment", e.Name, "error", err)
		case n > 0:
			s.log.Warn("service instance workflows restarted from PostgreSQL", "environment", e.Name, "instances", n)
		}
	}
}
