package store_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/intendhq/intend/internal/store"
)

func TestIsUnavailable(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		name string
		err  error
		want bool
		why  string
	}{
		{"nil", nil, false, "no error"},
		{"refused", fmt.Errorf("load batch: %w", refused), true, "the server is down: a dial error"},
		{"connect", &pgconn.ConnectError{}, true, "pgx could not connect"},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true, "a fast shutdown ends open sessions"},
		{"starting", &pgconn.PgError{Code: "57P03"}, true, "the database system is starting up"},
		{"connection exception", &pgconn.PgError{Code: "08006"}, true, "class 08"},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false, "the statement failed: trying again fails again"},
		{"not found", fmt.Errorf("batch: %w", store.ErrNotFound), false, "an answer, not an outage"},
		{"cancelled", fmt.Errorf("record: %w", context.Canceled), false, "the caller gave up"},
		{"other", errors.New("boom"), false, "unknown errors are not retried"},
	} {
		if got := store.IsUnavailable(c.err); got != c.want {
			t.Errorf("%s: IsUnavailable(%v) = %v, want %v (%s)", c.name, c.err, got, c.want, c.why)
		}
	}
}

// TestIsUnavailableRefusedSession: a database that takes no connections
// (its sessions ended, ALLOW_CONNECTIONS false) is unreachable: pgx's
// ConnectError wraps the server's FATAL 55000, which is not an answer to
// any statement. It was taken for a failed statement (a 500 for every
// request instead of a 503).
func TestIsUnavailableRefusedSession(t *testing.T) {
	t.Parallel()
	st, dbURL := openStore(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	u.Path = "/postgres"
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	db := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, "alter database "+db+" allow_connections false"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = admin.Exec(ctx, "alter database "+db+" allow_connections true") }()
	if _, err := admin.Exec(ctx, "select pg_terminate_backend(pid) from pg_stat_activity where datname = $1", name); err != nil {
		t.Fatal(err)
	}
	// The first call may meet a session ended under it (57P01); the next
	// ones cannot open one.
	for i := range 3 {
		if _, err := st.ListEnvironments(ctx, ""); !store.IsUnavailable(err) {
			t.Errorf("call %d with the database refusing sessions: IsUnavailable(%v) = false", i+1, err)
		}
	}
}

// TestActionRecorded: the executor asks whether a chunk whose commit was
// cut off is stored; an attempt is found by its workflow, run, attempt and
// start time (stored to the microsecond), and only that attempt.
func TestActionRecorded(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	now := time.Now().UTC()
	rec := store.ActionRecord{ResourceID: "fs::File[a,path=/a]", Hash: []byte("h"), Version: 1, Action: "deploy",
		Reason: "test", StartedAt: now, FinishedAt: now, Result: "deployed", Operation: "none",
		WorkflowID: "wf", RunID: "run", Attempt: 1}
	if found, err := st.ActionRecorded(ctx, e.ID, rec); err != nil || found {
		t.Fatalf("before recording: ActionRecorded = %v, %v; want false", found, err)
	}
	if err := st.RecordActions(ctx, e.ID, []store.ActionRecord{rec}); err != nil {
		t.Fatal(err)
	}
	if found, err := st.ActionRecorded(ctx, e.ID, rec); err != nil || !found {
		t.Fatalf("after recording: ActionRecorded = %v, %v; want true", found, err)
	}
	next := rec
	next.Attempt = 2
	if found, err := st.ActionRecorded(ctx, e.ID, next); err != nil || found {
		t.Errorf("another attempt: ActionRecorded = %v, %v; want false", found, err)
	}
	later := rec
	later.StartedAt = now.Add(time.Millisecond)
	if found, err := st.ActionRecorded(ctx, e.ID, later); err != nil || found {
		t.Errorf("a later start: ActionRecorded = %v, %v; want false", found, err)
	}
}
