package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/intendhq/intend/internal/lsm"
)

// Names of orders (docs/architecture.md, "Orders").
const (
	LSMOrderWorkflowName = "intend.LSMOrder"
)

// Activities of orders (activity.go).
var (
	LoadOrderActivity      = newActivity[LoadOrderInput, lsm.OrderPlan]("intend.LoadOrder")
	RunOrderItemsActivity  = newActivity[RunOrderItemsInput, []RunOrderItemResult]("intend.RunOrderItems")
	SetOrderStatusActivity = newActivityNoResult[SetOrderStatusInput]("intend.SetOrderStatus")
	MarkOrderItemsActivity = newActivityNoResult[MarkOrderItemsInput]("intend.MarkOrderItems")
)

// Defaults of the order workflow.
const (
	// DefaultOrderConcurrency is how many items of an order run at once.
	DefaultOrderConcurrency = 1000
	// orderBatch is how many items one RunOrderItems runs: a batch holds
	// one activity slot of the server's worker, however long its items
	// wait, and reads all its instances in one query per poll.
	orderBatch = 64
	// defaultOrderHistory is the history length (events) after which an
	// order's run starts no more items, lets those in flight finish and
	// continues as new (each item costs about 6 events).
	defaultOrderHistory = 20000
)

// OrderWorkflowID is the id of an order's workflow.
func OrderWorkflowID(env, id string) string { return "lsm-order/" + env + "/" + id }

// RegisterOrders registers the order workflow under its name.
func RegisterOrders(w interface {
	RegisterWorkflowWithOptions(w interface{}, options workflow.RegisterOptions)
}) {
	w.RegisterWorkflowWithOptions(LSMOrder, workflow.RegisterOptions{Name: LSMOrderWorkflowName})
}

// LSMOrderInput starts (or continues) an order's workflow. The order
// itself is in PostgreSQL: every run loads it (LoadOrder), so a continued
// run, or one started again by the reconciler after Temporal lost its
// store, goes on from the items' outcomes written so far.
type LSMOrderInput struct {
	EnvironmentID   string
	EnvironmentName string
	OrderID         string
	// MaxConcurrent bounds the items in flight (0: 1,000).
	MaxConcurrent int
	// HistoryLimit is the history length that makes a run continue as
	// new once the items in flight are done (0: 20,000 events).
	HistoryLimit int
}

// LoadOrderInput asks for an order's plan.
type LoadOrderInput struct {
	EnvironmentID string
	OrderID       string
}

// SetOrderStatusInput writes an order's status.
type SetOrderStatusInput struct {
	EnvironmentID string
	OrderID       string
	Status        string
}

// OrderItemMark is one item MarkOrderItems marks, and why.
type OrderItemMark struct {
	Position int
	Reason   string
}

// MarkOrderItemsInput gives items one status (skipped; failed when their
// activity gave up), each with its reason.
type MarkOrderItemsInput struct {
	EnvironmentID string
	OrderID       string
	Status        string
	Items         []OrderItemMark
}

// RunOrderItemsInput runs a batch of an order's items at once, by
// position (Compensate: undoes them).
type RunOrderItemsInput struct {
	EnvironmentID   string
	EnvironmentName string
	OrderID         string
	Positions       []int
	Compensate      bool
}

// RunOrderItemInput is one item of a RunOrderItemsInput.
type RunOrderItemInput struct {
	EnvironmentID   string
	EnvironmentName string
	OrderID         string
	Position        int
	Compensate      bool
}

// RunOrderItemResult is where the item ended: lsm.ItemSucceeded or
// lsm.ItemFailed (lsm.ItemCompensated or lsm.ItemCompensationFailed when
// compensating), with the reason of a failure. The activity has written
// it to the item already.
type RunOrderItemResult struct {
	Status string
	Error  string
}

// batchDone is a batch's activity that returned: the outcome of each
// item (Results, by Positions), or the error it gave up with.
type batchDone struct {
	Positions []int
	Results   []RunOrderItemResult
	Err       string
}

