package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// TestPeriodicPrune: the reconciler's prune pass deletes the action log
// rows past the environment's action_log_retention (each resource's
// newest stays), the expired responses to idempotent requests and the
// audit rows past --audit-retention (the recent ones stay), and counts
// them in intend_pruned_rows_total{table}.
func TestPeriodicPrune(t *testing.T) {
	t.Parallel()
	db := testenv.Database(t)
	c, s, _ := servertest.StartServer(t, server.Config{DatabaseURL: db, MetricsListen: "127.0.0.1:0",
		ReconcileEvery: 100 * time.Millisecond, PruneEvery: 200 * time.Millisecond, AuditRetention: time.Hour})
	env := servertest.NewEnvironment(t, c, "prune", map[string]any{"autostart_agents": []string{},
		"action_log_retention": 3600})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// Resource a: three attempts two hours ago; b: one. a's newest and
	// b's stay.
	if _, err := conn.Exec(ctx, `insert into resource_actions (environment_id, resource_id, version, action, reason,
		started_at, finished_at, result, workflow_id, run_id, attempt)
		select e.id, r, 1, 'deploy', 'test', now() - interval '2 hours' + make_interval(secs => g),
		       now() - interval '2 hours' + make_interval(secs => g), 'deployed', 'wf', 'r', 1
		from environments e, (values ('a', 1), ('a', 2), ('a', 3), ('b', 4)) as v(r, g)
		where e.name = $1`, env); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `insert into lsm_requests (environment_id, scope, key, request_hash, status, response,
		created_at) select id, 's', 'k', '\x01', 200, '{}', now() - interval '25 hours' from environments
		where name = $1`, env); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `insert into audit_log (at, actor_kind, actor, action, status)
		values (now() - interval '2 hours', 'token', 'admin', 'old.action', 200)`); err != nil {
		t.Fatal(err)
	}
	// a's newest (ids are the write order) and b's, before the prune.
	var wantA, wantB int64
	if err := conn.QueryRow(ctx, `select max(id) filter (where resource_id = 'a'), max(id) filter (where resource_id = 'b')
		from resource_actions`).Scan(&wantA, &wantB); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the prune of old rows", 30*time.Second, func() error {
		var actions, requests, audit, newAudit int
		if err := conn.QueryRow(ctx, `select (select count(*) from resource_actions), (select count(*) from lsm_requests),
			(select count(*) from audit_log where action = 'old.action'), (select count(*) from audit_log)`).
			Scan(&actions, &requests, &audit, &newAudit); err != nil {
			t.Fatal(err)
		}
		text := scrape(t, s)
		return wait.Unless(actions == 2 && requests == 0 && audit == 0 && newAudit > 0 &&
			strings.Contains(text, "\nintend_pruned_rows_total{table=\"resource_actions\"} 2\n") &&
			strings.Contains(text, "\nintend_pruned_rows_total{table=\"lsm_requests\"} 1\n") &&
			strings.Contains(text, "\nintend_pruned_rows_total{table=\"audit_log\"} 1\n"),
			"%d action rows (want 2), %d idempotent responses (want 0), %d old audit rows (want 0) "+
				"and %d in all (want the test's own); metrics:\n%s",
			actions, requests, audit, newAudit, grepLines(text, "intend_pruned_rows_total"))
	})
	var left []int64
	if err := conn.QueryRow(ctx, `select array_agg(id order by id) from resource_actions`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left[0] != wantA || left[1] != wantB {
		t.Errorf("left action rows %v, want a's newest (%d) and b's (%d)", left, wantA, wantB)
	}
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
