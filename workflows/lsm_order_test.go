package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/intendhq/intend/internal/lsm"
)

// orderFake plays the order's activities: the plan is the store, run
// answers each item's outcome from outcome (default succeeded), and the
// calls are recorded in order.
type orderFake struct {
	mu       sync.Mutex
	plan     lsm.OrderPlan
	outcome  map[string]string // item id → status it ends in (forward)
	undo     map[string]string // item id → status of its compensation (default compensated)
	runs     []string          // item ids, "undo:" + id for compensations, in start order
	ends     []string          // the same, in end order
	statuses []string          // the order's statuses as written
	inflight int
	peak     int
	batches  []int // the sizes of the batches, in start order
	loads    int
}

func (f *orderFake) env(t *testing.T) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(30 * time.Second)
	RegisterOrders(env)
	LoadOrderActivity.Register(env, func(_ context.Context, in LoadOrderInput) (lsm.OrderPlan, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.loads++
		p := f.plan
		p.Items = slices.Clone(f.plan.Items)
		return p, nil
	})
	SetOrderStatusActivity.Register(env, func(_ context.Context, in SetOrderStatusInput) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.statuses = append(f.statuses, in.Status)
		f.plan.Status = in.Status
		return nil
	})
	MarkOrderItemsActivity.Register(env, func(_ context.Context, in MarkOrderItemsInput) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, m := range in.Items {
			f.plan.Items[m.Position].Status = in.Status
		}
		return nil
	})
	RunOrderItemsActivity.Register(env, func(_ context.Context, in RunOrderItemsInput) ([]RunOrderItemResult, error) {
		f.mu.Lock()
		f.batches = append(f.batches, len(in.Positions))
		for _, pos := range in.Positions {
			name := f.plan.Items[pos].ID
			if in.Compensate {
				name = "undo:" + name
			}
			f.runs = append(f.runs, name)
		}
		f.inflight += len(in.Positions)
		f.peak = max(f.peak, f.inflight)
		f.mu.Unlock()
		time.Sleep(20 * time.Millisecond) // let the batches in flight overlap
		f.mu.Lock()
		defer f.mu.Unlock()
		f.inflight -= len(in.Positions)
		out := make([]RunOrderItemResult, len(in.Positions))
		for k, pos := range in.Positions {
			it := f.plan.Items[pos]
			name := it.ID
			status := lsm.ItemSucceeded
			if in.Compensate {
				name = "undo:" + name
				status = lsm.ItemCompensated
				if s, ok := f.undo[it.ID]; ok {
					status = s
				}
			} else if s, ok := f.outcome[it.ID]; ok {
				status = s
			}
			f.ends = append(f.ends, name)
			f.plan.Items[pos].Status = status
			out[k] = RunOrderItemResult{Status: status}
		}
		return out, nil
	})
	return env
}

func item(id, op string, deps ...int) lsm.OrderPlanItem {
	return lsm.OrderPlanItem{ID: id, Operation: op, Deps: deps, Status: lsm.ItemPending}
}

func (f *orderFake) status(id string) string {
	for _, it := range f.plan.Items {
		if it.ID == id {
			return it.Status
		}
	}
	return ""
}

func before(list []string, a, b string) bool {
	i, j := slices.Index(list, a), slices.Index(list, b)
	return i >= 0 && j >= 0 && i < j
}