// orderRun is one run of an order's workflow: the plan and what the
// scheduling derives from it.
type orderRun struct {
	in         LSMOrderInput
	plan       lsm.OrderPlan
	aon        bool
	dependents [][]int
	// failed names the first item that failed (all_or_nothing stops).
	failed string
	// started counts the batch activities this run started.
	started int
}

// LSMOrder is the workflow of one order (lsm-order/<env>/<id>). It runs
// the items in dependency order, at most MaxConcurrent at once, each
// with RunOrderItem (which sends the item's request to the instance's
// workflow as the API does and waits until the instance settles, writing
// the outcome). best_effort skips the items whose dependency did not
// succeed and runs the rest. all_or_nothing runs its deletes last, once
// every other item succeeded (a delete cannot be undone); on the first
// failure it starts no more items, waits for those in flight, marks the
// rest skipped and compensates, dependents before their dependencies:
// created instances are deleted, updated ones get the attributes they
// had before the order. The order's status is written as it changes.
func LSMOrder(ctx workflow.Context, in LSMOrderInput) error {
	if in.MaxConcurrent <= 0 {
		in.MaxConcurrent = DefaultOrderConcurrency
	}
	if in.HistoryLimit <= 0 {
		in.HistoryLimit = defaultOrderHistory
	}
	qctx := orderQuickOptions(ctx)
	plan, err := LoadOrderActivity.Run(qctx, LoadOrderInput{EnvironmentID: in.EnvironmentID, OrderID: in.OrderID})
	if err != nil {
		return fmt.Errorf("load order: %w", err)
	}
	if lsm.OrderFinal(plan.Status) {
		return nil
	}
	o := &orderRun{in: in, plan: plan, aon: plan.Policy == lsm.OrderAllOrNothing}
	if plan.Status == lsm.OrderCompensating {
		o.failed = "an item" // the run before found the failure
		for _, it := range plan.Items {
			if it.Status == lsm.ItemFailed {
				o.failed = it.ID
				break
			}
		}
	}
	deps := make([][]int, len(plan.Items))
	for i, it := range plan.Items {
		deps[i] = it.Deps
	}
	o.dependents = lsm.Dependents(deps)
	if plan.Status == lsm.OrderPending {
		if err := o.setStatus(ctx, lsm.OrderRunning); err != nil {
			return err
		}
		plan.Status = lsm.OrderRunning
	}
	if plan.Status != lsm.OrderCompensating {
		more, err := o.forward(ctx)
		if err != nil || more {
			return o.next(ctx, err, more)
		}
		if o.failed == "" || !o.aon {
			return o.setStatus(ctx, o.outcome())
		}
		if err := o.setStatus(ctx, lsm.OrderCompensating); err != nil {
			return err
		}
	}
	more, err := o.compensate(ctx)
	if err != nil || more {
		return o.next(ctx, err, more)
	}
	return o.setStatus(ctx, o.outcome())
}

// next ends a run: with err, or continuing as new when more.
func (o *orderRun) next(ctx workflow.Context, err error, more bool) error {
	if err != nil {
		return err
	}
	workflow.GetLogger(ctx).Info("order continues as new", "order", o.in.OrderID)
	return workflow.NewContinueAsNewError(ctx, LSMOrderWorkflowName, o.in)
}

func orderQuickOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second},
	})
}

// orderItemOptions: an item waits for its instance to settle (a deploy:
// seconds to minutes), heartbeating; a lost worker is noticed within the
// heartbeat timeout and the item runs again (idempotently).
func orderItemOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Hour,
		HeartbeatTimeout:    20 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
}

func (o *orderRun) setStatus(ctx workflow.Context, status string) error {
	if err := SetOrderStatusActivity.Run(orderQuickOptions(ctx), SetOrderStatusInput{
		EnvironmentID: o.in.EnvironmentID, OrderID: o.in.OrderID, Status: status}); err != nil {
		return fmt.Errorf("set order status %s: %w", status, err)
	}
	o.plan.Status = status
	return nil
}

