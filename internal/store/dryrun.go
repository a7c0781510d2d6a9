package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/ledger"
)

// MaxActiveDryruns is how many dry-runs an environment runs at once; one
// more is refused with ErrBusy.
const MaxActiveDryruns = 4

// CreateDryrun records a dry-run of a version (the released one when
// version is 0), optionally narrowed to agents or resource ids. Its
// workflow (env/<env>/dryrun/<run>) is the deploy workflow with action
// "dryrun": the same plan and adapters, stopping before any change.
func (s *Store) CreateDryrun(ctx context.Context, envID string, version int64, agents, ids []string) (DeployRun, error) {
	var run DeployRun
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		e, err := lockEnvironment(ctx, tx, envID)
		if err != nil {
			return err
		}
		if err := dryrunSlot(ctx, tx, e); err != nil {
			return err
		}
		if version == 0 {
			if e.ReleasedVersion == nil {
				return Conflict("environment %s has no released version; name one", e.Name)
			}
			version = *e.ReleasedVersion
		}
		var exists bool
		if err := tx.QueryRow(ctx, `select exists (select 1 from versions where environment_id = $1::uuid and version = $2)`,
			envID, version).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return NotFound("version %d", version)
		}
		run, err = insertRun(ctx, tx, e, version, string(ledger.ActionDryrun), fmt.Sprintf("dry-run of version %d", version), nil)
		if err != nil {
			return err
		}
		// A version not released yet may name agents the environment has
		// never had (the first dry-run of a new project: all of them).
		// Known, they are served by the embedded executor while a dry-run
		// is open (servedAgent), and the dry-run's batches find it.
		if _, err := tx.Exec(ctx, `insert into agents (environment_id, name)
			select distinct vr.environment_id, vr.agent from version_resources vr
			where vr.environment_id = $1::uuid and vr.first_version <= $2
			  and (vr.last_version is null or vr.last_version > $2)
			on conflict do nothing`, envID, version); err != nil {
			return fmt.Errorf("record the dry-run's agents: %w", err)
		}
		_, err = tx.Exec(ctx, `insert into deploy_requests (environment_id, kind, reason, agents, resource_ids, run, requested_by)
			values ($1::uuid, 'dryrun', $2, $3, $4, $5, $6)`, envID, run.Reason, nilIfEmpty(agents), nilIfEmpty(ids), run.Run,
			ActorOf(ctx))
		return err
	})
	return run, err
}

// dryrunSlot refuses another dry-run (ErrBusy) when the environment runs
// MaxActiveDryruns at once, on every replica: the caller holds the
// environment's row lock, which orders the counting. One stuck in pending
// (its workflow never started) stops counting after an hour.
func dryrunSlot(ctx context.Context, tx pgx.Tx, e Environment) error {
	var active int
	if err := tx.QueryRow(ctx, `select count(*) from deploy_runs
		where environment_id = $1::uuid and action = 'dryrun' and status in ('pending', 'running')
		  and requested_at > now() - interval '1 hour'`, e.ID).Scan(&active); err != nil {
		return err
	}
	if active >= MaxActiveDryruns {
		return fmt.Errorf("environment %s runs %d dry-runs already, the most it runs at once: %w", e.Name, active, ErrBusy)
	}
	return nil
}

// FailRun marks a run that could not start as failed.
func (s *Store) FailRun(ctx context.Context, envID string, run int64) error {
	return s.FinishRun(ctx, envID, run, "failed", RunCounts{})
}

// DryrunResult is what a dry-run found for one resource.
type DryrunResult struct {
	ResourceID string `json:"id"`
	// Status is unmodified, modified, added, deleted, skipped, unavailable,
	// failed, undefined (its attributes are not known yet; what requires
	// it is skipped) or unmanaged (the model left it alone: not looked at).
	Status  string          `json:"status"`
	Changes json.RawMessage `json:"changes,omitempty"`
	Error   *string         `json:"error,omitempty"`
}

// DryrunResults returns a page of a dry-run's results in id order, the
// last attempt per resource, with the sensitive outputs among their
// changes as outputs says. It reads about a page's worth of the run's
// attempts, not all of them (dryrunResultsSQL).
func (s *Store) DryrunResults(ctx context.Context, envID, workflowID, after string, limit int, outputs Outputs) ([]DryrunResult, error) {
	rows, err := s.pool.Query(ctx, dryrunResultsSQL, envID, workflowID, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (DryrunResult, error) {
		var d DryrunResult
		err := r.Scan(&d.ResourceID, &d.Status, &d.Changes, &d.Error)
		var logs json.RawMessage // not read
		outputs.redact(&logs, &d.Changes)
		return d, err
	})
}

// dryrunResultsSQL is DryrunResults' page ($1 environment, $2 workflow,
// $3 after, $4 limit): what the action log view gives for the run's
// resources after $3, without expanding every unchanged_actions row of
// the run (each holds up to a block of attempts, in the order recorded,
// not by resource; migration 035 gives each its least and greatest
// resource id and its count of attempts):
//
//   - first: the rows reaching past $3 that start at or before it, and
//     the others in the order of their least resource until they hold
//     twice $4 attempts, all after $3 (twice: a resource may repeat);
//   - bound: the $4th resource after $3 among those. No resource after it
//     is on the page, and every attempt of a resource up to it lies in a
//     row whose least resource is at most the bound. (Fewer than $4
//     resources among them: no bound, every row of the run.)
//   - the page: the rows up to the bound expanded, merged with the first
//     $4 resources of resource_actions, the newest attempt per resource.
const dryrunResultsSQL = `
	with cand as materialized (
		select u.id, u.least_resource_id as least, u.members as n
		from unchanged_actions u
		where u.environment_id = $1::uuid and u.workflow_id = $2 and u.greatest_resource_id > $3
	), first as (
		select id from cand where least <= $3
		union all
		select id from (select id, sum(n) over (order by least, id) - n as before from cand where least > $3) f
		where before < 2 * $4
	), near as (
		select distinct m.resource_id
		from unchanged_actions u cross join lateral unnest(u.resource_ids) as m(resource_id)
		where u.id in (select id from first) and m.resource_id > $3
		order by m.resource_id limit $4
	), bound as (
		select max(resource_id) as last from near having count(*) = $4
	), attempts as (
		select m.resource_id, m.id, u.result, u.operation, null::jsonb as changes, null::text as error
		from cand c
		join unchanged_actions u on u.id = c.id
		cross join lateral unnest(u.resource_ids, u.ids) as m(resource_id, id)
		where c.least <= coalesce((select last from bound), c.least)
		  and m.resource_id > $3 and m.resource_id <= coalesce((select last from bound), m.resource_id)
		union all
		(select distinct on (resource_id) resource_id, id, result, operation, changes, error
		 from resource_actions
		 where environment_id = $1::uuid and workflow_id = $2 and resource_id > $3
		 order by resource_id, id desc limit $4)
	)
	select distinct on (resource_id) resource_id,
	       case when result = 'deployed' then
	              case operation when 'create' then 'added' when 'update' then 'modified'
	                             when 'delete' then 'deleted' else 'unmodified' end
	            when result in ('skipped_for_dependency', 'skipped_for_undefined') then 'skipped'
	            else result end,
	       changes, error
	from attempts
	order by resource_id, id desc limit $4`
