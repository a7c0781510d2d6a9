package workflows

import (
	"go.temporal.io/sdk/workflow"
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
