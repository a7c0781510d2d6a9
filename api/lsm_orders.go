package api

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// Orders (docs/api.md, "Orders"): several creates, updates and deletes
// of service instances in one request, run by one workflow.

// MaxOrderItems bounds the items of one order.
const MaxOrderItems = 10000

// maxOrderBodyBytes bounds an order's body (10,000 items of about a
// kilobyte each), unless the server's body limit is larger.
const maxOrderBodyBytes = 16 << 20

// LSMOrders starts the workflows of orders.
type LSMOrders interface {
	// StartOrder starts the workflow of an order written to the store; a
	// running one is left alone, so calling it again is harmless. Safe
	// for concurrent use.
	StartOrder(ctx context.Context, env store.Environment, id string) error
}

// orderRequest is POST /lsm/v1/orders.
type orderRequest struct {
	Policy string             `json:"policy"`
	Items  []orderItemRequest `json:"items"`
}

// orderItemRequest is one item of an order.
type orderItemRequest struct {
	ID            string         `json:"id"`
	Operation     string         `json:"operation"`
	ServiceEntity string         `json:"service_entity"`
	Instance      string         `json:"instance,omitempty"`
	Attributes    map[string]any `json:"attributes,omitempty"`
	Edit          []lsm.Edit     `json:"edit,omitempty"`
	DependsOn     []string       `json:"depends_on,omitempty"`
}

