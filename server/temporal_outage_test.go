package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/server/servertest"
)

// temporalOutage is how long TestTemporalOutageMidRun keeps Temporal
// down: the 30 s of issue 13.
const temporalOutage = 30 * time.Second

// TestTemporalOutageMidRun: stop the Temporal server for temporalOutage in
// the middle of a 3,000-resource deploy run by an external executor and
// start it again on the same database and port; the run finishes with
// every resource deployed, exactly one deployed action per resource and no
// other. The Temporal server is this test's own: the shared one of testenv
// serves parallel tests.
func TestTemporalOutageMidRun(t *testing.T) {
	ctx := context.Background()
	temporalAddr, namespace, _, stop, start := ownTemporal(t)
	db := testenv.Database(t)
	addr := freeAddr(t)
	srv := startProc(t, "server", "--listen", addr, "--database-url", db, "--temporal-address", temporalAddr,
		"--temporal-namespace", namespace, "--log-level", "warn")
	c := procClient(addr)
	waitHealthy(t, c, srv)
	env := newEnv(t, c, "tdown", map[string]any{"deploy_interval": 0, "autostart_agents": []string{}})
	ex := startExecutor(t, c, "http://"+addr, env, []string{"remote"}, "--temporal-address", temporalAddr,
		"--temporal-namespace", namespace, "--log-level", "warn", "--concurrency", "2")

	const n = 3000
	files := t.TempDir()
	reqID := servertest.Release(t, c, env, manyFiles(t, files, "remote", n))
	mid := waitMidRun(t, c, env, reqID)
	stop()
	t.Logf("stopped Temporal at %d/%d for %s", mid.Deployed, mid.Total, temporalOutage)
	time.Sleep(temporalOutage) // the outage itself: nothing to wait for
	start()

	run, err := c.WaitRequest(ctx, env, reqID, 5*time.Minute, nil)
	if err != nil {
		t.Fatalf("%v\nserver output:\n%s\nexecutor output:\n%s", err, srv.Out.String(), ex.Out.String())
	}
	if run.Status != "done" || run.Deployed != n || run.Failed != 0 {
		t.Fatalf("run after the outage = %+v, want all %d deployed\nserver output:\n%s\nexecutor output:\n%s",
			run, n, srv.Out.String(), ex.Out.String())
	}
	checkFiles(t, files, n)
	checkActionLog(t, db, n)
}

// checkActionLog: n resources, each with exactly one deployed action and
// no other, each compliant.
func checkActionLog(t *testing.T, db string, n int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var resources, oneDeployed, other int
	if err := conn.QueryRow(ctx, `
		select count(*),
		       count(*) filter (where deployed = 1),
		       coalesce(sum(not_deployed), 0)
		from (select resource_id,
		             count(*) filter (where result = 'deployed') as deployed,
		             count(*) filter (where result <> 'deployed') as not_deployed
		      from action_log group by resource_id) a`).Scan(&resources, &oneDeployed, &other); err != nil {
		t.Fatal(err)
	}
	if resources != n || oneDeployed != n || other != 0 {
		t.Fatalf("action log: %d resources, %d with exactly one deployed action, %d other actions; want %d, %d, 0",
			resources, oneDeployed, other, n, n)
	}
	var notCompliant int
	if err := conn.QueryRow(ctx, `select count(*) from resource_state
		where compliance <> 'compliant' or last_result is distinct from 'deployed'`).Scan(&notCompliant); err != nil {
		t.Fatal(err)
	}
	if notCompliant != 0 {
		t.Fatalf("%d resources not compliant or last recorded other than deployed", notCompliant)
	}
}
