package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// RunResource is a resource that a deploy run (or dry-run) did not
// deploy: the result and error of its last attempt in the run, and how
// many attempts the run made on it (a level's retries, a retried batch).
type RunResource struct {
	ID       string
	Result   string
	Error    string
	Attempts int
}

// RunOutcome is what a run left undeployed, one entry per resource: the
// first Limit failed ones (failed or unavailable) and the first Limit
// skipped ones (skipped for a dependency or an undefined resource,
// undefined, report-only and different), each by resource id, and how
// many there are of each in all.
type RunOutcome struct {
	Failed, Skipped           []RunResource
	FailedCount, SkippedCount int
}

// RunNotDeployed returns the run's resources whose last attempt in the
// run did not deploy them, limit of each kind (a resource retried within
// the run counts once, with its last error). It reads the action log of
// the run's workflow id (every attempt of the run records one row there,
// the plan's own records of undefined resources too), so it answers the
// same after the run's batches are dropped.
func (s *Store) RunNotDeployed(ctx context.Context, envID string, run int64, limit int) (RunOutcome, error) {
	var out RunOutcome
	var wf string
	err := s.pool.QueryRow(ctx, `select workflow_id from deploy_runs where environment_id = $1::uuid and run = $2`,
		envID, run).Scan(&wf)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, NotFound("deploy run %d", run)
	}
	if err != nil {
		return out, err
	}
	// The window counts run before distinct on: attempts counts every row
	// of the resource in the run, and the row kept is its last.
	rows, err := s.pool.Query(ctx, `
		with last as (
			select distinct on (resource_id) resource_id, result, coalesce(error, '') as error,
			       count(*) over (partition by resource_id) as attempts
			from action_log
			where environment_id = $1::uuid and workflow_id = $2
			order by resource_id, id desc
		), kinds as (
			select *, result in ('failed', 'unavailable') as failed from last
			where result not in ('deployed', 'unmanaged')
		), numbered as (
			select *, row_number() over (partition by failed order by resource_id) as n,
			       count(*) over (partition by failed) as total
			from kinds
		)
		select failed, resource_id, result, error, attempts::int, total::int
		from numbered where n <= $3 order by failed desc, resource_id`, envID, wf, limit)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var failed bool
		var r RunResource
		var total int
		if err := rows.Scan(&failed, &r.ID, &r.Result, &r.Error, &r.Attempts, &total); err != nil {
			return out, err
		}
		if failed {
			out.Failed, out.FailedCount = append(out.Failed, r), total
		} else {
			out.Skipped, out.SkippedCount = append(out.Skipped, r), total
		}
	}
	return out, rows.Err()
}
