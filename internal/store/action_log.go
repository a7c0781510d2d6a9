package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/ledger"
)

// The action log keeps a chunk's attempts that changed nothing in one row
// of unchanged_actions (migration 031), the others a resource_actions row
// each; the view action_log reads both as one row per attempt.
//
// actionIDBlock is the step of resource_actions' identity: each value it
// gives is a block of ids of its own. recordActions takes a block per
// actionIDBlock records and gives them its ids in their order, so the
// records of a chunk never interleave with another chunk's, and a block
// holds at most one unchanged_actions row, whose id is its first member's.
// Readers that order by id rely on both (listActions).
const actionIDBlock = 1024

// unchanged reports whether r is an attempt that found its resource as
// intended and did nothing, with nothing worth a row of its own: no
// changes, logs or error.
func unchanged(r ActionRecord) bool {
	return r.Result == ledger.ResultDeployed && r.Operation == "none" && !r.Changed &&
		jsonOrNil(r.Changes) == nil && jsonOrNil(r.Logs) == nil && r.Error == ""
}

// unchangedKey is what the members of an unchanged_actions row share.
type unchangedKey struct {
	version                   int64
	action                    ledger.Action
	reason, workflowID, runID string
	attempt, batch            int
	executor                  string
}

func keyOf(r ActionRecord) unchangedKey {
	return unchangedKey{version: r.Version, action: r.Action, reason: r.Reason, workflowID: r.WorkflowID,
		runID: r.RunID, attempt: r.Attempt, batch: r.Batch, executor: r.Executor}
}

// reserveActionIDs takes the ids of n records, in their order: a block
// of the identity per actionIDBlock records.
func reserveActionIDs(ctx context.Context, tx pgx.Tx, n int) ([]int64, error) {
	blocks := (n + actionIDBlock - 1) / actionIDBlock
	rows, err := tx.Query(ctx, `select nextval(pg_get_serial_sequence('resource_actions', 'id'))
		from generate_series(1, $1)`, blocks)
	if err != nil {
		return nil, fmt.Errorf("reserve action ids: %w", err)
	}
	bases, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("reserve action ids: %w", err)
	}
	slices.Sort(bases)
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = bases[i/actionIDBlock] + int64(i%actionIDBlock)
	}
	return ids, nil
}

// compactable returns, per record, whether it goes into its block's
// unchanged_actions row: an unchanged attempt, on a resource that has no
// other record in recs (so that a resource's records order by their rows'
// ids), of the same key as the block's first such attempt.
func compactable(recs []ActionRecord, compactUnchanged bool) []bool {
	seen := make(map[string]int, len(recs))
	for _, r := range recs {
		seen[r.ResourceID]++
	}
	out := make([]bool, len(recs))
	if !compactUnchanged {
		return out
	}
	for start := 0; start < len(recs); start += actionIDBlock {
		var key *unchangedKey
		var members []int
		for i := start; i < min(start+actionIDBlock, len(recs)); i++ {
			r := recs[i]
			if !unchanged(r) || seen[r.ResourceID] > 1 {
				continue
			}
			k := keyOf(r)
			if key == nil {
				key = &k
			}
			if k == *key {
				members = append(members, i)
			}
		}
		// One attempt alone is a row either way.
		if len(members) > 1 {
			for _, i := range members {
				out[i] = true
			}
		}
	}
	return out
}

// insertUnchanged writes the unchanged_actions rows of recs: the members
// of each block, as compactable chose them.
func insertUnchanged(ctx context.Context, tx pgx.Tx, envID string, recs []ActionRecord, ids []int64, compact []bool) error {
	var rows [][]any
	for start := 0; start < len(recs); start += actionIDBlock {
		var rids []string
		var mids []int64
		var started, finished []time.Time
		first := -1
		for i := start; i < min(start+actionIDBlock, len(recs)); i++ {
			if !compact[i] {
				continue
			}
			if first < 0 {
				first = i
			}
			rids = append(rids, recs[i].ResourceID)
			mids = append(mids, ids[i])
			started = append(started, recs[i].StartedAt)
			finished = append(finished, recs[i].FinishedAt)
		}
		if first < 0 {
			continue
		}
		r := recs[first]
		rows = append(rows, []any{ids[first], envID, r.Version, r.Action, r.Reason, r.Result, r.Operation,
			r.WorkflowID, r.RunID, r.Attempt, executorOrNil(r.Executor), batchOrNil(r.Batch),
			rids, mids, started, finished})
	}
	if len(rows) == 0 {
		return nil
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"unchanged_actions"},
		[]string{"id", "environment_id", "version", "action", "reason", "result", "operation", "workflow_id",
			"run_id", "attempt", "executor", "batch", "resource_ids", "ids", "started_at", "finished_at"},
		pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("append unchanged actions: %w", err)
	}
	return nil
}

