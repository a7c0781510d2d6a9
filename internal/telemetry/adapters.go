package telemetry

import (
	"time"
)

// ObserveAdapterCall records one adapter call in
// intend_adapter_call_duration_seconds{type,operation}; it is the engine's
// adapters.CallTimer (adapters.WithCallTimer), so every call the engine
// makes is timed, optional capabilities included. A nil Telemetry records
// nothing.
func (t *Telemetry) ObserveAdapterCall(resourceType, op string, d time.Duration) {
	if t == nil {
		return
	}
	t.AdapterCallDuration.WithLabelValues(resourceType, op).Observe(d.Seconds())
}
