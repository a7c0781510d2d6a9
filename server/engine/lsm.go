package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/workflows"
)

// defaultLSMWait is how long a write waits for its transfer to be written
// before it answers 503 (the update goes on).
const defaultLSMWait = 30 * time.Second

// LSM sends the inventory's writes to the instances' workflows as
// Updates (lsm.Engine), tells them of model sources and entity
// configs, asks them to sync with PostgreSQL, and restarts the ones
// Temporal lost.
type LSM struct {
	Temporal client.Client
	// Store reads the instances and records the model sources announced
	// (ModelChanged).
	Store *store.Store
	// Wait bounds a request, from sending it to its completion (0: 30 s).
	Wait time.Duration
}

var _ lsm.Engine = (*LSM)(nil)

// Send implements lsm.Engine.
func (e *LSM) Send(ctx context.Context, req lsm.Request) (store.ServiceInstance, error) {
	wait := e.Wait
	if wait <= 0 {
		wait = defaultLSMWait
	}
	// The client leaving does not withdraw a request: wait for the
	// outcome anyway, so that it is logged and stored alike.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
	defer cancel()
	env, entity := req.Env, req.Entity.Name
	wfID := workflows.ServiceInstanceWorkflowID(env.Name, entity, req.InstanceID)
	idem := req.Idempotent
	opts := client.UpdateWorkflowOptions{
		UpdateID:     req.UpdateID,
		WorkflowID:   wfID,
		WaitForStage: client.WorkflowUpdateStageAccepted,
	}
	switch req.Op {
	case lsm.OpCreate:
		opts.UpdateName, opts.Args = workflows.CreateUpdate,
			[]any{workflows.CreateRequest{Attributes: req.Attributes, Request: idem, Actor: req.Actor,
				InitialState: req.Target}}
	case lsm.OpUpdate:
		opts.UpdateName, opts.Args = workflows.UpdateUpdate,
			[]any{workflows.UpdateRequest{CurrentVersion: req.CurrentVersion, Attributes: req.Attributes, Request: idem,
				Actor: req.Actor}}
	case lsm.OpSetState:
		opts.UpdateName, opts.Args = workflows.SetStateUpdate,
			[]any{workflows.SetStateRequest{CurrentVersion: req.CurrentVersion, Target: req.Target, Request: idem,
				Actor: req.Actor}}
	case lsm.OpDelete:
		opts.UpdateName, opts.Args = workflows.DeleteUpdate,
			[]any{workflows.DeleteRequest{CurrentVersion: req.CurrentVersion, Request: idem, Actor: req.Actor}}
	case lsm.OpExpert:
		opts.UpdateName, opts.Args = workflows.ExpertUpdate, []any{expertRequest(req, idem)}
	case lsm.OpMigrate:
		opts.UpdateName, opts.Args = workflows.MigrateUpdate,
			[]any{workflows.MigrateRequest{CurrentVersion: req.CurrentVersion, Entity: req.Entity, Attributes: req.Attributes,
				Request: idem, Actor: req.Actor}}
	default:
		return store.ServiceInstance{}, fmt.Errorf("unknown lifecycle request %q", req.Op)
	}

	// Busy (the workflow is still applying the previous transfer, often
	// for milliseconds) is refused before anything is written: try again
	// within the wait, so that clients see it only when it lasts.
	attempt := func() (store.ServiceInstance, error) {
		var h client.WorkflowUpdateHandle
		var err error
		if req.Op == lsm.OpCreate {
			start := e.Temporal.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
				ID:        wfID,
				TaskQueue: workflows.TaskQueue,
				// A running workflow takes the create (and rejects it when the
				// instance exists); an ended one's id may start again (the API
				// refuses ids the inventory has).
				WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
				WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
				TypedSearchAttributes:    workflows.ServiceInstanceSearchAttributes(env.Name, entity, req.InstanceID, ""),
				Memo:                     workflows.InstanceMemo(env.Name, entity, req.InstanceID),
				StaticSummary:            fmt.Sprintf("service instance %s/%s", entity, req.InstanceID),
			}, workflows.ServiceInstanceWorkflowName, workflows.ServiceInstanceInput{
				EnvironmentID: env.ID, EnvironmentName: env.Name, Entity: req.Entity, InstanceID: req.InstanceID,
				AutoTransfersOff: req.AutoTransfersOff, AutoTransferConfigs: req.AutoTransferConfigs, Generation: workflows.InstanceGeneration,
			})
			h, err = e.Temporal.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
				StartWorkflowOperation: start, UpdateOptions: opts,
			})
		} else {
			h, err = e.Temporal.UpdateWorkflow(ctx, opts)
		}
		if err != nil {
			if rej := rejection(err); rej != nil {
				return store.ServiceInstance{}, rej
			}
			var notReady *serviceerror.WorkflowNotReady
			if errors.As(err, &notReady) {
				// The workflow task that carried the update failed before
				// the workflow took it (a task timed out on a busy
				// worker): nothing was accepted, so the same update (same
				// id) is sent again.
				return store.ServiceInstance{}, &retryable{err}
			}
			var nf *serviceerror.NotFound
			if errors.As(err, &nf) {
				// The inventory has the instance live, but its workflow
				// does not run (it just ended, or Temporal lost it).
				return store.ServiceInstance{}, fmt.Errorf("%w: workflow %s does not run: %v", lsm.ErrUnavailable, wfID, err)
			}
			if ctx.Err() != nil || isUnavailable(err) {
				return store.ServiceInstance{}, fmt.Errorf("%w: send %s to %s: %v", lsm.ErrUnavailable, opts.UpdateName, wfID, err)
			}
			return store.ServiceInstance{}, fmt.Errorf("send %s to %s: %w", opts.UpdateName, wfID, err)
		}
		var inst store.ServiceInstance
		if err := h.Get(ctx, &inst); err != nil {
			if rej := rejection(err); rej != nil {
				return inst, rej
			}
			if ctx.Err() != nil {
				return inst, fmt.Errorf("%w: %s of %s (update %s)", lsm.ErrPending, opts.UpdateName, wfID, req.UpdateID)
			}
			if isUnavailable(err) {
				return inst, fmt.Errorf("%w: wait for %s of %s: %v", lsm.ErrUnavailable, opts.UpdateName, wfID, err)
			}
			return inst, fmt.Errorf("%s of %s: %w", opts.UpdateName, wfID, err)
		}
		return inst, nil
	}
	backoff := 50 * time.Millisecond
	synced := false
	for {
		inst, err := attempt()
		var rej *lsm.Rejection
		var again *retryable
		retry := errors.As(err, &rej) && rej.Reason == lsm.RejectBusy || errors.As(err, &again)
		if errors.As(err, &rej) && rej.Reason == lsm.RejectStale && rej.Version < req.CurrentVersion {
			// The client read a version the workflow does not have: the
			// workflow lost a task after its transfers were written
			// (workflows.SyncSignal). It takes the instance up from
			// PostgreSQL, and the request is judged again against that.
			if !synced {
				if serr := e.Sync(ctx, env, entity, req.InstanceID); serr != nil {
					return inst, err
				}
				synced = true
			}
			retry = true
		}
		if !retry {
			if err == nil && req.Op == lsm.OpCreate {
				e.syncConfig(ctx, req)
			}
			return inst, err
		}
		select {
		case <-ctx.Done():
			if again != nil {
				return inst, fmt.Errorf("%w: send %s to %s: %v", lsm.ErrUnavailable, opts.UpdateName, wfID, again.err)
			}
			return inst, err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// retryable is an update that did not reach the workflow and is sent
// again within the request's wait.
type retryable struct{ err error }

func (r *retryable) Error() string { return r.err.Error() }

// Signal sends the signal name (with arg) to a workflow; one that does
// not run (it ended) has nothing to be told, which is no error.
func (e *LSM) Signal(ctx context.Context, workflowID, name string, arg any) error {
	err := e.Temporal.SignalWorkflow(ctx, workflowID, "", name, arg)
	if _, gone := errors.AsType[*serviceerror.NotFound](err); gone {
		return nil
	}
	return err
}

// Sync sends workflows.SyncSignal to the workflow of an instance: it
// compares itself with PostgreSQL and takes up what it lost. A workflow
// that does not run has nothing to compare (the reconciler starts it
// from PostgreSQL).
func (e *LSM) Sync(ctx context.Context, env lsm.Env, entity, id string) error {
	return e.Signal(ctx, workflows.ServiceInstanceWorkflowID(env.Name, entity, id), workflows.SyncSignal, nil)
}

// rejection finds the instance workflow's rejection in err's chain (a
// validator's, or a handler's after it, possibly under the wrappers of
// an activity failure), or returns nil.
func rejection(err error) *lsm.Rejection {
	for ; err != nil; err = errors.Unwrap(err) {
		ae, ok := err.(*temporal.ApplicationError)
		if !ok {
			continue
		}
		rej := &lsm.Rejection{Reason: ae.Type(), Message: ae.Message()}
		switch ae.Type() {
		case lsm.RejectStale:
			if ae.HasDetails() {
				_ = ae.Details(&rej.Version)
			}
		case lsm.RejectIllegal:
			var d workflows.IllegalDetails
			if ae.HasDetails() && ae.Details(&d) == nil {
				rej.State, rej.Allowed = d.State, d.Allowed
			}
		case lsm.RejectInvalid:
			var ps []lsm.AttributeProblem
			if ae.HasDetails() && ae.Details(&ps) == nil {
				rej.Problems = ps
			}
		case lsm.RejectReferenced:
			var rs []lsm.Referrer
			if ae.HasDetails() && ae.Details(&rs) == nil {
				rej.Referrers = rs
			}
		case lsm.RejectBusy, lsm.RejectExists, lsm.RejectNotCreated, lsm.RejectConflict:
		default:
			continue
		}
		return rej
	}
	return nil
}

// isUnavailable reports whether err says Temporal could not serve.
func isUnavailable(err error) bool {
	var u *serviceerror.Unavailable
	var d *serviceerror.DeadlineExceeded
	var x *serviceerror.ResourceExhausted
	return errors.As(err, &u) || errors.As(err, &d) || errors.As(err, &x)
}

// ModelChanged implements lsm.Engine: it starts the environment's
// notification of the model source (intend.ModelChanged), which signals
// every live instance, and records the source as announced. A
// notification of the same source still running is that one; a source
// never recorded as announced is announced by the reconciler.
func (e *LSM) ModelChanged(ctx context.Context, env lsm.Env, hash string) error {
	// Without live instances there is nobody to tell (one created from
	// now on compiles with this source anyway): no workflow.
	live, err := e.Store.HasLiveServiceInstances(ctx, env.ID)
	if err != nil {
		return fmt.Errorf("live service instances: %w", err)
	}
	if live {
		if err := e.startModelChanged(ctx, env, hash); err != nil {
			return err
		}
	}
	if err := e.Store.MarkModelAnnounced(ctx, env.ID, hash); err != nil {
		return fmt.Errorf("record model source %s as announced: %w", hash, err)
	}
	return nil
}

func (e *LSM) startModelChanged(ctx context.Context, env lsm.Env, hash string) error {
	_, err := e.Temporal.ExecuteWorkflow(ctx, envWorkflowOptions(workflows.ModelChangedWorkflowID(env.Name, hash), env.Name,
		fmt.Sprintf("model source %.12s announced to the service instances", hash)),
		workflows.ModelChangedWorkflowName, workflows.ModelChangedInput{
			EnvironmentID: env.ID, EnvironmentName: env.Name, Hash: hash,
		})
	if err != nil {
		return fmt.Errorf("start %s: %w", workflows.ModelChangedWorkflowID(env.Name, hash), err)
	}
	return nil
}
