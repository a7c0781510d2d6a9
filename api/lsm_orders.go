package api

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// Orders (docs/api.md, "Orders"): several creates, updates and deletes
// of service instances in one request, run by one workflow.

// MaxOrderItems bounds the items of one order.
const MaxOrderItems = lsm.MaxOrderItems

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

// orderItemID is what an item's id may be (lsm.OrderItemID).
var orderItemID = lsm.OrderItemID

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
	var req lsm.OrderRequest
	if err := decodeJSON(lw.body, &req); err != nil {
		return err
	}
	inv, err := s.gatherOrderInventory(r.Context(), lw.env, req)
	if err != nil {
		return err
	}
	items, problems := lsm.CheckOrder(req, inv, newUUID)
	if len(problems) > 0 {
		errs := make([]FieldError, len(problems))
		for i, p := range problems {
			errs[i] = FieldError{Field: p.Field, Detail: p.Detail}
		}
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

// maxOrderReadRounds bounds the rounds of gatherOrderInventory (it
// needs four: lsm.OrderLookups).
const maxOrderReadRounds = 8

// referenceRead is a reference's key among the keys read.
type referenceRead lsm.InstanceKey

// gatherOrderInventory reads what lsm.CheckOrder looks up of the
// environment for req: the keys lsm.OrderLookups names, read and added
// to the snapshot, until it names none not read yet. Each key is read
// once (an order has at most MaxOrderItems items, each a few keys: a
// larger one looks nothing up); references are resolved in one query
// per round.
func (s *Server) gatherOrderInventory(ctx context.Context, env store.Environment, req lsm.OrderRequest) (lsm.OrderInventory, error) {
	inv := lsm.OrderInventory{Entities: map[string]lsm.Entity{}, EntityVersions: map[lsm.VersionKey]lsm.Entity{},
		Instances: map[lsm.InstanceKey]lsm.Instance{}, Live: map[lsm.InstanceKey]bool{}}
	read := map[any]bool{}
	for range maxOrderReadRounds {
		need := lsm.OrderLookups(req, inv)
		progress := false
		for _, name := range need.Entities {
			if read[name] {
				continue
			}
			read[name], progress = true, true
			e, err := s.opts.Store.GetEntity(ctx, env.ID, name)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return inv, err
			}
			inv.Entities[name] = e.Entity
		}
		for _, k := range need.Instances {
			if read[k] {
				continue
			}
			read[k], progress = true, true
			inst, err := s.opts.Store.GetInstance(ctx, env.ID, k.Entity, k.Ref)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return inv, err
			}
			inv.Instances[k] = inst
		}
		for _, k := range need.EntityVersions {
			if read[k] {
				continue
			}
			read[k], progress = true, true
			e, err := s.opts.Store.EntityAt(ctx, env.ID, k.Name, k.Version)
			if err != nil {
				return inv, err
			}
			inv.EntityVersions[k] = e
		}
		var refs []lsm.Reference
		for _, k := range need.References {
			if rk := referenceRead(k); !read[rk] {
				read[rk] = true
				refs = append(refs, lsm.Reference{Entity: k.Entity, Value: k.Ref})
			}
		}
		if len(refs) > 0 {
			progress = true
			resolved, err := s.opts.Store.ResolveReferences(ctx, env.ID, refs)
			if err != nil {
				return inv, err
			}
			for _, r := range resolved {
				if r.ID != "" {
					inv.Live[lsm.InstanceKey{Entity: r.Entity, Ref: r.Value}] = true
				}
			}
		}
		if !progress {
			return inv, nil
		}
	}
	return inv, fmt.Errorf("order inventory: still reading after %d rounds", maxOrderReadRounds)
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
