package store

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// ClusterMetrics is what the database-derived gauges of /metrics read
// besides StateCounts: one snapshot for the whole cluster, exported by the
// replica that holds the metrics lock (MetricsLock).
type ClusterMetrics struct {
	// Environments are every environment's name, sorted.
	Environments []string
	// LastSuccessfulDeploy is, by environment, when its newest deploy or
	// repair run that ended done with no failed resource finished;
	// environments with none are absent.
	LastSuccessfulDeploy map[string]time.Time
	// OldestOpenRun is, by environment, when its oldest deploy or repair
	// run still pending or running was created; absent when none is open.
	OldestOpenRun map[string]time.Time
	// Compiles are the finished autonomous compiles, by environment and
	// status (succeeded or failed); combinations with none are absent.
	Compiles []CompileCount
	// LSMStates are the states of every registered entity's lifecycle,
	// each with the live (not deleted) instances in it.
	LSMStates []LSMStateCount
	// Agents are every agent not paused, with its live executors.
	Agents []AgentLiveExecutors
}

// AgentLiveExecutors is the number of live executors (ExecutorLiveWithin)
// serving one agent.
type AgentLiveExecutors struct {
	Environment, Agent string
	Live               int
}

// CompileCount is the finished compiles of one environment with one status.
type CompileCount struct {
	Environment, Status string
	Count               int
	// Seconds is the sum of their durations, from start (or request,
	// when never started) to end.
	Seconds float64
}

// LSMStateCount is the live instances of one entity in one state of its
// lifecycle.
type LSMStateCount struct {
	Environment, Entity, State string
	// Transient: the engine moves an instance on from this state by itself
	// (a transfer out is triggered auto or by its resources), so an
	// instance staying long in it is stuck.
	Transient bool
	Count     int
	// OldestChange is the oldest last change of the instances in it (nil
	// when it holds none).
	OldestChange *time.Time
}

// ClusterMetrics reads the cluster's gauges in one read-only, repeatable
// read transaction. Each part uses an index (deploy_runs' primary key
// backwards, deploy_runs_open, compiles_environment,
// service_instances_entity), but compiles are counted whole: a few per
// day and environment.
func (s *Store) ClusterMetrics(ctx context.Context) (ClusterMetrics, error) {
	out := ClusterMetrics{LastSuccessfulDeploy: map[string]time.Time{}, OldestOpenRun: map[string]time.Time{}}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `select e.name, ok.finished_at, open.requested_at
				from environments e
				left join lateral (select r.finished_at from deploy_runs r
					where r.environment_id = e.id and r.action <> 'dryrun' and r.status = 'done' and r.failed = 0
					order by r.run desc limit 1) ok on true
				left join lateral (select r.requested_at from deploy_runs r
					where r.environment_id = e.id and r.action <> 'dryrun' and r.status in ('pending', 'running')
					order by r.run limit 1) open on true
				order by e.name`)
			if err != nil {
				return fmt.Errorf("read deploy runs: %w", err)
			}
			var (
				env      string
				ok, open *time.Time
			)
			if _, err := pgx.ForEachRow(rows, []any{&env, &ok, &open}, func() error {
				out.Environments = append(out.Environments, env)
				if ok != nil {
					out.LastSuccessfulDeploy[env] = *ok
				}
				if open != nil {
					out.OldestOpenRun[env] = *open
				}
				return nil
			}); err != nil {
				return fmt.Errorf("read deploy runs: %w", err)
			}

			rows, err = tx.Query(ctx, `select e.name, c.status, count(*),
					coalesce(sum(extract(epoch from c.finished_at - coalesce(c.started_at, c.requested_at))), 0)::float8
				from compiles c join environments e on e.id = c.environment_id
				where c.status in ('succeeded', 'failed')
				group by 1, 2 order by 1, 2`)
			if err != nil {
				return fmt.Errorf("count compiles: %w", err)
			}
			var cc CompileCount
			if _, err := pgx.ForEachRow(rows, []any{&cc.Environment, &cc.Status, &cc.Count, &cc.Seconds}, func() error {
				out.Compiles = append(out.Compiles, cc)
				return nil
			}); err != nil {
				return fmt.Errorf("count compiles: %w", err)
			}

			rows, err = tx.Query(ctx, `select e.name, se.name, st.key,
					exists (select 1 from jsonb_array_elements(coalesce(se.lifecycle->'transfers', '[]')) t
						where t->>'source' = st.key and t->>'trigger' in ('auto', 'resource')),
					count(si.id), min(si.updated_at)
				from service_entities se
				join environments e on e.id = se.environment_id
				cross join lateral jsonb_each(coalesce(se.lifecycle->'states', '{}')) st
				left join service_instances si on si.environment_id = se.environment_id
					and si.entity = se.name and si.state = st.key and not si.deleted
				group by 1, 2, 3, 4 order by 1, 2, 3`)
			if err != nil {
				return fmt.Errorf("count service instances: %w", err)
			}
			var ls LSMStateCount
			if _, err := pgx.ForEachRow(rows, []any{&ls.Environment, &ls.Entity, &ls.State, &ls.Transient, &ls.Count, &ls.OldestChange}, func() error {
				out.LSMStates = append(out.LSMStates, ls)
				return nil
			}); err != nil {
				return fmt.Errorf("count service instances: %w", err)
			}

			rows, err = tx.Query(ctx, `select e.name, a.name, count(x.name)
				from agents a join environments e on e.id = a.environment_id
				left join executors x on x.environment_id = a.environment_id and a.name = any (x.agents)
					and x.stopped_at is null and x.last_seen > now() - make_interval(secs => $1)
				where not a.paused
				group by 1, 2 order by 1, 2`, ExecutorLiveWithin.Seconds())
			if err != nil {
				return fmt.Errorf("count agents' executors: %w", err)
			}
			var ae AgentLiveExecutors
			if _, err := pgx.ForEachRow(rows, []any{&ae.Environment, &ae.Agent, &ae.Live}, func() error {
				out.Agents = append(out.Agents, ae)
				return nil
			}); err != nil {
				return fmt.Errorf("count agents' executors: %w", err)
			}
			return nil
		})
	return out, err
}

