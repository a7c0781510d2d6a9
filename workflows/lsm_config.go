package workflows

import (
	"maps"

	"go.temporal.io/sdk/workflow"

	"github.com/intendhq/intend/internal/lsm"
)

// A service entity's config reaches its instances' workflows (issue 14,
// B.7): a new instance's workflow starts with it (ServiceInstanceInput),
// and a change is signalled to every live instance (ConfigChangedSignal).
// An instance's own config (issue 31) is signalled to its workflow alone
// (InstanceConfigChangedSignal). An auto transfer the configs hold
// (lsm.AutoConfig.Takes: the entity-wide and instance-wide switches, then
// the transfer's config name, the instance's entry before the entity's)
// stops the instance in the state it leaves, and a set-state naming that
// transfer's target takes it, as an api transfer would be taken:
// validated when the transfer validates, logged with trigger auto and the
// operator as actor.

// ConfigChangedSignal carries an entity's new config to its instances'
// workflows (payload: EntityConfigSignal).
const ConfigChangedSignal = "intend.lsm.config_changed"

// InstanceConfigChangedSignal carries an instance's new config to its
// workflow (payload: InstanceConfigSignal).
const InstanceConfigChangedSignal = "intend.lsm.instance_config_changed"

// EntityConfigSignal is the payload of ConfigChangedSignal.
type EntityConfigSignal struct {
	AutoTransfers bool
	// AutoTransferConfigs: the entity's config per config name.
	AutoTransferConfigs map[string]bool `json:",omitempty"`
}

// InstanceConfigSignal is the payload of InstanceConfigChangedSignal.
type InstanceConfigSignal struct {
	AutoTransfers       bool
	AutoTransferConfigs map[string]bool `json:",omitempty"`
}

// auto is the switch of the instance's auto transfers its input holds.
func (in ServiceInstanceInput) auto() lsm.AutoConfig {
	return lsm.AutoConfig{Off: in.AutoTransfersOff, InstanceOff: in.InstanceAutoTransfersOff,
		Entity: in.AutoTransferConfigs, Instance: in.InstanceAutoTransferConfigs}
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
			if w.in.AutoTransfersOff != !c.AutoTransfers || !sameConfigs(w.in.AutoTransferConfigs, c.AutoTransferConfigs) {
				w.in.AutoTransfersOff = !c.AutoTransfers
				w.in.AutoTransferConfigs = c.AutoTransferConfigs
				w.configChanged = true
			}
		}
	})
}

// listenInstanceConfig takes the instance's own config changes, as
// listenConfig the entity's.
func (w *instanceWorkflow) listenInstanceConfig(ctx workflow.Context) {
	ch := workflow.GetSignalChannel(ctx, InstanceConfigChangedSignal)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var c InstanceConfigSignal
			ch.Receive(ctx, &c)
			if w.in.InstanceAutoTransfersOff != !c.AutoTransfers || !sameConfigs(w.in.InstanceAutoTransferConfigs, c.AutoTransferConfigs) {
				w.in.InstanceAutoTransfersOff = !c.AutoTransfers
				w.in.InstanceAutoTransferConfigs = c.AutoTransferConfigs
				w.configChanged = true
			}
		}
	})
}

// sameConfigs: a and b map the same names alike (nil and empty are the
// same).
func sameConfigs(a, b map[string]bool) bool { return maps.Equal(a, b) }
