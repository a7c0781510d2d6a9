package telemetry

import (
	"strconv"
	"time"
)

// LSMTransfer is one transfer of a service instance, as the lifecycle
// engine wrote it.
type LSMTransfer struct {
	Environment, Entity string
	// Source is the state the instance left ("" for its creation) and
	// Target the state it entered.
	Source, Target string
	// Trigger is the log's event.trigger: create, auto, api, on_update,
	// on_delete, resource or expert.
	Trigger string
	// Error: the transfer took its error path (a failed validation or
	// deploy).
	Error bool
	// InSource is how long the instance was in Source: from the transfer
	// that entered it to this one. It is observed only when the transfer
	// leaves Source for another state.
	InSource time.Duration
}

// ObserveLSMTransfer counts one transfer in intend_lsm_transfers_total
// and, when it leaves a state for another, observes the time spent in it
// in intend_lsm_state_duration_seconds. Call it once per transfer written
// and committed (store.AppliedChange.Written), never for a retry that
// found it written: the count is then exact but for a crash between the
// commit and the call. A nil Telemetry records nothing.
//
// Every label is bounded: environments and entities by the catalog,
// states by the lifecycles, triggers by the engine. Series appear with
// their first transfer: the label sets a lifecycle allows are too many to
// initialise at 0 (an increase() over a window in which a series appears
// misses its first transfer, which rates and alerts can afford).
func (t *Telemetry) ObserveLSMTransfer(tr LSMTransfer) {
	if t == nil {
		return
	}
	t.LSMTransfers.WithLabelValues(tr.Environment, tr.Entity, tr.Source, tr.Target, tr.Trigger,
		strconv.FormatBool(tr.Error)).Inc()
	if tr.Source != "" && tr.Source != tr.Target {
		t.LSMStateDuration.WithLabelValues(tr.Environment, tr.Entity, tr.Source).Observe(tr.InSource.Seconds())
	}
}