// orderItemID is what an item's id may be: it names the item in paths,
// messages and the per-item Idempotency-Key of its instance request.
var orderItemID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}$`)

// createOrder checks every item of an order, refuses it whole (422, one
// entry per fault, each at its item's pointer) when any is bad, else
// writes it pending and starts its workflow: 201 with the order.
func (s *Server) createOrder(w http.ResponseWriter, r *http.Request) error {
	var lw lsmWrite
	var err error
	if lw.env, err = s.lsmEnv(r); err != nil {
		return err
	}
	if lw.body, err = ReadBody(r, max(s.opts.MaxBodyBytes, maxOrderBodyBytes)); err != nil {
		return err
	}
	if done, err := s.replay(w, r, &lw); err != nil || done {
		return err
	}
	var req orderRequest
	if err := decodeJSON(lw.body, &req); err != nil {
		return err
	}
	items, errs, err := s.checkOrder(r.Context(), lw.env, req)
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		return Validation(fmt.Sprintf("the order is refused, nothing was started: %d problem(s) in its items", len(errs)), errs...)
	}
	if s.opts.LSM == nil || s.opts.Orders == nil {
		return Unavailable("the lifecycle engine is not running in this server")
	}
	o := store.NewOrder{ID: newUUIDv7(time.Now()), Policy: req.Policy, Status: lsm.OrderPending,
		RequestedBy: principal(r).Actor(), Items: items}
	return s.writeOrder(w, r, &lw, o, func(order store.Order) map[string]any {
		return map[string]any{"order": order.ID, "policy": order.Policy, "items": order.ItemCount}
	})
}

// writeOrder writes o (under the request's Idempotency-Key, if any),
// notes audit(order) in the audit log, starts its workflow and answers
// 201 with the order. An order written whose workflow did not start is
// started by the reconciler.
func (s *Server) writeOrder(w http.ResponseWriter, r *http.Request, lw *lsmWrite, o store.NewOrder, audit func(store.Order) map[string]any) error {
	var idem *lsm.IdempotentRequest
	if lw.key != "" {
		idem = &lsm.IdempotentRequest{Scope: lw.scope, Key: lw.key, Hash: lw.hash, Status: http.StatusCreated}
	}
	order, err := s.opts.Store.CreateOrder(r.Context(), lw.env.ID, o, idem)
	if errors.Is(err, store.ErrRequestTaken) {
		// A concurrent request with the same key was first.
		if done, err := s.replay(w, r, lw); err != nil || done {
			return err
		}
		return Conflict("a request with the same %s is being written; repeat it", IdempotencyKeyHeader)
	}
	if err != nil {
		return err
	}
	noteAudit(r, audit(order))
	if err := s.opts.Orders.StartOrder(r.Context(), lw.env, order.ID); err != nil {
		// The order is written: the reconciler starts its workflow.
		s.log.WarnContext(r.Context(), "order written, its workflow not started yet (the reconciler will)", "environment", lw.env.Name,
			"order", order.ID, "error", err)
	}
	w.Header().Set("Location", "/lsm/v1/orders/"+order.ID)
	WriteJSON(w, http.StatusCreated, wireOrder(order))
	return nil
}

// checkOrder checks an order's items as the single-instance routes check
// their requests, all of them, and returns them ready to write, or every
// problem found.
func (s *Server) checkOrder(ctx context.Context, env store.Environment, req orderRequest) ([]store.NewOrderItem, []FieldError, error) {
	var errs []FieldError
	bad := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
	}
	switch req.Policy {
	case lsm.OrderAllOrNothing, lsm.OrderBestEffort:
	case "":
		bad("/policy", `required: "all_or_nothing" or "best_effort"`)
	default:
		bad("/policy", `must be "all_or_nothing" or "best_effort"`)
	}
	switch n := len(req.Items); {
	case n == 0:
		bad("/items", "required: at least one item")
	case n > MaxOrderItems:
		bad("/items", "an order holds at most %d items, not %d", MaxOrderItems, n)
	}
	if len(errs) > 0 {
		return nil, errs, nil
	}
	entities := map[string]*store.ServiceEntity{}
	entity := func(name string) (*store.ServiceEntity, error) {
		if e, ok := entities[name]; ok {
			return e, nil
		}
		e, err := s.opts.Store.GetEntity(ctx, env.ID, name)
		if errors.Is(err, store.ErrNotFound) {
			entities[name] = nil
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		entities[name] = &e
		return &e, nil
	}
	ids := make(map[string]int, len(req.Items))
	identities := map[string]int{} // entity NUL identity → item creating it
	instances := map[string]int{}  // instance id → item on it
	var refChecks []orderRefCheck  // after the loop: references may name the order's creates
	out := make([]store.NewOrderItem, len(req.Items))
	for i, it := range req.Items {
		at := "/items/" + strconv.Itoa(i)
		switch j, dup := ids[it.ID]; {
		case it.ID == "":
			bad(at+"/id", "required: the item's id, unique in the order")
		case !orderItemID.MatchString(it.ID):
			bad(at+"/id", "must be 1 to 100 letters, digits and . _ : / -, starting with a letter or digit")
		case dup:
			bad(at+"/id", "duplicate: item %d has the id %q", j, it.ID)
		default:
			ids[it.ID] = i
		}
		spec, err := json.Marshal(it)
		if err != nil {
			return nil, nil, err
		}
		out[i] = store.NewOrderItem{ItemID: it.ID, Operation: it.Operation, Entity: it.ServiceEntity, Spec: spec}
		switch it.Operation {
		case lsm.OpCreate, lsm.OpUpdate, lsm.OpDelete:
		case "":
			bad(at+"/operation", `required: "create", "update" or "delete"`)
			continue
		default:
			bad(at+"/operation", `must be "create", "update" or "delete"`)
			continue
		}
		if it.ServiceEntity == "" {
			bad(at+"/service_entity", "required: the service entity")
			continue
		}
		ent, err := entity(it.ServiceEntity)
		if err != nil {
			return nil, nil, err
		}
		if ent == nil {
			bad(at+"/service_entity", "the catalog has no service entity %q", it.ServiceEntity)
			continue
		}
		if it.Operation == lsm.OpCreate {
			if it.Instance != "" {
				bad(at+"/instance", "a create names no instance: the order gives the new one its id")
			}
			if it.Edit != nil {
				bad(at+"/edit", "a create takes attributes, not edits")
			}
			var ae *lsm.AttributeError
			if err := lsm.CheckCreate(ent.Attributes, it.Attributes); errors.As(err, &ae) {
				errs = append(errs, attributeErrors(at+"/attributes/", ae.Problems)...)
			}
			refChecks = append(refChecks, orderRefCheck{at: at, specs: ent.Attributes, attrs: it.Attributes})
			out[i].InstanceID = newUUID()
			if ident := lsm.Identity(ent.Identity, lsm.WithDefaults(ent.Attributes, it.Attributes)); ident != "" {
				field := at + "/attributes/" + escapePointer(ent.Identity)
				k := ent.Name + "\x00" + ident
				if j, ok := identities[k]; ok {
					bad(field, "item %d creates the %s with identity %q too", j, ent.Name, ident)
				} else if _, err := s.opts.Store.GetInstance(ctx, env.ID, ent.Name, ident); err == nil {
					bad(field, "a live %s has the identity %q", ent.Name, ident)
				} else if !errors.Is(err, store.ErrNotFound) {
					return nil, nil, err
				}
				identities[k] = i
			}
			continue
		}
		// An update or a delete names a live instance, by id or identity.
		if it.Instance == "" {
			bad(at+"/instance", "required: the instance's id or identity")
			continue
		}
		inst, err := s.opts.Store.GetInstance(ctx, env.ID, ent.Name, it.Instance)
		switch {
		case errors.Is(err, store.ErrNotFound):
			bad(at+"/instance", "the inventory has no %s %q", ent.Name, it.Instance)
			continue
		case err != nil:
			return nil, nil, err
		case inst.Deleted:
			bad(at+"/instance", "%s %s is %s: it takes no more requests", ent.Name, inst.ID, inst.State)
			continue
		}
		if j, ok := instances[inst.ID]; ok {
			bad(at+"/instance", "item %d is on the same instance: an order has one item per instance", j)
			continue
		}
		instances[inst.ID] = i
		out[i].InstanceID = inst.ID
		if it.Operation == lsm.OpDelete {
			if it.Attributes != nil || it.Edit != nil {
				bad(at, "a delete takes no attributes or edits")
			}
			continue
		}
		var next map[string]any
		switch {
		case len(it.Attributes) > 0 && len(it.Edit) > 0:
			bad(at, "an update takes attributes (as PATCH /lsm/v1) or edit (as PATCH /lsm/v2), not both")
			continue
		case len(it.Attributes) > 0:
			next = lsm.MergeAttributes(inst.Current(), it.Attributes)
		case len(it.Edit) > 0:
			if next, err = applyEdits(inst.Current(), it.Edit); err != nil {
				var p *Problem
				if !errors.As(err, &p) {
					return nil, nil, err
				}
				for _, fe := range p.Errors {
					errs = append(errs, FieldError{Field: at + fe.Field, Detail: fe.Detail})
				}
				continue
			}
		default:
			bad(at+"/attributes", "required: the attributes to change, by name (or edit, a list of dict-path edits)")
			continue
		}
		var ae *lsm.AttributeError
		specs := ent.Attributes
		if v := inst.CurrentVersion(); v != lsm.EntityVersion(ent.Version) {
			// An instance of an older version: its version's attributes.
			old, err := s.opts.Store.EntityAt(ctx, env.ID, ent.Name, v)
			if err != nil {
				return nil, nil, err
			}
			specs = old.Attributes
		}
		if err := lsm.CheckUpdate(specs, inst.Current(), next); errors.As(err, &ae) {
			errs = append(errs, attributeErrors(at+"/attributes/", ae.Problems)...)
		}
		refChecks = append(refChecks, orderRefCheck{at: at, specs: ent.Attributes, attrs: changed(inst.Current(), next)})
	}
	refErrs, err := s.checkOrderReferences(ctx, env.ID, refChecks, identities)
	if err != nil {
		return nil, nil, err
	}
	errs = append(errs, refErrs...)
	// Dependencies, once every id is known.
	deps := make([][]int, len(req.Items))
	depsOK := true
	for i, it := range req.Items {
		for k, d := range it.DependsOn {
			field := fmt.Sprintf("/items/%d/depends_on/%d", i, k)
			j, ok := ids[d]
			switch {
			case !ok:
				bad(field, "the order has no item %q", d)
				depsOK = false
			case j == i:
				bad(field, "an item cannot depend on itself")
				depsOK = false
			case !slices.Contains(deps[i], j):
				deps[i] = append(deps[i], j)
			}
		}
		out[i].Deps = deps[i]
	}
	if depsOK {
		if cycle := lsm.FindCycle(deps); cycle != nil {
			names := make([]string, len(cycle))
			for k, p := range cycle {
				names[k] = req.Items[p].ID
			}
			first, next := cycle[0], req.Items[cycle[1]].ID
			k := 0
			for n, d := range req.Items[first].DependsOn {
				if d == next {
					k = n
					break
				}
			}
			bad(fmt.Sprintf("/items/%d/depends_on/%d", first, k), "a dependency cycle: %s", strings.Join(names, " → "))
		}
	}
	return out, errs, nil
}

// getOrder returns an order with its items and their outcomes.
func (s *Server) getOrder(w http.ResponseWriter, r *http.Request) error {
	env, err := s.lsmEnv(r)
	if err != nil {
		return err
	}
	id, err := pathParam(chi.URLParam(r, "id"))
	if err != nil {
		return err
	}
	if !isUUID(id) {
		return NotFound("order %s: no such order (an order's id is a UUID)", id)
	}
	o, err := s.opts.Store.GetOrder(r.Context(), env.ID, strings.ToLower(id))
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, wireOrder(o))
	return nil
}

// orderStatuses are the statuses ?status= takes.
var orderStatuses = []string{lsm.OrderPending, lsm.OrderRunning, lsm.OrderCompensating, lsm.OrderSucceeded,
	lsm.OrderPartiallyFailed, lsm.OrderFailed, lsm.OrderCompensated}

// listOrders returns a page of the environment's orders, newest first
// (without their items), of one status when ?status= is given.
func (s *Server) listOrders(w http.ResponseWriter, r *http.Request) error {
	env, err := s.lsmEnv(r)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	status := q.Get("status")
	if status != "" && !slices.Contains(orderStatuses, status) {
		return InvalidField("?status", "must be one of "+strings.Join(orderStatuses, ", "))
	}
	after := q.Get("after")
	if after != "" && !isUUID(after) {
		return InvalidField("?after", "want the id of the last order of the previous page")
	}
	items, err := s.opts.Store.ListOrders(r.Context(), env.ID, status, strings.ToLower(after), limit)
	if err != nil {
		return err
	}
	writePage(w, items, limit, func(o store.Order) string { return o.ID }, wireOrder)
	return nil
}

// newUUIDv7 returns a version 7 UUID (RFC 9562): the time in
// milliseconds, then random bits, so that ids sort by creation time.
func newUUIDv7(now time.Time) string {
	var b [16]byte
	if _, err := rand.Read(b[6:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(now.UnixMilli()))
	copy(b[:6], ms[2:])
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	return formatUUID(b)
}
