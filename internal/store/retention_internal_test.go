package store

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/testenv"
)

// history is what fillHistory writes into one environment: resources
// resources with actions rows each in the action log (the oldest first,
// one a day back from now), runs deploy runs and as many requests,
// compiles compiles, orders orders of 2 items, and instances service
// instances with logs log rows each. Everything but the newest of each
// is older than an hour; for the action log, everything older than
// keepDays days.
type history struct {
	resources, actions, runs, compiles, orders, instances, logs int
	// unchanged is the unchanged_actions rows of 100 attempts per action.
	unchanged int
}

// fillHistory writes h into environment envID with set-based inserts
// (seconds for millions of rows), then analyzes the tables.
func fillHistory(tb testing.TB, conn *pgx.Conn, envID string, h history) {
	tb.Helper()
	ctx := context.Background()
	for _, q := range []string{
		// Action n of resource r finished (actions - n) days ago; rows are
		// written as they would be, a whole run of every resource after
		// the other.
		`insert into resource_actions (environment_id, resource_id, version, action, reason, started_at, finished_at,
			result, operation, workflow_id, run_id, attempt, logs)
		select @env::uuid, 'test::Thing[a,name=t' || r || ']', n, 'repair', 'repair_interval',
		       now() - make_interval(days => @actions - n), now() - make_interval(days => @actions - n),
		       'deployed', 'none', 'env/e/deploy/' || n, 'r', 1,
		       '[{"level": "info", "msg": "observed: up to date"}]'
		from generate_series(1, @actions) n, generate_series(1, @resources) r order by n, r`,
		// And unchanged attempts of other resources, 100 a row (migration
		// 031), unchanged rows per action.
		`insert into unchanged_actions (id, environment_id, version, action, reason, result, operation, workflow_id,
			run_id, attempt, resource_ids, ids, started_at, finished_at)
		select s.base, @env::uuid, s.n, 'repair', 'repair_interval', 'deployed', 'none', 'env/e/deploy/' || s.n, 'r', 1,
		       array(select 'test::Thing[u,name=t' || (s.c * 100 + k) || ']' from generate_series(1, 100) k),
		       array(select s.base + k - 1 from generate_series(1, 100) k),
		       array_fill(now() - make_interval(days => @actions - s.n), array[100]),
		       array_fill(now() - make_interval(days => @actions - s.n), array[100])
		from (select nextval(pg_get_serial_sequence('resource_actions', 'id')) as base, n, c
		      from generate_series(1, @actions) n, generate_series(0, @unchanged - 1) c order by n, c) s`,
		`insert into deploy_runs (environment_id, run, version, action, reason, status, requested_at, started_at,
			finished_at, total, deployed, workflow_id)
		select @env::uuid, n, n, 'repair', 'repair_interval', 'done', now() - make_interval(hours => @runs - n),
		       now() - make_interval(hours => @runs - n), now() - make_interval(hours => @runs - n), @resources, @resources,
		       'env/e/deploy/' || n
		from generate_series(1, @runs) n`,
		`insert into deploy_requests (environment_id, kind, reason, requested_at, run)
		select @env::uuid, 'repair', 'repair_interval', now() - make_interval(hours => @runs - n), n
		from generate_series(1, @runs) n`,
		`insert into compiles (environment_id, status, reason, requested_at, started_at, finished_at, repo_url, branch,
			workflow_id)
		select @env::uuid, 'succeeded', 'schedule', now() - make_interval(hours => @compiles - n),
		       now() - make_interval(hours => @compiles - n), now() - make_interval(hours => @compiles - n),
		       'https://example.com/model.git', 'main', 'env/e/compile/' || n
		from generate_series(1, @compiles) n`,
		`insert into lsm_orders (environment_id, id, policy, status, item_count, created_at, started_at, finished_at)
		select @env::uuid, ('00000000-0000-7000-8000-' || lpad(n::text, 12, '0'))::uuid, 'best_effort', 'succeeded', 2,
		       now() - make_interval(hours => @orders - n), now() - make_interval(hours => @orders - n),
		       now() - make_interval(hours => @orders - n)
		from generate_series(1, @orders) n`,
		`insert into lsm_order_items (environment_id, order_id, position, item_id, operation, entity, instance_id, spec,
			status)
		select @env::uuid, ('00000000-0000-7000-8000-' || lpad(n::text, 12, '0'))::uuid, p, p::text, 'create', 'vm',
		       gen_random_uuid(), '{}', 'succeeded'
		from generate_series(1, @orders) n, generate_series(0, 1) p`,
		`insert into audit_log (at, environment_id, environment, actor_kind, actor, action, method, path, status)
		select now() - make_interval(hours => @runs - n), @env::uuid, 'e', 'token', 'admin', 'deploy.request', 'POST',
		       '/api/v1/environments/e/deploy', 202
		from generate_series(1, @runs) n`,
		`insert into service_entities (environment_id, name, attributes, lifecycle, model_hash)
		select @env::uuid, 'vm', '[]', '{}', 'h' where @instances > 0`,
		// Instance i is up; its log went start, creating, up, then
		// updating, up again for each further pair of versions.
		`insert into service_instances (environment_id, entity, id, state, version, updated_at)
		select @env::uuid, 'vm', ('00000000-0000-4000-8000-' || lpad(i::text, 12, '0'))::uuid, 'up', @logs, now()
		from generate_series(1, @instances) i`,
		`insert into service_instance_log (environment_id, instance_id, version, state, event, created_at)
		select @env::uuid, ('00000000-0000-4000-8000-' || lpad(i::text, 12, '0'))::uuid, v,
		       case when v = 1 then 'start' when v = 2 then 'creating' when v % 2 = 1 then 'up' else 'updating' end,
		       '{"trigger": "api"}', now() - make_interval(days => @logs - v)
		from generate_series(1, @instances) i, generate_series(1, @logs) v`,
	} {
		if _, err := conn.Exec(ctx, q, pgx.NamedArgs{"env": envID, "resources": h.resources, "actions": h.actions,
			"runs": h.runs, "compiles": h.compiles, "orders": h.orders, "instances": h.instances,
			"logs": h.logs, "unchanged": h.unchanged}); err != nil {
			tb.Fatalf("fill: %v\n%s", err, q)
		}
	}
	if _, err := conn.Exec(ctx, `analyze`); err != nil {
		tb.Fatal(err)
	}
}

