package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/ledger"
)

// ExecutorHeartbeat is how often an executor reports itself.
const ExecutorHeartbeat = ledger.Heartbeat

// ExecutorLiveWithin is how recently an executor that has not stopped must
// have reported itself to count as live: three heartbeats, so one late or
// lost report does not flap it.
const ExecutorLiveWithin = 3 * ExecutorHeartbeat

// ExecutorForgetAfter is how long the row of an executor that no longer
// reports (stopped or killed) is kept; reports prune older rows.
const ExecutorForgetAfter = 24 * time.Hour

// ExecutorReport is what an executor says about itself to one environment.
type ExecutorReport = ledger.ExecutorReport

// Executor is an executor as GET .../executors shows it.
type Executor struct {
	Name      string     `json:"name"`
	Hostname  string     `json:"hostname"`
	PID       int        `json:"pid"`
	Version   string     `json:"version"`
	Agents    []string   `json:"agents"`
	Embedded  bool       `json:"embedded"`
	StartedAt time.Time  `json:"started_at"`
	LastSeen  time.Time  `json:"last_seen"`
	StoppedAt *time.Time `json:"stopped_at,omitempty"`
	// Live: not stopped, and seen within ExecutorLiveWithin.
	Live bool `json:"live"`
}

// ReportExecutor records that an executor serves agents of the environment
// named env, now (the database's clock), and forgets the executors of env
// not seen for ExecutorForgetAfter. A report after a stop revives the row.
// An unknown environment is ErrNotFound.
func (s *Store) ReportExecutor(ctx context.Context, env string, r ExecutorReport) error {
	agents := r.Agents
	if agents == nil {
		agents = []string{}
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			insert into executors (environment_id, name, hostname, pid, version, agents, embedded)
			select id, $2, $3, $4, $5, $6, $7 from environments where name = $1
			on conflict (environment_id, name) do update set
			  hostname = excluded.hostname, pid = excluded.pid, version = excluded.version,
			  agents = excluded.agents, embedded = excluded.embedded,
			  last_seen = now(), stopped_at = null,
			  started_at = case when $8 then now() else executors.started_at end`,
			env, r.Name, r.Hostname, r.PID, r.Version, agents, r.Embedded, r.First)
		if err != nil {
			return fmt.Errorf("report executor %s: %w", r.Name, err)
		}
		if tag.RowsAffected() == 0 {
			return NotFound("report executor %s: environment %q", r.Name, env)
		}
		if _, err := tx.Exec(ctx, `delete from executors
			where environment_id = (select id from environments where name = $1)
			  and last_seen < now() - make_interval(secs => $2)`,
			env, ExecutorForgetAfter.Seconds()); err != nil {
			return fmt.Errorf("forget old executors: %w", err)
		}
		return nil
	})
}

// StopExecutor records that the executor called name stopped serving the
// environments named envs (on a clean shutdown).
func (s *Store) StopExecutor(ctx context.Context, name string, envs []string) error {
	if _, err := s.pool.Exec(ctx, `update executors set stopped_at = now(), last_seen = now()
		where name = $1 and stopped_at is null
		  and environment_id in (select id from environments where name = any($2))`, name, envs); err != nil {
		return fmt.Errorf("mark executor %s stopped: %w", name, err)
	}
	return nil
}

// ListExecutors returns the executors that reported to the environment
// within ExecutorForgetAfter, stopped ones included, by name.
func (s *Store) ListExecutors(ctx context.Context, envID string) ([]Executor, error) {
	rows, err := s.pool.Query(ctx, `select name, hostname, pid, version, agents, embedded, started_at,
		last_seen, stopped_at, stopped_at is null and last_seen > now() - make_interval(secs => $2)
		from executors where environment_id = $1::uuid order by name`, envID, ExecutorLiveWithin.Seconds())
	if err != nil {
		return nil, fmt.Errorf("list executors: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Executor, error) {
		var e Executor
		return e, r.Scan(&e.Name, &e.Hostname, &e.PID, &e.Version, &e.Agents, &e.Embedded, &e.StartedAt,
			&e.LastSeen, &e.StoppedAt, &e.Live)
	})
	if err != nil {
		return nil, fmt.Errorf("list executors: %w", err)
	}
	return out, nil
}

// AgentExecutor is an executor serving an agent, as GET .../agents shows
// it.
type AgentExecutor struct {
	Name     string    `json:"name"`
	Hostname string    `json:"hostname"`
	Version  string    `json:"version"`
	Embedded bool      `json:"embedded"`
	LastSeen time.Time `json:"last_seen"`
	Live     bool      `json:"live"`
}

// AgentExecutors returns, per agent, the executors that serve it in the
// environment and have not stopped (killed ones too, not live), by name.
func AgentExecutors(execs []Executor) map[string][]AgentExecutor {
	out := map[string][]AgentExecutor{}
	for _, e := range execs {
		if e.StoppedAt != nil {
			continue
		}
		for _, a := range e.Agents {
			out[a] = append(out[a], AgentExecutor{Name: e.Name, Hostname: e.Hostname, Version: e.Version,
				Embedded: e.Embedded, LastSeen: e.LastSeen, Live: e.Live})
		}
	}
	return out
}

// OpenRunVersions returns, per environment id among envIDs, the versions
// that an open (pending or running) deploy run deploys; the executor's
// cache keeps version-bound values only while their version is in it.
func (s *Store) OpenRunVersions(ctx context.Context, envIDs []string) (map[string]map[int64]bool, error) {
	rows, err := s.pool.Query(ctx, `select distinct environment_id::text, version from deploy_runs
		where environment_id::text = any($1) and status in ('pending', 'running')`, envIDs)
	if err != nil {
		return nil, fmt.Errorf("open run versions: %w", err)
	}
	defer rows.Close()
	out := map[string]map[int64]bool{}
	for rows.Next() {
		var env string
		var v int64
		if err := rows.Scan(&env, &v); err != nil {
			return nil, fmt.Errorf("open run versions: %w", err)
		}
		if out[env] == nil {
			out[env] = map[int64]bool{}
		}
		out[env][v] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("open run versions: %w", err)
	}
	return out, nil
}

// executorOrNil stores an empty executor name as null.
func executorOrNil(name string) any {
	if name == "" {
		return nil
	}
	return name
}
