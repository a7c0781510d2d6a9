package activities

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/workflows"
)

// LSMOrders holds the activities of orders (workflows.LSMOrder): load an
// order, write its status and its items' marks, and run one item. Each is
// idempotent: an item's request to its instance's workflow carries a
// per-item Idempotency-Key (the order and the item), whose first response
// the engine stores with the transfer, so a retried item finds its
// request applied and waits for the instance instead of sending it again.
type LSMOrders struct {
	Store *store.Store
	// Engine sends an item's request to its instance's workflow as the
	// API does (intend server's lifecycle engine): a *lsm.Rejection other
	// than busy is the item's failure; any other error is retried.
	Engine lsm.Engine
	// Sync asks an instance's workflow to compare itself with PostgreSQL
	// (workflows.SyncSignal): a retried item whose request was applied
	// may have lost the workflow task that applied it. nil: not asked.
	Sync func(ctx context.Context, env lsm.Env, entity, id string) error
	// Poll is the interval between two reads of the instances a batch of
	// items waits for (0: 250 ms; one query for the whole batch).
	Poll time.Duration
	// Settle bounds an item's wait for its instance (0: one hour).
	Settle time.Duration
	// MaxSends bounds the requests sent to instances' workflows at once
	// by this worker's batches (0: 32): a large order's items queue here
	// rather than all wait on the engine at once.
	MaxSends int
	Log      *slog.Logger // nil: slog.Default()
	// Migrate maps an instance's attributes to a newer entity version
	// (LSM.MigrateAttributes), for migrate items.
	Migrate func(ctx context.Context, envID, entity string, from, to int, attrs map[string]any) (map[string]any, error)

	sendsOnce sync.Once
	sends     chan struct{}
}

// Register registers the activities under their explicit names.
func (o *LSMOrders) Register(w workflows.ActivityRegistry) {
	workflows.LoadOrderActivity.Register(w, o.LoadOrder)
	workflows.SetOrderStatusActivity.Register(w, o.SetOrderStatus)
	workflows.MarkOrderItemsActivity.Register(w, o.MarkOrderItems)
	workflows.RunOrderItemsActivity.Register(w, o.RunOrderItems)
}

// LoadOrder returns the order's plan.
func (o *LSMOrders) LoadOrder(ctx context.Context, in workflows.LoadOrderInput) (lsm.OrderPlan, error) {
	p, err := o.Store.GetOrderPlan(ctx, in.EnvironmentID, in.OrderID)
	if errors.Is(err, store.ErrNotFound) {
		return p, temporal.NewNonRetryableApplicationError(err.Error(), "not_found", err)
	}
	if err != nil {
		return p, classify(err)
	}
	return p, nil
}

// SetOrderStatus writes the order's status (its end time with a final one).
func (o *LSMOrders) SetOrderStatus(ctx context.Context, in workflows.SetOrderStatusInput) error {
	return classify(o.Store.SetOrderStatus(ctx, in.EnvironmentID, in.OrderID, in.Status, lsm.OrderFinal(in.Status)))
}

// MarkOrderItems gives items a status and their reasons.
func (o *LSMOrders) MarkOrderItems(ctx context.Context, in workflows.MarkOrderItemsInput) error {
	marks := make([]store.OrderItemMark, len(in.Items))
	for i, m := range in.Items {
		marks[i] = store.OrderItemMark{Position: m.Position, Reason: m.Reason}
	}
	_, err := o.Store.MarkOrderItems(ctx, in.EnvironmentID, in.OrderID, in.Status, marks)
	return classify(err)
}

// watcher reads the instances a batch of items waits for, all in one
// query per poll, and hands each round's answers to the items that wait.
type watcher struct {
	store *store.Store
	envID string
	poll  time.Duration

	mu sync.Mutex
	// ids are the instances waited for (with how many items wait).
	ids map[string]int
	// latest is the last round's answer for each id it asked for (a
	// zero instance: not found); err the last round's error.
	latest map[string]*store.ServiceInstance
	err    error
	// round is closed when a round ends.
	round chan struct{}
}

