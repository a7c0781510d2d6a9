package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/names"
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
	// RegisteredBy owns the registration (Registrant.Owner): "token:<id>",
	// or "system:intend" for the server's in-process embedded executor.
	RegisteredBy string `json:"registered_by,omitempty"`
	// TaskQueue is the Temporal task queue it polls for all its agents
	// (empty: a registration of before).
	TaskQueue string `json:"task_queue,omitempty"`
}

// The bounds of executor registrations (docs/security.md, "Executors").
const (
	// MaxExecutorsPerOwner bounds the registrations one owner (a token)
	// keeps in an environment. Beyond it, the owner's registrations that
	// are not live (stopped, or unseen for ExecutorLiveWithin) are
	// forgotten, oldest first, to make room for a new one; when all of
	// them are live, the new one is refused (ExecutorLimitError).
	MaxExecutorsPerOwner = 64
	// MaxExecutorAgents bounds the agents of one registration through
	// the executor API.
	MaxExecutorAgents = 1000
)

// Registrant is who registers an executor, or marks one stopped.
type Registrant struct {
	// Owner names the principal: TokenOwner(id) for an API token, its
	// actor otherwise (SystemActor for the server's in-process embedded
	// executor).
	Owner string
	// Admin may mark any registration of the environment stopped
	// (operators clean up), not update it.
	Admin bool
}

// TokenOwner is the Registrant.Owner of the API token with this id: the
// id, not the name, as a revoked token's name may be given again.
func TokenOwner(id string) string { return "token:" + id }

// mayTakeSQL is true for a registration (a row of executors) that the
// owner $3 may update: its own, one of before owners were recorded, and
// one whose token is revoked or expired (a rotated token's executor comes
// back under the new one). The server's own registrations are its own.
const mayTakeSQL = `(executors.owner is null or executors.owner = $3 or
	(executors.owner like 'token:%' and not exists (select 1 from api_tokens t
	  where t.id::text = substr(executors.owner, 7) and t.revoked_at is null
	    and (t.expires_at is null or t.expires_at > now()))))`

// ReportExecutor records, for the server's in-process embedded executor,
// that it serves agents of the environment named env, now: RegisterExecutor
// with SystemActor as the owner. It implements ledger.Registry.
func (s *Store) ReportExecutor(ctx context.Context, env string, r ExecutorReport) error {
	return s.RegisterExecutor(ctx, env, r, Registrant{Owner: SystemActor})
}

// RegisterExecutor records that an executor serves agents of the
// environment named env, now (the database's clock), and forgets the
// executors of env not seen for ExecutorForgetAfter. A report after a stop
// revives the row. The registration belongs to by.Owner: a name another
// owner registered is an *ExecutorOwnedError (unless that owner is a
// revoked or expired token); a new registration beyond
// MaxExecutorsPerOwner live ones of by.Owner is an *ExecutorLimitError. An
// unknown environment is ErrNotFound.
func (s *Store) RegisterExecutor(ctx context.Context, env string, r ExecutorReport, by Registrant) error {
	agents := r.Agents
	if agents == nil {
		agents = []string{}
	}
	if err := names.CheckPool(r.Pool); err != nil {
		return fmt.Errorf("executor %s: pool %w", r.Name, err)
	}
	queue := names.ExecutorTaskQueue(env, r.Pool, agents, r.Embedded)
	return s.inTx(ctx, func(tx pgx.Tx) error {
		envID, err := executorEnv(ctx, tx, env, r.Name)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `delete from executors
			where environment_id = $1::uuid and last_seen < now() - make_interval(secs => $2)`,
			envID, ExecutorForgetAfter.Seconds()); err != nil {
			return fmt.Errorf("forget old executors: %w", err)
		}
		var owner *string
		var may bool
		err = tx.QueryRow(ctx, `select owner, `+mayTakeSQL+` from executors
			where environment_id = $1::uuid and name = $2 for update`, envID, r.Name, by.Owner).Scan(&owner, &may)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return fmt.Errorf("report executor %s: %w", r.Name, err)
		case !may:
			return &ExecutorOwnedError{Name: r.Name, Environment: env, Server: owner != nil && *owner == SystemActor}
		}
		if owner == nil || *owner != by.Owner {
			// A new registration of by.Owner (or one it takes over).
			if err := makeRoom(ctx, tx, envID, env, r.Name, by.Owner); err != nil {
				return err
			}
		}
		// The condition again, for a row inserted since the select by
		// another owner's report.
		tag, err := tx.Exec(ctx, `
			insert into executors (environment_id, name, hostname, pid, version, agents, embedded, owner, task_queue)
			values ($1::uuid, $2, $4, $5, $6, $7, $8, $3, $10)
			on conflict (environment_id, name) do update set
			  hostname = excluded.hostname, pid = excluded.pid, version = excluded.version,
			  agents = excluded.agents, embedded = excluded.embedded, owner = excluded.owner,
			  task_queue = excluded.task_queue,
			  last_seen = now(), stopped_at = null,
			  started_at = case when $9 then now() else executors.started_at end
			where `+mayTakeSQL,
			envID, r.Name, by.Owner, r.Hostname, r.PID, r.Version, agents, r.Embedded, r.First, queue)
		if err != nil {
			return fmt.Errorf("report executor %s: %w", r.Name, err)
		}
		if tag.RowsAffected() == 0 {
			return &ExecutorOwnedError{Name: r.Name, Environment: env}
		}
		return nil
	})
}

