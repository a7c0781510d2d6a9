package plan

import (
	"fmt"
	"slices"
	"testing"
)

func TestCutShapes(t *testing.T) {
	t.Parallel()
	chain := func(n int, agentOf func(i int) string) []Item {
		items := make([]Item, n)
		for i := range items {
			items[i] = Item{ID: fmt.Sprintf("r%05d", i), Agent: agentOf(i), Size: 10}
			if i > 0 {
				items[i].Requires = []string{fmt.Sprintf("r%05d", i-1)}
			}
		}
		return items
	}
	one := func(int) string { return "a" }
	independent := func(n int) []Item {
		items := make([]Item, n)
		for i := range items {
			items[i] = Item{ID: fmt.Sprintf("r%05d", i), Agent: fmt.Sprint("a", i%2), Size: 10}
		}
		return items
	}
	cases := []struct {
		why     string
		items   []Item
		limits  Limits
		batches int
		levels  int
	}{
		{"a chain on one agent is one batch", chain(1000, one), Limits{MaxResources: 5000}, 1, 1},
		{"a chain longer than a batch is cut into consecutive levels", chain(1000, one), Limits{MaxResources: 400}, 3, 3},
		{"a chain alternating agents needs a level per link", chain(6, func(i int) string { return fmt.Sprint("a", i%2) }),
			Limits{MaxResources: 500}, 6, 6},
		{"independent resources of two agents are one level", independent(1000), Limits{MaxResources: 500}, 2, 1},
		{"the byte limit cuts too", independent(100), Limits{MaxResources: 500, MaxBytes: 100}, 10, 1},
		{"no limits are the default ones", independent(1200), Limits{}, 4, 1},
		{"nothing to plan is no batch", nil, Limits{}, 0, 0},
	}
	for _, c := range cases {
		res := Make(c.items, nil, c.limits)
		if err := checkPlan(c.items, nil, c.limits, res); err != nil {
			t.Errorf("%s: %v", c.why, err)
		}
		levels := map[int]bool{}
		for _, b := range res.Batches {
			levels[b.Level] = true
		}
		if len(res.Batches) != c.batches || len(levels) != c.levels {
			t.Errorf("%s: %d batches in %d levels, want %d in %d", c.why, len(res.Batches), len(levels), c.batches, c.levels)
		}
	}
}

func TestCutTiesByAgentThenID(t *testing.T) {
	t.Parallel()
	items := []Item{
		{ID: "b", Agent: "x"}, {ID: "a", Agent: "y"}, {ID: "c", Agent: "x"}, {ID: "d", Agent: "x", Requires: []string{"a"}},
	}
	res := Make(items, nil, Limits{MaxResources: 10})
	var got []string
	for _, i := range res.Order {
		got = append(got, items[i].ID)
	}
	want := []string{"b", "c", "a", "d"}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(res.Batches) != 3 || res.Batches[2].Level != 1 {
		t.Errorf("order %q, batches %+v; want %q in three batches, d's a level up: "+
			"level 0 holds x's batch then y's, each in id order", got, res.Batches, want)
	}
}

// TestCutEvenly: a group is cut into as few batches as its limit allows,
// of even size, so that its batches, which run at once, end together
// (issue 28: 625 resources of an agent were 500 and 125, and the run
// waited for the 500 alone).
func TestCutEvenly(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n, max int
		want   []int
	}{
		{625, 500, []int{313, 312}},
		{1000, 500, []int{500, 500}},
		{1001, 500, []int{334, 334, 333}},
		{39, 500, []int{39}},
		{7, 3, []int{3, 2, 2}},
	} {
		items := make([]Item, c.n)
		for i := range items {
			items[i] = Item{ID: fmt.Sprintf("r%05d", i), Agent: "a", Size: 10}
		}
		res := Make(items, nil, Limits{MaxResources: c.max})
		var got []int
		for _, b := range res.Batches {
			got = append(got, b.Count)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%d resources, at most %d a batch: batches of %v, want %v", c.n, c.max, got, c.want)
		}
	}
}

// TestCutGroups: the agents of one group (one executor serves them) share
// batches, so 1,000 agents of 20 resources are 40 batches of 500, not
// 1,000 of 20 (issue 28: about 15 ms of CPU per batch); agents of
// another group, or of none, never share one.
func TestCutGroups(t *testing.T) {
	t.Parallel()
	var items []Item
	for a := range 1000 {
		for r := range 20 {
			items = append(items, Item{ID: fmt.Sprintf("f[a%04d,r%02d]", a, r), Agent: fmt.Sprintf("a%04d", a),
				Group: "executors/env/embedded", Size: 10})
		}
	}
	for r := range 30 {
		items = append(items, Item{ID: fmt.Sprintf("f[solo,r%02d]", r), Agent: "solo", Size: 10},
			Item{ID: fmt.Sprintf("f[other,r%02d]", r), Agent: "other", Group: "executors/env/pool/p", Size: 10})
	}
	res := Make(items, nil, DefaultLimits)
	if err := checkPlan(items, nil, DefaultLimits, res); err != nil {
		t.Fatal(err)
	}
	shared, alone := 0, map[string]int{}
	for _, b := range res.Batches {
		switch {
		case len(b.Agents) > 0:
			shared++
			if b.Count != 500 || len(b.Agents) != 25 {
				t.Errorf("batch %d: %d resources of %d agents, want 500 of 25", b.Seq, b.Count, len(b.Agents))
			}
		default:
			alone[b.Agent] += b.Count
		}
	}
	if shared != 40 || len(alone) != 2 || alone["solo"] != 30 || alone["other"] != 30 {
		t.Errorf("%d shared batches (want 40), alone %v (want solo and other, 30 each)", shared, alone)
	}

	// The checker refuses batches that mix groups or misname their agents.
	// Batches in key order: solo's, the 40 shared ones, other's.
	k := slices.IndexFunc(res.Batches, func(b Batch) bool { return len(b.Agents) > 0 })
	if k != 1 || len(res.Batches) != 42 {
		t.Fatalf("the first shared batch is %d of %d, want 1 of 42", k, len(res.Batches))
	}
	for _, c := range []struct {
		why string
		do  func(r *Result)
	}{
		{"agents not named", func(r *Result) { r.Batches[k].Agents = nil }},
		{"agents unsorted", func(r *Result) {
			a := r.Batches[k].Agents
			a[0], a[1] = a[1], a[0]
		}},
		{"two groups in a batch", func(r *Result) {
			// The last shared batch takes the next one's (other's).
			k := k + 39
			r.Batches[k].Count += r.Batches[k+1].Count
			r.Batches[k].Agents = append(r.Batches[k].Agents, "other")
			r.Batches = append(r.Batches[:k+1], r.Batches[k+2:]...)
			for i := k + 1; i < len(r.Batches); i++ {
				r.Batches[i].Seq--
			}
		}},
	} {
		r := Make(items, nil, DefaultLimits)
		c.do(&r)
		if err := checkPlan(items, nil, DefaultLimits, r); err == nil {
			t.Errorf("the checker passes a plan with %s", c.why)
		}
	}
}