func newWatcher(st *store.Store, envID string, poll time.Duration) *watcher {
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	return &watcher{store: st, envID: envID, poll: poll, ids: map[string]int{},
		latest: map[string]*store.ServiceInstance{}, round: make(chan struct{})}
}

func (w *watcher) add(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ids[id]++
}

func (w *watcher) remove(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ids[id]--; w.ids[id] <= 0 {
		delete(w.ids, id)
		delete(w.latest, id)
	}
}

// run polls until ctx ends, heartbeating each round (also those with
// nothing to read: the items may be waiting to send).
func (w *watcher) run(ctx context.Context) {
	for {
		w.mu.Lock()
		ids := make([]string, 0, len(w.ids))
		for id := range w.ids {
			ids = append(ids, id)
		}
		w.mu.Unlock()
		if len(ids) > 0 {
			insts, err := w.store.GetInstances(ctx, w.envID, ids)
			w.mu.Lock()
			w.err = err
			if err == nil {
				for _, id := range ids {
					w.latest[id] = &store.ServiceInstance{}
				}
				for i := range insts {
					w.latest[insts[i].ID] = &insts[i]
				}
			}
			close(w.round)
			w.round = make(chan struct{})
			w.mu.Unlock()
		}
		// Every round, whether items wait for instances or for their
		// turn to send: the batch is alive.
		activity.RecordHeartbeat(ctx, len(ids))
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.poll):
		}
	}
}

// look returns the instance id (added before) as the next round that
// asked for it read it.
func (w *watcher) look(ctx context.Context, id string) (store.ServiceInstance, error) {
	for {
		w.mu.Lock()
		ch := w.round
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return store.ServiceInstance{}, ctx.Err()
		case <-ch:
		}
		w.mu.Lock()
		inst, asked, err := w.latest[id], true, w.err
		if inst == nil {
			asked = false
		}
		w.mu.Unlock()
		switch {
		case err != nil:
			return store.ServiceInstance{}, err
		case !asked:
			continue // the round began before id was added
		case inst.ID == "":
			return store.ServiceInstance{}, store.NotFound("service instance %s", id)
		}
		return *inst, nil
	}
}

// orderItemSpec is the item as the client sent it (the parts the
// activity needs).
type orderItemSpec struct {
	Attributes map[string]any `json:"attributes"`
	Edit       []lsm.Edit     `json:"edit"`
	// InitialState is the state a create's instance begins in ("": its
	// lifecycle's start state).
	InitialState string `json:"initial_state"`
	// ToVersion is a migrate item's target entity version.
	ToVersion int `json:"to_version"`
}

// itemRun is what one item of RunOrderItems works with.
type itemRun struct {
	in     workflows.RunOrderItemInput
	w      *watcher
	item   store.OrderItem
	env    store.Environment
	entity lsm.Entity
	actor  string
}

