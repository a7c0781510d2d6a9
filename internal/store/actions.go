package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/plan"
)

// RecordActions appends attempts to the action log and, for deploys and
// repairs, moves each resource's deploy state in the same transaction:
// compliant when deployed, undefined when undefined, else non_compliant. A
// resource whose intent changed meanwhile keeps compliance has_update.
// Facts are upserted for every action kind, dry-runs included: they are
// observations of the target, not changes to it. The attempts that
// changed nothing share one row (action_log.go); the state update is one
// statement for the whole chunk.
func (s *Store) RecordActions(ctx context.Context, envID string, recs []ActionRecord) error {
	if len(recs) == 0 {
		return nil
	}
	return s.inTx(ctx, func(tx pgx.Tx) error { return recordActions(ctx, tx, envID, recs, !s.perResource) })
}

// recordActions is RecordActions in the caller's transaction; with
// compact, the unchanged attempts share rows (action_log.go).
func recordActions(ctx context.Context, tx pgx.Tx, envID string, recs []ActionRecord, compact bool) error {
	if len(recs) == 0 {
		return nil
	}
	if err := lockVersionsOf(ctx, tx, envID, recs); err != nil {
		return err
	}
	actionIDs, err := reserveActionIDs(ctx, tx, len(recs))
	if err != nil {
		return err
	}
	inSet := compactable(recs, compact)
	env, err := copyUUID(envID)
	if err != nil {
		return err
	}
	rows := make([][]any, 0, len(recs))
	ids := make([]string, 0, len(recs))
	hashes := make([][]byte, 0, len(recs))
	results := make([]string, 0, len(recs))
	changed := make([]bool, 0, len(recs))
	finished := make([]time.Time, 0, len(recs))
	for i, r := range recs {
		var errText any
		if r.Error != "" {
			errText = r.Error
		}
		var op, class any
		if r.Operation != "" {
			op = r.Operation
		}
		if r.ErrorClass != "" && (r.Result == ledger.ResultFailed || r.Result == ledger.ResultUnavailable ||
			r.Result == ledger.ResultSkipped) {
			class = r.ErrorClass
		}
		if !inSet[i] {
			rows = append(rows, []any{actionIDs[i], env, r.ResourceID, r.Version, r.Action, r.Reason, r.StartedAt, r.FinishedAt, r.Result,
				op, jsonOrNil(r.Changes), jsonOrNil(r.Logs), errText, class, r.WorkflowID, r.RunID, r.Attempt,
				executorOrNil(r.Executor), batchOrNil(r.Batch)})
		}
		if r.Action == ledger.ActionDryrun {
			continue
		}
		ids = append(ids, r.ResourceID)
		hashes = append(hashes, r.Hash)
		results = append(results, string(r.Result))
		changed = append(changed, r.Changed)
		finished = append(finished, r.FinishedAt)
	}
	if len(rows) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"resource_actions"},
			[]string{"id", "environment_id", "resource_id", "version", "action", "reason", "started_at", "finished_at",
				"result", "operation", "changes", "logs", "error", "error_class", "workflow_id", "run_id", "attempt",
				"executor", "batch"},
			pgx.CopyFromRows(rows)); err != nil {
			return fmt.Errorf("append action log: %w", err)
		}
	}
	if err := insertUnchanged(ctx, tx, envID, recs, actionIDs, inSet); err != nil {
		return err
	}
	if err := upsertFacts(ctx, tx, envID, recs); err != nil {
		return err
	}
	if len(ids) == 0 {
		return countProgress(ctx, tx, envID, recs)
	}
	_, err = tx.Exec(ctx, `
		update resource_state rs set
		  last_result = u.result,
		  last_attempt = u.finished,
		  last_produced_change = u.changed,
		  deployed_hash = case when u.result in ('deployed', 'unmanaged') then u.hash else rs.deployed_hash end,
		  last_success = case when u.result in ('deployed', 'unmanaged') then u.finished else rs.last_success end,
		  compliance = case when rs.intent_hash is distinct from u.hash then 'has_update'
		                    when u.result in ('deployed', 'unmanaged') then 'compliant'
		                    when u.result = 'undefined' then 'undefined'
		                    else 'non_compliant' end
		from unnest($2::text[], $3::bytea[], $4::text[], $5::bool[], $6::timestamptz[])
		  as u(rid, hash, result, changed, finished)
		where rs.environment_id = $1::uuid and rs.resource_id = u.rid`,
		envID, ids, hashes, results, changed, finished)
	if err != nil {
		return fmt.Errorf("update deploy state: %w", err)
	}
	if err := queueFollowUps(ctx, tx, envID, recs); err != nil {
		return err
	}
	// Last: the counters' row is locked until the commit (the batch's,
	// or the run's for the plan's records).
	return countProgress(ctx, tx, envID, recs)
}

