package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultPruneChunk is how many rows one prune statement deletes at most.
// Each chunk is its own transaction, so a backlog of millions of rows
// never holds its locks (or a snapshot that stops vacuum) for long.
const DefaultPruneChunk = 10_000

// PruneOptions tune one prune pass.
type PruneOptions struct {
	// Now is when the retentions count back from (zero: time.Now()).
	Now time.Time
	// Chunk is the most rows a statement deletes (0: DefaultPruneChunk).
	Chunk int
}

func (o PruneOptions) norm() PruneOptions {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.Chunk <= 0 {
		o.Chunk = DefaultPruneChunk
	}
	return o
}

// The tables a prune deletes from, as they name the pruned rows.
const (
	TableActions       = "resource_actions"
	TableRuns          = "deploy_runs"
	TableRequests      = "deploy_requests"
	TableCompiles      = "compiles"
	TableOrders        = "lsm_orders"
	TableOrderItems    = "lsm_order_items"
	TableInstanceLog   = "service_instance_log"
	TableInstances     = "service_instances"
	TableIdempotent    = "lsm_requests"
	TableCallbackEvts  = "lsm_callback_events"
	TableExecutors     = "executors"
	TableNotifications = "notifications"
)

// Pruned counts the rows a prune deleted, by table (Table*).
type Pruned map[string]int64

// Total is the number of rows deleted from every table.
func (p Pruned) Total() int64 {
	var n int64
	for _, v := range p {
		n += v
	}
	return n
}

// PruneEnvironment deletes what the environment's retention settings let
// go (Retention), in chunks of at most o.Chunk rows, and returns how many
// rows it deleted per table, also when it stops on an error. What is still
// read stays whatever its age:
//
//   - the action log: each resource's newest row (the lifecycle engine
//     reads it to tell whether the resource's failure is final), and every
//     row of an open (pending or running) run, which its retries, its
//     resumed batches and its dry-run results read;
//   - runs: open ones, the newest of each action, and the newest
//     successful deploy (the last-successful-deploy gauge reads it); the
//     requests an open run took;
//   - compiles: queued and running ones, and the newest (the
//     recompile_interval timer counts from it);
//   - orders: those that have not finished;
//   - instance logs: each instance's log from the last row in another
//     state than its current one on (the engine reads when the instance
//     entered its state from there); a terminated instance goes whole;
//   - executor registrations: those seen (or stopped) within
//     ExecutorForgetAfter, whatever the settings;
//   - notifications: unresolved ones (each holds its subject's place).
//
// Every part walks an index of its table in key order, a chunk at a time,
// and stops at the first chunk that holds nothing old enough (keys grow
// with time), so a pass reads the old part of a table and what it keeps,
// not the whole table. Deletes are idempotent: passes of two replicas at
// once delete each row once (the server holds PruneLock anyway).
func (s *Store) PruneEnvironment(ctx context.Context, e Environment, o PruneOptions) (Pruned, error) {
	o = o.norm()
	out := Pruned{}
	r := e.Settings.Retention
	if before, ok := cutoff(o.Now, r.ActionLogRetention); ok {
		if err := s.pruneActions(ctx, e.ID, o.Now, before, o.Chunk, out); err != nil {
			return out, fmt.Errorf("prune the action log: %w", err)
		}
	}
	if before, ok := cutoff(o.Now, r.RunRetention); ok {
		if err := s.pruneRuns(ctx, e.ID, before, o.Chunk, out); err != nil {
			return out, fmt.Errorf("prune deploy runs: %w", err)
		}
	}
	if before, ok := cutoff(o.Now, r.CompileRetention); ok {
		if err := s.pruneCompiles(ctx, e.ID, before, o.Chunk, out); err != nil {
			return out, fmt.Errorf("prune compiles: %w", err)
		}
	}
	if before, ok := cutoff(o.Now, r.OrderRetention); ok {
		if err := s.pruneOrders(ctx, e.ID, before, o.Chunk, out); err != nil {
			return out, fmt.Errorf("prune orders: %w", err)
		}
	}
	if before, ok := cutoff(o.Now, r.InstanceLogRetention); ok {
		if err := s.pruneInstanceLogs(ctx, e.ID, before, o.Chunk, out); err != nil {
			return out, fmt.Errorf("prune service instance logs: %w", err)
		}
	}
	// Notifications: at most MaxNotificationsPerEnvironment resolved
	// ones whatever the setting, so one statement.
	var before *time.Time
	if b, ok := cutoff(o.Now, r.NotificationRetention); ok {
		before = &b
	}
	if err := s.pruneNotifications(ctx, e.ID, before, out); err != nil {
		return out, fmt.Errorf("prune notifications: %w", err)
	}
	// Executor registrations stopped or unseen for ExecutorForgetAfter:
	// reports forget them too, but only in an environment still reported
	// to. At most MaxExecutorsPerOwner of each token: one statement.
	tag, err := s.pool.Exec(ctx, `delete from executors where environment_id = $1::uuid and last_seen < $2`,
		e.ID, o.Now.Add(-ExecutorForgetAfter))
	if err != nil {
		return out, fmt.Errorf("prune executor registrations: %w", err)
	}
	if n := tag.RowsAffected(); n > 0 {
		out[TableExecutors] += n
	}
	return out, nil
}

