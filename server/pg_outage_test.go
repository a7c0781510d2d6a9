package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/server/servertest"
)

// pgOutage is how long TestPostgresOutageMidRun keeps PostgreSQL down: the
// 30 s of issue 13.
const pgOutage = 30 * time.Second

// TestPostgresOutageMidRun: stop PostgreSQL (fast shutdown) for pgOutage in
// the middle of a 3,000-resource deploy and start it again on the same data
// and port; the run finishes with every resource deployed, exactly one
// deployed action per resource and no failed one. The cluster is this
// test's own: the shared one of testenv serves parallel tests.
func TestPostgresOutageMidRun(t *testing.T) {
	ctx := context.Background()
	db, stop, start := ownPostgres(t)

	_, hostPort, namespace := testenv.Temporal(t)
	addr := freeAddr(t)
	srv := startProc(t, "server", "--listen", addr, "--database-url", db, "--temporal-address", hostPort,
		"--temporal-namespace", namespace, "--log-level", "warn", "--executor-concurrency", "2")
	c := procClient(addr)
	waitHealthy(t, c, srv)
	env := newEnv(t, c, "pgdown", map[string]any{"deploy_interval": 0})

	const n = 3000
	files := t.TempDir()
	reqID := servertest.Release(t, c, env, manyFiles(t, files, "localhost", n))
	mid := waitMidRun(t, c, env, reqID)
	stop()
	t.Logf("stopped PostgreSQL at %d/%d for %s", mid.Deployed, mid.Total, pgOutage)
	time.Sleep(pgOutage) // the outage itself: nothing to wait for
	start()

	run, err := c.WaitRequest(ctx, env, reqID, 5*time.Minute, nil)
	if err != nil {
		t.Fatalf("%v\nserver output:\n%s", err, srv.Out.String())
	}
	if run.Status != "done" || run.Deployed != n || run.Failed != 0 {
		t.Fatalf("run after the outage = %+v, want all %d deployed\nserver output:\n%s", run, n, srv.Out.String())
	}
	checkFiles(t, files, n)
	checkActionLog(t, db, n)
}