// TestLSMOrderScheduling: the order's decisions with its activities
// played by a fake: dependency order, the concurrency bound, skips,
// all_or_nothing's deletes last and its compensation (dependents first,
// failed creates too), and the final statuses.
func TestLSMOrderScheduling(t *testing.T) {
	t.Run("best_effort: a failure skips its dependents, transitively; the rest runs", func(t *testing.T) {
		f := &orderFake{plan: lsm.OrderPlan{Policy: lsm.OrderBestEffort, Status: lsm.OrderPending, Items: []lsm.OrderPlanItem{
			item("a", lsm.OpCreate), item("b", lsm.OpCreate, 0), item("c", lsm.OpCreate, 1), item("d", lsm.OpCreate),
		}}, outcome: map[string]string{"a": lsm.ItemFailed}}
		env := f.env(t)
		env.ExecuteWorkflow(LSMOrder, LSMOrderInput{OrderID: "o"})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		if got := []string{f.status("a"), f.status("b"), f.status("c"), f.status("d")}; !slices.Equal(got,
			[]string{lsm.ItemFailed, lsm.ItemSkipped, lsm.ItemSkipped, lsm.ItemSucceeded}) {
			t.Errorf("statuses = %v", got)
		}
		if !slices.Equal(f.statuses, []string{lsm.OrderRunning, lsm.OrderPartiallyFailed}) {
			t.Errorf("order statuses = %v", f.statuses)
		}
		if slices.Contains(f.runs, "b") || slices.Contains(f.runs, "c") {
			t.Errorf("skipped items ran: %v", f.runs)
		}
	})
	t.Run("dependencies first, at most MaxConcurrent at once, in batches", func(t *testing.T) {
		items := []lsm.OrderPlanItem{item("root", lsm.OpCreate)}
		for _, id := range []string{"1", "2", "3", "4", "5", "6"} {
			items = append(items, item(id, lsm.OpCreate, 0))
		}
		f := &orderFake{plan: lsm.OrderPlan{Policy: lsm.OrderBestEffort, Status: lsm.OrderPending, Items: items}}
		env := f.env(t)
		env.ExecuteWorkflow(LSMOrder, LSMOrderInput{OrderID: "o", MaxConcurrent: 2})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		if f.ends[0] != "root" || f.runs[0] != "root" || len(f.runs) != 7 {
			t.Errorf("runs %v, ends %v: root first", f.runs, f.ends)
		}
		if f.peak != 2 || !slices.Equal(f.batches, []int{1, 2, 2, 2}) {
			t.Errorf("peak concurrency %d (want 2), batches %v (want 1, 2, 2, 2)", f.peak, f.batches)
		}
		if f.statuses[len(f.statuses)-1] != lsm.OrderSucceeded {
			t.Errorf("order statuses = %v", f.statuses)
		}
	})
	t.Run("independent items go in batches of 64", func(t *testing.T) {
		var items []lsm.OrderPlanItem
		for i := range 150 {
			items = append(items, item(fmt.Sprint(i), lsm.OpCreate))
		}
		f := &orderFake{plan: lsm.OrderPlan{Policy: lsm.OrderBestEffort, Status: lsm.OrderPending, Items: items}}
		env := f.env(t)
		env.ExecuteWorkflow(LSMOrder, LSMOrderInput{OrderID: "o"})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		// The batches start together: their activities record in any order.
		if slices.Sort(f.batches); !slices.Equal(f.batches, []int{22, 64, 64}) || f.peak != 150 {
			t.Errorf("batches %v, peak %d", f.batches, f.peak)
		}
	})
	t.Run("all_or_nothing: deletes last; a failure compensates, dependents first", func(t *testing.T) {
		f := &orderFake{plan: lsm.OrderPlan{Policy: lsm.OrderAllOrNothing, Status: lsm.OrderPending, Items: []lsm.OrderPlanItem{
			item("a", lsm.OpCreate), item("b", lsm.OpUpdate, 0), item("del", lsm.OpDelete), item("c", lsm.OpCreate, 1),
			item("after", lsm.OpCreate, 3),
		}}, outcome: map[string]string{"c": lsm.ItemFailed}}
		env := f.env(t)
		env.ExecuteWorkflow(LSMOrder, LSMOrderInput{OrderID: "o"})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(f.runs, "del") || slices.Contains(f.runs, "after") {
			t.Errorf("the delete or c's dependent ran: %v", f.runs)
		}
		if f.status("del") != lsm.ItemSkipped || f.status("after") != lsm.ItemSkipped {
			t.Errorf("del %s, after %s: want skipped", f.status("del"), f.status("after"))
		}
		// c (a failed create) first, then b, then a: dependents first.
		if !before(f.ends, "undo:c", "undo:b") || !before(f.ends, "undo:b", "undo:a") {
			t.Errorf("compensation order: %v", f.ends)
		}
		if !slices.Equal(f.statuses, []string{lsm.OrderRunning, lsm.OrderCompensating, lsm.OrderCompensated}) {
			t.Errorf("order statuses = %v", f.statuses)
		}
	})
	t.Run("all_or_nothing: the delete runs once everything else succeeded", func(t *testing.T) {
		f := &orderFake{plan: lsm.OrderPlan{Policy: lsm.OrderAllOrNothing, Status: lsm.OrderPending, Items: []lsm.OrderPlanItem{
			item("del", lsm.OpDelete), item("a", lsm.OpCreate), item("b", lsm.OpCreate, 1),
		}}}
		env := f.env(t)
		env.ExecuteWorkflow(LSMOrder, LSMOrderInput{OrderID: "o"})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		if !before(f.ends, "b", "del") || f.runs[len(f.runs)-1] != "del" {
			t.Errorf("runs %v, ends %v: del last", f.runs, f.ends)
		}
		if f.statuses[len(f.statuses)-1] != lsm.OrderSucceeded {
			t.Errorf("order statuses = %v", f.statuses)
		}
	})
	t.Run("all_or_nothing: a failed compensation fails the order", func(t *testing.T) {
		f := &orderFake{plan: lsm.OrderPlan{Policy: lsm.OrderAllOrNothing, Status: lsm.OrderPending, Items: []lsm.OrderPlanItem{
			item("a", lsm.OpCreate), item("b", lsm.OpCreate, 0),
		}}, outcome: map[string]string{"b": lsm.ItemFailed}, undo: map[string]string{"a": lsm.ItemCompensationFailed}}
		env := f.env(t)
		env.ExecuteWorkflow(LSMOrder, LSMOrderInput{OrderID: "o"})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		if got := f.statuses[len(f.statuses)-1]; got != lsm.OrderFailed {
			t.Errorf("order statuses = %v", f.statuses)
		}
	})
	t.Run("a long history continues as new after the items in flight, and goes on from the store", func(t *testing.T) {
		var items []lsm.OrderPlanItem
		for _, id := range []string{"1", "2", "3", "4", "5", "6", "7", "8"} {
			items = append(items, item(id, lsm.OpCreate))
		}
		f := &orderFake{plan: lsm.OrderPlan{Policy: lsm.OrderBestEffort, Status: lsm.OrderPending, Items: items}}
		env := f.env(t)
		env.ExecuteWorkflow(LSMOrder, LSMOrderInput{OrderID: "o", MaxConcurrent: 2, HistoryLimit: 1})
		var can *workflow.ContinueAsNewError
		if err := env.GetWorkflowError(); !errors.As(err, &can) {
			t.Fatalf("want continue-as-new, got %v", err)
		}
		if n := len(f.runs); n != 2 || len(f.ends) != 2 {
			t.Fatalf("the first run ran %v (ended %v), want the first batch of 2 only", f.runs, f.ends)
		}
		// The next run: from the store, only what is left.
		env = f.env(t)
		env.ExecuteWorkflow(LSMOrder, LSMOrderInput{OrderID: "o"})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		if len(f.runs) != 8 || f.statuses[len(f.statuses)-1] != lsm.OrderSucceeded {
			t.Errorf("runs %v, statuses %v", f.runs, f.statuses)
		}
	})
	t.Run("an order taken up again with an item running reruns it; a final one does nothing", func(t *testing.T) {
		f := &orderFake{plan: lsm.OrderPlan{Policy: lsm.OrderBestEffort, Status: lsm.OrderRunning, Items: []lsm.OrderPlanItem{
			{ID: "a", Operation: lsm.OpCreate, Status: lsm.ItemSucceeded}, {ID: "b", Operation: lsm.OpCreate, Deps: []int{0},
				Status: lsm.ItemRunning},
		}}}
		env := f.env(t)
		env.ExecuteWorkflow(LSMOrder, LSMOrderInput{OrderID: "o"})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(f.runs, []string{"b"}) || !slices.Equal(f.statuses, []string{lsm.OrderSucceeded}) {
			t.Errorf("runs %v, statuses %v", f.runs, f.statuses)
		}
		env = f.env(t)
		env.ExecuteWorkflow(LSMOrder, LSMOrderInput{OrderID: "o"})
		if err := env.GetWorkflowError(); err != nil || len(f.runs) != 1 || len(f.statuses) != 1 {
			t.Errorf("a final order ran again: %v, runs %v, statuses %v", err, f.runs, f.statuses)
		}
	})
}

// TestFindCycle: cycles are found, named from the lowest position.
func TestFindCycle(t *testing.T) {
	for _, c := range []struct {
		why  string
		deps [][]int
		want []int
	}{
		{"none", [][]int{nil, {0}, {0, 1}}, nil},
		{"a diamond is no cycle", [][]int{nil, {0}, {0}, {1, 2}}, nil},
		{"two items", [][]int{{1}, {0}}, []int{0, 1, 0}},
		{"three, reached late", [][]int{nil, {3}, {1}, {2}}, []int{1, 3, 2, 1}},
	} {
		if got := lsm.FindCycle(c.deps); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.why, got, c.want)
		}
	}
}
