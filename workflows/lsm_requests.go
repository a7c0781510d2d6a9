package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/intendhq/intend/internal/lsm"
)

// register sets the update handlers.
func (w *instanceWorkflow) register(ctx workflow.Context) error {
	if err := workflow.SetUpdateHandlerWithOptions(ctx, CreateUpdate, w.create,
		workflow.UpdateHandlerOptions{Validator: w.validateCreate}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateUpdate, w.update,
		workflow.UpdateHandlerOptions{Validator: w.validateUpdate}); err != nil {
		return err
	}
	if err := w.registerExpert(ctx); err != nil {
		return err
	}
	if err := w.registerMigrate(ctx); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, SetStateUpdate, w.setState,
		workflow.UpdateHandlerOptions{Validator: w.validateSetState}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, DeleteUpdate, w.delete,
		workflow.UpdateHandlerOptions{Validator: w.validateDelete})
}

func (w *instanceWorkflow) validateCreate(_ workflow.Context, req CreateRequest) error {
	if w.st.Version > 0 || w.busy {
		return temporal.NewApplicationError(fmt.Sprintf("service instance %s exists", w.in.InstanceID), lsm.RejectExists)
	}
	return invalid(lsm.CheckCreate(w.in.Entity.Attributes, req.Attributes))
}

// validateRequest checks what every request after the create must pass:
// the instance exists, nobody is applying a transfer, the version is
// current, and the state has a transfer for ev.
func (w *instanceWorkflow) validateRequest(version int64, ev lsm.Event) (lsm.Transfer, error) {
	if w.st.Version == 0 {
		return lsm.Transfer{}, temporal.NewApplicationError(
			fmt.Sprintf("service instance %s is not created yet", w.in.InstanceID), lsm.RejectNotCreated)
	}
	if w.busy {
		return lsm.Transfer{}, temporal.NewApplicationError(fmt.Sprintf(
			"service instance %s is applying a transfer (state %s, version %d); try again shortly",
			w.in.InstanceID, w.st.State, w.st.Version), lsm.RejectBusy)
	}
	if version != w.st.Version {
		return lsm.Transfer{}, temporal.NewApplicationError(fmt.Sprintf(
			"service instance %s is at version %d, not %d", w.in.InstanceID, w.st.Version, version),
			lsm.RejectStale, w.st.Version)
	}
	t, err := w.lifecycle().Next(w.st.State, ev)
	if err != nil {
		return t, temporal.NewApplicationError(err.Error(), lsm.RejectIllegal,
			IllegalDetails{State: w.st.State, Allowed: w.allowed()})
	}
	return t, nil
}

func (w *instanceWorkflow) validateUpdate(_ workflow.Context, req UpdateRequest) error {
	if _, err := w.validateRequest(req.CurrentVersion, lsm.Event{Trigger: lsm.OnUpdate}); err != nil {
		return err
	}
	return invalid(lsm.CheckUpdate(w.entityOf(w.currentVersion()).Attributes, w.currentAttributes(), req.Attributes))
}

func (w *instanceWorkflow) validateSetState(_ workflow.Context, req SetStateRequest) error {
	_, err := w.setStateTransfer(req)
	return err
}

func (w *instanceWorkflow) validateDelete(_ workflow.Context, req DeleteRequest) error {
	_, err := w.validateRequest(req.CurrentVersion, lsm.Event{Trigger: lsm.OnDelete})
	return err
}

// currentAttributes is what an update edits: the candidate set, or the
// active one when there is no candidate.
func (w *instanceWorkflow) currentAttributes() map[string]any {
	if w.st.Sets.Candidate != nil {
		return w.st.Sets.Candidate
	}
	return w.st.Sets.Active
}

// invalid makes an *lsm.AttributeError an lsm.RejectInvalid rejection.
func invalid(err error) error {
	if err == nil {
		return nil
	}
	var ae *lsm.AttributeError
	if errors.As(err, &ae) {
		return temporal.NewApplicationError(ae.Error(), lsm.RejectInvalid, ae.Problems)
	}
	return temporal.NewApplicationError(err.Error(), lsm.RejectInvalid)
}

