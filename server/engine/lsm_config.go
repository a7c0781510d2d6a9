package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"go.temporal.io/api/serviceerror"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/workflows"
)

// An entity's config reaches its instances' workflows (issue 14, B.7): a
// create's workflow starts with the config the request read; a change is
// signalled to every live instance (ConfigChanged). A create in flight
// while the config changes may be missed by the change's signals (its
// version 1 was not committed when they were sent): the create, once
// written, reads the config again and signals its own workflow when it
// changed (syncConfig), so that either the change or the create tells it.

var (
	_ api.LSMConfigNotifier         = (*LSM)(nil)
	_ api.LSMInstanceConfigNotifier = (*LSM)(nil)
)

// ConfigChanged implements api.LSMConfigNotifier: it signals c to every
// live instance of entity (a workflow that does not run is skipped: the
// reconciler restarts it with the stored config).
func (e *LSM) ConfigChanged(ctx context.Context, env store.Environment, entity string, c store.EntityConfig) error {
	live, err := e.Store.LiveServiceInstances(ctx, env.ID)
	if err != nil {
		return fmt.Errorf("live service instances: %w", err)
	}
	var errs []error
	for _, inst := range live {
		if inst.Entity != entity {
			continue
		}
		if err := e.signalConfig(ctx, env.Name, entity, inst.ID, c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (e *LSM) signalConfig(ctx context.Context, env, entity, id string, c store.EntityConfig) error {
	wfID := workflows.ServiceInstanceWorkflowID(env, entity, id)
	err := e.Temporal.SignalWorkflow(ctx, wfID, "", workflows.ConfigChangedSignal,
		workflows.EntityConfigSignal{AutoTransfers: c.AutoTransfers, AutoTransferConfigs: c.AutoTransferConfigs})
	if _, gone := errors.AsType[*serviceerror.NotFound](err); gone {
		return nil
	}
	if err != nil {
		return fmt.Errorf("signal %s: %w", wfID, err)
	}
	return nil
}

// InstanceConfigChanged implements api.LSMInstanceConfigNotifier: it
// signals c to the workflow of the instance id (one that does not run is
// skipped: the reconciler restarts it with the stored config).
func (e *LSM) InstanceConfigChanged(ctx context.Context, env store.Environment, entity, id string, c store.InstanceConfig) error {
	wfID := workflows.ServiceInstanceWorkflowID(env.Name, entity, id)
	err := e.Temporal.SignalWorkflow(ctx, wfID, "", workflows.InstanceConfigChangedSignal,
		workflows.InstanceConfigSignal{AutoTransfers: c.AutoTransfers, AutoTransferConfigs: c.AutoTransferConfigs})
	if _, gone := errors.AsType[*serviceerror.NotFound](err); gone {
		return nil
	}
	if err != nil {
		return fmt.Errorf("signal %s: %w", wfID, err)
	}
	return nil
}

// syncConfig tells a just created instance's workflow the entity's config
// when it is not what the create started it with. Best effort: a failure
// is left to the next config change (or a repeat of it).
func (e *LSM) syncConfig(ctx context.Context, req lsm.Request) {
	ent, err := e.Store.GetEntityDefinition(ctx, req.Env.ID, req.Entity.Name)
	if err != nil || (!ent.Config.AutoTransfers == req.AutoTransfersOff && maps.Equal(ent.Config.AutoTransferConfigs, req.AutoTransferConfigs)) {
		return // the workflow started with the config there is
	}
	_ = e.signalConfig(ctx, req.Env.Name, req.Entity.Name, req.InstanceID, ent.Config)
}

// expertRequest is an expert write as the instance's workflow takes it.
func expertRequest(req lsm.Request, idem *lsm.IdempotentRequest) workflows.ExpertRequest {
	x := req.Expert
	if x == nil {
		x = &lsm.ExpertChange{}
	}
	return workflows.ExpertRequest{CurrentVersion: req.CurrentVersion, ExpertChange: *x, Request: idem, Actor: req.Actor}
}
