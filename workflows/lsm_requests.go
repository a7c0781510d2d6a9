package workflows

import (
	"encoding/json"
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

// subject is the instance as lsm.Decide judges a request against it.
func (w *instanceWorkflow) subject() lsm.Subject {
	return lsm.Subject{
		ID: w.in.InstanceID, Version: w.st.Version, State: w.st.State, Sets: w.st.Sets, Busy: w.busy,
		Lifecycle: w.lifecycle(), Entity: w.in.Entity, Attributes: w.entityOf(w.st.Sets.CurrentVersion()).Attributes,
		Auto: w.in.auto(),
	}
}

// decide judges a request (lsm.Decide); a refusal is the rejection the
// update fails with.
func (w *instanceWorkflow) decide(req lsm.Request) (lsm.Decision, error) {
	d, rej := lsm.Decide(w.subject(), req)
	return d, rejection(rej)
}

// validateRequest checks what every request after the create must pass:
// the instance exists, nobody is applying a transfer, the version is
// current, and the state has a transfer for ev.
func (w *instanceWorkflow) validateRequest(version int64, ev lsm.Event) (lsm.Transfer, error) {
	t, rej := w.subject().Transfer(version, ev)
	return t, rejection(rej)
}

func (w *instanceWorkflow) validateCreate(_ workflow.Context, req CreateRequest) error {
	_, err := w.decide(lsm.Request{Op: lsm.OpCreate, Attributes: req.Attributes, Target: req.InitialState})
	return err
}

func (w *instanceWorkflow) validateUpdate(_ workflow.Context, req UpdateRequest) error {
	_, err := w.decide(lsm.Request{Op: lsm.OpUpdate, CurrentVersion: req.CurrentVersion, Attributes: req.Attributes})
	return err
}

func (w *instanceWorkflow) validateSetState(_ workflow.Context, req SetStateRequest) error {
	_, err := w.decide(lsm.Request{Op: lsm.OpSetState, CurrentVersion: req.CurrentVersion, Target: req.Target})
	return err
}

func (w *instanceWorkflow) validateDelete(_ workflow.Context, req DeleteRequest) error {
	_, err := w.decide(lsm.Request{Op: lsm.OpDelete, CurrentVersion: req.CurrentVersion})
	return err
}

// rejection is the Temporal error an update is refused with: the
// rejection's reason is its type, and its details what the engine's
// client reads back (server/engine's rejection).
func rejection(rej *lsm.Rejection) error {
	if rej == nil {
		return nil
	}
	switch rej.Reason {
	case lsm.RejectStale:
		return temporal.NewApplicationError(rej.Message, rej.Reason, rej.Version)
	case lsm.RejectIllegal:
		return temporal.NewApplicationError(rej.Message, rej.Reason, IllegalDetails{State: rej.State, Allowed: rej.Allowed})
	case lsm.RejectInvalid:
		if rej.Problems != nil {
			return temporal.NewApplicationError(rej.Message, rej.Reason, rej.Problems)
		}
	}
	return temporal.NewApplicationError(rej.Message, rej.Reason)
}

// The handlers run the validator's checks again: on replay validators do
// not run, and an update the validator accepted must behave the same.

func (w *instanceWorkflow) create(ctx workflow.Context, req CreateRequest) (ServiceInstanceRecord, error) {
	failUpdateTask(ctx)
	d, err := w.decide(lsm.Request{Op: lsm.OpCreate, Attributes: req.Attributes, Target: req.InitialState})
	if err != nil {
		return ServiceInstanceRecord{}, err
	}
	w.busy = true
	defer func() { w.busy = false }()
	start := d.Transfer.Target
	ev := TransferEvent{Trigger: string(d.Transfer.Trigger), Target: start, Operations: []lsm.Operation{}, Actor: req.Actor}
	if req.Request != nil {
		ev.Request = req.Request.Key
	}
	rec, err := w.write(ctx, ApplyTransferInput{
		Version:  1,
		Identity: d.Identity,
		State:    start,
		Sets:     d.Sets,
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
	return w.apply(ctx, lsm.Request{Op: lsm.OpUpdate, CurrentVersion: req.CurrentVersion, Attributes: req.Attributes}, caller{idem: req.Request, actor: req.Actor})
}

func (w *instanceWorkflow) setState(ctx workflow.Context, req SetStateRequest) (ServiceInstanceRecord, error) {
	return w.apply(ctx, lsm.Request{Op: lsm.OpSetState, CurrentVersion: req.CurrentVersion, Target: req.Target}, caller{idem: req.Request, actor: req.Actor})
}

func (w *instanceWorkflow) delete(ctx workflow.Context, req DeleteRequest) (ServiceInstanceRecord, error) {
	return w.apply(ctx, lsm.Request{Op: lsm.OpDelete, CurrentVersion: req.CurrentVersion}, caller{idem: req.Request, actor: req.Actor})
}

// apply decides req (refused: the update's error) and applies the
// transfer it takes.
func (w *instanceWorkflow) apply(ctx workflow.Context, req lsm.Request, c caller) (ServiceInstanceRecord, error) {
	failUpdateTask(ctx)
	d, err := w.decide(req)
	if err != nil {
		return ServiceInstanceRecord{}, err
	}
	return w.request(ctx, d.Transfer, d.Sets, c)
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

// validate runs ValidateInstance with the current set (Sets.Current), and
// returns sets with the r attribute values the model computed written
// into that set (when the validation succeeded).
func (w *instanceWorkflow) validate(ctx workflow.Context, sets lsm.Sets) (failed bool, errs json.RawMessage, out lsm.Sets, err error) {
	version := sets.CurrentVersion()
	res, err := ValidateInstanceActivity.RunLocal(longOptions(ctx), ValidateInstanceInput{
		EnvironmentID: w.in.EnvironmentID, Entity: w.in.Entity.Name, InstanceID: w.in.InstanceID,
		Attributes: lsm.WithoutReadOnly(w.entityOf(version).Attributes, sets.Current()), EntityVersion: version,
	})
	if err != nil {
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
	rec, err := ApplyTransferActivity.RunLocal(quickOptions(ctx), in)
	if err != nil {
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
