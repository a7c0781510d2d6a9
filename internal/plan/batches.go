package plan

import (
	"slices"
	"sort"
)

// cut orders the items of a run that go in batches (run: indices into
// all) and cuts them into batches.
//
// A batch holds resources of one agent, or of the agents of one group
// (Item.Group: agents one executor serves), and may hold resources that
// require each other: the executor runs a batch in dependency order. So a chain of
// resources on one agent is one batch, not one batch per link. Batches get
// a level: every batch a batch depends on (through requires between
// resources of different batches) has a lower level, and batches of one
// level are independent, so the deploy workflow runs a level's batches in
// parallel and the levels one after another.
//
// How:
//  1. order the resources topologically (Kahn; ties by agent, then id);
//  2. give each resource a stage: the most agent changes along any requires
//     path into it, so resources of one agent that depend on each other
//     share a stage;
//  3. cut each (stage, agent or group) set, in topological order, into
//     batches within the limits;
//  4. a batch's level is one more than the highest level of a batch it
//     depends on (0 if none).
//
// Requires outside run are deployed already and do not count. It returns
// the indices (into all) reordered so that every batch is a contiguous run
// of them, and the batches in (level, agent, stage) order, numbered from 1.
func cut(all []Item, run []int, limits Limits) ([]int, []Batch) {
	if limits.MaxResources <= 0 {
		limits = DefaultLimits
	}
	n := len(run)
	items := make([]Item, n)
	for i, k := range run {
		items[i] = all[k]
	}
	index := make(map[string]int, n)
	for i, it := range items {
		index[it.ID] = i
	}
	deps := make([][]int, n)
	dependents := make([][]int, n)
	indeg := make([]int, n)
	for i, it := range items {
		for _, r := range it.Requires {
			if j, ok := index[r]; ok && j != i {
				deps[i] = append(deps[i], j)
				dependents[j] = append(dependents[j], i)
				indeg[i]++
			}
		}
	}

	// 1. Topological order; the ready set is kept sorted by (agent, id)
	// so the plan does not depend on the input order.
	less := func(a, b int) bool {
		if items[a].Agent != items[b].Agent {
			return items[a].Agent < items[b].Agent
		}
		return items[a].ID < items[b].ID
	}
	var ready []int
	for i := range items {
		if indeg[i] == 0 {
			ready = append(ready, i)
		}
	}
	sort.Slice(ready, func(a, b int) bool { return less(ready[a], ready[b]) })
	order := make([]int, 0, n)
	for len(ready) > 0 {
		i := ready[0]
		ready = ready[1:]
		order = append(order, i)
		var next []int
		for _, d := range dependents[i] {
			indeg[d]--
			if indeg[d] == 0 {
				next = append(next, d)
			}
		}
		if len(next) > 0 {
			ready = append(ready, next...)
			sort.Slice(ready, func(a, b int) bool { return less(ready[a], ready[b]) })
		}
	}
	if len(order) < n {
		// A cycle cannot be exported; should stored data hold one anyway,
		// its members go last, in id order, rather than never.
		var rest []int
		for i := range items {
			if indeg[i] > 0 {
				rest = append(rest, i)
			}
		}
		sort.Slice(rest, func(a, b int) bool { return less(rest[a], rest[b]) })
		order = append(order, rest...)
	}
	pos := make([]int, n)
	for p, i := range order {
		pos[i] = p
	}

	// 2. Stages.
	stage := make([]int, n)
	for _, i := range order {
		for _, j := range deps[i] {
			if pos[j] > pos[i] {
				continue // inside a cycle
			}
			s := stage[j]
			if items[j].Agent != items[i].Agent {
				s++
			}
			stage[i] = max(stage[i], s)
		}
	}

	// 3. Cut (stage, agent or group) sets in topological order.
	key := make([]string, n)
	for i, it := range items {
		if it.Group != "" {
			key[i] = "g" + it.Group
		} else {
			key[i] = "a" + it.Agent
		}
	}
	byGroup := make([]int, n)
	copy(byGroup, order)
	sort.SliceStable(byGroup, func(a, b int) bool {
		x, y := byGroup[a], byGroup[b]
		if stage[x] != stage[y] {
			return stage[x] < stage[y]
		}
		return key[x] < key[y]
	})
	batchOf := make([]int, n)
	type group struct {
		key     string
		stage   int
		members []int
		bytes   int
		size    int // the most members it takes
	}
	// A group of g resources is cut into ⌈g ÷ MaxResources⌉ batches of
	// even size (625: 313 and 312, not 500 and 125), so that its batches,
	// which run at once, end together. left[i] is what is left of item i's
	// group from i on.
	left := make([]int, n)
	for b := n - 1; b >= 0; b-- {
		i := byGroup[b]
		left[i] = 1
		if b+1 < n {
			if j := byGroup[b+1]; stage[j] == stage[i] && key[j] == key[i] {
				left[i] = left[j] + 1
			}
		}
	}
	var cuts []group
	for _, i := range byGroup {
		k := len(cuts) - 1
		if k < 0 || cuts[k].stage != stage[i] || cuts[k].key != key[i] ||
			len(cuts[k].members) >= cuts[k].size ||
			(limits.MaxBytes > 0 && cuts[k].bytes+items[i].Size > limits.MaxBytes && len(cuts[k].members) > 0) {
			// An even share of what is left: the batches still to cut
			// from it, each at most MaxResources.
			rest := (left[i] + limits.MaxResources - 1) / limits.MaxResources
			cuts = append(cuts, group{key: key[i], stage: stage[i], size: (left[i] + rest - 1) / rest})
			k++
		}
		cuts[k].members = append(cuts[k].members, i)
		cuts[k].bytes += items[i].Size
		batchOf[i] = k
	}

	// 4. Levels: cuts are in (stage, key, topological) order, so every
	// batch a cut depends on comes before it.
	level := make([]int, len(cuts))
	for k, c := range cuts {
		for _, i := range c.members {
			for _, j := range deps[i] {
				if b := batchOf[j]; b != k && b < k {
					level[k] = max(level[k], level[b]+1)
				}
			}
		}
	}
	ck := make([]int, len(cuts))
	for k := range ck {
		ck[k] = k
	}
	sort.SliceStable(ck, func(a, b int) bool { return level[ck[a]] < level[ck[b]] })

	out := make([]int, 0, n)
	refs := make([]Batch, 0, len(cuts))
	for seq, k := range ck {
		c := cuts[k]
		for _, i := range c.members {
			out = append(out, run[i])
		}
		b := Batch{Seq: seq + 1, Level: level[k], Count: len(c.members), First: items[c.members[0]].ID}
		b.Agent, b.Agents = agentsOf(items, c.members)
		refs = append(refs, b)
	}
	return out, refs
}

// agentsOf returns the first agent by name of members, and all of them,
// sorted, when there are several (nil for one).
func agentsOf(items []Item, members []int) (string, []string) {
	first := items[members[0]].Agent
	var several []string
	for _, i := range members[1:] {
		if a := items[i].Agent; a != first && !slices.Contains(several, a) {
			if several == nil {
				several = []string{first}
			}
			several = append(several, a)
		}
	}
	if several == nil {
		return first, nil
	}
	slices.Sort(several)
	return several[0], several
}