// metricsLockKey is the advisory lock whose holder exports the cluster's
// gauges ("intend/m" in ASCII).
const metricsLockKey int64 = 0x696e74656e642f6d

// MetricsLock elects the one replica of a cluster that exports the
// database-derived gauges, so that sum() over replicas does not count the
// cluster twice. It holds a session-level advisory lock on a connection of
// its own: when the holder stops or dies, PostgreSQL ends its session and
// frees the lock, and another replica takes it at its next try. It is
// safe for concurrent use.
type MetricsLock struct {
	// DatabaseURL is the database whose lock it takes.
	DatabaseURL string
	// Every is how often a replica without the lock tries to take it, and
	// the holder checks its connection (default 15 s).
	Every time.Duration
	Log   *slog.Logger

	held atomic.Bool
}

// Held reports whether this replica holds the lock now.
func (l *MetricsLock) Held() bool { return l.held.Load() }

// Run tries to take the lock, and checks it once held, every Every until
// ctx is done; then it closes its connection, which frees the lock.
func (l *MetricsLock) Run(ctx context.Context) {
	every := l.Every
	if every <= 0 {
		every = 15 * time.Second
	}
	log := l.Log
	if log == nil {
		log = slog.Default()
	}
	var conn *pgx.Conn
	defer func() {
		l.held.Store(false)
		if conn != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
		}
	}()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		var err error
		conn, err = l.try(ctx, conn, every, log)
		if err != nil && ctx.Err() == nil {
			if l.held.Swap(false) {
				log.Warn("metrics lock lost: another replica exports the cluster's gauges", "error", err)
			} else {
				log.Debug("metrics lock: try failed", "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// try takes the lock, or checks that the session holding it lives, on
// conn (connecting when nil). It returns the connection to use next time:
// nil after an error, having closed it.
func (l *MetricsLock) try(ctx context.Context, conn *pgx.Conn, every time.Duration, log *slog.Logger) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, every)
	defer cancel()
	var err error
	if conn == nil {
		if conn, err = pgx.Connect(ctx, l.DatabaseURL); err != nil {
			return nil, fmt.Errorf("connect: %w", err)
		}
	}
	if l.held.Load() {
		var one int
		err = conn.QueryRow(ctx, "select 1").Scan(&one)
	} else {
		var got bool
		if err = conn.QueryRow(ctx, "select pg_try_advisory_lock($1)", metricsLockKey).Scan(&got); err == nil && got {
			l.held.Store(true)
			log.Info("metrics lock taken: this replica exports the cluster's gauges")
		}
	}
	if err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return conn, nil
}