// retentionStore opens a store on a database of the test's own with
// environments named names, and a connection of its own.
func retentionStore(tb testing.TB, names ...string) (*Store, *pgx.Conn, []Environment) {
	tb.Helper()
	ctx := context.Background()
	url := testenv.Database(tb)
	st, err := Open(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(st.Close)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := st.CreateProject(ctx, "p"); err != nil {
		tb.Fatal(err)
	}
	var envs []Environment
	for _, n := range names {
		e, err := st.CreateEnvironment(ctx, NewEnvironment{Project: "p", Name: n})
		if err != nil {
			tb.Fatal(err)
		}
		envs = append(envs, e)
	}
	return st, conn, envs
}

// TestPruneStatementsUseIndexes: on tables of tens of thousands of rows
// in two environments, no prune statement scans a whole table: each walks
// an index (EXPLAIN, with the planner free to choose).
func TestPruneStatementsUseIndexes(t *testing.T) {
	t.Parallel()
	_, conn, envs := retentionStore(t, "a", "b")
	h := history{resources: 4000, actions: 5, runs: 20000, compiles: 20000, orders: 20000, instances: 4000, logs: 5,
		unchanged: 40}
	for _, e := range envs {
		fillHistory(t, conn, e.ID, h)
	}
	ctx := context.Background()
	before := time.Now().Add(-time.Hour)
	zero := "00000000-0000-0000-0000-000000000000"
	for _, c := range []struct {
		name string
		sql  string
		args []any
	}{
		{"action log", pruneActionsSQL, []any{envs[0].ID, 0, DefaultPruneChunk, before, []string{"x"}, time.Now()}},
		{"unchanged actions", pruneUnchangedSQL, []any{envs[0].ID, 0, DefaultPruneChunk / 100, before, []string{"x"}, time.Now()}},
		{"runs", pruneRunsSQL, []any{envs[0].ID, 0, DefaultPruneChunk, before, []int64{1}}},
		{"requests", pruneRequestsSQL, []any{envs[0].ID, 0, DefaultPruneChunk, before, []int64{1}}},
		{"compiles", pruneCompilesSQL, []any{envs[0].ID, 0, DefaultPruneChunk, before}},
		{"orders", pruneOrdersSQL, []any{envs[0].ID, zero, DefaultPruneChunk, before}},
		{"instance logs", pruneInstanceLogSQL, []any{envs[0].ID, zero, DefaultPruneChunk / 10, before, DefaultPruneChunk}},
		{"audit", pruneAuditSQL, []any{0, DefaultPruneChunk, before}},
		{"instances", pruneInstancesSQL, []any{envs[0].ID, zero, "00000000-0000-4000-8000-000000001000", before}},
	} {
		rows, err := conn.Query(ctx, "explain "+c.sql, c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		plan := strings.Join(lines, "\n")
		if strings.Contains(plan, "Seq Scan") || !strings.Contains(plan, "Index") {
			t.Errorf("%s: the plan scans a table:\n%s", c.name, plan)
		}
	}
}

// BenchmarkPrune measures one prune pass over an environment of 100,000
// resources with 5 daily repairs of each in the action log (500,000
// rows), 2,000 runs, requests, compiles and orders (an hour apart; the
// orders of 2 items) and 10,000 service instances of 9 log versions (a
// day apart). Every retention is a day.
//
//   - first: the pass over that backlog, which deletes 4 action rows of
//     each resource, all but the newest day of runs, requests, compiles
//     and orders (and their items), and 7 log rows of each instance (those
//     older than a day before its last state change): 481,856 rows.
//   - steady: the pass after it, which finds nothing to delete.
//   - stale: a pass after one ten days later, when every resource's
//     newest action is past the retention and stays: the walk reads all
//     100,000 of them (the worst case of the steady state).
//
// It logs each part's time and rows per second; b.N passes each fill
// the database anew (outside the timer).
func BenchmarkPrune(b *testing.B) {
	h := history{resources: 100_000, actions: 5, runs: 2000, compiles: 2000, orders: 2000, instances: 10_000, logs: 9}
	if n, err := strconv.Atoi(os.Getenv("INTEND_BENCH_RESOURCES")); err == nil && n > 0 {
		h.resources = n
	}
	for _, pass := range []string{"first", "steady", "stale"} {
		b.Run(pass, func(b *testing.B) {
			var deleted int64
			var took time.Duration
			for range b.N {
				b.StopTimer()
				st, conn, envs := retentionStore(b, "e")
				fillHistory(b, conn, envs[0].ID, h)
				e := envs[0]
				e.Settings.Retention = Retention{ActionLogRetention: day, RunRetention: day, CompileRetention: day,
					OrderRetention: day, InstanceLogRetention: day}
				ctx := context.Background()
				now := time.Now()
				if pass == "stale" {
					now = now.Add(10 * 24 * time.Hour)
				}
				if pass != "first" {
					if _, err := st.PruneEnvironment(ctx, e, PruneOptions{Now: now}); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				before := now.Add(-24 * time.Hour)
				out := Pruned{}
				for _, part := range []struct {
					name string
					run  func() error
				}{
					{"action log", func() error {
						return st.pruneActions(ctx, e.ID, now, before, DefaultPruneChunk, out)
					}},
					{"runs, requests", func() error { return st.pruneRuns(ctx, e.ID, before, DefaultPruneChunk, out) }},
					{"compiles", func() error { return st.pruneCompiles(ctx, e.ID, before, DefaultPruneChunk, out) }},
					{"orders, items", func() error { return st.pruneOrders(ctx, e.ID, before, DefaultPruneChunk, out) }},
					{"instance logs", func() error {
						return st.pruneInstanceLogs(ctx, e.ID, before, DefaultPruneChunk, out)
					}},
				} {
					n0, t0 := out.Total(), time.Now()
					if err := part.run(); err != nil {
						b.Fatal(err)
					}
					d := time.Since(t0)
					took += d
					n := out.Total() - n0
					deleted += n
					b.Logf("%-6s %-15s %8d rows in %8v  %8.0f rows/s", pass, part.name, n, d.Round(time.Millisecond),
						float64(n)/d.Seconds())
				}
			}
			b.ReportMetric(float64(deleted)/float64(b.N), "rows/op")
			b.ReportMetric(float64(deleted)/took.Seconds(), "rows/s")
		})
	}
}
