package lsm

import "slices"

// Orders (docs/lsm.md, "Orders"): several creates, updates and deletes
// of service instances sent as one request, run by one workflow.

// Order policies.
const (
	// OrderAllOrNothing: the first failure stops the order, and what it
	// did is undone (compensated).
	OrderAllOrNothing = "all_or_nothing"
	// OrderBestEffort: every item that can run runs; an item whose
	// dependency did not succeed is skipped.
	OrderBestEffort = "best_effort"
)

// Order statuses.
const (
	OrderPending      = "pending"
	OrderRunning      = "running"
	OrderCompensating = "compensating"
	// OrderSucceeded: every item succeeded.
	OrderSucceeded = "succeeded"
	// OrderPartiallyFailed (best_effort): some items succeeded, some not.
	OrderPartiallyFailed = "partially_failed"
	// OrderFailed: no item succeeded (best_effort), or an all_or_nothing
	// order that could not undo everything it did (a delete went
	// through, or a compensation failed).
	OrderFailed = "failed"
	// OrderCompensated (all_or_nothing): an item failed and everything
	// the order did was undone.
	OrderCompensated = "compensated"
)

// Order item statuses.
const (
	ItemPending   = "pending"
	ItemRunning   = "running"
	ItemSucceeded = "succeeded"
	ItemFailed    = "failed"
	ItemSkipped   = "skipped"
	// ItemCompensated: the item succeeded (or a create failed after it
	// made the instance) and was undone.
	ItemCompensated        = "compensated"
	ItemCompensationFailed = "compensation_failed"
)

// OrderPlan is what an order's workflow knows of it: its policy, status
// and items (by position), as the store reads them.
type OrderPlan struct {
	Policy string
	Status string
	Items  []OrderPlanItem
}

// OrderPlanItem is one item: its client id, operation, the positions it
// depends on and its status.
type OrderPlanItem struct {
	ID        string
	Operation string
	Deps      []int
	Status    string
}

// OrderFinal reports whether an order status is final.
func OrderFinal(status string) bool {
	switch status {
	case OrderSucceeded, OrderPartiallyFailed, OrderFailed, OrderCompensated:
		return true
	}
	return false
}

// FindCycle returns one dependency cycle among items, as the positions
// on it with the first repeated at the end (a → b → a), or nil when
// there is none. deps[i] are the positions item i depends on, each in
// range. Deterministic: the cycle found from the lowest position.
func FindCycle(deps [][]int) []int {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(deps))
	type frame struct{ node, next int }
	for root := range deps {
		if color[root] != white {
			continue
		}
		stack := []frame{{root, 0}}
		color[root] = grey
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(deps[top.node]) {
				color[top.node] = black
				stack = stack[:len(stack)-1]
				continue
			}
			d := deps[top.node][top.next]
			top.next++
			switch color[d] {
			case grey:
				var cycle []int
				for i := range stack {
					if stack[i].node == d {
						for _, f := range stack[i:] {
							cycle = append(cycle, f.node)
						}
						break
					}
				}
				return append(cycle, d)
			case white:
				color[d] = grey
				stack = append(stack, frame{d, 0})
			}
		}
	}
	return nil
}

// Dependents returns, for each position, the positions that depend on it
// (sorted), from deps as FindCycle takes them.
func Dependents(deps [][]int) [][]int {
	out := make([][]int, len(deps))
	for i, ds := range deps {
		for _, d := range ds {
			if !slices.Contains(out[d], i) {
				out[d] = append(out[d], i)
			}
		}
	}
	for i := range out {
		slices.Sort(out[i])
	}
	return out
}