// The handlers run the validator's checks again: on replay validators do
// not run, and an update the validator accepted must behave the same.

func (w *instanceWorkflow) create(ctx workflow.Context, req CreateRequest) (ServiceInstanceRecord, error) {
	failUpdateTask(ctx)
	if err := w.validateCreate(ctx, req); err != nil {
		return ServiceInstanceRecord{}, err
	}
	w.busy = true
	defer func() { w.busy = false }()
	start := w.lifecycle().Start
	ev := TransferEvent{Trigger: "create", Target: start, Operations: []lsm.Operation{}, Actor: req.Actor}
	if req.Request != nil {
		ev.Request = req.Request.Key
	}
	// The candidate set shows the defaults the model would use.
	attrs := lsm.WithDefaults(w.in.Entity.Attributes, req.Attributes)
	rec, err := w.write(ctx, ApplyTransferInput{
		Version:  1,
		Identity: identity(w.in.Entity.Identity, attrs),
		State:    start,
		Sets:     lsm.Sets{Candidate: attrs, CandidateVersion: w.in.Entity.Version},
		Deleted:  w.lifecycle().States[start].Terminal,
		Event:    ev,
		Request:  req.Request,
	})
	if err != nil {
		w.createFailed = true
		return rec, err
	}
	if lsm.HasAllocated(w.in.Entity.Attributes) {
		// The store gave the allocated r attributes their values in the
		// candidate set it wrote (docs/lsm.md, "Allocation"): they are
		// the instance's from now on, and the model reads them.
		w.st.Sets.Candidate = rec.Candidate
	}
	w.dirty = true
	return rec, nil
}

func (w *instanceWorkflow) update(ctx workflow.Context, req UpdateRequest) (ServiceInstanceRecord, error) {
	failUpdateTask(ctx)
	if err := w.validateUpdate(ctx, req); err != nil {
		return ServiceInstanceRecord{}, err
	}
	t, _ := w.lifecycle().Next(w.st.State, lsm.Event{Trigger: lsm.OnUpdate})
	sets := w.st.Sets
	sets.Candidate, sets.CandidateVersion = req.Attributes, w.currentVersion()
	return w.request(ctx, t, sets, caller{idem: req.Request, actor: req.Actor})
}

func (w *instanceWorkflow) setState(ctx workflow.Context, req SetStateRequest) (ServiceInstanceRecord, error) {
	failUpdateTask(ctx)
	if err := w.validateSetState(ctx, req); err != nil {
		return ServiceInstanceRecord{}, err
	}
	t, _ := w.setStateTransfer(req)
	return w.request(ctx, t, w.st.Sets, caller{idem: req.Request, actor: req.Actor})
}

func (w *instanceWorkflow) delete(ctx workflow.Context, req DeleteRequest) (ServiceInstanceRecord, error) {
	failUpdateTask(ctx)
	if err := w.validateDelete(ctx, req); err != nil {
		return ServiceInstanceRecord{}, err
	}
	t, _ := w.lifecycle().Next(w.st.State, lsm.Event{Trigger: lsm.OnDelete})
	return w.request(ctx, t, w.st.Sets, caller{idem: req.Request, actor: req.Actor})
}

// request applies the transfer a request caused, validating first when
// the transfer says so (an api transfer may).
func (w *instanceWorkflow) request(ctx workflow.Context, t lsm.Transfer, sets lsm.Sets, req caller) (ServiceInstanceRecord, error) {
	w.busy = true
	defer func() { w.busy = false }()
	failed, errs := false, json.RawMessage(nil)
	if t.Validate {
		var err error
		if failed, errs, sets, err = w.validate(ctx, sets); err != nil {
			return ServiceInstanceRecord{}, err
		}
	}
	rec, err := w.transfer(ctx, t, sets, failed, errs, req)
	if err == nil {
		w.dirty = true
	}
	return rec, err
}

