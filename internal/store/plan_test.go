package store

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// checkPlan verifies the invariants planBatches promises.
func checkPlan(t *testing.T, in, out []planItem, refs []BatchRef, limits BatchLimits) {
	t.Helper()
	if len(out) != len(in) {
		t.Fatalf("%d items planned, %d given", len(out), len(in))
	}
	batch := map[string]int{} // id -> index into refs
	posIn := map[string]int{} // id -> position inside its batch
	at := 0
	for k, b := range refs {
		if b.Seq != k+1 || b.Count == 0 || b.Count > limits.MaxResources {
			t.Fatalf("batch %d = %+v (limit %d)", k, b, limits.MaxResources)
		}
		if k > 0 && refs[k-1].Level > b.Level {
			t.Fatalf("batch %d of level %d after level %d", b.Seq, b.Level, refs[k-1].Level)
		}
		for p, it := range out[at : at+b.Count] {
			if it.agent != b.Agent {
				t.Fatalf("batch %d of agent %s holds %s of agent %s", b.Seq, b.Agent, it.id, it.agent)
			}
			if _, dup := batch[it.id]; dup {
				t.Fatalf("%s planned twice", it.id)
			}
			batch[it.id], posIn[it.id] = k, p
		}
		if out[at].id != b.First {
			t.Fatalf("batch %d names %s first, holds %s", b.Seq, b.First, out[at].id)
		}
		at += b.Count
	}
	for _, it := range out {
		for _, r := range it.requires {
			bd, ok := batch[r]
			if !ok {
				continue // outside the run
			}
			bi := batch[it.id]
			switch {
			case bd == bi && posIn[r] < posIn[it.id]:
			case bd != bi && refs[bd].Level < refs[bi].Level:
			default:
				t.Fatalf("%s (batch %d, level %d) requires %s (batch %d, level %d) but may run before it",
					it.id, refs[bi].Seq, refs[bi].Level, r, refs[bd].Seq, refs[bd].Level)
			}
		}
	}
}

func randomDAG(r *rand.Rand, n, agents int) []planItem {
	items := make([]planItem, n)
	for i := range items {
		items[i] = planItem{id: fmt.Sprintf("r%05d", i), agent: fmt.Sprintf("a%d", r.IntN(agents)), size: 1 + r.IntN(300)}
		for d := r.IntN(4); d > 0 && i > 0; d-- {
			items[i].requires = append(items[i].requires, fmt.Sprintf("r%05d", r.IntN(i)))
		}
		if r.IntN(10) == 0 {
			items[i].requires = append(items[i].requires, "outside")
		}
	}
	return items
}

func TestPlanBatchesProperties(t *testing.T) {
	t.Parallel()
	for seed := uint64(0); seed < 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		items := randomDAG(r, 1+r.IntN(400), 1+r.IntN(4))
		limits := BatchLimits{MaxResources: 1 + r.IntN(60), MaxBytes: 500 + r.IntN(5000)}
		out, refs := planBatches(append([]planItem(nil), items...), limits)
		checkPlan(t, items, out, refs, limits)

		// The plan does not depend on the order the rows came in.
		shuffled := append([]planItem(nil), items...)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		out2, refs2 := planBatches(shuffled, limits)
		if !reflect.DeepEqual(refs, refs2) || !reflect.DeepEqual(out, out2) {
			t.Fatalf("seed %d: the plan depends on the input order", seed)
		}
	}
}

func TestPlanBatchesShapes(t *testing.T) {
	t.Parallel()
	chain := func(n int, agentOf func(i int) string) []planItem {
		items := make([]planItem, n)
		for i := range items {
			items[i] = planItem{id: fmt.Sprintf("r%05d", i), agent: agentOf(i), size: 10}
			if i > 0 {
				items[i].requires = []string{fmt.Sprintf("r%05d", i-1)}
			}
		}
		return items
	}
	one := func(int) string { return "a" }
	cases := []struct {
		why     string
		items   []planItem
		limits  BatchLimits
		batches int
		levels  int
	}{
		{"a chain on one agent is one batch", chain(1000, one), BatchLimits{MaxResources: 5000}, 1, 1},
		{"a chain longer than a batch is cut into consecutive levels", chain(1000, one), BatchLimits{MaxResources: 400}, 3, 3},
		{"a chain alternating agents needs a level per link", chain(6, func(i int) string { return fmt.Sprint("a", i%2) }),
			BatchLimits{MaxResources: 500}, 6, 6},
		{"independent resources of two agents are one level", randomIndependent(1000), BatchLimits{MaxResources: 500}, 2, 1},
	}
	for _, c := range cases {
		out, refs := planBatches(c.items, c.limits)
		checkPlan(t, c.items, out, refs, c.limits)
		levels := map[int]bool{}
		for _, b := range refs {
			levels[b.Level] = true
		}
		if len(refs) != c.batches || len(levels) != c.levels {
			t.Errorf("%s: %d batches in %d levels, want %d in %d", c.why, len(refs), len(levels), c.batches, c.levels)
		}
	}
}

func randomIndependent(n int) []planItem {
	items := make([]planItem, n)
	for i := range items {
		items[i] = planItem{id: fmt.Sprintf("r%05d", i), agent: fmt.Sprint("a", i%2), size: 10}
	}
	return items
}