// lockVersionsOf holds a key share lock on the version of each record of
// a batch (Batch > 0) until tx ends, and refuses the records of a version
// that no longer exists: an environment cleared (ClearEnvironment deletes
// its versions; numbers are never reused) while an executor was still
// working gets no action log, facts or deploy state back from its late
// report. A version that an unfinished run uses is never pruned or
// deleted otherwise.
func lockVersionsOf(ctx context.Context, tx pgx.Tx, envID string, recs []ActionRecord) error {
	var vs []int64
	for _, r := range recs {
		if r.Batch > 0 && !slices.Contains(vs, r.Version) {
			vs = append(vs, r.Version)
		}
	}
	if len(vs) == 0 {
		return nil
	}
	slices.Sort(vs)
	rows, err := tx.Query(ctx, `select version from versions where environment_id = $1::uuid and version = any($2)
		order by version for key share`, envID, vs)
	if err != nil {
		return fmt.Errorf("lock the versions: %w", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("lock the versions: %w", err)
	}
	for _, v := range vs {
		if !slices.Contains(found, v) {
			return NotFound("version %d (the environment was cleared?)", v)
		}
	}
	return nil
}

// upsertFacts stores the facts of recs, keeping the last value per
// resource and name (a later record of the same resource wins).
func upsertFacts(ctx context.Context, tx pgx.Tx, envID string, recs []ActionRecord) error {
	type key struct{ rid, name string }
	last := map[key]json.RawMessage{}
	for _, r := range recs {
		for name, v := range r.Facts {
			last[key{r.ResourceID, name}] = v
		}
	}
	if len(last) == 0 {
		return nil
	}
	keys := make([]key, 0, len(last))
	for k := range last {
		keys = append(keys, k)
	}
	// A fixed order keeps concurrent upserts from deadlocking.
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].rid != keys[j].rid {
			return keys[i].rid < keys[j].rid
		}
		return keys[i].name < keys[j].name
	})
	rids := make([]string, len(keys))
	names := make([]string, len(keys))
	values := make([]string, len(keys))
	for i, k := range keys {
		rids[i], names[i], values[i] = k.rid, k.name, string(last[k])
	}
	if _, err := tx.Exec(ctx, `insert into facts (environment_id, resource_id, name, value)
		select $1::uuid, u.rid, u.name, u.value::jsonb
		from unnest($2::text[], $3::text[], $4::text[]) as u(rid, name, value)
		on conflict (environment_id, resource_id, name)
		do update set value = excluded.value, updated_at = now()
		-- An unchanged fact (the common case in a repair) rewrites no row;
		-- a user's (a parameter) is never replaced by an adapter's.
		where facts.value is distinct from excluded.value and facts.source = 'adapter'`,
		envID, rids, names, values); err != nil {
		return fmt.Errorf("record facts: %w", err)
	}
	return nil
}

// queueFollowUps queues the automatic requests a chunk of outcomes calls
// for (the rules are plan's: plan.Recovery, plan.Events): a deploy of the
// resources skipped because of a dependency that is now deployed, failed
// or undefined before ("dependency X recovered"), and a repair of the
// resources with receive_events that require a resource with send_event
// that just changed ("event from X"). Automatic requests are dropped at
// take time when the run at hand already did the work.
func queueFollowUps(ctx context.Context, tx pgx.Tx, envID string, recs []ActionRecord) error {
	outs := make([]plan.Outcome, len(recs))
	for i, r := range recs {
		outs[i] = plan.Outcome{ResourceID: r.ResourceID, Action: string(r.Action), Result: string(r.Result), Changed: r.Changed,
			FinishedAt: r.FinishedAt}
	}
	t := plan.FollowUpTriggers(outs)
	if len(t.Deployed) == 0 {
		return nil
	}
	deployed := make([]string, len(t.Deployed))
	for k, i := range t.Deployed {
		deployed[k] = recs[i].ResourceID
	}
	const dependents = `select distinct rs.resource_id, req.id
		from resource_state rs
		join resource_contents c on c.environment_id = rs.environment_id and c.hash = rs.intent_hash
		cross join lateral unnest(c.requires) as req(id)
		where rs.environment_id = $1::uuid and req.id = any($2) and `
	skipped, err := dependentsOf(ctx, tx, dependents+`rs.last_result in ('skipped_for_dependency', 'skipped_for_undefined')
		order by 1, 2`, envID, deployed)
	if err != nil {
		return fmt.Errorf("find recovered dependents: %w", err)
	}
	if f, ok := plan.Recovery(skipped); ok {
		if err := queueFollowUp(ctx, tx, envID, f); err != nil {
			return err
		}
	}
	if len(t.Changed) == 0 {
		return nil
	}
	changed := make([]string, len(t.Changed))
	changedHashes := make([][]byte, len(t.Changed))
	for k, i := range t.Changed {
		changed[k], changedHashes[k] = recs[i].ResourceID, recs[i].Hash
	}
	rows, err := tx.Query(ctx, sendersSQL, envID, changed, changedHashes)
	if err != nil {
		return err
	}
	senders, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(senders) == 0 {
		return err
	}
	receivers, err := dependentsOf(ctx, tx, dependents+`rs.intent_hash is not null and c.receive_events order by 1, 2`, envID, senders)
	if err != nil {
		return fmt.Errorf("find event receivers: %w", err)
	}
	if f, ok := plan.Events(receivers, t.At); ok {
		return queueFollowUp(ctx, tx, envID, f)
	}
	return nil
}

