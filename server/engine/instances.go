package engine

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/workflows"
)

// maxInstanceRestarts bounds the workflows one RestartInstances starts;
// the next call starts the rest.
const maxInstanceRestarts = 500

// RestartInstances starts, from PostgreSQL, the workflow of every live
// service instance of env that has none running (Temporal lost its
// store, or the workflow ended with the instance live), at most 500 a
// call, and returns how many it started: each starts from the instance
// as PostgreSQL holds it (state, version, attribute sets) and exports
// again if its state exports. A workflow that runs already is left as it
// is (the start uses the existing one), but is asked to sync (Sync) when
// its published state has differed from PostgreSQL's for longer than
// stable. Every replica may call it.
func (e *LSM) RestartInstances(ctx context.Context, env store.Environment, stable time.Duration, log *slog.Logger) (int, error) {
	live, err := e.Store.LiveServiceInstances(ctx, env.ID)
	if err != nil || len(live) == 0 {
		return 0, err
	}
	running, err := e.runningInstances(ctx, env.Name)
	if err != nil {
		return 0, err
	}
	var entities map[string]store.ServiceEntity
	var configs map[string]store.InstanceConfig
	started := 0
	for _, inst := range live {
		wfID := workflows.ServiceInstanceWorkflowID(env.Name, inst.Entity, inst.ID)
		if state, ok := running[wfID]; ok {
			e.syncBehind(ctx, env, inst, state, stable, log)
			continue
		}
		if started >= maxInstanceRestarts {
			continue
		}
		if entities == nil {
			es, err := e.Store.ListEntities(ctx, env.ID)
			if err != nil {
				return started, err
			}
			entities = make(map[string]store.ServiceEntity, len(es))
			for _, e := range es {
				entities[e.Name] = e
			}
		}
		entity, ok := entities[inst.Entity]
		if !ok {
			continue // its entity left the catalog: nothing can drive it
		}
		// The workflow starts with the version of the instance and knows
		// the versions of its other sets (lsm_versions.go).
		own, others, err := e.Store.EntitiesOfSets(ctx, env.ID, inst.Entity, inst.Sets)
		if err != nil {
			return started, err
		}
		entity.Entity = own
		if configs == nil {
			if configs, err = e.Store.InstanceConfigs(ctx, env.ID); err != nil {
				return started, err
			}
		}
		ic, ok := configs[inst.ID]
		if !ok {
			ic = store.DefaultInstanceConfig()
		}
		_, err = e.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID:                       wfID,
			TaskQueue:                workflows.TaskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			TypedSearchAttributes:    workflows.ServiceInstanceSearchAttributes(env.Name, inst.Entity, inst.ID, inst.State),
			Memo:                     workflows.InstanceMemo(env.Name, inst.Entity, inst.ID),
			StaticSummary:            fmt.Sprintf("service instance %s/%s (restarted from PostgreSQL)", inst.Entity, inst.ID),
		}, workflows.ServiceInstanceWorkflowName, workflows.ServiceInstanceInput{
			EnvironmentID: env.ID, EnvironmentName: env.Name, Entity: entity.Entity, InstanceID: inst.ID,
			AutoTransfersOff: !entity.Config.AutoTransfers, AutoTransferConfigs: entity.Config.AutoTransferConfigs,
			InstanceAutoTransfersOff: !ic.AutoTransfers, InstanceAutoTransferConfigs: ic.AutoTransferConfigs,
			Generation: workflows.InstanceGeneration,
			Snapshot: &workflows.InstanceSnapshot{State: inst.State, Version: inst.Version, Identity: inst.Identity,
				Sets: inst.Sets, Entities: others},
		})
		if err != nil {
			return started, fmt.Errorf("start %s: %w", wfID, err)
		}
		started++
	}
	return started, nil
}

// syncBehind sends workflows.SyncSignal to the running workflow of inst
// when the state its workflow last published (state, from visibility)
// has differed from PostgreSQL's for longer than stable: the
// workflow lost a task after its transfers were written, and nothing
// else may ever tell it. A workflow that merely has not published yet
// (a long validation) reads the instance once and goes on.
func (e *LSM) syncBehind(ctx context.Context, env store.Environment, inst store.ServiceInstance, state string,
	stable time.Duration, log *slog.Logger) {
	if state == "" || state == inst.State || time.Since(inst.UpdatedAt) < stable {
		return
	}
	log.Warn("reconcile: a service instance's workflow shows another state than PostgreSQL; it is asked to sync",
		"environment", env.Name, "service_entity", inst.Entity, "instance", inst.ID,
		"state", inst.State, "workflow_state", state)
	if err := e.Sync(ctx, env.LSM(), inst.Entity, inst.ID); err != nil && ctx.Err() == nil {
		log.Warn("reconcile: sync a service instance's workflow", "instance", inst.ID, "error", err)
	}
}

// runningInstances maps the ids of the running instance workflows of the
// environment named env to the state each last published ("" when it has
// none yet). It reads visibility: a workflow started a moment ago may be
// missing, and is then left as it is by the start.
func (e *LSM) runningInstances(ctx context.Context, env string) (map[string]string, error) {
	out := map[string]string{}
	query := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running' AND %s = '%s'",
		workflows.ServiceInstanceWorkflowName, workflows.SearchAttrEnvironment, env)
	var token []byte
	for {
		resp, err := e.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: query, PageSize: 1000, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list instance workflows: %w", err)
		}
		for _, ex := range resp.GetExecutions() {
			var state string
			if p := ex.GetSearchAttributes().GetIndexedFields()[workflows.SearchAttrInstanceState]; p != nil {
				_ = converter.GetDefaultDataConverter().FromPayload(p, &state)
			}
			out[ex.GetExecution().GetWorkflowId()] = state
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}
