package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/intendhq/intend/internal/lsm"
)

// A service entity's config reaches its instances' workflows (issue 14,
// B.7): a new instance's workflow starts with it (ServiceInstanceInput),
// and a change is signalled to every live instance (ConfigChangedSignal).
// With the entity's auto transfers off, an instance stops in a state an
// auto transfer leaves, and a set-state naming that transfer's target takes
// it, as an api transfer would be taken: validated when the transfer
// validates, logged with trigger auto and the operator as actor.

// ConfigChangedSignal carries an entity's new config to its instances'
// workflows (payload: EntityConfigSignal).
const ConfigChangedSignal = "intend.lsm.config_changed"

// EntityConfigSignal is the payload of ConfigChangedSignal.
type EntityConfigSignal struct {
	AutoTransfers bool
}

// listenConfig takes the entity's config changes as they come: the
// instance's state is looked at again (auto transfers turned back on take
// the one the instance waits at), and a continue-as-new keeps the
// setting (it is in the input).
func (w *instanceWorkflow) listenConfig(ctx workflow.Context) {
	ch := workflow.GetSignalChannel(ctx, ConfigChangedSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var c EntityConfigSignal
			ch.Receive(ctx, &c)
			if w.in.AutoTransfersOff != !c.AutoTransfers {
				w.in.AutoTransfersOff = !c.AutoTransfers
				w.configChanged = true
			}
		}
	})
}

// heldAuto is the auto transfer the instance waits at because the
// entity's auto transfers are off.
func (w *instanceWorkflow) heldAuto() (lsm.Transfer, bool) {
	if !w.in.AutoTransfersOff {
		return lsm.Transfer{}, false
	}
	return w.lifecycle().AutoFrom(w.st.State)
}

// setStateTransfer is the transfer a set-state takes: the api transfer to
// its target, or, with auto transfers off, the auto transfer the instance
// waits at when the set-state names its target.
func (w *instanceWorkflow) setStateTransfer(req SetStateRequest) (lsm.Transfer, error) {
	t, err := w.validateRequest(req.CurrentVersion, lsm.Event{Trigger: lsm.API, Target: req.Target})
	var ae *temporal.ApplicationError
	if err != nil && errors.As(err, &ae) && ae.Type() == lsm.RejectIllegal {
		if auto, ok := w.heldAuto(); ok && auto.Target == req.Target {
			return auto, nil
		}
	}
	return t, err
}

// allowed are the events the instance's state takes, as a refusal lists
// them: with auto transfers off, the auto transfer the instance waits at
// is an api event to its target (a set-state takes it).
func (w *instanceWorkflow) allowed() []lsm.Event {
	evs := w.lifecycle().Allowed(w.st.State)
	if auto, ok := w.heldAuto(); ok {
		for i, ev := range evs {
			if ev.Trigger == lsm.Auto {
				evs[i] = lsm.Event{Trigger: lsm.API, Target: auto.Target}
			}
		}
	}
	return evs
}