// executorEnv is the id of the environment named env.
func executorEnv(ctx context.Context, tx pgx.Tx, env, name string) (string, error) {
	var id string
	err := tx.QueryRow(ctx, `select id::text from environments where name = $1`, env).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", NotFound("executor %s: environment %q", name, env)
	}
	if err != nil {
		return "", fmt.Errorf("executor %s: %w", name, err)
	}
	return id, nil
}

// makeRoom makes room for one more registration of owner in the
// environment (see MaxExecutorsPerOwner). Concurrent registrations of one
// owner in one environment take turns, so they do not both count
// MaxExecutorsPerOwner-1 and pass.
func makeRoom(ctx context.Context, tx pgx.Tx, envID, env, name, owner string) error {
	if _, err := tx.Exec(ctx, `select pg_advisory_xact_lock(hashtextextended('executors/' || $1 || '/' || $2, 0))`,
		envID, owner); err != nil {
		return fmt.Errorf("lock the executors of %s: %w", owner, err)
	}
	rows, err := tx.Query(ctx, `select name, stopped_at is null and last_seen > now() - make_interval(secs => $4)
		from executors where environment_id = $1::uuid and owner = $2 and name <> $3
		order by 2 desc, last_seen desc, name`, envID, owner, name, ExecutorLiveWithin.Seconds())
	if err != nil {
		return fmt.Errorf("count the executors of %s: %w", owner, err)
	}
	type reg struct {
		name string
		live bool
	}
	regs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (reg, error) {
		var g reg
		return g, r.Scan(&g.name, &g.live)
	})
	if err != nil {
		return fmt.Errorf("count the executors of %s: %w", owner, err)
	}
	if len(regs) < MaxExecutorsPerOwner {
		return nil
	}
	if regs[MaxExecutorsPerOwner-1].live {
		return &ExecutorLimitError{Environment: env, Limit: MaxExecutorsPerOwner}
	}
	// Live ones sort first: what is left beyond the room is not live.
	// One revived since (a heartbeat of its own) stays, and then there
	// is no room after all.
	var gone []string
	for _, g := range regs[MaxExecutorsPerOwner-1:] {
		gone = append(gone, g.name)
	}
	tag, err := tx.Exec(ctx, `delete from executors where environment_id = $1::uuid and name = any($2)
		and not (stopped_at is null and last_seen > now() - make_interval(secs => $3))`,
		envID, gone, ExecutorLiveWithin.Seconds())
	if err != nil {
		return fmt.Errorf("forget executors of %s: %w", owner, err)
	}
	if tag.RowsAffected() < int64(len(gone)) {
		return &ExecutorLimitError{Environment: env, Limit: MaxExecutorsPerOwner}
	}
	return nil
}

