package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
)

// TestStartFailureTearsDownEarlierPhases: a Start that fails in a late
// phase (the API's TLS files, the metrics listener) leaves nothing of
// the phases before it: the API's address is free again and no
// connection to the database is left open. The listener, bound before
// the API was built, stayed bound until the process exited.
func TestStartFailureTearsDownEarlierPhases(t *testing.T) {
	_, hostPort, namespace := testenv.Temporal(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, c := range []struct {
		name, reason string
		set          func(*server.Config)
	}{
		{"tls", "the API's certificate is missing: fails once the API is built, its address bound",
			func(c *server.Config) {
				c.TLSCert = filepath.Join(t.TempDir(), "missing.crt")
				c.TLSKey = filepath.Join(t.TempDir(), "missing.key")
			}},
		{"metrics", "the metrics address is taken: fails after the API's http.Server is made, before it serves",
			func(c *server.Config) { c.MetricsListen = busy.Addr().String() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := freeAddr(t)
			db := testenv.Database(t)
			cfg := server.Config{Listen: addr, DatabaseURL: db, TemporalAddress: hostPort, TemporalNamespace: namespace,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			c.set(&cfg)
			s, err := server.Start(context.Background(), cfg)
			if err == nil {
				s.Shutdown(context.Background())
				t.Fatalf("%s: Start succeeded, want an error", c.reason)
			}
			t.Logf("%s: %v", c.reason, err)
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				t.Errorf("%s: the API's address after the failed Start: %v, want it free", c.reason, err)
			} else {
				ln.Close()
			}
			waitNoDBConnections(t, c.reason, db)
		})
	}
}

// waitNoDBConnections waits up to 5 s for the other sessions on db's
// database to drop to zero (a closed client's backend exits shortly
// after); why names the case.
func waitNoDBConnections(t *testing.T, why, db string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	wait.For(t, why+": the connections to the database to close", 5*time.Second, func() error {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return wait.Unless(n == 0, "%d connections to the database left open, want none", n)
	})
}
