package plan

import (
	"fmt"
	"sort"
)

// holdUndefined picks out of items the undefined ones and those that
// require one: directly, through other items, or an undefined resource
// that is not among items (outside). It returns the indices of the rest,
// in their order, and the held ones in id order.
//
// Only the undefined resources outside the run are known here; a resource
// requiring one that is not deployed for another reason (say, it was
// skipped for an undefined one itself) is left to the executor, which
// skips it for that dependency.
func holdUndefined(items []Item, outside map[string]bool) ([]int, []Held) {
	index := make(map[string]int, len(items))
	for i, it := range items {
		index[it.ID] = i
	}
	// why[i] != "" holds item i; root[i] names the undefined resource it
	// waits for.
	why := make([]string, len(items))
	root := make([]string, len(items))
	var queue []int
	for i, it := range items {
		if it.Undefined {
			why[i] = "its attributes depend on values not known yet: a version that defines it deploys it"
			root[i] = it.ID
			queue = append(queue, i)
		}
	}
	for i, it := range items {
		if why[i] != "" {
			continue
		}
		for _, q := range it.Requires {
			if _, in := index[q]; !in && outside[q] {
				why[i] = fmt.Sprintf("requires %s, which is undefined", q)
				root[i] = q
				queue = append(queue, i)
				break
			}
		}
	}
	run := make([]int, 0, len(items)-len(queue))
	if len(queue) == 0 {
		for i := range items {
			run = append(run, i)
		}
		return run, nil
	}
	dependents := make([][]int, len(items))
	for i, it := range items {
		for _, q := range it.Requires {
			if j, ok := index[q]; ok && j != i {
				dependents[j] = append(dependents[j], i)
			}
		}
	}
	// Breadth first from the undefined ones: each dependent names the
	// nearest resource it waits for.
	for k := 0; k < len(queue); k++ {
		j := queue[k]
		for _, i := range dependents[j] {
			if why[i] != "" {
				continue
			}
			if items[j].Undefined {
				why[i] = fmt.Sprintf("requires %s, which is undefined", items[j].ID)
			} else {
				why[i] = fmt.Sprintf("requires %s, which depends on undefined %s", items[j].ID, root[j])
			}
			root[i] = root[j]
			queue = append(queue, i)
		}
	}
	run = run[:0]
	held := make([]Held, 0, len(queue))
	for i, it := range items {
		switch {
		case why[i] == "":
			run = append(run, i)
		case it.Undefined:
			held = append(held, Held{Index: i, Result: ResultUndefined, Why: why[i]})
		default:
			held = append(held, Held{Index: i, Result: ResultSkippedForUndefined, Why: why[i]})
		}
	}
	sort.Slice(held, func(a, b int) bool { return items[held[a].Index].ID < items[held[b].Index].ID })
	return run, held
}