// StopExecutor records that the server's in-process embedded executor
// called name stopped serving the environments named envs (on a clean
// shutdown). It implements ledger.Registry.
func (s *Store) StopExecutor(ctx context.Context, name string, envs []string) error {
	var errs []error
	for _, env := range envs {
		if err := s.StopRegistration(ctx, env, name, Registrant{Owner: SystemActor}); err != nil &&
			!errors.Is(err, ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// StopRegistration marks the executor called name stopped in the
// environment named env. Only its owner may (or a token that may take it
// over, see RegisterExecutor), or an admin: anyone else gets an
// *ExecutorOwnedError. A name not registered is no error (a stop is
// idempotent); an unknown environment is ErrNotFound.
func (s *Store) StopRegistration(ctx context.Context, env, name string, by Registrant) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		envID, err := executorEnv(ctx, tx, env, name)
		if err != nil {
			return err
		}
		var owner *string
		var may bool
		err = tx.QueryRow(ctx, `select owner, `+mayTakeSQL+` from executors
			where environment_id = $1::uuid and name = $2 for update`, envID, name, by.Owner).Scan(&owner, &may)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return fmt.Errorf("mark executor %s stopped: %w", name, err)
		case !may && !by.Admin:
			return &ExecutorOwnedError{Name: name, Environment: env, Server: owner != nil && *owner == SystemActor}
		}
		if _, err := tx.Exec(ctx, `update executors set stopped_at = now(), last_seen = now()
			where environment_id = $1::uuid and name = $2 and stopped_at is null`, envID, name); err != nil {
			return fmt.Errorf("mark executor %s stopped: %w", name, err)
		}
		return nil
	})
}

// executorColumns are the columns of an Executor, in scan order ($1 is
// ExecutorLiveWithin in seconds).
const executorColumns = `name, hostname, pid, version, agents, embedded, started_at, last_seen, stopped_at,
	stopped_at is null and last_seen > now() - make_interval(secs => $1), coalesce(owner, ''), coalesce(task_queue, '')`

func scanExecutor(r pgx.CollectableRow) (Executor, error) {
	var e Executor
	return e, r.Scan(&e.Name, &e.Hostname, &e.PID, &e.Version, &e.Agents, &e.Embedded, &e.StartedAt,
		&e.LastSeen, &e.StoppedAt, &e.Live, &e.RegisteredBy, &e.TaskQueue)
}

// ListExecutors returns the executors that reported to the environment
// within ExecutorForgetAfter, stopped ones included, by name.
func (s *Store) ListExecutors(ctx context.Context, envID string) ([]Executor, error) {
	return s.ListExecutorsPage(ctx, envID, "", 0)
}

// ListExecutorsPage returns at most limit (0: every) executors of
// ListExecutors whose name comes after after, by name.
func (s *Store) ListExecutorsPage(ctx context.Context, envID, after string, limit int) ([]Executor, error) {
	rows, err := s.pool.Query(ctx, `select `+executorColumns+`
		from executors where environment_id = $2::uuid and name > $3 order by name limit nullif($4, 0)`,
		ExecutorLiveWithin.Seconds(), envID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list executors: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanExecutor)
	if err != nil {
		return nil, fmt.Errorf("list executors: %w", err)
	}
	return out, nil
}

// ExecutorsServing returns the executors of the environment that serve
// one of agents and have not stopped, by name (a page of agents shows
// those of its agents only).
func (s *Store) ExecutorsServing(ctx context.Context, envID string, agents []string) ([]Executor, error) {
	rows, err := s.pool.Query(ctx, `select `+executorColumns+`
		from executors where environment_id = $2::uuid and stopped_at is null and agents && $3 order by name`,
		ExecutorLiveWithin.Seconds(), envID, agents)
	if err != nil {
		return nil, fmt.Errorf("list executors: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanExecutor)
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

// ExecutorSlot returns the slot of env's embedded executor user (its
// uid's offset in the server's --executor-uids range), given once and for
// good: both replicas run env's executor as the same user.
func (s *Store) ExecutorSlot(ctx context.Context, envID string) (int, error) {
	var slot int
	err := s.pool.QueryRow(ctx, `select slot from executor_uids where environment_id = $1::uuid`, envID).Scan(&slot)
	if !errors.Is(err, pgx.ErrNoRows) {
		return slot, err
	}
	// A conflict (the other replica, at the same time) uses up a slot
	// number, which is harmless.
	if _, err := s.pool.Exec(ctx, `insert into executor_uids (environment_id) values ($1::uuid)
		on conflict do nothing`, envID); err != nil {
		return 0, err
	}
	err = s.pool.QueryRow(ctx, `select slot from executor_uids where environment_id = $1::uuid`, envID).Scan(&slot)
	return slot, err
}