// walked is what one chunk of a walk saw: how many rows it scanned, how
// many of them were old enough to go, and how many rows it deleted.
type walked struct {
	scanned, old, deleted int64
}

// more reports whether the walk goes on after a chunk of limit rows: it
// stops at the end of the table and at the first chunk with nothing old.
func (w walked) more(limit int) bool { return w.scanned == int64(limit) && w.old > 0 }

// The statements of a prune, one chunk each (EXPLAINed by
// TestPruneStatementsUseIndexes).
const (
	pruneActionsSQL = `
	with scan as (
		select id, resource_id, workflow_id, finished_at from resource_actions
		where environment_id = $1::uuid and id > $2 order by id limit $3
	), gone as (
		delete from resource_actions where id = any(array(
			select s.id from scan s
			where s.finished_at < $4 and not (s.workflow_id = any($5))
			  -- a scalar subquery, not exists: PostgreSQL would make that
			  -- a hash join reading the environment's whole log per chunk
			  and ((select n.id from resource_actions n
			        where n.environment_id = $1::uuid and n.resource_id = s.resource_id and n.id > s.id
			        limit 1) is not null
			       -- or a newer unchanged attempt (action_log.go)
			       or exists (select 1 from unchanged_actions n
			                  where n.environment_id = $1::uuid and n.resource_ids @> array[s.resource_id]
			                    and n.id > s.id))))
		returning 1
	)
	select count(*), count(*) filter (where finished_at < $4 or finished_at > $6), max(id), (select count(*) from gone)
	from scan`
	pruneRunsSQL = `
	with scan as (
		select run, status, requested_at, coalesce(finished_at, requested_at) as ended from deploy_runs
		where environment_id = $1::uuid and run > $2 order by run limit $3
	), gone as (
		delete from deploy_runs where environment_id = $1::uuid and run = any(array(
			select s.run from scan s
			where s.status in ('done', 'failed', 'preempted') and s.ended < $4 and not (s.run = any($5))))
		returning 1
	)
	select count(*), count(*) filter (where requested_at < $4), max(run), (select count(*) from gone) from scan`
	pruneRequestsSQL = `
	with scan as (
		select id, run, requested_at from deploy_requests
		where environment_id = $1::uuid and id > $2 order by id limit $3
	), gone as (
		delete from deploy_requests where environment_id = $1::uuid and id = any(array(
			select s.id from scan s where s.run is not null and s.requested_at < $4 and not (s.run = any($5))))
		returning 1
	)
	select count(*), count(*) filter (where requested_at < $4), max(id), (select count(*) from gone) from scan`
	pruneCompilesSQL = `
	with scan as (
		select id, status, requested_at, coalesce(finished_at, requested_at) as ended from compiles
		where environment_id = $1::uuid and id > $2 order by id limit $3
	), gone as (
		delete from compiles where id = any(array(
			select s.id from scan s
			where s.status in ('succeeded', 'failed') and s.ended < $4
			  and s.id <> (select max(id) from compiles where environment_id = $1::uuid)))
		returning 1
	)
	select count(*), count(*) filter (where requested_at < $4), max(id), (select count(*) from gone) from scan`
	pruneOrdersSQL = `
	with head as (
		select id, created_at, finished_at, item_count from lsm_orders
		where environment_id = $1::uuid and id > $2::uuid order by id limit $3
	), scan as (
		select * from (select *, sum(item_count) over (order by id) as upto from head) h
		where upto - item_count < $3
	), gone as (
		delete from lsm_orders where environment_id = $1::uuid and id = any(array(
			select s.id from scan s where s.finished_at < $4))
		returning item_count
	)
	select (select count(*) from head), count(*), count(*) filter (where created_at < $4), max(id::text),
	       (select count(*) from gone), (select coalesce(sum(item_count), 0) from gone) from scan`
	pruneInstanceLogSQL = `
	with inst as (
		select id, state, deleted and updated_at < $4 as gone from service_instances
		where environment_id = $1::uuid and id > $2::uuid order by id limit $3
	), doomed as (
		select l.ctid
		from inst
		left join lateral (select max(m.version) as k from service_instance_log m
		                   where m.environment_id = $1::uuid and m.instance_id = inst.id
		                     and m.state <> inst.state) k on not inst.gone
		-- the limit keeps the lateral a loop over the instances (a probe
		-- of the primary key each), not a join reading the whole log
		cross join lateral (select l.ctid from service_instance_log l
		                    where l.environment_id = $1::uuid and l.instance_id = inst.id
		                      and (inst.gone or l.created_at < $4 and l.version < k.k)
		                    limit $5) l
		limit $5
	), del as (
		delete from service_instance_log where ctid = any(array(select ctid from doomed))
		returning 1
	)
	select (select count(*) from inst), (select max(id::text) from inst), (select count(*) from del)`
	pruneInstancesSQL = `delete from service_instances i
		where i.environment_id = $1::uuid and i.id > $2::uuid and i.id <= $3::uuid
		  and i.deleted and i.updated_at < $4
		  and not exists (select 1 from service_instance_log l
		                  where l.environment_id = i.environment_id and l.instance_id = i.id)`
)