func (o *orderRun) mark(ctx workflow.Context, status string, marks []OrderItemMark) error {
	if len(marks) == 0 {
		return nil
	}
	if err := MarkOrderItemsActivity.Run(orderQuickOptions(ctx), MarkOrderItemsInput{
		EnvironmentID: o.in.EnvironmentID, OrderID: o.in.OrderID, Status: status, Items: marks}); err != nil {
		return fmt.Errorf("mark order items %s: %w", status, err)
	}
	for _, m := range marks {
		o.plan.Items[m.Position].Status = status
	}
	return nil
}

// eventsPerBatch bounds the events one batch's activity adds to the
// history (scheduled, started, completed, and its share of workflow
// tasks).
const eventsPerBatch = 6

// historyFull reports whether the run should continue as new: the
// history is as long as HistoryLimit (what the server reports, or the
// bound from the items started in this run, whichever is larger), or the
// server suggests it.
func (o *orderRun) historyFull(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	n := max(info.GetCurrentHistoryLength(), o.started*eventsPerBatch)
	return n >= o.in.HistoryLimit || info.GetContinueAsNewSuggested()
}

// pool runs items' activities in batches, at most MaxConcurrent items
// at once.
type pool struct {
	o        *orderRun
	done     workflow.Channel
	inflight int
}

func (o *orderRun) newPool(ctx workflow.Context) *pool {
	return &pool{o: o, done: workflow.NewChannel(ctx)}
}

// room is how many more items may start.
func (p *pool) room() int { return p.o.in.MaxConcurrent - p.inflight }

// take starts the items at the head of queue that fit, in batches, and
// returns the rest of the queue; skip tells an item that is not to run.
func (p *pool) take(ctx workflow.Context, queue []int, compensate bool, skip func(int) bool) []int {
	for len(queue) > 0 && p.room() > 0 {
		var batch []int
		for len(queue) > 0 && len(batch) < min(orderBatch, p.room()) {
			i := queue[0]
			queue = queue[1:]
			if !skip(i) {
				batch = append(batch, i)
			}
		}
		if len(batch) > 0 {
			p.start(ctx, batch, compensate)
		}
	}
	return queue
}

func (p *pool) start(ctx workflow.Context, batch []int, compensate bool) {
	p.inflight += len(batch)
	p.o.started++
	for _, i := range batch {
		if !compensate {
			p.o.plan.Items[i].Status = lsm.ItemRunning
		}
	}
	in := RunOrderItemsInput{EnvironmentID: p.o.in.EnvironmentID, EnvironmentName: p.o.in.EnvironmentName,
		OrderID: p.o.in.OrderID, Positions: batch, Compensate: compensate}
	f := RunOrderItemsActivity.Start(orderItemOptions(ctx), in)
	workflow.Go(ctx, func(ctx workflow.Context) {
		d := batchDone{Positions: batch}
		var err error
		if d.Results, err = f.Get(ctx); err != nil {
			d.Err = err.Error()
		}
		p.done.Send(ctx, d)
	})
}

// wait returns the next batch done, one outcome per item (an error the
// batch gave up with is each item's failure: failed is its status).
func (p *pool) wait(ctx workflow.Context, failed string) []itemDone {
	var d batchDone
	p.done.Receive(ctx, &d)
	p.inflight -= len(d.Positions)
	out := make([]itemDone, len(d.Positions))
	for k, pos := range d.Positions {
		out[k] = itemDone{Position: pos}
		switch {
		case d.Err != "":
			out[k].Err = d.Err
		case k < len(d.Results):
			out[k].Result = d.Results[k]
		default:
			out[k].Result = RunOrderItemResult{Status: failed, Error: "no outcome reported"}
		}
	}
	return out
}

// itemDone is one item of a batch done.
type itemDone struct {
	Position int
	Result   RunOrderItemResult
	Err      string
}

