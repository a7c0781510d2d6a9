package server

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/intendhq/intend/activities"
	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/workflows"
)

// orderEngine starts orders' workflows (api.LSMOrders) and sends their
// items' requests through the lifecycle engine.
type orderEngine struct {
	temporal client.Client
	lsm      *lsmEngine
}

var _ api.LSMOrders = (*orderEngine)(nil)

// StartOrder implements api.LSMOrders: the workflow lsm-order/<env>/<id>,
// an existing one (running) used as it is.
func (e *orderEngine) StartOrder(ctx context.Context, env store.Environment, id string) error {
	wfID := workflows.OrderWorkflowID(env.Name, id)
	if _, err := e.temporal.ExecuteWorkflow(ctx, envWorkflowOptions(wfID, env, "service order "+id),
		workflows.LSMOrderWorkflowName, workflows.LSMOrderInput{
			EnvironmentID: env.ID, EnvironmentName: env.Name, OrderID: id,
		}); err != nil {
		return fmt.Errorf("start %s: %w", wfID, err)
	}
	return nil
}

// send is activities.LSMOrders.Send: the request as the API sends it. A
// rejection other than busy is the item's failure; busy (after the
// engine's own retries), pending and unavailable are errors the activity
// retries.
func (e *orderEngine) send(ctx context.Context, req activities.OrderRequest) (store.ServiceInstance, error) {
	inst, err := e.lsm.Send(ctx, api.LSMRequest{
		Environment: req.Environment, Entity: req.Entity, InstanceID: req.InstanceID, Op: req.Op,
		UpdateID: req.UpdateID, CurrentVersion: req.CurrentVersion, Attributes: req.Attributes,
		Idempotent: req.Idempotent, Actor: req.Actor,
	})
	var rej *api.LSMRejection
	if errors.As(err, &rej) && rej.Reason != lsm.RejectBusy {
		msg := fmt.Sprintf("%s refused (%s): %s", req.Op, rej.Reason, rej.Message)
		if len(rej.Problems) > 0 {
			parts := make([]string, len(rej.Problems))
			for i, p := range rej.Problems {
				parts[i] = p.String()
			}
			msg = fmt.Sprintf("%s refused (%s): %s", req.Op, rej.Reason, strings.Join(parts, "; "))
		}
		return inst, &activities.RequestRejected{Message: msg}
	}
	return inst, err
}

// registerOrders registers the order workflow and its activities.
func (s *Server) registerOrders(w worker.Worker, orders *orderEngine, lsmActs *activities.LSM) {
	workflows.RegisterOrders(w)
	(&activities.LSMOrders{Store: s.store, Send: orders.send, Sync: orders.lsm.Sync, Migrate: lsmActs.MigrateAttributes, Log: s.log}).Register(w)
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
