package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
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

// TestPostgresStoppedAnswers503: with PostgreSQL stopped, an
// authenticated request (its token lookup fails first) answers 503 with
// Retry-After, as /healthz does, not 500; once PostgreSQL is back, it
// answers again.
func TestPostgresStoppedAnswers503(t *testing.T) {
	db, stop, start := ownPostgres(t)
	c, _, _ := startValidated(t, server.Config{DatabaseURL: db})
	envs := c.Base + "/api/v1/environments"
	resp, err := authGet(c, envs)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("before the outage: %v %v", resp, err)
	}
	resp.Body.Close()

	stop()
	for _, u := range []string{envs, c.Base + "/api/v1/whoami", c.Base + "/healthz"} {
		resp, err := authGet(c, u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("GET %s with PostgreSQL stopped = %d (Retry-After %q) %s, want 503 with Retry-After",
				u, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}

	start()
	wait.For(t, "the API to answer after the outage", 30*time.Second, func() error {
		resp, err := authGet(c, envs)
		if err != nil {
			return fmt.Errorf("after the outage: %w", err)
		}
		resp.Body.Close()
		return wait.Unless(resp.StatusCode == http.StatusOK, "after the outage: %s", resp.Status)
	})
}