// forward runs the items. It returns more when the run should continue
// as new (the items in flight are done, and their outcomes written).
func (o *orderRun) forward(ctx workflow.Context) (more bool, err error) {
	items := o.plan.Items
	waiting := make([]int, len(items)) // deps not succeeded yet
	nonDeletesLeft := 0
	var queue, held []int // ready; all_or_nothing deletes waiting for the others
	var skips []OrderItemMark
	for i := range items {
		if items[i].Status == lsm.ItemRunning {
			items[i].Status = lsm.ItemPending // its activity runs again, idempotently
		}
		if items[i].Status == lsm.ItemFailed && o.failed == "" {
			o.failed = items[i].ID
		}
		if items[i].Operation != lsm.OpDelete && items[i].Status != lsm.ItemSucceeded {
			nonDeletesLeft++
		}
	}
	for i, it := range items {
		if it.Status != lsm.ItemPending {
			continue
		}
		for _, d := range it.Deps {
			switch items[d].Status {
			case lsm.ItemSucceeded:
			case lsm.ItemFailed, lsm.ItemSkipped:
				waiting[i] = -1
			default:
				waiting[i]++
			}
		}
	}
	for i, it := range items {
		switch {
		case it.Status != lsm.ItemPending:
		case waiting[i] < 0 && !o.aon:
			skips = o.skipFrom(i, skips)
		case waiting[i] == 0:
			queue = append(queue, i)
		}
	}
	release := func() {
		// all_or_nothing: deletes go once everything else succeeded.
		var keep []int
		for _, i := range queue {
			if o.aon && items[i].Operation == lsm.OpDelete && nonDeletesLeft > 0 {
				held = append(held, i)
			} else {
				keep = append(keep, i)
			}
		}
		queue = keep
		if nonDeletesLeft == 0 && len(held) > 0 {
			queue = append(queue, held...)
			held = nil
		}
	}
	p := o.newPool(ctx)
	stopping := false
	for {
		if err := o.mark(ctx, lsm.ItemSkipped, skips); err != nil {
			return false, err
		}
		skips = nil
		release()
		if !stopping && !(o.aon && o.failed != "") {
			queue = p.take(ctx, queue, false, func(i int) bool { return items[i].Status != lsm.ItemPending })
		}
		if p.inflight == 0 {
			break
		}
		var failedMarks []OrderItemMark
		for _, d := range p.wait(ctx, lsm.ItemFailed) {
			it := &items[d.Position]
			if d.Err != "" {
				it.Status = lsm.ItemFailed
				failedMarks = append(failedMarks, OrderItemMark{Position: d.Position, Reason: d.Err})
			} else {
				it.Status = d.Result.Status
			}
			if it.Status == lsm.ItemSucceeded {
				if it.Operation != lsm.OpDelete {
					nonDeletesLeft--
				}
				for _, j := range o.dependents[d.Position] {
					if items[j].Status == lsm.ItemPending && waiting[j] > 0 {
						if waiting[j]--; waiting[j] == 0 {
							queue = append(queue, j)
						}
					}
				}
			} else {
				if o.failed == "" {
					o.failed = it.ID
				}
				if !o.aon {
					skips = o.skipFrom(d.Position, skips)
				}
			}
		}
		if err := o.mark(ctx, lsm.ItemFailed, failedMarks); err != nil {
			return false, err
		}
		if !stopping && o.historyFull(ctx) {
			stopping = true
		}
	}
	if stopping && !(o.aon && o.failed != "") && o.anyPending() {
		return true, nil
	}
	if o.aon && o.failed != "" {
		// Nothing more starts: what did not run is skipped.
		var rest []OrderItemMark
		for i, it := range items {
			if it.Status == lsm.ItemPending {
				rest = append(rest, OrderItemMark{Position: i,
					Reason: fmt.Sprintf("not started: item %q failed (all_or_nothing)", o.failed)})
			}
		}
		return false, o.mark(ctx, lsm.ItemSkipped, rest)
	}
	return false, nil
}

