package plan

import (
	"fmt"
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
