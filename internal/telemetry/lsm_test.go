package telemetry_test

import (
	"testing"
	"time"

	"github.com/intendhq/intend/internal/telemetry"
)

// TestObserveLSMTransfer: every transfer is counted by its labels; the
// time in a state is observed when a transfer leaves it for another, not
// for a create (no state left) nor a transfer to the same state.
func TestObserveLSMTransfer(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	for _, tr := range []telemetry.LSMTransfer{
		{Environment: "prod", Entity: "vm", Target: "start", Trigger: "create"},
		{Environment: "prod", Entity: "vm", Source: "start", Target: "acknowledged", Trigger: "auto", InSource: 100 * time.Millisecond},
		{Environment: "prod", Entity: "vm", Source: "acknowledged", Target: "creating", Trigger: "auto", InSource: time.Second},
		{Environment: "prod", Entity: "vm", Source: "creating", Target: "failed", Trigger: "resource", Error: true, InSource: time.Minute},
		{Environment: "prod", Entity: "vm", Source: "failed", Target: "failed", Trigger: "on_update", InSource: time.Hour},
	} {
		tel.ObserveLSMTransfer(tr)
	}
	got := series(t, tel, "intend_lsm_transfers_total")
	for key, want := range map[string]float64{
		"entity=vm,environment=prod,error=false,source=,target=start,trigger=create":              1,
		"entity=vm,environment=prod,error=false,source=start,target=acknowledged,trigger=auto":    1,
		"entity=vm,environment=prod,error=true,source=creating,target=failed,trigger=resource":    1,
		"entity=vm,environment=prod,error=false,source=failed,target=failed,trigger=on_update":    1,
		"entity=vm,environment=prod,error=false,source=acknowledged,target=creating,trigger=auto": 1,
	} {
		if got[key] != want {
			t.Errorf("transfers{%s} = %v, want %v", key, got[key], want)
		}
	}
	if len(got) != 5 {
		t.Errorf("transfers %v, want 5 series", got)
	}
	durations := series(t, tel, "intend_lsm_state_duration_seconds")
	want := map[string]float64{
		"entity=vm,environment=prod,state=start":        1,
		"entity=vm,environment=prod,state=acknowledged": 1,
		"entity=vm,environment=prod,state=creating":     1,
	}
	if len(durations) != len(want) {
		t.Errorf("state durations %v, want %v", durations, want)
	}
	for k, n := range want {
		if durations[k] != n {
			t.Errorf("state durations{%s} = %v samples, want %v", k, durations[k], n)
		}
	}
	// The sum is the time, in seconds.
	families, err := tel.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() == "intend_lsm_state_duration_seconds" {
			for _, m := range f.GetMetric() {
				sum += m.GetHistogram().GetSampleSum()
			}
		}
	}
	if sum != 61.1 {
		t.Errorf("time in states sums to %v s, want 61.1", sum)
	}

	var none *telemetry.Telemetry
	none.ObserveLSMTransfer(telemetry.LSMTransfer{Environment: "prod"}) // a nil Telemetry records nothing
}