// pruneActions deletes the action log rows of envID that finished before
// before, but each resource's newest and those of open runs. It walks
// resource_actions_env from the oldest id; each row's test for a newer
// row of its resource is a probe of resource_actions_resource.
//
// The times are the executors' clocks: a row dated in the future (more
// than an hour past now) tells nothing of where the old rows end, so it
// does not stop the walk; it stays until its time is past.
func (s *Store) pruneActions(ctx context.Context, envID string, now, before time.Time, chunk int, out Pruned) error {
	future := now.Add(time.Hour)
	var open []string
	rows, err := s.pool.Query(ctx, `select workflow_id from deploy_runs
		where environment_id = $1::uuid and status in ('pending', 'running')`, envID)
	if err != nil {
		return err
	}
	if open, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return err
	}
	open = nonNil(open)
	var after int64
	for {
		var w walked
		var last *int64
		err := s.pool.QueryRow(ctx, pruneActionsSQL,
			envID, after, chunk, before, open, future).Scan(&w.scanned, &w.old, &last, &w.deleted)
		if err != nil {
			return err
		}
		out[TableActions] += w.deleted
		if !w.more(chunk) {
			return s.pruneUnchanged(ctx, envID, before, future, open, chunk, out)
		}
		after = *last
	}
}

// pruneRuns deletes the finished runs of envID that ended before before,
// but the newest run of each action and the newest successful deploy or
// repair, and then the requests taken before before, but those of open
// runs. Both walk their primary key.
func (s *Store) pruneRuns(ctx context.Context, envID string, before time.Time, chunk int, out Pruned) error {
	// Each newest is a backward walk of the primary key that stops at
	// its first match, as ClusterMetrics' is.
	keep, open := []int64{}, []int64{}
	if err := s.pool.QueryRow(ctx, `select
		array_remove(array[
			(select run from deploy_runs where environment_id = $1::uuid and action = 'deploy' order by run desc limit 1),
			(select run from deploy_runs where environment_id = $1::uuid and action = 'repair' order by run desc limit 1),
			(select run from deploy_runs where environment_id = $1::uuid and action = 'dryrun' order by run desc limit 1),
			(select run from deploy_runs where environment_id = $1::uuid and action <> 'dryrun' and status = 'done'
			        and failed = 0 order by run desc limit 1)], null),
		array(select run from deploy_runs where environment_id = $1::uuid and status in ('pending', 'running'))`,
		envID).Scan(&keep, &open); err != nil {
		return err
	}
	keep, open = nonNil(keep), nonNil(open)
	var after int64
	for {
		var w walked
		var last *int64
		err := s.pool.QueryRow(ctx, pruneRunsSQL,
			envID, after, chunk, before, keep).Scan(&w.scanned, &w.old, &last, &w.deleted)
		if err != nil {
			return err
		}
		out[TableRuns] += w.deleted
		if !w.more(chunk) {
			break
		}
		after = *last
	}
	after = 0
	for {
		var w walked
		var last *int64
		err := s.pool.QueryRow(ctx, pruneRequestsSQL,
			envID, after, chunk, before, open).Scan(&w.scanned, &w.old, &last, &w.deleted)
		if err != nil {
			return err
		}
		out[TableRequests] += w.deleted
		if !w.more(chunk) {
			return nil
		}
		after = *last
	}
}

// pruneCompiles deletes the finished compiles of envID that ended before
// before, but the newest, walking compiles_environment.
func (s *Store) pruneCompiles(ctx context.Context, envID string, before time.Time, chunk int, out Pruned) error {
	var after int64
	for {
		var w walked
		var last *int64
		err := s.pool.QueryRow(ctx, pruneCompilesSQL,
			envID, after, chunk, before).Scan(&w.scanned, &w.old, &last, &w.deleted)
		if err != nil {
			return err
		}
		out[TableCompiles] += w.deleted
		if !w.more(chunk) {
			return nil
		}
		after = *last
	}
}

