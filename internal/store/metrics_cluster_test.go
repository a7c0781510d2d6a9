package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// TestClusterMetricsLSMStates: every state of a registered lifecycle is
// listed, 0 included; deleted instances are not counted; a state is
// transient exactly when an auto or resource-triggered transfer leaves
// it, as the lifecycle says.
func TestClusterMetricsLSMStates(t *testing.T) {
	t.Parallel()
	st, e, _ := openVM(t)
	ctx := context.Background()
	before := time.Now().Add(-time.Minute)
	liveWebDeletedDB(t, st, e)

	m, err := st.ClusterMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lc := lsm.Simple()
	transient := map[string]bool{}
	for _, tr := range lc.Transfers {
		if tr.Trigger == lsm.Auto || tr.Trigger == lsm.Resource {
			transient[tr.Source] = true
		}
	}
	got := map[string]store.LSMStateCount{}
	for _, s := range m.LSMStates {
		if s.Environment != e.Name || s.Entity != "vm" {
			t.Errorf("state %+v of another entity", s)
		}
		got[s.State] = s
	}
	if len(got) != len(lc.States) || len(transient) == 0 || len(transient) == len(lc.States) {
		t.Errorf("states %v, want the lifecycle's %d, some transient (%v) and some not", got, len(lc.States), transient)
	}
	for name := range lc.States {
		s, ok := got[name]
		want := 0
		if name == "start" {
			want = 1 // the other one moved on and was deleted
		}
		if !ok || s.Count != want || s.Transient != transient[name] || (s.OldestChange != nil) != (want > 0) {
			t.Errorf("state %s = %+v (listed %v), want %d instances, transient %v", name, s, ok, want, transient[name])
		}
		if s.OldestChange != nil && s.OldestChange.Before(before) {
			t.Errorf("state %s: oldest change %v, before the test began", name, s.OldestChange)
		}
	}
	if len(m.Environments) != 1 || m.Environments[0] != e.Name || len(m.Compiles) != 0 ||
		len(m.LastSuccessfulDeploy) != 0 || len(m.OldestOpenRun) != 0 {
		t.Errorf("cluster metrics %+v, want one environment with no run nor compile", m)
	}
}