// RunOrderItems runs a batch of an order's items at once (or, with
// Compensate, undoes them) and returns their outcomes, in the order of
// in.Positions, once every one has ended; each is written to its item
// as it ends. One query per poll reads every instance the batch waits
// for. An error is the batch's (the store or the engine unreachable):
// the retry runs the batch again, and its items that ended return what
// they wrote.
//
// Each item, when it has no outcome yet: an update or delete first waits
// until its instance settles, then sends its request with the key
// "<item id>" (compensation: "<item id> undo") in the scope "order
// <order id>", unless the engine stored a response under that key (an
// earlier attempt's request was applied), then waits until the instance
// settles again: the item succeeded when no transfer since its request
// failed.
func (o *LSMOrders) RunOrderItems(ctx context.Context, in workflows.RunOrderItemsInput) ([]workflows.RunOrderItemResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := newWatcher(o.Store, in.EnvironmentID, o.Poll)
	go w.run(ctx)
	out := make([]workflows.RunOrderItemResult, len(in.Positions))
	errs := make([]error, len(in.Positions))
	var wg sync.WaitGroup
	for i, pos := range in.Positions {
		wg.Go(func() {
			out[i], errs[i] = o.runItem(ctx, w, workflows.RunOrderItemInput{EnvironmentID: in.EnvironmentID,
				EnvironmentName: in.EnvironmentName, OrderID: in.OrderID, Position: pos, Compensate: in.Compensate})
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// runItem runs (or undoes) one item: RunOrderItems.
func (o *LSMOrders) runItem(ctx context.Context, w *watcher, in workflows.RunOrderItemInput) (workflows.RunOrderItemResult, error) {
	it, err := o.Store.GetOrderItem(ctx, in.EnvironmentID, in.OrderID, in.Position)
	if errors.Is(err, store.ErrNotFound) {
		return workflows.RunOrderItemResult{}, temporal.NewNonRetryableApplicationError(err.Error(), "not_found", err)
	}
	if err != nil {
		return workflows.RunOrderItemResult{}, classify(err)
	}
	r := itemRun{in: in, w: w, item: it}
	if in.Compensate {
		switch it.Status {
		case lsm.ItemCompensated, lsm.ItemCompensationFailed:
			return workflows.RunOrderItemResult{Status: it.Status, Error: it.Error}, nil
		}
	} else {
		switch it.Status {
		case lsm.ItemSucceeded, lsm.ItemFailed, lsm.ItemSkipped:
			return workflows.RunOrderItemResult{Status: it.Status, Error: it.Error}, nil
		}
	}
	if r.env, err = o.Store.GetEnvironment(ctx, in.EnvironmentID); err != nil {
		return workflows.RunOrderItemResult{}, classify(err)
	}
	ent, err := o.Store.GetEntityDefinition(ctx, in.EnvironmentID, it.Entity)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return o.finish(ctx, r, failedStatus(in), nil, fmt.Sprintf("service entity %s is not in the catalog", it.Entity))
		}
		return workflows.RunOrderItemResult{}, classify(err)
	}
	r.entity = ent.Entity
	if r.actor, err = o.Store.OrderRequestedBy(ctx, in.EnvironmentID, in.OrderID); err != nil {
		return workflows.RunOrderItemResult{}, classify(err)
	}
	if in.Compensate {
		return o.compensate(ctx, r)
	}
	return o.run(ctx, r)
}

func failedStatus(in workflows.RunOrderItemInput) string {
	if in.Compensate {
		return lsm.ItemCompensationFailed
	}
	return lsm.ItemFailed
}

// key is the item's Idempotency-Key (scope, key, hash).
func (r itemRun) key() *lsm.IdempotentRequest {
	key := r.item.ID
	if r.in.Compensate {
		key += " undo"
	}
	scope := "order " + r.in.OrderID
	h := sha256.Sum256([]byte("intend lsm order item\x00" + r.in.EnvironmentID + "\x00" + scope + "\x00" + key))
	return &lsm.IdempotentRequest{Scope: scope, Key: key, Hash: h[:], Status: 200}
}

// sent returns the instance as an earlier attempt's request wrote it, if
// the engine stored it.
func (o *LSMOrders) sent(ctx context.Context, r itemRun) (*store.ServiceInstance, error) {
	k := r.key()
	stored, ok, err := o.Store.LookupRequest(ctx, r.in.EnvironmentID, k.Scope, k.Key)
	if err != nil || !ok {
		return nil, classify(err)
	}
	var inst store.ServiceInstance
	if err := json.Unmarshal(stored.Response, &inst); err != nil {
		return nil, fmt.Errorf("stored response to %s: %w", k.Key, err)
	}
	return &inst, nil
}

// send sends req with the item's key; a rejection is returned as its
// message (and no error).
func (o *LSMOrders) send(ctx context.Context, r itemRun, req lsm.Request) (store.ServiceInstance, string, error) {
	req.Env, req.Actor = r.env.LSM(), r.actor
	if req.Entity.Name == "" { // a migrate item names its target version's
		req.Entity = r.entity
	}
	req.Idempotent = r.key()
	// Temporal applies an update id once per workflow run: a retry of
	// a request still in flight gets the first one's outcome.
	req.UpdateID = req.Idempotent.Key + " " + req.Idempotent.Scope
	o.sendsOnce.Do(func() {
		n := o.MaxSends
		if n <= 0 {
			n = 32
		}
		o.sends = make(chan struct{}, n)
	})
	select {
	case o.sends <- struct{}{}:
	case <-ctx.Done():
		return store.ServiceInstance{}, "", ctx.Err()
	}
	inst, err := o.Engine.Send(ctx, req)
	<-o.sends
	if rej, ok := errors.AsType[*lsm.Rejection](err); ok && rej.Reason != lsm.RejectBusy {
		return inst, rejectedMessage(req.Op, rej), nil
	}
	return inst, "", err
}

// rejectedMessage is the item's failure when the instance's workflow
// refused its request: the reason and the message, or the attributes at
// fault.
func rejectedMessage(op string, rej *lsm.Rejection) string {
	if len(rej.Problems) == 0 {
		return fmt.Sprintf("%s refused (%s): %s", op, rej.Reason, rej.Message)
	}
	parts := make([]string, len(rej.Problems))
	for i, p := range rej.Problems {
		parts[i] = p.String()
	}
	return fmt.Sprintf("%s refused (%s): %s", op, rej.Reason, strings.Join(parts, "; "))
}

func (o *LSMOrders) run(ctx context.Context, r itemRun) (workflows.RunOrderItemResult, error) {
	it := r.item
	sent, err := o.sent(ctx, r)
	if err != nil {
		return workflows.RunOrderItemResult{}, err
	}
	if sent == nil {
		var spec orderItemSpec
		dec := json.NewDecoder(bytes.NewReader(it.Request))
		dec.UseNumber()
		if err := dec.Decode(&spec); err != nil {
			return o.finish(ctx, r, lsm.ItemFailed, nil, "the item's request does not decode: "+err.Error())
		}
		req := lsm.Request{Op: it.Operation, InstanceID: it.InstanceID}
		var before *int64
		if it.Operation == lsm.OpCreate {
			req.Attributes, req.Target = spec.Attributes, spec.InitialState
			if req.Attributes == nil {
				req.Attributes = map[string]any{}
			}
		} else {
			// The instance may be moving (a transfer of before the
			// order): wait until it takes requests.
			inst, failure, err := o.settle(ctx, r, it.InstanceID, 0)
			if err != nil {
				return workflows.RunOrderItemResult{}, err
			}
			if failure != "" {
				return o.finish(ctx, r, lsm.ItemFailed, &inst, failure)
			}
			if inst.Deleted {
				return o.finish(ctx, r, lsm.ItemFailed, &inst, fmt.Sprintf("service instance %s is %s", inst.ID, inst.State))
			}
			before, req.CurrentVersion = &inst.Version, inst.Version
			if it.Operation == lsm.OpMigrate {
				var failure string
				if req, failure, err = o.migrateRequest(ctx, r, inst, spec.ToVersion, req); err != nil {
					return workflows.RunOrderItemResult{}, err
				}
				if failure != "" {
					return o.finish(ctx, r, lsm.ItemFailed, &inst, failure)
				}
			}
			if it.Operation == lsm.OpUpdate {
				cur := inst.Current()
				if spec.Edit != nil {
					if req.Attributes, err = lsm.ApplyEdits(cur, spec.Edit); err != nil {
						return o.finish(ctx, r, lsm.ItemFailed, &inst, err.Error())
					}
				} else {
					req.Attributes = lsm.MergeAttributes(cur, spec.Attributes)
				}
			}
		}
		if err := o.Store.StartOrderItem(ctx, r.in.EnvironmentID, r.in.OrderID, r.in.Position, lsm.ItemRunning, before); err != nil {
			return workflows.RunOrderItemResult{}, classify(err)
		}
		inst, rejected, err := o.send(ctx, r, req)
		if err != nil {
			return workflows.RunOrderItemResult{}, err
		}
		if rejected != "" {
			return o.finish(ctx, r, lsm.ItemFailed, nil, rejected)
		}
		sent = &inst
	} else if o.Sync != nil {
		// An earlier attempt's request was applied, but the attempt did
		// not end: its worker may have died, and the workflow task that
		// applied the request with it, leaving the instance where no
		// workflow drives it.
		if err := o.Sync(ctx, r.env.LSM(), it.Entity, it.InstanceID); err != nil {
			return workflows.RunOrderItemResult{}, classify(err)
		}
	}
	inst, failure, err := o.settle(ctx, r, it.InstanceID, sent.Version)
	if err != nil {
		return workflows.RunOrderItemResult{}, err
	}
	if failure != "" {
		return o.finish(ctx, r, lsm.ItemFailed, &inst, failure)
	}
	return o.finish(ctx, r, lsm.ItemSucceeded, &inst, "")
}

// compensate undoes a create (deletes its instance) or an update (sends
// the attributes the instance had at the version before the item as an
// update, as POST .../rollback does).
func (o *LSMOrders) compensate(ctx context.Context, r itemRun) (workflows.RunOrderItemResult, error) {
	it := r.item
	sent, err := o.sent(ctx, r)
	if err != nil {
		return workflows.RunOrderItemResult{}, err
	}
	if sent == nil {
		inst, err := o.Store.GetInstance(ctx, r.in.EnvironmentID, "", it.InstanceID)
		switch {
		case errors.Is(err, store.ErrNotFound) && it.Operation == lsm.OpCreate && it.Status != lsm.ItemSucceeded:
			// The create made nothing: nothing to undo.
			return workflows.RunOrderItemResult{Status: it.Status, Error: it.Error}, nil
		case err != nil:
			return workflows.RunOrderItemResult{}, classify(err)
		case inst.Deleted:
			return o.finish(ctx, r, lsm.ItemCompensated, &inst, "")
		}
		inst, failure, err := o.settle(ctx, r, it.InstanceID, 0)
		if err != nil {
			return workflows.RunOrderItemResult{}, err
		}
		_ = failure // how the instance got here is the item's, not the compensation's
		req := lsm.Request{InstanceID: it.InstanceID, CurrentVersion: inst.Version}
		switch it.Operation {
		case lsm.OpCreate:
			req.Op = lsm.OpDelete
		case lsm.OpUpdate:
			if it.VersionBefore == nil {
				return o.finish(ctx, r, lsm.ItemCompensated, &inst, "") // never sent
			}
			log, err := o.Store.InstanceLogPage(ctx, r.in.EnvironmentID, it.InstanceID, *it.VersionBefore+1, 1)
			if err != nil {
				return workflows.RunOrderItemResult{}, classify(err)
			}
			if len(log) == 0 || log[0].Version != *it.VersionBefore {
				return o.finish(ctx, r, lsm.ItemCompensationFailed, &inst,
					fmt.Sprintf("the instance's log has no version %d to restore", *it.VersionBefore))
			}
			then := log[0].Active
			if len(then) == 0 {
				then = log[0].Candidate
			}
			cur := inst.Candidate
			if cur == nil {
				cur = inst.Active
			}
			req.Op, req.Attributes = lsm.OpUpdate, lsm.RestoreAttributes(r.entity.Attributes, cur, then)
		default:
			return workflows.RunOrderItemResult{Status: it.Status, Error: it.Error}, nil
		}
		if err := o.Store.StartOrderItem(ctx, r.in.EnvironmentID, r.in.OrderID, r.in.Position, it.Status, nil); err != nil {
			return workflows.RunOrderItemResult{}, classify(err)
		}
		sentInst, rejected, err := o.send(ctx, r, req)
		if err != nil {
			return workflows.RunOrderItemResult{}, err
		}
		if rejected != "" {
			return o.finish(ctx, r, lsm.ItemCompensationFailed, &inst, "compensation refused: "+rejected)
		}
		sent = &sentInst
	}
	inst, failure, err := o.settle(ctx, r, it.InstanceID, sent.Version)
	if err != nil {
		return workflows.RunOrderItemResult{}, err
	}
	if failure != "" {
		return o.finish(ctx, r, lsm.ItemCompensationFailed, &inst, "compensation: "+failure)
	}
	return o.finish(ctx, r, lsm.ItemCompensated, &inst, "")
}

// finish writes the item's outcome and returns it.
func (o *LSMOrders) finish(ctx context.Context, r itemRun, status string, inst *store.ServiceInstance, reason string) (workflows.RunOrderItemResult, error) {
	out := store.OrderItemOutcome{Status: status, Error: reason}
	if inst != nil && inst.Version > 0 {
		out.Version, out.State = &inst.Version, inst.State
	}
	if r.in.Compensate && reason == "" {
		out.Error = r.item.Error // the item's own failure, if it had one, stays
	}
	if err := o.Store.FinishOrderItem(ctx, r.in.EnvironmentID, r.in.OrderID, r.in.Position, out); err != nil {
		return workflows.RunOrderItemResult{}, classify(err)
	}
	return workflows.RunOrderItemResult{Status: status, Error: out.Error}, nil
}

// settle waits until the instance is at version since or later and takes
// requests: deleted, or in a state without an auto or resource transfer
// (where its lifecycle waits for a request). failure names the first
// failed transfer after since (since 0: none is looked for), or says that
// it did not settle within Settle.
func (o *LSMOrders) settle(ctx context.Context, r itemRun, id string, since int64) (inst store.ServiceInstance, failure string, err error) {
	limit := o.Settle
	if limit <= 0 {
		limit = time.Hour
	}
	deadline := time.Now().Add(limit)
	lc := r.entity.Lifecycle
	r.w.add(id)
	defer r.w.remove(id)
	for {
		inst, err = r.w.look(ctx, id)
		if err != nil {
			return inst, "", classify(err)
		}
		if inst.Version >= since {
			_, auto := lc.AutoFrom(inst.State)
			_, noResource := lc.Next(inst.State, lsm.Event{Trigger: lsm.Resource})
			if inst.Deleted || (!auto && noResource != nil) {
				break
			}
		}
		if time.Now().After(deadline) {
			return inst, fmt.Sprintf("the instance did not settle within %s (state %s, version %d)", limit, inst.State, inst.Version), nil
		}
	}
	if since == 0 {
		return inst, "", nil
	}
	log, err := o.Store.InstanceLogPage(ctx, r.in.EnvironmentID, id, 0, int(inst.Version-since)+1)
	if err != nil {
		return inst, "", classify(err)
	}
	for i := len(log) - 1; i >= 0; i-- {
		e := log[i]
		var ev struct {
			Error bool `json:"error"`
		}
		if e.Version < since || json.Unmarshal(e.Event, &ev) != nil || !ev.Error {
			continue
		}
		msg := fmt.Sprintf("failed at version %d (to %s)", e.Version, e.State)
		if s := summarizeErrors(e.Errors); s != "" {
			msg += ": " + s
		}
		return inst, msg, nil
	}
	return inst, "", nil
}

// summarizeErrors is the messages of a log entry's compile errors, on
// one line, at most 1,000 characters.
func summarizeErrors(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var list []map[string]any
	var parts []string
	if json.Unmarshal(raw, &list) == nil {
		for _, e := range list {
			if m, ok := e["message"].(string); ok {
				parts = append(parts, m)
			}
		}
	}
	s := strings.Join(parts, "; ")
	if s == "" {
		s = string(raw)
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 1000 {
		s = s[:1000] + "…"
	}
	return s
}