// skipFrom appends to skips every pending item that depends, directly or
// not, on the item at pos (which did not succeed), each naming the
// dependency it waited for.
func (o *orderRun) skipFrom(pos int, skips []OrderItemMark) []OrderItemMark {
	items := o.plan.Items
	stack := []int{pos}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, j := range o.dependents[x] {
			if items[j].Status != lsm.ItemPending {
				continue
			}
			verb := "failed"
			if items[x].Status == lsm.ItemSkipped {
				verb = "was skipped"
			}
			items[j].Status = lsm.ItemSkipped
			skips = append(skips, OrderItemMark{Position: j, Reason: fmt.Sprintf("dependency %q %s", items[x].ID, verb)})
			stack = append(stack, j)
		}
	}
	// The item at pos itself, when it is pending (a dependency of it
	// failed in an earlier run).
	if items[pos].Status == lsm.ItemPending {
		for _, d := range items[pos].Deps {
			if s := items[d].Status; s == lsm.ItemFailed || s == lsm.ItemSkipped {
				items[pos].Status = lsm.ItemSkipped
				skips = append(skips, OrderItemMark{Position: pos, Reason: fmt.Sprintf("dependency %q %s", items[d].ID, s)})
				return o.skipFrom(pos, skips)
			}
		}
	}
	return skips
}

func (o *orderRun) anyPending() bool {
	for _, it := range o.plan.Items {
		if it.Status == lsm.ItemPending {
			return true
		}
	}
	return false
}

// undoable reports whether the item is to be compensated: a create or
// update that succeeded (or was cut short: running), or a create that
// failed after it made its instance (the activity finds whether it did).
func undoable(it lsm.OrderPlanItem) bool {
	switch it.Operation {
	case lsm.OpCreate:
		return it.Status == lsm.ItemSucceeded || it.Status == lsm.ItemRunning || it.Status == lsm.ItemFailed
	case lsm.OpUpdate:
		return it.Status == lsm.ItemSucceeded || it.Status == lsm.ItemRunning
	}
	return false
}

// compensate undoes the undoable items, an item only once every item
// that depends on it is undone (the reverse of the order they ran in).
func (o *orderRun) compensate(ctx workflow.Context) (more bool, err error) {
	items := o.plan.Items
	blockers := make([]int, len(items))
	for _, it := range items {
		if !undoable(it) {
			continue
		}
		for _, d := range it.Deps {
			if undoable(items[d]) {
				blockers[d]++
			}
		}
	}
	var queue []int
	for i, it := range items {
		if undoable(it) && blockers[i] == 0 {
			queue = append(queue, i)
		}
	}
	p := o.newPool(ctx)
	stopping := false
	for {
		if !stopping {
			queue = p.take(ctx, queue, true, func(int) bool { return false })
		}
		if p.inflight == 0 {
			break
		}
		var failedMarks []OrderItemMark
		for _, d := range p.wait(ctx, lsm.ItemCompensationFailed) {
			if d.Err != "" {
				items[d.Position].Status = lsm.ItemCompensationFailed
				failedMarks = append(failedMarks, OrderItemMark{Position: d.Position, Reason: d.Err})
			} else {
				items[d.Position].Status = d.Result.Status
			}
			for _, dep := range items[d.Position].Deps {
				if undoable(items[dep]) {
					if blockers[dep]--; blockers[dep] == 0 {
						queue = append(queue, dep)
					}
				}
			}
		}
		if err := o.mark(ctx, lsm.ItemCompensationFailed, failedMarks); err != nil {
			return false, err
		}
		if !stopping && o.historyFull(ctx) {
			stopping = true
		}
	}
	return stopping && len(queue) > 0, nil
}

// outcome is the order's final status from its items'.
func (o *orderRun) outcome() string {
	var ok, bad, deleted, undoFailed int
	for _, it := range o.plan.Items {
		switch it.Status {
		case lsm.ItemSucceeded:
			ok++
			if it.Operation == lsm.OpDelete {
				deleted++
			}
		case lsm.ItemCompensationFailed:
			undoFailed++
		case lsm.ItemFailed, lsm.ItemSkipped:
			bad++
		}
	}
	switch {
	case o.aon && o.failed == "":
		return lsm.OrderSucceeded
	case o.aon && (deleted > 0 || undoFailed > 0 || ok > 0):
		return lsm.OrderFailed
	case o.aon:
		return lsm.OrderCompensated
	case bad == 0:
		return lsm.OrderSucceeded
	case ok == 0:
		return lsm.OrderFailed
	}
	return lsm.OrderPartiallyFailed
}
