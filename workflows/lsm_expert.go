package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/intendhq/intend/internal/lsm"
)

// Expert mode (issue 14, B.7): an admin forces an instance's state and/or
// attribute sets past the lifecycle's rules. The workflow, the instance's
// single writer, writes it as one version with trigger expert, the reason
// and the actor in the log, and then runs what the new state calls for
// (its auto transfer, its export and deploy wait, a terminal state's
// removal), as after any transfer.

// ExpertUpdate is the update that forces a state or attribute sets.
const ExpertUpdate = "expert"

// ExpertTrigger is the trigger an expert transfer is logged with.
const ExpertTrigger = "expert"

// ExpertRequest is the expert update: the change (its fields inline in
// the payload's JSON, as recorded histories have them), the version the
// client saw, and who asked.
type ExpertRequest struct {
	CurrentVersion int64
	lsm.ExpertChange
	Request *lsm.IdempotentRequest
	Actor   string
}

func (w *instanceWorkflow) registerExpert(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, ExpertUpdate, w.expert,
		workflow.UpdateHandlerOptions{Validator: w.validateExpert})
}

// validateExpert checks what an expert transfer must pass: the instance
// exists, nobody is applying a transfer, the version is current, the
// state (if any) exists in the lifecycle, and something changes is asked
// for with a reason. The lifecycle's transfers are not consulted.
func (w *instanceWorkflow) validateExpert(_ workflow.Context, req ExpertRequest) error {
	if err := rejection(w.subject().Ready(req.CurrentVersion)); err != nil {
		return err
	}
	if req.State != "" {
		if _, ok := w.lifecycle().States[req.State]; !ok {
			return temporal.NewApplicationError(fmt.Sprintf("lifecycle %s has no state %q", w.lifecycle().Name, req.State),
				lsm.RejectInvalid)
		}
	}
	if req.State == "" && !req.SetCandidate && !req.SetActive && !req.SetRollback {
		return temporal.NewApplicationError("an expert transfer needs a state or an attribute set", lsm.RejectInvalid)
	}
	if req.Reason == "" {
		return temporal.NewApplicationError("an expert transfer needs a reason", lsm.RejectInvalid)
	}
	return nil
}

func (w *instanceWorkflow) expert(ctx workflow.Context, req ExpertRequest) (ServiceInstanceRecord, error) {
	failUpdateTask(ctx)
	if err := w.validateExpert(ctx, req); err != nil {
		return ServiceInstanceRecord{}, err
	}
	w.busy = true
	defer func() { w.busy = false }()
	target := req.State
	if target == "" {
		target = w.st.State
	}
	sets := w.st.Sets
	if req.SetCandidate {
		sets.Candidate = req.Candidate
	}
	if req.SetActive {
		sets.Active = req.Active
	}
	if req.SetRollback {
		sets.Rollback = req.Rollback
	}
	ev := TransferEvent{Trigger: ExpertTrigger, Source: w.st.State, Target: target, Operations: []lsm.Operation{},
		Actor: req.Actor, Reason: req.Reason}
	if req.Request != nil {
		ev.Request = req.Request.Key
	}
	rec, err := w.write(ctx, ApplyTransferInput{
		Version:  w.st.Version + 1,
		Identity: w.st.Identity,
		State:    target,
		Sets:     sets,
		Deleted:  w.lifecycle().States[target].Terminal,
		Event:    ev,
		Request:  req.Request,
	})
	if err == nil {
		w.dirty = true // the main loop runs what the new state calls for
	}
	return rec, err
}
