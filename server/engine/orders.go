package engine

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/workflows"
)

// Orders starts orders' workflows (api.LSMOrders); their items'
// requests go through the lifecycle engine (LSM) like the API's.
type Orders struct {
	Temporal client.Client
}

var _ api.LSMOrders = (*Orders)(nil)

// StartOrder implements api.LSMOrders: the workflow lsm-order/<env>/<id>,
// an existing one (running) used as it is.
func (e *Orders) StartOrder(ctx context.Context, env store.Environment, id string) error {
	wfID := workflows.OrderWorkflowID(env.Name, id)
	if _, err := e.Temporal.ExecuteWorkflow(ctx, envWorkflowOptions(wfID, env.Name, "service order "+id),
		workflows.LSMOrderWorkflowName, workflows.LSMOrderInput{
			EnvironmentID: env.ID, EnvironmentName: env.Name, OrderID: id,
		}); err != nil {
		return fmt.Errorf("start %s: %w", wfID, err)
	}
	return nil
}
