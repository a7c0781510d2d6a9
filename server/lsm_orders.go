package server

import (
	"context"

	"go.temporal.io/sdk/worker"

	"github.com/intendhq/intend/activities"
	"github.com/intendhq/intend/workflows"
)

// registerOrders registers the order workflow and its activities.
func (s *Server) registerOrders(w worker.Worker, lsmActs *activities.LSM) {
	workflows.RegisterOrders(w)
	(&activities.LSMOrders{Store: s.store, Engine: s.lsm, Sync: s.lsm.Sync, Migrate: lsmActs.MigrateAttributes, Log: s.log}).Register(w)
}

// reconcileOrders starts the workflow of every order that has not ended
// (its start failed, or Temporal lost it with its store): the workflow
// goes on from the outcomes PostgreSQL holds. Running ones are left
// alone.
func (s *Server) reconcileOrders(ctx context.Context) {
	if s.orders == nil {
		return
	}
	us, err := s.store.UnfinishedOrders(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("reconcile: list unfinished orders", "error", err)
		}
		return
	}
	for _, u := range us {
		if err := s.orders.StartOrder(ctx, u.Environment, u.ID); err != nil && ctx.Err() == nil {
			s.log.Warn("reconcile: order workflow", "environment", u.Environment.Name, "order", u.ID, "error", err)
		}
	}
}