// validationSet is what a validating transfer validates: the candidate
// set, or the active one when there is no candidate (a lifecycle may
// validate an api transfer out of an active state).
func validationSet(sets lsm.Sets) map[string]any {
	if sets.Candidate != nil {
		return sets.Candidate
	}
	return sets.Active
}

// validate runs ValidateInstance with the set validationSet picks, and
// returns sets with the r attribute values the model computed written
// into that set (when the validation succeeded).
func (w *instanceWorkflow) validate(ctx workflow.Context, sets lsm.Sets) (failed bool, errs json.RawMessage, out lsm.Sets, err error) {
	var res ValidateInstanceResult
	version := validationVersion(sets)
	if err := workflow.ExecuteLocalActivity(longOptions(ctx), ValidateInstanceActivity, ValidateInstanceInput{
		EnvironmentID: w.in.EnvironmentID, Entity: w.in.Entity.Name, InstanceID: w.in.InstanceID,
		Attributes: lsm.WithoutReadOnly(w.entityOf(version).Attributes, validationSet(sets)), EntityVersion: version,
	}).Get(ctx, &res); err != nil {
		return false, nil, sets, fmt.Errorf("validate: %w", err)
	}
	if res.OK && len(res.ReadOnly) > 0 {
		if sets.Candidate != nil {
			sets.Candidate = withValues(sets.Candidate, res.ReadOnly)
		} else if sets.Active != nil {
			sets.Active = withValues(sets.Active, res.ReadOnly)
		}
	}
	return !res.OK, res.Errors, sets, nil
}

// withValues is attrs (not changed) with vals written over it.
func withValues(attrs, vals map[string]any) map[string]any {
	out := maps.Clone(attrs)
	maps.Copy(out, vals)
	return out
}

// transfer writes t (to its error state when failed) from sets: the
// transfer's operations are applied to them.
func (w *instanceWorkflow) transfer(ctx workflow.Context, t lsm.Transfer, sets lsm.Sets, failed bool, errs json.RawMessage, req caller) (ServiceInstanceRecord, error) {
	target, ops := t.Target, t.TargetOperation
	if failed {
		target, ops = t.Error, t.ErrorOperation
	}
	if ops == nil {
		ops = []lsm.Operation{}
	}
	ev := TransferEvent{Trigger: string(t.Trigger), Source: t.Source, Target: target, Error: failed, Operations: ops,
		Actor: req.actor, MigrateTo: req.migrateTo}
	if req.idem != nil {
		ev.Request = req.idem.Key
	}
	return w.write(ctx, ApplyTransferInput{
		Version:  w.st.Version + 1,
		Identity: w.st.Identity,
		State:    target,
		Sets:     lsm.ApplyAll(ops, sets),
		Deleted:  w.lifecycle().States[target].Terminal,
		Event:    ev,
		Errors:   errs,
		Request:  req.idem,
	})
}

// write runs ApplyTransfer and takes what it wrote as the instance's state.
func (w *instanceWorkflow) write(ctx workflow.Context, in ApplyTransferInput) (ServiceInstanceRecord, error) {
	in.EnvironmentID, in.Entity, in.InstanceID = w.in.EnvironmentID, w.in.Entity.Name, w.in.InstanceID
	var rec ServiceInstanceRecord
	if err := workflow.ExecuteLocalActivity(quickOptions(ctx), ApplyTransferActivity, in).Get(ctx, &rec); err != nil {
		if behind(err) {
			w.syncWanted = true
		}
		return rec, fmt.Errorf("apply transfer to %s (version %d): %w", in.State, in.Version, err)
	}
	w.st.State, w.st.Version, w.st.Identity, w.st.Sets = in.State, in.Version, in.Identity, in.Sets
	w.transfers++
	workflow.GetLogger(ctx).Info("service instance transfer", "state", in.State, "version", in.Version,
		"trigger", in.Event.Trigger, "error", in.Event.Error)
	if in.Event.Error {
		w.noteError(fmt.Sprintf("transfer %s went to its error state %s", in.Event.Trigger, in.State), in.Errors)
	}
	w.showDetails(ctx)
	return rec, nil
}
