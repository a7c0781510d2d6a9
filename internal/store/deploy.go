package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/plan"
	"github.com/intendhq/intend/internal/runstages"
)

// BatchLimits bound what one executor activity receives.
type BatchLimits = plan.Limits

// DefaultBatchLimits are the limits the deploy workflow uses unless told
// otherwise; see docs/architecture.md, "Batching".
var DefaultBatchLimits = plan.DefaultLimits

// BatchRef names one batch of a deploy run: all a workflow history holds
// about it.
type BatchRef = plan.Batch

// Plan is the outcome of PlanDeploy.
type Plan struct {
	Version int64  `json:"version"`
	Action  string `json:"action"`
	Reason  string `json:"reason"`
	// Total counts every resource the run covers: those in Batches and
	// the Undefined ones.
	Total   int        `json:"total"`
	Batches []BatchRef `json:"batches"`
	// NextSeq is the first batch number not in use: retry batches are
	// numbered from it (see PlanRetry) and are not in Batches.
	NextSeq int `json:"next_seq"`
	// Undefined counts the resources the plan recorded itself, in no
	// batch: undefined ones and those skipped_for_undefined. The run
	// counts them as skipped.
	Undefined int `json:"undefined"`
}

// planItem is a resource of a run: what planning sees, and what the
// batches and the held resources' records store.
type planItem struct {
	plan.Item
	hash []byte
	// action is what an attempt on it records: deploy, repair or dryrun.
	action string
}

// Caller names the Temporal workflow run and activity attempt on whose
// behalf the store writes action records itself (PlanDeploy).
type Caller struct {
	RunID   string
	Attempt int
}

// PlanDeploy selects the resources a run deploys, orders them in levels of
// their requires, and cuts each (level, agent) group into batches bounded by
// limits. It is idempotent: a repeat returns the batches planned before.
// It reads the run's resources and writes the plan; plan.Make decides it.
//
// Undefined resources, and the resources of the run that require one
// (directly, through other resources of the run, or an undefined resource
// the run does not cover), go in no batch: PlanDeploy records them itself,
// in the same transaction, as undefined and skipped_for_undefined, on
// behalf of by; no executor or adapter ever sees them. Plan.Undefined
// counts them.
func (s *Store) PlanDeploy(ctx context.Context, envID string, run int64, limits BatchLimits, by Caller) (Plan, error) {
	return s.PlanDeployGrouped(ctx, envID, run, limits, by, nil)
}

// Grouper returns the group of each of agents whose batches one executor
// may run together (plan.Item.Group: its task queue), "" or absent for an
// agent whose batches are its own.
type Grouper func(ctx context.Context, agents []string) (map[string]string, error)