// listUnchanged is ListActions' read of unchanged_actions: the records f
// selects with an id below before, newest first, at most f.Limit. It
// expands the newest f.Limit rows that hold at least one of them: each
// gives one or more, and a row not read holds only older records than
// every row read (its block is an older one: a block holds one row).
func (s *Store) listUnchanged(ctx context.Context, envID string, before int64, f ActionFilter) ([]Action, error) {
	rowWhere := "u.environment_id = $1::uuid and u.id < $2"
	member := "m.id < $2"
	args := []any{envID, before, f.Limit}
	add := func(where *string, cond string, v any) {
		args = append(args, v)
		*where += fmt.Sprintf(" and "+cond, len(args))
	}
	if f.ResourceID != "" {
		add(&rowWhere, "u.resource_ids @> array[$%d::text]", f.ResourceID)
		member += fmt.Sprintf(" and m.resource_id = $%d", len(args))
	}
	if f.Action != "" {
		add(&rowWhere, "u.action = $%d", f.Action)
	}
	if f.Result != "" {
		add(&rowWhere, "u.result = $%d", f.Result)
	}
	if len(f.Results) > 0 {
		add(&rowWhere, "u.result = any($%d)", f.Results)
	}
	if f.WorkflowID != "" {
		add(&rowWhere, "u.workflow_id = $%d", f.WorkflowID)
	}
	if f.Since != nil {
		add(&member, "m.started_at >= $%d", *f.Since)
	}
	if f.Until != nil {
		add(&member, "m.started_at < $%d", *f.Until)
	}
	q := `select u.id, m.id, m.resource_id, u.version, u.action, u.reason, m.started_at, m.finished_at, u.result,
		       u.workflow_id, u.run_id, u.attempt, coalesce(u.executor, '')
		from (select * from unchanged_actions u
		      where ` + rowWhere + ` and exists (select 1
		          from unnest(u.resource_ids, u.ids, u.started_at) as m(resource_id, id, started_at)
		          where ` + member + `)
		      order by u.id desc limit $3) u
		cross join lateral unnest(u.resource_ids, u.ids, u.started_at, u.finished_at)
		    as m(resource_id, id, started_at, finished_at)
		where ` + member + `
		order by m.id desc limit $3`
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list unchanged actions: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Action, error) {
		var a Action
		var row int64
		err := r.Scan(&row, &a.ID, &a.ResourceID, &a.Version, &a.Action, &a.Reason, &a.StartedAt, &a.FinishedAt,
			&a.Result, &a.WorkflowID, &a.RunID, &a.Attempt, &a.Executor)
		f.Outputs.redact(&a.Logs, &a.Changes)
		return a, err
	})
}

// pruneUnchangedSQL is pruneActions' statement for unchanged_actions: a
// member goes on the terms a resource_actions row does (finished before
// $4, its run not open, a newer record of its resource kept); a row
// loses the members that go, and goes with the last.
const pruneUnchangedSQL = `
	with scan as (
		select id, workflow_id, resource_ids, ids, started_at, finished_at from unchanged_actions
		where environment_id = $1::uuid and id > $2 order by id limit $3 for update
	), m as (
		select s.id as row, x.*,
		       x.fin < $4 and not (s.workflow_id = any($5))
		       and ((select n.id from resource_actions n
		             where n.environment_id = $1::uuid and n.resource_id = x.rid and n.id > x.mid limit 1) is not null
		            -- a row of a later block: the block of x holds no other
		            or exists (select 1 from unchanged_actions n
		                       where n.environment_id = $1::uuid and n.resource_ids @> array[x.rid] and n.id > x.mid))
		         as doomed
		from scan s
		cross join lateral unnest(s.resource_ids, s.ids, s.started_at, s.finished_at) with ordinality
		    as x(rid, mid, st, fin, ord)
	), agg as (
		select row, count(*) filter (where doomed) as doomed, count(*) as total,
		       count(*) filter (where fin < $4 or fin > $6) as old,
		       array_agg(rid order by ord) filter (where not doomed) as rids,
		       array_agg(mid order by ord) filter (where not doomed) as mids,
		       array_agg(st order by ord) filter (where not doomed) as sts,
		       array_agg(fin order by ord) filter (where not doomed) as fins
		from m group by row
	), del as (
		delete from unchanged_actions where id = any(array(select row from agg where doomed = total))
		returning 1
	), upd as (
		update unchanged_actions u set resource_ids = a.rids, ids = a.mids, started_at = a.sts, finished_at = a.fins
		from agg a where u.id = a.row and a.doomed > 0 and a.doomed < a.total
		returning 1
	)
	select (select count(*) from scan), (select coalesce(sum(old), 0) from agg), (select max(id) from scan),
	       (select coalesce(sum(doomed), 0) from agg), (select count(*) from del) + (select count(*) from upd)`

// pruneUnchanged is pruneActions for unchanged_actions; it counts the
// members that went, as rows of the action log. A statement reads chunk
// members at most (rows of up to actionIDBlock).
func (s *Store) pruneUnchanged(ctx context.Context, envID string, before, future time.Time, open []string, chunk int,
	out Pruned) error {
	rowsPer := max(1, chunk/100)
	var after int64
	for {
		var w walked
		var last *int64
		var touched int64
		err := s.pool.QueryRow(ctx, pruneUnchangedSQL, envID, after, rowsPer, before, open, future).
			Scan(&w.scanned, &w.old, &last, &w.deleted, &touched)
		if err != nil {
			return fmt.Errorf("prune unchanged actions: %w", err)
		}
		out[TableActions] += w.deleted
		if !w.more(rowsPer) {
			return nil
		}
		after = *last
	}
}