// pruneOrders deletes the orders of envID that finished before before,
// with their items. It walks the primary key (ids are version 7 UUIDs:
// by submission time), taking orders while their items add up to fewer
// than chunk, so a chunk deletes at most chunk rows plus one order's
// items (at most 10,000).
func (s *Store) pruneOrders(ctx context.Context, envID string, before time.Time, chunk int, out Pruned) error {
	after := "00000000-0000-0000-0000-000000000000"
	for {
		var w walked
		var taken int64
		var last *string
		var items int64
		err := s.pool.QueryRow(ctx, pruneOrdersSQL,
			envID, after, chunk, before).Scan(&w.scanned, &taken, &w.old, &last, &w.deleted, &items)
		if err != nil {
			return err
		}
		out[TableOrders] += w.deleted
		out[TableOrderItems] += items
		// A chunk cut short by the items goes on from its last order.
		if !(w.more(chunk) || taken < w.scanned && w.old > 0) {
			return nil
		}
		after = *last
	}
}

// pruneInstanceLogs deletes, for a chunk of service instances of envID at
// a time (by primary key), the log rows written before before that are
// older than the last row in another state than the instance's current
// one, and every log row of a terminated instance last changed before
// before, and then that instance. Every instance is visited: an instance
// id says nothing of its age.
func (s *Store) pruneInstanceLogs(ctx context.Context, envID string, before time.Time, chunk int, out Pruned) error {
	// Instances per chunk: a tenth of the rows, about what a few versions
	// of each add up to.
	instances := max(1, chunk/10)
	after := "00000000-0000-0000-0000-000000000000"
	for {
		var scanned, logs int64
		var last *string
		err := s.pool.QueryRow(ctx, pruneInstanceLogSQL,
			envID, after, instances, before, chunk).Scan(&scanned, &last, &logs)
		if err != nil {
			return err
		}
		out[TableInstanceLog] += logs
		if logs == int64(chunk) {
			continue // the same instances again: more of their log may go
		}
		if scanned > 0 {
			// Terminated instances whose whole log went in this chunk.
			tag, err := s.pool.Exec(ctx, pruneInstancesSQL,
				envID, after, *last, before)
			if err != nil {
				return err
			}
			out[TableInstances] += tag.RowsAffected()
		}
		if scanned < int64(instances) {
			return nil
		}
		after = *last
	}
}

// pruneLockKey is the advisory lock whose holder prunes ("intend/p" in
// ASCII).
const pruneLockKey int64 = 0x696e74656e642f70

// TryPruneLock takes the session-level advisory lock that makes one
// replica of a cluster prune at a time, on a connection of the pool that
// it keeps until unlock. ok is false, with nothing held, when another
// session holds the lock. Should the process die, PostgreSQL ends its
// session and frees the lock.
func (s *Store) TryPruneLock(ctx context.Context) (unlock func(), ok bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	var got bool
	if err := conn.QueryRow(ctx, `select pg_try_advisory_lock($1)`, pruneLockKey).Scan(&got); err != nil || !got {
		conn.Release()
		return nil, false, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, `select pg_advisory_unlock($1)`, pruneLockKey); err != nil {
			// A session that may still hold the lock must not go
			// back to the pool: closing it frees the lock.
			_ = conn.Hijack().Close(ctx)
			return
		}
		conn.Release()
	}, true, nil
}

// nonNil is s, or an empty slice for nil: pgx sends a nil slice as null,
// and "x = any(null)" is null, not false.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// pruneAuditSQL is one chunk of PruneAudit.
const pruneAuditSQL = `
	with scan as (
		select id, at from audit_log where id > $1 order by id limit $2
	), gone as (
		delete from audit_log where id = any(array(select id from scan where at < $3))
		returning 1
	)
	select count(*), count(*) filter (where at < $3), max(id), (select count(*) from gone) from scan`

// TableAudit is the audit trail's table, as PruneAudit names its rows.
const TableAudit = "audit_log"

// PruneAudit deletes the audit rows written before before, of every
// environment (and of none, and of deleted ones), chunk rows at a time
// (0: DefaultPruneChunk). Unlike the rest of the history it is the
// server's to keep, not an environment's: its retention is a server flag
// (intend server --audit-retention). The walk follows the primary key:
// ids grow with the rows' time, the database's clock.
func (s *Store) PruneAudit(ctx context.Context, before time.Time, chunk int) (int64, error) {
	if chunk <= 0 {
		chunk = DefaultPruneChunk
	}
	var after, n int64
	for {
		var w walked
		var last *int64
		if err := s.pool.QueryRow(ctx, pruneAuditSQL, after, chunk, before).
			Scan(&w.scanned, &w.old, &last, &w.deleted); err != nil {
			return n, err
		}
		n += w.deleted
		if !w.more(chunk) {
			return n, nil
		}
		after = *last
	}
}
