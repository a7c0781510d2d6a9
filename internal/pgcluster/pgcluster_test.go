package pgcluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestStartCreateStopReuse(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()

	c := start(ctx, t, Options{Dir: dir})
	if err := c.CreateDatabase(ctx, "kept", ""); err != nil {
		t.Fatal(err)
	}
	mustQuery(ctx, t, c.URL("kept"), "create table marker (x int); insert into marker values (42)")
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("second stop should be a no-op: %v", err)
	}

	// A postmaster.pid naming a live process that is not postgres (pids get
	// reused in containers) must not keep the cluster from starting again.
	pidFile := filepath.Join(dir, "data", "postmaster.pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"+filepath.Join(dir, "data")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	c2 := start(ctx, t, Options{Dir: dir})
	defer c2.Stop(ctx)
	var x int
	conn, err := pgx.Connect(ctx, c2.URL("kept"))
	if err != nil {
		t.Fatalf("data directory was not reused: %v", err)
	}
	err = conn.QueryRow(ctx, "select x from marker").Scan(&x)
	conn.Close(ctx) // a template must have no connections
	if err != nil || x != 42 {
		t.Fatalf("marker row after restart: %d, %v", x, err)
	}

	if err := c2.CreateDatabase(ctx, "copy", "kept"); err != nil {
		t.Fatalf("create from template: %v", err)
	}
	mustQuery(ctx, t, c2.URL("copy"), "select x from marker")
	if err := c2.DropDatabase(ctx, "copy"); err != nil {
		t.Fatal(err)
	}
	if err := c2.DropDatabase(ctx, "copy"); err != nil {
		t.Fatalf("drop of a missing database should succeed: %v", err)
	}
}

func TestStartFailsWithLogTail(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// max_connections below the reserved superuser slots makes postgres
	// refuse to start; the error must carry its explanation.
	_, err := Start(ctx, Options{Dir: t.TempDir(), MaxConnections: 1})
	if err == nil {
		t.Fatal("start with max_connections=1 succeeded")
	}
	if !strings.Contains(err.Error(), "superuser_reserved_connections") {
		t.Fatalf("error does not include the server log: %v", err)
	}
}

func TestFindBinDir(t *testing.T) {
	dir, err := FindBinDir()
	if err != nil {
		t.Fatal(err) // says what to install
	}
	if !hasServer(dir) {
		t.Fatalf("FindBinDir returned %s without initdb and postgres", dir)
	}

	t.Setenv("INTEND_PG_BINDIR", t.TempDir())
	if _, err := FindBinDir(); err == nil {
		t.Fatal("INTEND_PG_BINDIR without binaries was accepted")
	}
	t.Setenv("INTEND_PG_BINDIR", dir)
	if got, err := FindBinDir(); err != nil || got != dir {
		t.Fatalf("INTEND_PG_BINDIR=%s: got %q, %v", dir, got, err)
	}
}

func TestNewestDebianBinDir(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, v := range []string{"9.6", "13", "16", "17"} {
		bin := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		names := []string{"initdb", "postgres"}
		if v == "17" {
			names = names[:1] // client-only install: no server
		}
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(bin, n), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, want := newestDebianBinDir(root), filepath.Join(root, "16", "bin"); got != want {
		t.Fatalf("got %s, want %s (highest version with both binaries)", got, want)
	}
	if got := newestDebianBinDir(filepath.Join(root, "missing")); got != "" {
		t.Fatalf("missing root: got %q", got)
	}
}

func start(ctx context.Context, t *testing.T, opts Options) *Cluster {
	t.Helper()
	c, err := Start(ctx, opts)
	if errors.Is(err, ErrNoBinaries) {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return c
}

func mustQuery(ctx context.Context, t *testing.T, url, sql string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
