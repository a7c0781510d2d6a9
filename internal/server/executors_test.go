package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/exectest"
	"github.com/intendhq/intend/internal/testenv"
)

// recordsBy counts the action records of the environment per executor
// ("" for none).
func recordsBy(t *testing.T, conn *pgx.Conn, envName, where string) map[string]int {
	t.Helper()
	rows, err := conn.Query(context.Background(), `select coalesce(a.executor, ''), count(*)
		from resource_actions a join environments e on e.id = a.environment_id
		where e.name = $1 and `+where+` group by 1`, envName)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTwoExecutorsShareAnAgent: two `intend executor` processes serve the
// same agent; both register, both take batches of one run, and stopping
// one cleanly (SIGTERM) in the middle of a batch loses nothing: the other
// resumes the batch (a second attempt, by the other executor) and the run
// deploys everything. (TestExecutorKilledMidBatch does the same with
// kill -9.)
func TestTwoExecutorsShareAnAgent(t *testing.T) {
	c, _, db := startServerDB(t)
	ctx := context.Background()
	_, hostPort, namespace := testenv.Temporal(t)
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	env := newEnv(t, c, "share", map[string]any{"autostart_agents": []string{}, "deploy_interval": 0})
	args := func(name string) []string {
		return []string{"executor", "--environment", env, "--agent", "remote", "--name", name, "--database-url", db,
			"--temporal-address", hostPort, "--temporal-namespace", namespace, "--log-level", "warn",
			"--concurrency", "2"}
	}
	a, b := startProc(t, args("exec-a")...), startProc(t, args("exec-b")...)

	// Both registered (they register once they poll).
	deadline := time.Now().Add(60 * time.Second)
	for {
		l := exectest.Executors(t, c, env)
		if len(l) == 2 && l[0].Name == "exec-a" && l[0].Live && l[1].Name == "exec-b" && l[1].Live {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("executors = %+v\nexec-a:\n%s\nexec-b:\n%s", l, a.Out.String(), b.Out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Six batches of 500: each executor runs at most four at once, so both
	// get some.
	const n = 3000
	dir := t.TempDir()
	reqID := exectest.Release(t, c, env, manyFiles(t, dir, "remote", n))
	if l := exectest.Agents(t, c, env); len(l) != 1 || len(l[0].Executors) != 2 {
		t.Errorf("agents = %+v, want remote served by exec-a and exec-b", l)
	}

	// Stop exec-a while one of its batches is part done: it has recorded
	// some chunks (of 100), not whole batches (of 500).
	deadline = time.Now().Add(60 * time.Second)
	for {
		done := recordsBy(t, conn, env, "true")["exec-a"]
		if done >= 100 && done%500 != 0 {
			t.Logf("stopping exec-a after %d of its records", done)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("exec-a never got going (%d records)\n%s", done, a.Out.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := a.Stop(); err != nil {
		t.Fatalf("stopping exec-a (SIGTERM): %v\n%s", err, a.Out.String())
	}
	if ex := exectest.Executors(t, c, env); len(ex) != 2 || ex[0].StoppedAt == nil || ex[0].Live || !ex[1].Live {
		t.Errorf("after exec-a stopped: %+v, want exec-a stopped and exec-b live", ex)
	}

	run, err := c.WaitRequest(ctx, env, reqID, 120*time.Second, nil)
	if err != nil {
		t.Fatalf("%v\nexec-b:\n%s", err, b.Out.String())
	}
	if run.Status != "done" || run.Deployed != n || run.Failed != 0 {
		t.Fatalf("run = %+v, want all %d deployed", run, n)
	}
	checkFiles(t, dir, n)
	by := recordsBy(t, conn, env, "a.result = 'deployed'")
	if by["exec-a"] == 0 || by["exec-b"] == 0 || by[""] != 0 {
		t.Errorf("deployed records by executor = %v, want some by each and none without", by)
	}
	if resumed := recordsBy(t, conn, env, "a.attempt > 1")["exec-b"]; resumed == 0 {
		t.Errorf("exec-b recorded no second attempt: it did not resume the batch exec-a was running")
	}
	var distinct int
	if err := conn.QueryRow(ctx, `select count(distinct resource_id) from resource_actions
		where result = 'deployed'`).Scan(&distinct); err != nil || distinct != n {
		t.Errorf("%d resources have a deployed record (%v), want %d", distinct, err, n)
	}
}
