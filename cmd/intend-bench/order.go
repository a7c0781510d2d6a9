package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/workflows"
)

// P7o's flags: the items of the order, and how many items each
// dependency chain holds.
var orderN, orderChain int

// benchOrder is P7o (P7 as one order): one order (best_effort) creating n service
// instances, in chains of chain items (each depending on the one before
// it), from POST to the order's end with every item up.
func benchOrder(ctx context.Context, c *client.Client, srv *server.Server, files string, n, chain int) ([]row, error) {
	if chain < 1 {
		chain = 1
	}
	if _, err := c.EnsureEnvironment(ctx, "bench", lsmEnv); err != nil {
		return nil, err
	}
	root := filepath.Join(files, "lsm")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	if err := uploadModel(ctx, c, lsmEnv, lsmModel(root)); err != nil {
		return nil, fmt.Errorf("upload the model: %w", err)
	}
	items := make([]map[string]any, n)
	for i := range items {
		it := map[string]any{"id": fmt.Sprint(i), "operation": "create", "service_entity": "svc",
			"attributes": map[string]any{"name": fmt.Sprintf("o%05d", i)}}
		if i%chain != 0 {
			it["depends_on"] = []string{fmt.Sprint(i - 1)}
		}
		items[i] = it
	}
	cpu0 := treeCPU()
	t0 := time.Now()
	var o client.Order
	if err := lsmCall(ctx, c, http.MethodPost, "/lsm/v1/orders", map[string]any{"policy": "best_effort", "items": items}, &o); err != nil {
		return nil, err
	}
	posted := time.Since(t0)
	for !lsm.OrderFinal(o.Status) {
		if time.Since(t0) > 15*time.Minute {
			return nil, fmt.Errorf("order %s still %s after 15 minutes: %v", o.ID, o.Status, o.Counts)
		}
		time.Sleep(200 * time.Millisecond)
		if err := lsmCall(ctx, c, http.MethodGet, "/lsm/v1/orders/"+o.ID, nil, &o); err != nil {
			return nil, err
		}
	}
	all := time.Since(t0)
	cpuAll := cpuRow("CPU of the process tree, P7o", cpu0, treeCPU())
	if o.Status != lsm.OrderSucceeded {
		return nil, fmt.Errorf("order %s %s: %v", o.ID, o.Status, o.Counts)
	}
	events := "?"
	if d, err := srv.Temporal().DescribeWorkflowExecution(ctx, workflows.OrderWorkflowID(lsmEnv, o.ID), ""); err == nil {
		events = fmt.Sprint(d.GetWorkflowExecutionInfo().GetHistoryLength())
	}
	shape := "no dependencies"
	if chain > 1 {
		shape = fmt.Sprintf("chains of %d", chain)
	}
	return []row{
		{fmt.Sprintf("P7o order of %d creates (%s), POST → all up", n, shape), all.Round(time.Millisecond).String(),
			fmt.Sprintf("POST answered in %v (checks and write); %s events in the last run's history; bar ≤ 60 s at 1,000",
				posted.Round(time.Millisecond), events)},
		cpuAll,
	}, nil
}
