package runstages

import (
	"encoding/json"
	"testing"
)

func TestStatsObserveMergeQuantile(t *testing.T) {
	t.Parallel()
	var a, b Stats
	for _, s := range []float64{0.001, 0.2, 0.2, 3} {
		a.Observe(s)
	}
	b.Observe(-1) // clocks apart: counts as 0
	b.Observe(4000)
	a.Merge(b)
	a.Merge(Stats{})
	if a.Count != 6 || a.Max != 4000 || a.Sum != 0.001+0.2+0.2+3+4000 {
		t.Fatalf("merged = %+v, want 6 batches, max 4000", a)
	}
	want := map[int]int{0: 2, 3: 2, 7: 1, len(Bounds): 1}
	for i, n := range a.Buckets {
		if n != want[i] {
			t.Fatalf("buckets %v, want %v", a.Buckets, want)
		}
	}
	for q, w := range map[float64]float64{0.3: 0.005, 0.5: 0.25, 0.8: 5, 1: 4000} {
		if got := a.Quantile(q); got != w {
			t.Errorf("quantile %v = %v, want %v", q, got, w)
		}
	}
	if (Stats{}).Quantile(0.5) != 0 || (Stats{}).Mean() != 0 {
		t.Error("an empty stage should have quantile and mean 0")
	}
	var one Stats
	one.Observe(0.3)
	if one.Quantile(0.95) != 0.3 {
		t.Errorf("a quantile never exceeds the max: %v", one.Quantile(0.95))
	}
}

func TestRunJSON(t *testing.T) {
	t.Parallel()
	var r Run
	r.Stage(Execute).Observe(1.5)
	r.MaxInFlight, r.HistoryEvents, r.Segments = 3, 40, 1
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Run
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Execute.Count != 1 || back.Execute.Sum != 1.5 || back.MaxInFlight != 3 || back.Stage("nope") != nil {
		t.Errorf("round trip %s = %+v", b, back)
	}
}
