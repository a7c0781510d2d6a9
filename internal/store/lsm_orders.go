package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/lsm"
)

// Orders of the lifecycle service manager (migration 014): the API writes
// an order and its items at once; the order's workflow (intend.LSMOrder)
// writes every item's outcome and the order's status as they happen.

// ErrRequestTaken: another request with the same Idempotency-Key was
// stored first; look its response up.
var ErrRequestTaken = errors.New("the idempotency key was taken by a concurrent request")

// Order is an order of the lifecycle service manager.
type Order struct {
	ID     string `json:"id"`
	Policy string `json:"policy"`
	// Status is one of lsm.Order*.
	Status      string `json:"status"`
	RequestedBy string `json:"requested_by,omitempty"`
	ItemCount   int    `json:"item_count"`
	// Counts are the items by status.
	Counts     map[string]int `json:"counts"`
	CreatedAt  time.Time      `json:"created_at"`
	StartedAt  *time.Time     `json:"started_at,omitempty"`
	FinishedAt *time.Time     `json:"finished_at,omitempty"`
	// Items, in the request's order (GetOrder; not in lists).
	Items []OrderItem `json:"items,omitempty"`
}

// OrderItem is one item of an order and its outcome.
type OrderItem struct {
	ID         string `json:"id"`
	Position   int    `json:"position"`
	Operation  string `json:"operation"`
	Entity     string `json:"service_entity"`
	InstanceID string `json:"instance_id"`
	// DependsOn are the ids of the items it depends on.
	DependsOn []string `json:"depends_on"`
	// Status is one of lsm.Item*.
	Status string `json:"status"`
	// VersionBefore is the instance's version when the item was sent
	// (an update's compensation restores its attributes).
	VersionBefore *int64 `json:"version_before,omitempty"`
	// Version and State are where the instance settled.
	Version    *int64     `json:"version,omitempty"`
	State      string     `json:"state,omitempty"`
	Error      string     `json:"error,omitempty"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Request is the item as the client sent it.
	Request json.RawMessage `json:"request"`
	// Deps are the positions of DependsOn.
	Deps []int `json:"-"`
}

// NewOrder is an order as the API writes it, checked.
type NewOrder struct {
	ID          string
	Policy      string
	Status      string
	RequestedBy string
	Items       []NewOrderItem
}

// NewOrderItem is one checked item of a NewOrder (lsm.CheckOrder's).
type NewOrderItem = lsm.NewOrderItem

// CreateOrder writes an order and its items in one transaction and
// returns the order as written. With req, the order as written is stored
// as the first response to that idempotent request (status req.Status)
// in the same transaction; a live response stored under the key first is
// ErrRequestTaken, and nothing is written.
func (s *Store) CreateOrder(ctx context.Context, envID string, o NewOrder, req *lsm.IdempotentRequest) (Order, error) {
	var out Order
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `insert into lsm_orders (environment_id, id, policy, status, requested_by, item_count)
			values ($1::uuid, $2::uuid, $3, $4, $5, $6)`, envID, o.ID, o.Policy, o.Status, o.RequestedBy, len(o.Items)); err != nil {
			return fmt.Errorf("write order: %w", err)
		}
		rows := make([][]any, len(o.Items))
		for i, it := range o.Items {
			deps := make([]int32, len(it.Deps))
			for j, d := range it.Deps {
				deps[j] = int32(d)
			}
			rows[i] = []any{envID, o.ID, int32(i), it.ItemID, it.Operation, it.Entity, it.InstanceID, deps, []byte(it.Spec)}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"lsm_order_items"},
			[]string{"environment_id", "order_id", "position", "item_id", "operation", "entity", "instance_id", "depends_on", "spec"},
			pgx.CopyFromRows(rows)); err != nil {
			return fmt.Errorf("write order items: %w", err)
		}
		var err error
		if out, err = getOrder(ctx, tx, envID, o.ID, true); err != nil {
			return err
		}
		if req == nil {
			return nil
		}
		body, err := json.Marshal(out)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `insert into lsm_requests (environment_id, scope, key, request_hash, status, response)
			values ($1::uuid, $2, $3, $4, $5, $6) on conflict (environment_id, scope, key) do update
			set request_hash = excluded.request_hash, status = excluded.status, response = excluded.response,
			    created_at = now()
			where lsm_requests.created_at <= now() - `+requestRetention,
			envID, req.Scope, req.Key, req.Hash, req.Status, body)
		if err != nil {
			return fmt.Errorf("store the response to request %s: %w", req.Key, err)
		}
		if tag.RowsAffected() == 0 {
			return ErrRequestTaken
		}
		return nil
	})
	return out, err
}

type orderQuerier interface {
	querier
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

const orderColumns = `o.id::text, o.policy, o.status, o.requested_by, o.item_count, o.created_at, o.started_at, o.finished_at,
	(select coalesce(jsonb_object_agg(c.status, c.n), '{}') from (select i.status, count(*) n from lsm_order_items i
	 where i.environment_id = o.environment_id and i.order_id = o.id group by i.status) c)`

func scanOrder(row pgx.Row) (Order, error) {
	var o Order
	err := row.Scan(&o.ID, &o.Policy, &o.Status, &o.RequestedBy, &o.ItemCount, &o.CreatedAt, &o.StartedAt, &o.FinishedAt, &o.Counts)
	return o, err
}

const orderItemColumns = `position, item_id, operation, entity, instance_id::text, depends_on, status, version_before,
	version, coalesce(state, ''), coalesce(error, ''), started_at, finished_at, spec`

func scanOrderItem(row pgx.Row) (OrderItem, error) {
	var it OrderItem
	var deps []int32
	err := row.Scan(&it.Position, &it.ID, &it.Operation, &it.Entity, &it.InstanceID, &deps, &it.Status, &it.VersionBefore,
		&it.Version, &it.State, &it.Error, &it.StartedAt, &it.FinishedAt, &it.Request)
	it.Deps = make([]int, len(deps))
	for i, d := range deps {
		it.Deps[i] = int(d)
	}
	return it, err
}

func getOrder(ctx context.Context, q orderQuerier, envID, id string, items bool) (Order, error) {
	if !IsUUID(id) {
		return Order{}, NotFound("order %s", id)
	}
	o, err := scanOrder(q.QueryRow(ctx, `select `+orderColumns+` from lsm_orders o
		where o.environment_id = $1::uuid and o.id = $2::uuid`, envID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return o, NotFound("order %s", id)
	}
	if err != nil || !items {
		return o, err
	}
	rows, err := q.Query(ctx, `select `+orderItemColumns+` from lsm_order_items
		where environment_id = $1::uuid and order_id = $2::uuid order by position`, envID, id)
	if err != nil {
		return o, err
	}
	if o.Items, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (OrderItem, error) { return scanOrderItem(row) }); err != nil {
		return o, err
	}
	for i := range o.Items {
		o.Items[i].DependsOn = make([]string, len(o.Items[i].Deps))
		for j, d := range o.Items[i].Deps {
			if d >= 0 && d < len(o.Items) {
				o.Items[i].DependsOn[j] = o.Items[d].ID
			}
		}
	}
	return o, nil
}

// GetOrder returns an order with its items.
func (s *Store) GetOrder(ctx context.Context, envID, id string) (Order, error) {
	return getOrder(ctx, s.pool, envID, id, true)
}

// ListOrders returns a page of the environment's orders, newest first,
// of one status when status is not "", those before the order before
// when it is not "" (the previous page's last).
func (s *Store) ListOrders(ctx context.Context, envID, status, before string, limit int) ([]Order, error) {
	if before == "" {
		before = "ffffffff-ffff-ffff-ffff-ffffffffffff"
	}
	rows, err := s.pool.Query(ctx, `select `+orderColumns+` from lsm_orders o
		where o.environment_id = $1::uuid and ($2 = '' or o.status = $2) and o.id < $3::uuid
		order by o.id desc limit $4`, envID, status, before, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Order, error) { return scanOrder(row) })
}

// GetOrderItem returns one item of an order, by position.
func (s *Store) GetOrderItem(ctx context.Context, envID, orderID string, position int) (OrderItem, error) {
	it, err := scanOrderItem(s.pool.QueryRow(ctx, `select `+orderItemColumns+` from lsm_order_items
		where environment_id = $1::uuid and order_id = $2::uuid and position = $3`, envID, orderID, position))
	if errors.Is(err, pgx.ErrNoRows) {
		return it, NotFound("item %d of order %s", position, orderID)
	}
	return it, err
}

// SetOrderStatus writes an order's status: running notes when it
// started (the first time), a final one (lsm.OrderFinal) when it ended.
func (s *Store) SetOrderStatus(ctx context.Context, envID, id, status string, final bool) error {
	tag, err := s.pool.Exec(ctx, `update lsm_orders set status = $3,
		started_at = case when $3 = 'running' then coalesce(started_at, now()) else started_at end,
		finished_at = case when $4 then coalesce(finished_at, now()) else finished_at end
		where environment_id = $1::uuid and id = $2::uuid`, envID, id, status, final)
	if err == nil && tag.RowsAffected() == 0 {
		err = NotFound("order %s", id)
	}
	return err
}

// StartOrderItem marks an item running; versionBefore, when given, is
// kept unless one was noted before (a retried activity keeps the first).
func (s *Store) StartOrderItem(ctx context.Context, envID, orderID string, position int, status string, versionBefore *int64) error {
	_, err := s.pool.Exec(ctx, `update lsm_order_items set status = $4, started_at = coalesce(started_at, now()),
		version_before = coalesce(version_before, $5)
		where environment_id = $1::uuid and order_id = $2::uuid and position = $3`, envID, orderID, position, status, versionBefore)
	return err
}

// OrderItemOutcome is where an item ended.
type OrderItemOutcome struct {
	Status  string
	Version *int64
	State   string
	Error   string
}

// FinishOrderItem writes an item's outcome.
func (s *Store) FinishOrderItem(ctx context.Context, envID, orderID string, position int, out OrderItemOutcome) error {
	_, err := s.pool.Exec(ctx, `update lsm_order_items set status = $4, version = coalesce($5, version),
		state = coalesce(nullif($6, ''), state), error = nullif($7, ''), finished_at = now()
		where environment_id = $1::uuid and order_id = $2::uuid and position = $3`,
		envID, orderID, position, out.Status, out.Version, out.State, out.Error)
	return err
}

// OrderItemMark is the reason one item gets a status from MarkOrderItems.
type OrderItemMark struct {
	Position int
	Reason   string
}

// MarkOrderItems gives the items marks names status, each with its
// reason, in one statement (the workflow skips items, or records an item
// whose activity gave up), and returns how many it marked. An item whose
// own outcome is written is left as it is: a run's (compensated,
// compensation_failed) always, a forward one's (succeeded, failed,
// skipped) unless status is a compensation's.
func (s *Store) MarkOrderItems(ctx context.Context, envID, orderID, status string, marks []OrderItemMark) (int64, error) {
	ps := make([]int32, len(marks))
	rs := make([]string, len(marks))
	for i, m := range marks {
		ps[i], rs[i] = int32(m.Position), m.Reason
	}
	tag, err := s.pool.Exec(ctx, `update lsm_order_items i set status = $3, error = nullif(m.reason, ''), finished_at = now()
		from unnest($4::integer[], $5::text[]) m(position, reason)
		where i.environment_id = $1::uuid and i.order_id = $2::uuid and i.position = m.position
		  and i.status not in ('compensated', 'compensation_failed')
		  and ($3 = 'compensation_failed' or i.status not in ('succeeded', 'failed', 'skipped'))`,
		envID, orderID, status, ps, rs)
	return tag.RowsAffected(), err
}

// GetOrderPlan returns the plan of an order.
func (s *Store) GetOrderPlan(ctx context.Context, envID, id string) (lsm.OrderPlan, error) {
	var p lsm.OrderPlan
	if err := s.pool.QueryRow(ctx, `select policy, status from lsm_orders where environment_id = $1::uuid and id = $2::uuid`,
		envID, id).Scan(&p.Policy, &p.Status); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return p, NotFound("order %s", id)
		}
		return p, err
	}
	rows, err := s.pool.Query(ctx, `select item_id, operation, depends_on, status from lsm_order_items
		where environment_id = $1::uuid and order_id = $2::uuid order by position`, envID, id)
	if err != nil {
		return p, err
	}
	p.Items, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (lsm.OrderPlanItem, error) {
		var it lsm.OrderPlanItem
		var deps []int32
		err := row.Scan(&it.ID, &it.Operation, &deps, &it.Status)
		it.Deps = make([]int, len(deps))
		for i, d := range deps {
			it.Deps[i] = int(d)
		}
		return it, err
	})
	return p, err
}

// UnfinishedOrder names an order that has not ended.
type UnfinishedOrder struct {
	Environment Environment
	ID          string
}

// UnfinishedOrders returns the orders that have not ended, in every
// environment, oldest first: their workflows should run.
func (s *Store) UnfinishedOrders(ctx context.Context) ([]UnfinishedOrder, error) {
	rows, err := s.pool.Query(ctx, `select o.environment_id::text, e.name, o.id::text from lsm_orders o
		join environments e on e.id = o.environment_id
		where o.finished_at is null order by o.id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (UnfinishedOrder, error) {
		var u UnfinishedOrder
		err := row.Scan(&u.Environment.ID, &u.Environment.Name, &u.ID)
		return u, err
	})
}

// OrderRequestedBy returns who asked for an order.
func (s *Store) OrderRequestedBy(ctx context.Context, envID, id string) (string, error) {
	var by string
	err := s.pool.QueryRow(ctx, `select requested_by from lsm_orders where environment_id = $1::uuid and id = $2::uuid`,
		envID, id).Scan(&by)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", NotFound("order %s", id)
	}
	return by, err
}

// GetInstances returns the instances with the given ids (those that
// exist), in one query: an order's watcher reads the instances it waits
// for this way.
func (s *Store) GetInstances(ctx context.Context, envID string, ids []string) ([]ServiceInstance, error) {
	rows, err := s.pool.Query(ctx, `select `+instanceRowColumns+` from service_instances
		where environment_id = $1::uuid and id = any($2::uuid[])`, envID, ids)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ServiceInstance, error) { return scanInstance(row) })
}
