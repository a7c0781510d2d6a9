package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/api/apitest"
	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/telemetry"
)

// statements records the SQL of every statement a pool sends while on.
type statements struct {
	mu  sync.Mutex
	on  bool
	sql []string
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.on {
		s.sql = append(s.sql, strings.Join(strings.Fields(d.SQL), " "))
	}
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// start forgets what was recorded and records from now on; stop stops
// and returns what was recorded.
func (s *statements) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on, s.sql = true, nil
}

func (s *statements) stop() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on = false
	return s.sql
}

// TestExecutorAPIIntentIsOneStatement: in a chain, one resource acts at a
// time, and each waits for its intent to be recorded (a round trip to the
// server, and the server's to PostgreSQL) before it acts: intend-bench's
// P5, a chain of 1,000, took 1.2–1.4 s against 0.35 s before the executor
// left the server's process (issue 28). Of an intent's statements, the
// guard's (the token and the environment) is every route's; the intent's
// own were two, the batch's head and the insert. The batch's head never
// changes, so after a batch's first intent each is the insert alone (a
// batch gone since is still a 404, from the insert).
func TestExecutorAPIIntentIsOneStatement(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	e, run, batches := plannedRun(t, f, "exec-intent-statements", 8)
	ctx := context.Background()
	ba, err := f.st.LoadBatch(ctx, e.ID, run, batches["a"].Seq)
	if err != nil {
		t.Fatal(err)
	}
	tok := executorToken(t, f, e, "a")

	// A server of its own on the same database, whose statements are
	// recorded.
	rec := &statements{}
	cfg, err := pgxpool.ParseConfig(f.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = rec
	st, err := store.OpenConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	tel, err := telemetry.New()
	if err != nil {
		t.Fatal(err)
	}
	h := api.New(api.Options{Store: st, Scheduler: &recordingScheduler{}, Telemetry: tel,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Auth: &auth.Authenticator{Tokens: st},
		Health: map[string]func(context.Context) error{"postgresql": st.Ping}}).Handler()
	srv := httptest.NewServer(apitest.Validating(t, h))
	t.Cleanup(srv.Close)
	traced := &fixture{t: t, srv: srv, st: st, handler: h, dbURL: f.dbURL}

	path := fmt.Sprintf("/api/v1/environments/%s/executor/batches/%d/%d/intents", e.ID, run, batches["a"].Seq)
	intend := func(i int) {
		t.Helper()
		body := fmt.Sprintf(`{"intents":[{"resource_id":%q,"operation":"create","workflow_id":"wf","attempt":1}]}`, ba.Resources[i].ID)
		if code, out := traced.callAs("POST", path, body, tok, nil); code != http.StatusNoContent {
			t.Fatalf("intent %d = %d %v, want 204", i, code, out)
		}
	}
	intend(0) // the batch's first: its head is read
	rec.start()
	const n = 5
	for i := 1; i <= n; i++ {
		intend(i)
	}
	sqls := rec.stop()
	var own []string
	for _, sql := range sqls {
		// The guard's, on every route: the token and the environment
		// (one statement, store.TokenByHashIn), its last use marked at
		// most once a minute.
		if strings.Contains(sql, "from api_tokens") || strings.Contains(sql, "update api_tokens") ||
			strings.Contains(sql, "from environments where") {
			continue
		}
		own = append(own, sql)
	}
	if len(own) != n {
		t.Errorf("%d intents after the batch's first sent %d statements of their own, want %d (the inserts):\n%s",
			n, len(own), n, strings.Join(own, "\n"))
	}
	for _, sql := range own {
		if !strings.HasPrefix(sql, "insert into resource_intents") {
			t.Errorf("an intent's statement is not its insert: %s", sql)
		}
	}
	if len(sqls) > 2*n+1 {
		t.Errorf("%d intents sent %d statements in all, want at most 2 each (the guard's, the insert):\n%s",
			n, len(sqls), strings.Join(sqls, "\n"))
	}

	// The batch gone (its run finished) with its head known: still a 404.
	conn, err := pgx.Connect(ctx, f.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `delete from deploy_batches where environment_id = $1::uuid and run = $2 and seq = $3`,
		e.ID, run, batches["a"].Seq); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"intents":[{"resource_id":%q,"operation":"create","workflow_id":"wf","attempt":1}]}`, ba.Resources[n+1].ID)
	if code, out := traced.callAs("POST", path, body, tok, nil); code != http.StatusNotFound {
		t.Errorf("an intent for a batch gone = %d %v, want 404", code, out)
	}
}

// BenchmarkExecutorAPIIntent: one intent, as a link of a chain sends it
// (one resource, a new attempt each time so that each is written and
// committed), through HTTP, the guard and PostgreSQL.
func BenchmarkExecutorAPIIntent(b *testing.B) {
	f := newFixture(b, api.Options{})
	e, run, batches := plannedRun(b, f, "exec-intent-bench", 2)
	ba, err := f.st.LoadBatch(context.Background(), e.ID, run, batches["a"].Seq)
	if err != nil {
		b.Fatal(err)
	}
	tok := executorToken(b, f, e, "a")
	path := fmt.Sprintf("/api/v1/environments/%s/executor/batches/%d/%d/intents", e.ID, run, batches["a"].Seq)
	attempt := 0
	for b.Loop() {
		attempt++
		body := fmt.Sprintf(`{"intents":[{"resource_id":%q,"operation":"create","workflow_id":"wf","attempt":%d}]}`,
			ba.Resources[0].ID, attempt)
		if code, out := f.callAs("POST", path, body, tok, nil); code != http.StatusNoContent {
			b.Fatalf("intent = %d %v, want 204", code, out)
		}
	}
}