// sendersSQL reads which of the resources that changed ($2, with their
// hashes $3) send events: every chunk with a change asks, and the
// contents that send events are few; their partial index
// (resource_contents_send_event, migration 032) answers without reading
// a content of each resource (issue 28; TestSendersReadTheirIndex).
const sendersSQL = `select u.rid from unnest($2::text[], $3::bytea[]) as u(rid, hash)
		join resource_contents c on c.environment_id = $1::uuid and c.hash = u.hash
		where c.send_event order by 1`

// queueFollowUp queues an automatic request.
func queueFollowUp(ctx context.Context, tx pgx.Tx, envID string, f plan.FollowUp) error {
	_, err := insertRequest(ctx, tx, envID, Request{Kind: f.Kind, Auto: true, ResourceIDs: f.ResourceIDs,
		StaleBefore: f.StaleBefore, Reason: f.Reason})
	return err
}

// dependentsOf runs a query of (resource, cause) rows.
func dependentsOf(ctx context.Context, tx pgx.Tx, q string, args ...any) ([]plan.Dependent, error) {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (plan.Dependent, error) {
		var d plan.Dependent
		return d, r.Scan(&d.ID, &d.Cause)
	})
}

// countProgress moves the live counters of the runs the records belong to:
// those of the record's batch (a running run's counters add its batches',
// runColumns), or the run's own for a record of no batch (the plan's).
// They show progress while a run works; FinishRun sets the exact totals.
func countProgress(ctx context.Context, tx pgx.Tx, envID string, recs []ActionRecord) error {
	type counts struct{ deployed, failed, skipped, unavailable int }
	type key struct {
		workflow string
		batch    int
	}
	byWorkflow := map[key]*counts{}
	for _, r := range recs {
		k := key{r.WorkflowID, max(r.Batch, 0)}
		c := byWorkflow[k]
		if c == nil {
			c = &counts{}
			byWorkflow[k] = c
		}
		switch r.Result {
		case ledger.ResultDeployed, ledger.ResultUnmanaged:
			c.deployed++
		case ledger.ResultUnavailable:
			c.unavailable++
		case ledger.ResultSkippedForDependency, ledger.ResultSkipped, plan.ResultUndefined, plan.ResultSkippedForUndefined:
			c.skipped++
		default:
			c.failed++
		}
	}
	for k, c := range byWorkflow {
		q := `update deploy_runs set deployed = deployed + $3, failed = failed + $4,
			skipped = skipped + $5, unavailable = unavailable + $6
			where environment_id = $1::uuid and workflow_id = $2 and status = 'running' and $7::int = 0`
		if k.batch > 0 {
			// The batch's row, which only its own chunks (one after
			// another) update: the batches in flight never wait for each
			// other here.
			q = `update deploy_batches b set deployed = b.deployed + $3, failed = b.failed + $4,
				skipped = b.skipped + $5, unavailable = b.unavailable + $6
				from deploy_runs r
				where r.environment_id = $1::uuid and r.workflow_id = $2 and r.status = 'running'
				  and b.environment_id = r.environment_id and b.run = r.run and b.seq = $7`
		}
		if _, err := tx.Exec(ctx, q, envID, k.workflow, c.deployed, c.failed, c.skipped, c.unavailable, k.batch); err != nil {
			return fmt.Errorf("count progress: %w", err)
		}
	}
	return nil
}

func jsonOrNil(b json.RawMessage) any {
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	return string(b)
}

// RunCounts are a finished run's totals.
type RunCounts struct {
	Deployed    int `json:"deployed"`
	Failed      int `json:"failed"`
	Skipped     int `json:"skipped"`
	Unavailable int `json:"unavailable"`
}
