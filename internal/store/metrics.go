package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// StateCount is the number of released resources of one environment in one
// (compliance, last result) state.
type StateCount struct {
	Environment string
	Compliance  string
	Result      string
	Count       int
}

// StateCounts is the deploy state of every environment, for /metrics.
type StateCounts struct {
	// Resources counts the resources with intent (orphans excluded), sorted
	// by environment, compliance and result; empty combinations are absent.
	Resources []StateCount
	// Queued maps every environment, those with an empty queue included, to
	// its deploy requests not yet taken by a run.
	Queued map[string]int
}

// StateCounts reads the resource and queue counts of every environment in
// one statement, so a scrape costs one round trip and sees one snapshot.
// It scans resource_state (tens of milliseconds per 100,000 resources);
// callers bound it with their context.
func (s *Store) StateCounts(ctx context.Context) (StateCounts, error) {
	rows, err := s.pool.Query(ctx, `
		select e.name, rs.compliance, rs.last_result, count(*)
		from resource_state rs join environments e on e.id = rs.environment_id
		where rs.intent_hash is not null
		group by e.name, rs.compliance, rs.last_result
		union all
		select e.name, null, null, count(r.id)
		from environments e
		left join deploy_requests r on r.environment_id = e.id and r.run is null
		group by e.name
		order by 1, 2, 3`)
	if err != nil {
		return StateCounts{}, fmt.Errorf("count deploy state: %w", err)
	}
	out := StateCounts{Queued: map[string]int{}}
	var (
		env, compliance, result *string
		n                       int
	)
	_, err = pgx.ForEachRow(rows, []any{&env, &compliance, &result, &n}, func() error {
		if compliance == nil {
			out.Queued[*env] = n
			return nil
		}
		out.Resources = append(out.Resources, StateCount{Environment: *env, Compliance: *compliance, Result: *result, Count: n})
		return nil
	})
	if err != nil {
		return StateCounts{}, fmt.Errorf("count deploy state: %w", err)
	}
	return out, nil
}

// RunTiming is what the deploy run metrics need about one run.
type RunTiming struct {
	EnvironmentName string
	Action          string
	Status          string
	RequestedAt     time.Time
	// FinishedAt is nil while the run is open.
	FinishedAt *time.Time
}

// Duration is the run's time from creation to end, 0 while it is open.
func (t RunTiming) Duration() time.Duration {
	if t.FinishedAt == nil {
		return 0
	}
	return t.FinishedAt.Sub(t.RequestedAt)
}

// RunTiming returns the timing of one deploy run, with its environment's
// name.
func (s *Store) RunTiming(ctx context.Context, envID string, run int64) (RunTiming, error) {
	var t RunTiming
	err := s.pool.QueryRow(ctx, `select e.name, r.action, r.status, r.requested_at, r.finished_at
		from deploy_runs r join environments e on e.id = r.environment_id
		where r.environment_id = $1::uuid and r.run = $2`, envID, run).
		Scan(&t.EnvironmentName, &t.Action, &t.Status, &t.RequestedAt, &t.FinishedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, NotFound("deploy run %d", run)
	}
	if err != nil {
		return t, fmt.Errorf("deploy run %d: %w", run, err)
	}
	return t, nil
}
