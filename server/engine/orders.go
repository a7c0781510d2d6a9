package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/intendhq/intend/activities"
	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/workflows"
)

// Orders starts orders' workflows (api.LSMOrders) and sends their items'
// requests through the lifecycle engine (activities.LSMOrders.Send).
type Orders struct {
	Temporal client.Client
	LSM      *LSM
}

var _ api.LSMOrders = (*Orders)(nil)

// StartOrder implements api.LSMOrders: the workflow lsm-order/<env>/<id>,
// an existing one (running) used as it is.
func (e *Orders) StartOrder(ctx context.Context, env store.Environment, id string) error {
	wfID := workflows.OrderWorkflowID(env.Name, id)
	if _, err := e.Temporal.ExecuteWorkflow(ctx, envWorkflowOptions(wfID, env, "service order "+id),
		workflows.LSMOrderWorkflowName, workflows.LSMOrderInput{
			EnvironmentID: env.ID, EnvironmentName: env.Name, OrderID: id,
		}); err != nil {
		return fmt.Errorf("start %s: %w", wfID, err)
	}
	return nil
}

// Send is activities.LSMOrders.Send: the request as the API sends it. A
// rejection other than busy is the item's failure; busy (after the
// engine's own retries), pending and unavailable are errors the activity
// retries.
func (e *Orders) Send(ctx context.Context, req activities.OrderRequest) (store.ServiceInstance, error) {
	inst, err := e.LSM.Send(ctx, api.LSMRequest{
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