// PlanDeployGrouped is PlanDeploy with the agents of the run grouped by
// group (nil: none), so that a batch may hold the resources of several
// agents of one group (issue 28). A repeat returns the batches planned
// before, whatever group says now.
func (s *Store) PlanDeployGrouped(ctx context.Context, envID string, run int64, limits BatchLimits, by Caller,
	group Grouper) (Plan, error) {
	var p Plan
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var status, workflowID string
		err := tx.QueryRow(ctx, `select version, action, reason, status, workflow_id from deploy_runs
			where environment_id = $1::uuid and run = $2 for update`, envID, run).
			Scan(&p.Version, &p.Action, &p.Reason, &status, &workflowID)
		if errors.Is(err, pgx.ErrNoRows) {
			return NotFound("deploy run %d", run)
		}
		if err != nil {
			return err
		}
		if status != "pending" {
			return existingPlan(ctx, tx, envID, run, workflowID, &p)
		}
		reqs, err := runRequests(ctx, tx, envID, run)
		if err != nil {
			return err
		}
		if len(reqs) == 0 {
			// A run made outside the scheduler's queue covers everything
			// its action implies.
			reqs = []Request{{Kind: p.Action}}
		}
		cond, args := scope(reqs, []any{envID})
		q := `select rs.resource_id, rs.agent, rs.intent_hash, c.requires, pg_column_size(c.attributes), c.undefined,
			       case when rs.compliance = 'compliant' then 'repair' else 'deploy' end
			from resource_state rs
			join resource_contents c on c.environment_id = rs.environment_id and c.hash = rs.intent_hash
			where ` + candidates + ` and ` + cond + `
			order by rs.resource_id`
		if p.Action == string(ledger.ActionDryrun) {
			// A dry-run covers a version (released or not), paused agents
			// included: it changes nothing. rs is the version's membership.
			args = append(args, p.Version)
			q = fmt.Sprintf(`select rs.resource_id, rs.agent, rs.hash, c.requires, pg_column_size(c.attributes), c.undefined,
				       'dryrun'
				from version_resources rs
				join resource_contents c on c.environment_id = rs.environment_id and c.hash = rs.hash
				where rs.environment_id = $1::uuid and rs.first_version <= $%[1]d
				  and (rs.last_version is null or rs.last_version > $%[1]d) and %[2]s
				order by rs.resource_id`, len(args), cond)
			overlay, err := hasDryrunResources(ctx, tx, envID, run)
			if err != nil {
				return err
			}
			if overlay {
				// An instance's dry-run: the resources it lists, not
				// the version's.
				args[len(args)-1] = run
				q = fmt.Sprintf(`select rs.resource_id, rs.agent, rs.hash, c.requires, pg_column_size(c.attributes), c.undefined,
					       'dryrun'
					from dryrun_resources rs
					join resource_contents c on c.environment_id = rs.environment_id and c.hash = rs.hash
					where rs.environment_id = $1::uuid and rs.run = $%d and %s
					order by rs.resource_id`, len(args), cond)
			}
		}
		rows, err := tx.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		var items []planItem
		for rows.Next() {
			var it planItem
			if err := rows.Scan(&it.ID, &it.Agent, &it.hash, &it.Requires, &it.Size, &it.Undefined, &it.action); err != nil {
				return err
			}
			items = append(items, it)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		in := make([]plan.Item, len(items))
		for i, it := range items {
			in[i] = it.Item
		}
		if group != nil && len(items) > 0 {
			var agents []string
			seen := map[string]bool{}
			for _, it := range items {
				if !seen[it.Agent] {
					seen[it.Agent] = true
					agents = append(agents, it.Agent)
				}
			}
			groups, err := group(ctx, agents)
			if err != nil {
				return err
			}
			for i := range in {
				in[i].Group = groups[in[i].Agent]
			}
		}
		outside, err := undefinedOutside(ctx, tx, envID, p, plan.Outside(in))
		if err != nil {
			return err
		}
		made := plan.Make(in, outside, limits)
		p.Batches = made.Batches
		p.Undefined = len(made.Held)
		p.Total = len(made.Order) + len(made.Held)
		p.NextSeq = 1
		for _, b := range p.Batches {
			p.NextSeq = max(p.NextSeq, b.Seq+1)
		}

		var copyRows [][]any
		at := 0
		for _, b := range p.Batches {
			ids := make([]string, 0, b.Count)
			hashes := make([][]byte, 0, b.Count)
			for _, i := range made.Order[at : at+b.Count] {
				ids = append(ids, items[i].ID)
				hashes = append(hashes, items[i].hash)
			}
			at += b.Count
			copyRows = append(copyRows, []any{envID, run, b.Seq, b.Agent, b.Agents, b.Level, ids, hashes})
		}
		if len(copyRows) > 0 {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"deploy_batches"},
				[]string{"environment_id", "run", "seq", "agent", "agents", "level", "resource_ids", "hashes"},
				pgx.CopyFromRows(copyRows)); err != nil {
				return fmt.Errorf("store batches: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, `update deploy_runs set status = 'running', started_at = now(), total = $3
			where environment_id = $1::uuid and run = $2`, envID, run, p.Total); err != nil {
			return err
		}
		// Recorded once the run is running, so that its live counters
		// count them.
		return recordActions(ctx, tx, envID, heldRecords(items, made.Held, p, workflowID, by), true)
	})
	return p, err
}

// undefinedOutside returns which of ids, the resources that the run's
// resources require but that are not among them, are undefined in the
// run's intent: the deploy state's for a deploy or repair, the version's
// for a dry-run.
func undefinedOutside(ctx context.Context, tx pgx.Tx, envID string, p Plan, ids []string) (map[string]bool, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	q := `select rs.resource_id from resource_state rs
		join resource_contents c on c.environment_id = rs.environment_id and c.hash = rs.intent_hash
		where rs.environment_id = $1::uuid and rs.resource_id = any($2) and c.undefined`
	args := []any{envID, ids}
	if p.Action == string(ledger.ActionDryrun) {
		q = `select vr.resource_id from version_resources vr
			join resource_contents c on c.environment_id = vr.environment_id and c.hash = vr.hash
			where vr.environment_id = $1::uuid and vr.resource_id = any($2) and c.undefined
			  and vr.first_version <= $3 and (vr.last_version is null or vr.last_version > $3)`
		args = append(args, p.Version)
	}
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("find undefined requires: %w", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find undefined requires: %w", err)
	}
	out := make(map[string]bool, len(found))
	for _, id := range found {
		out[id] = true
	}
	return out, nil
}

// heldRecords are the action records of the resources PlanDeploy holds
// back: no attempt, so they start and finish at once.
func heldRecords(items []planItem, held []plan.Held, p Plan, workflowID string, by Caller) []ActionRecord {
	now := time.Now().UTC()
	recs := make([]ActionRecord, len(held))
	for i, h := range held {
		it := items[h.Index]
		recs[i] = ActionRecord{ResourceID: it.ID, Hash: it.hash, Version: p.Version, Action: ledger.Action(it.action),
			Reason: p.Reason, StartedAt: now, FinishedAt: now, Result: ledger.Result(h.Result), Error: h.Why,
			WorkflowID: workflowID, RunID: by.RunID, Attempt: by.Attempt}
	}
	return recs
}

func existingPlan(ctx context.Context, tx pgx.Tx, envID string, run int64, workflowID string, p *Plan) error {
	if err := tx.QueryRow(ctx, `select coalesce(max(seq) + 1, 0) from deploy_batches
		where environment_id = $1::uuid and run = $2`, envID, run).Scan(&p.NextSeq); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, `select seq, agent, agents, level, cardinality(resource_ids), resource_ids[1]
		from deploy_batches where environment_id = $1::uuid and run = $2 and retry = 0 order by seq`, envID, run)
	if err != nil {
		return err
	}
	p.Batches, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (BatchRef, error) {
		var b BatchRef
		return b, r.Scan(&b.Seq, &b.Agent, &b.Agents, &b.Level, &b.Count, &b.First)
	})
	if err != nil {
		return err
	}
	for _, b := range p.Batches {
		p.Total += b.Count
	}
	// Executors never record these results: they are the plan's own.
	if err := tx.QueryRow(ctx, `select count(*) from resource_actions
		where workflow_id = $1 and environment_id = $2::uuid and result in ('undefined', 'skipped_for_undefined')`,
		workflowID, envID).Scan(&p.Undefined); err != nil {
		return err
	}
	p.Total += p.Undefined
	return nil
}

// BatchResource is one resource of a batch, as an executor receives it.
type BatchResource = ledger.Resource

// Batch is what an executor loads for one activity (see ledger.Batch).
type Batch = ledger.Batch

// LoadBatch reads one batch with the content of its resources.
func (s *Store) LoadBatch(ctx context.Context, envID string, run int64, seq int) (Batch, error) {
	b := Batch{EnvironmentID: envID}
	var plugins []byte
	err := s.pool.QueryRow(ctx, `select r.version, r.action, r.reason, b.agent, b.agents, v.plugins
		from deploy_batches b join deploy_runs r on r.environment_id = b.environment_id and r.run = b.run
		left join versions v on v.environment_id = r.environment_id and v.version = r.version
		where b.environment_id = $1::uuid and b.run = $2 and b.seq = $3`, envID, run, seq).
		Scan(&b.Version, &b.Action, &b.Reason, &b.Agent, &b.Agents, &plugins)
	if errors.Is(err, pgx.ErrNoRows) {
		return b, NotFound("deploy run %d batch %d", run, seq)
	}
	if err != nil {
		return b, err
	}
	if len(plugins) > 0 {
		if b.Plugins, err = decodePlugins(plugins); err != nil {
			return b, err
		}
	}
	rows, err := s.pool.Query(ctx, `
		select u.rid, u.hash, c.attributes, c.purged, c.requires,
		       case when rs.compliance = 'compliant' then 'repair' else 'deploy' end, c.report_only,
		       c.receive_events,
		       c.receive_events and exists (
		           select 1 from resource_state d
		           where d.environment_id = b.environment_id and d.resource_id = any(c.requires)
		             and d.last_produced_change and d.last_attempt > coalesce(rs.last_attempt, '-infinity'))
		from deploy_batches b
		cross join lateral unnest(b.resource_ids, b.hashes) with ordinality as u(rid, hash, ord)
		join resource_contents c on c.environment_id = b.environment_id and c.hash = u.hash
		left join resource_state rs on rs.environment_id = b.environment_id and rs.resource_id = u.rid
		where b.environment_id = $1::uuid and b.run = $2 and b.seq = $3
		order by u.ord`, envID, run, seq)
	if err != nil {
		return b, err
	}
	b.Resources, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (BatchResource, error) {
		var x BatchResource
		return x, r.Scan(&x.ID, &x.Hash, &x.Attributes, &x.Purged, &x.Requires, &x.Action, &x.ReportOnly,
			&x.ReceiveEvents, &x.Event)
	})
	if err != nil {
		return b, err
	}
	in := make(map[string]bool, len(b.Resources))
	for _, r := range b.Resources {
		in[r.ID] = true
	}
	var outside []string
	for _, r := range b.Resources {
		for _, q := range r.Requires {
			if !in[q] {
				in[q] = true
				outside = append(outside, q)
			}
		}
	}
	if len(outside) == 0 {
		return b, nil
	}
	rows, err = s.pool.Query(ctx, `select resource_id, last_result from resource_state
		where environment_id = $1::uuid and resource_id = any($2)
		  and (intent_hash is null or deployed_hash is distinct from intent_hash or last_result <> 'deployed')`,
		envID, outside)
	if err != nil {
		return b, err
	}
	b.Blocked = map[string]string{}
	for rows.Next() {
		var id, result string
		if err := rows.Scan(&id, &result); err != nil {
			return b, err
		}
		b.Blocked[id] = result
	}
	return b, rows.Err()
}

// ActionRecord is one attempt on one resource, for the action log.
type ActionRecord = ledger.ActionRecord

// batchOrNil stores "no batch" (0: seqs start at 1) as null.
func batchOrNil(seq int) any {
	if seq <= 0 {
		return nil
	}
	return seq
}

// FinishRun marks a run done, failed or preempted with its totals and
// drops its batches, which only a running run needs. A preempted run's
// requests go back to the queue. A deploy or repair run with failures
// notifies the environment (notifications.go), one without resolves
// that notification.
func (s *Store) FinishRun(ctx context.Context, envID string, run int64, status string, c RunCounts) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		// Whether it was open before: a retried finish notifies nothing
		// more.
		var wasOpen bool
		if err := tx.QueryRow(ctx, `select status in ('pending', 'running') from deploy_runs
			where environment_id = $1::uuid and run = $2 for update`, envID, run).Scan(&wasOpen); err != nil &&
			!errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if _, err := tx.Exec(ctx, `update deploy_runs set status = $3, finished_at = coalesce(finished_at, now()),
			deployed = $4, failed = $5, skipped = $6, unavailable = $7 where environment_id = $1::uuid and run = $2`,
			envID, run, status, c.Deployed, c.Failed, c.Skipped, c.Unavailable); err != nil {
			return err
		}
		if wasOpen {
			if err := runFinished(ctx, tx, envID, run, status, c); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `delete from deploy_batches where environment_id = $1::uuid and run = $2`, envID, run); err != nil {
			return err
		}
		if status == "preempted" {
			// Its requests go back to the queue; the next run takes them
			// (a repair then skips what this run attempted).
			_, err := tx.Exec(ctx, `update deploy_requests set run = null where environment_id = $1::uuid and run = $2`,
				envID, run)
			return err
		}
		return nil
	})
}

// RecordRunStages records where a run's batches spent their time.
func (s *Store) RecordRunStages(ctx context.Context, envID string, run int64, st runstages.Run) error {
	_, err := s.pool.Exec(ctx, `update deploy_runs set stages = $3 where environment_id = $1::uuid and run = $2`,
		envID, run, st)
	return err
}

// GetRun returns one deploy run.
func (s *Store) GetRun(ctx context.Context, envID string, run int64) (DeployRun, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, `select `+runColumns+` from deploy_runs
		where environment_id = $1::uuid and run = $2`, envID, run))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, NotFound("deploy run %d", run)
	}
	return r, err
}

// runListColumns is runColumns without the stages: a list shows the runs,
// one run's page shows where it waited (about a kilobyte each).
var runListColumns = strings.Replace(runColumns, "workflow_id, stages", "workflow_id, null::jsonb", 1)

// ListRuns returns the environment's newest deploy runs first, without
// their stages (GetRun has them).
func (s *Store) ListRuns(ctx context.Context, envID string, limit int) ([]DeployRun, error) {
	rows, err := s.pool.Query(ctx, `select `+runListColumns+` from deploy_runs
		where environment_id = $1::uuid order by run desc limit $2`, envID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeployRun, error) { return scanRun(r) })
}

// servedAgentsSQL lists the agents of released resources by environment,
// and every agent of an environment with a dry-run open: a probe per
// agent (servedAgent).
const servedAgentsSQL = `select e.name, a.name from agents a
	join environments e on e.id = a.environment_id
	cross join lateral (` + servedAgent + `) r
	order by 1, 2`

// ServedAgents lists, per environment name, the agents of the released
// resources and the environments' settings, for the embedded executor to
// decide which task queues to poll.
func (s *Store) ServedAgents(ctx context.Context) (map[string][]string, map[string]Settings, error) {
	envs, err := s.ListEnvironments(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	settings := map[string]Settings{}
	for _, e := range envs {
		settings[e.Name] = e.Settings
	}
	// Only the agents of released resources: an agent no released version
	// names any more costs no executor a worker.
	rows, err := s.pool.Query(ctx, servedAgentsSQL)
	if err != nil {
		return nil, nil, err
	}
	out := map[string][]string{}
	for rows.Next() {
		var env, agent string
		if err := rows.Scan(&env, &agent); err != nil {
			return nil, nil, err
		}
		out[env] = append(out[env], agent)
	}
	return out, settings, rows.Err()
}
