package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/store"
)

// chunks are the chunk sizes every prune test runs with: one row at a
// time (every boundary a chunk can have), a few, and the default (one
// chunk for everything).
var chunks = []int{1, 2, 3, store.DefaultPruneChunk}

// retentionEnv is an environment of a test's own database whose every
// retention is an hour (MinRetention), so that rows dated hoursAgo(2)
// are past it and rows of now are not; and a second environment holding
// the same history, which no prune of the first may touch.
func retentionEnv(t *testing.T) (*store.Store, *pgx.Conn, store.Environment, store.Environment) {
	t.Helper()
	st, _, conn := open(t)
	ctx := context.Background()
	if _, err := st.CreateProject(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	hour := json.RawMessage(`3600`)
	set := map[string]json.RawMessage{"action_log_retention": hour, "run_retention": hour,
		"compile_retention": hour, "order_retention": hour, "instance_log_retention": hour}
	var envs []store.Environment
	for _, name := range []string{"e", "other"} {
		e, err := st.CreateEnvironment(ctx, store.NewEnvironment{Project: "p", Name: name, Settings: set})
		if err != nil {
			t.Fatal(err)
		}
		envs = append(envs, e)
	}
	return st, conn, envs[0], envs[1]
}

// old and recent date the rows of the tests: past the hour's retention,
// and within it.
const (
	old    = `now() - interval '2 hours'`
	recent = `now() - interval '1 minute'`
)

func exec(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func strs(t *testing.T, conn *pgx.Conn, sql string, args ...any) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	slices.Sort(out)
	return out
}

// prune runs one pass over e with chunk, and checks that it left the
// other environment as it was.
func prune(t *testing.T, st *store.Store, conn *pgx.Conn, e, other store.Environment, chunk int) store.Pruned {
	t.Helper()
	tables := []string{"resource_actions", "deploy_runs", "deploy_requests", "compiles", "lsm_orders",
		"lsm_order_items", "service_instances", "service_instance_log"}
	countOther := func() string {
		var b strings.Builder
		for _, tb := range tables {
			q := `select count(*) from ` + tb + ` where environment_id = $1::uuid`
			fmt.Fprintf(&b, "%s=%d ", tb, count(t, conn, q, other.ID))
		}
		return b.String()
	}
	before := countOther()
	p, err := st.PruneEnvironment(context.Background(), e, store.PruneOptions{Chunk: chunk})
	if err != nil {
		t.Fatalf("prune (chunk %d): %v", chunk, err)
	}
	if after := countOther(); after != before {
		t.Errorf("chunk %d: the other environment's rows went from %s to %s", chunk, before, after)
	}
	return p
}

// pruneRun is one chunk size's run of a prune test (see eachChunk): a
// retentionEnv of its own and the chunk its prunes walk with.
type pruneRun struct {
	t        *testing.T
	st       *store.Store
	conn     *pgx.Conn
	e, other store.Environment
	chunk    int
}

// eachChunk runs test in parallel once for every chunk size of chunks.
func eachChunk(t *testing.T, test func(t *testing.T, r *pruneRun)) {
	t.Parallel()
	for _, chunk := range chunks {
		t.Run(fmt.Sprint("chunk ", chunk), func(t *testing.T) {
			t.Parallel()
			st, conn, e, other := retentionEnv(t)
			test(t, &pruneRun{t: t, st: st, conn: conn, e: e, other: other, chunk: chunk})
		})
	}
}

// inBoth calls insert with the id of e, then of the other environment:
// the same history in both.
func (r *pruneRun) inBoth(insert func(env string)) {
	for _, env := range []string{r.e.ID, r.other.ID} {
		insert(env)
	}
}

// prune runs one pass over e (see prune).
func (r *pruneRun) prune() store.Pruned {
	r.t.Helper()
	return prune(r.t, r.st, r.conn, r.e, r.other, r.chunk)
}

// left checks that query, of e's rows ($1 is e's id), returns want,
// sorted; what names the rows.
func (r *pruneRun) left(what, query string, want ...string) {
	r.t.Helper()
	if got := strs(r.t, r.conn, query, r.e.ID); !slices.Equal(got, want) {
		r.t.Errorf("%s left %v, want %v", what, got, want)
	}
}

// TestPruneActionLog: rows past the retention go, except each resource's
// newest (the lifecycle engine reads it) and those of an open run; recent
// rows stay. A row dated in the future (an executor's clock) does not stop
// the walk.
func TestPruneActionLog(t *testing.T) {
	eachChunk(t, func(t *testing.T, pr *pruneRun) {
		exec(t, pr.conn, `insert into deploy_runs (environment_id, run, version, action, reason, status, workflow_id)
			values ($1::uuid, 9, 1, 'deploy', 'test', 'running', 'wf-open')`, pr.e.ID)
		// In id order, as they were recorded: name, resource, workflow,
		// age. (Ids grow with time, and a walk stops at its first chunk
		// of young rows: the tests' rows are in that order too.)
		rows := []struct{ name, rid, wf, at string }{
			{"a1", "a", "wf-1", old},
			{"b1", "b", "wf-1", old},
			{"c1", "c", "wf-1", old},
			{"skew", "d", "wf-1", `now() + interval '1 day'`},
			{"a2", "a", "wf-2", old},
			{"o1", "o", "wf-open", old},
			{"b2", "b", "wf-2", old},
			{"a3", "a", "wf-3", old},
			{"e1", "e", "wf-3", old},
			{"b3", "b", "wf-4", recent},
			{"o2", "o", "wf-4", recent},
			{"e2", "e", "wf-open", recent},
		}
		pr.inBoth(func(env string) {
			for _, r := range rows {
				exec(t, pr.conn, `insert into resource_actions (environment_id, resource_id, version, action, reason,
					started_at, finished_at, result, workflow_id, run_id, attempt, error)
					values ($1::uuid, $2, 1, 'deploy', 'test', `+r.at+`, `+r.at+`, 'deployed', $3, 'r', 1, $4)`,
					env, r.rid, r.wf, r.name)
			}
		})
		p := pr.prune()
		// a1, a2 (a3 is a's newest), b1, b2 (b3 is newer); c1 is c's
		// only row; o1 is the open run's; e1 goes (e2 is newer).
		pr.left("action log rows", `select error from resource_actions where environment_id = $1::uuid`,
			"a3", "b3", "c1", "e2", "o1", "o2", "skew")
		if p[store.TableActions] != 5 || p.Total() != 5 {
			t.Errorf("pruned %v, want 5 action log rows", p)
		}
		// Idempotent: a second pass finds nothing.
		if p := pr.prune(); p.Total() != 0 {
			t.Errorf("second pass pruned %v", p)
		}
	})
}

// TestPruneRuns: finished runs past the retention go, with the requests
// taken into them and those that found nothing to do; open runs, the
// newest run of each action, the newest successful deploy, and the
// requests of open runs and queued ones stay.
func TestPruneRuns(t *testing.T) {
	eachChunk(t, func(t *testing.T, pr *pruneRun) {
		runs := []struct {
			run            int
			action, status string
			failed         int
			at             string
		}{
			{1, "deploy", "done", 0, old},      // goes: run 3 is a newer success
			{2, "deploy", "done", 2, old},      // goes
			{3, "repair", "done", 0, old},      // stays: the newest success
			{4, "deploy", "running", 0, old},   // stays: open
			{5, "dryrun", "done", 0, old},      // goes: run 7 is a newer dry-run
			{6, "deploy", "preempted", 0, old}, // goes
			{7, "dryrun", "failed", 0, old},    // stays: the newest dry-run
			{8, "deploy", "failed", 1, recent}, // stays: recent, and the newest deploy
			{9, "repair", "done", 3, recent},   // stays: recent, and the newest repair
			{10, "deploy", "pending", 0, old},  // stays: open (pending)
		}
		pr.inBoth(func(env string) {
			for _, r := range runs {
				fin := r.at
				if r.status == "running" || r.status == "pending" {
					fin = "null"
				}
				exec(t, pr.conn, `insert into deploy_runs (environment_id, run, version, action, reason, status, failed,
					requested_at, finished_at, workflow_id)
					values ($1::uuid, $2, 1, $3, 'test', $4, $5, `+r.at+`, `+fin+`, $6)`,
					env, r.run, r.action, r.status, r.failed, fmt.Sprint("wf-", r.run))
			}
			// The requests, by the run that took them (null: queued).
			for _, q := range []struct {
				run *int
				at  string
			}{
				{ptr(1), old},    // goes
				{ptr(0), old},    // goes: nothing to do
				{ptr(4), old},    // stays: an open run's
				{nil, old},       // stays: queued
				{ptr(3), old},    // goes: its run stays, but the request is past it
				{ptr(8), recent}, // stays: recent
				{ptr(0), recent}, // stays: recent
			} {
				exec(t, pr.conn, `insert into deploy_requests (environment_id, kind, reason, run, requested_at)
					values ($1::uuid, 'deploy', 'test', $2, `+q.at+`)`, env, q.run)
			}
		})
		p := pr.prune()
		pr.left("runs", `select run::text from deploy_runs where environment_id = $1::uuid`,
			"10", "3", "4", "7", "8", "9")
		pr.left("requests (by run)", `select coalesce(run::text, 'queued') from deploy_requests where environment_id = $1::uuid`,
			"0", "4", "8", "queued")
		if p[store.TableRuns] != 4 || p[store.TableRequests] != 3 || p.Total() != 7 {
			t.Errorf("pruned %v, want 4 runs and 3 requests", p)
		}
		if p := pr.prune(); p.Total() != 0 {
			t.Errorf("second pass pruned %v", p)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// TestPruneCompiles: finished compiles past the retention go; a running
// one, the queued one and the newest (the recompile_interval timer counts
// from it) stay.
func TestPruneCompiles(t *testing.T) {
	eachChunk(t, func(t *testing.T, pr *pruneRun) {
		pr.inBoth(func(env string) {
			// By id, as requested.
			for _, c := range []struct{ name, status, at string }{
				{"c1", "succeeded", old}, // goes
				{"c2", "running", old},   // stays: running
				{"c3", "failed", old},    // goes
				{"c5", "queued", old},    // stays: queued
				{"c6", "failed", old},    // goes
				{"c7", "succeeded", recent},
			} {
				fin := c.at
				if c.status == "running" || c.status == "queued" {
					fin = "null"
				}
				exec(t, pr.conn, `insert into compiles (environment_id, status, reason, requested_at, finished_at,
					repo_url, branch, workflow_id)
					values ($1::uuid, $2, 'api', `+c.at+`, `+fin+`, 'https://example.com/r', 'main', $3)`,
					env, c.status, c.name)
			}
		})
		p := pr.prune()
		pr.left("compiles", `select workflow_id from compiles where environment_id = $1::uuid`,
			"c2", "c5", "c7")
		if p[store.TableCompiles] != 3 || p.Total() != 3 {
			t.Errorf("pruned %v, want 3 compiles", p)
		}
		// Once every compile is old, the newest still stays.
		exec(t, pr.conn, `update compiles set requested_at = `+old+`, finished_at = `+old+` where finished_at is not null`)
		if p := pr.prune(); p.Total() != 0 {
			t.Errorf("pruned %v once c7 is old too; it is the newest", p)
		}
	})
}

// TestPruneOrders: orders that finished before the retention go with
// their items; unfinished and recent ones stay. A chunk is cut short by
// the items of its orders and goes on from there.
func TestPruneOrders(t *testing.T) {
	eachChunk(t, func(t *testing.T, pr *pruneRun) {
		pr.inBoth(func(env string) {
			for i, o := range []struct {
				items       int
				created, at string // at: finished (null: not yet)
			}{
				{3, old, old},       // goes, 3 items
				{1, old, old},       // goes, 1 item
				{2, old, "null"},    // stays: running
				{4, old, old},       // goes, 4 items
				{1, old, recent},    // stays: finished recently
				{2, recent, recent}, // stays
			} {
				id := fmt.Sprintf("00000000-0000-7000-8000-%012d", i+1)
				exec(t, pr.conn, `insert into lsm_orders (environment_id, id, policy, status, item_count, created_at, finished_at)
					values ($1::uuid, $2::uuid, 'best_effort', 'running', $3, `+o.created+`, `+o.at+`)`, env, id, o.items)
				for n := range o.items {
					exec(t, pr.conn, `insert into lsm_order_items (environment_id, order_id, position, item_id, operation,
						entity, instance_id, spec) values ($1::uuid, $2::uuid, $3, $4, 'create', 'vm', gen_random_uuid(), '{}')`,
						env, id, n, fmt.Sprint(n))
				}
			}
		})
		p := pr.prune()
		pr.left("orders", `select id::text from lsm_orders where environment_id = $1::uuid`,
			"00000000-0000-7000-8000-000000000003", "00000000-0000-7000-8000-000000000005", "00000000-0000-7000-8000-000000000006")
		if n := count(t, pr.conn, `select count(*) from lsm_order_items where environment_id = $1::uuid`, pr.e.ID); n != 5 {
			t.Errorf("%d items left, want 5", n)
		}
		if p[store.TableOrders] != 3 || p[store.TableOrderItems] != 8 || p.Total() != 11 {
			t.Errorf("pruned %v, want 3 orders and 8 items", p)
		}
	})
}

// sinceSQL is when a service instance entered its current state as
// ApplyInstanceChange reads it from the log.
const sinceSQL = `select coalesce((select l.created_at from service_instance_log l
	where l.environment_id = i.environment_id and l.instance_id = i.id
	  and l.version = 1 + coalesce((select max(m.version) from service_instance_log m
	      where m.environment_id = i.environment_id and m.instance_id = i.id and m.state <> i.state), 0)),
	i.updated_at)::text
	from service_instances i where i.environment_id = $1::uuid and i.id = $2::uuid`

// TestPruneInstanceLogs: a live instance loses the log rows past the
// retention that come before the last row in another state than its
// current one, and so still tells when it entered its state; a
// terminated instance last changed before the retention goes whole.
func TestPruneInstanceLogs(t *testing.T) {
	type logRow struct{ state, at string }
	instances := []struct {
		state   string
		deleted bool
		changed string // updated_at
		log     []logRow
		kept    []int // the versions that stay
	}{
		// up since v5; v4 is the last row in another state.
		{"up", false, old, []logRow{{"start", old}, {"creating", old}, {"up", old}, {"updating", old}, {"up", old}},
			[]int{4, 5}},
		// never left its state: nothing to go.
		{"b", false, old, []logRow{{"a", old}, {"b", old}, {"b", old}}, []int{1, 2, 3}},
		// recent rows stay, old ones before the last other state go.
		{"b", false, recent, []logRow{{"a", old}, {"b", old}, {"a", recent}, {"b", recent}}, []int{3, 4}},
		// an old row after the last other state stays.
		{"b", false, recent, []logRow{{"a", old}, {"b", old}, {"a", old}, {"b", old}, {"b", recent}}, []int{3, 4, 5}},
		// terminated long ago: goes whole.
		{"terminated", true, old, []logRow{{"start", old}, {"up", old}, {"terminated", old}}, nil},
		// terminated recently: stays, its log pruned as a live one's.
		{"terminated", true, recent, []logRow{{"start", old}, {"up", old}, {"terminated", recent}}, []int{2, 3}},
		// a single version, old.
		{"start", false, old, []logRow{{"start", old}}, []int{1}},
	}
	eachChunk(t, func(t *testing.T, pr *pruneRun) {
		id := func(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1) }
		pr.inBoth(func(env string) {
			exec(t, pr.conn, `insert into service_entities (environment_id, name, attributes, lifecycle, model_hash)
				values ($1::uuid, 'vm', '[]', '{}', 'h')`, env)
			for i, in := range instances {
				exec(t, pr.conn, `insert into service_instances (environment_id, entity, id, state, version, deleted, updated_at)
					values ($1::uuid, 'vm', $2::uuid, $3, $4, $5, `+in.changed+`)`, env, id(i), in.state, len(in.log), in.deleted)
				for v, l := range in.log {
					exec(t, pr.conn, `insert into service_instance_log (environment_id, instance_id, version, state, event, created_at)
						values ($1::uuid, $2::uuid, $3, $4, '{}', `+l.at+` + make_interval(secs => $5))`, env, id(i), v+1, l.state, v+1)
				}
			}
		})
		since := map[int]string{}
		for i, in := range instances {
			if !in.deleted {
				since[i] = strs(t, pr.conn, sinceSQL, pr.e.ID, id(i))[0]
			}
		}
		p := pr.prune()
		var wantLogs, wantGone int64
		for i, in := range instances {
			wantLogs += int64(len(in.log) - len(in.kept))
			var got []int
			rows, _ := pr.conn.Query(context.Background(), `select version from service_instance_log
				where environment_id = $1::uuid and instance_id = $2::uuid order by version`, pr.e.ID, id(i))
			got, err := pgx.CollectRows(rows, pgx.RowTo[int])
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, in.kept) {
				t.Errorf("instance %d (%s): versions %v left, want %v", i, in.state, got, in.kept)
			}
			exists := count(t, pr.conn, `select count(*) from service_instances where environment_id = $1::uuid and id = $2::uuid`,
				pr.e.ID, id(i)) == 1
			if exists != (in.kept != nil) {
				t.Errorf("instance %d (%s): row exists %v, want %v", i, in.state, exists, in.kept != nil)
			}
			if !exists {
				wantGone++
			}
			if s, ok := since[i]; ok {
				if after := strs(t, pr.conn, sinceSQL, pr.e.ID, id(i))[0]; after != s {
					t.Errorf("instance %d (%s): entered its state at %s before the prune, %s after", i, in.state, s, after)
				}
			}
		}
		if p[store.TableInstanceLog] != wantLogs || p[store.TableInstances] != wantGone {
			t.Errorf("pruned %v, want %d log rows and %d instances", p, wantLogs, wantGone)
		}
	})
}

// TestPruneKeepsEverythingAtZero: a retention of 0 keeps everything,
// however old.
func TestPruneKeepsEverythingAtZero(t *testing.T) {
	t.Parallel()
	st, conn, e, other := retentionEnv(t)
	exec(t, conn, `insert into resource_actions (environment_id, resource_id, version, action, reason,
		started_at, finished_at, result, workflow_id, run_id, attempt)
		select $1::uuid, 'a', 1, 'deploy', 'test', now() - interval '10 years', now() - interval '10 years',
		       'deployed', 'wf', 'r', 1 from generate_series(1, 3)`, e.ID)
	exec(t, conn, `insert into deploy_runs (environment_id, run, version, action, reason, status, requested_at,
		finished_at, workflow_id) select $1::uuid, g, 1, 'deploy', 'test', 'done', now() - interval '10 years',
		now() - interval '10 years', 'wf' from generate_series(1, 3) g`, e.ID)
	zero := json.RawMessage(`0`)
	e, err := st.UpdateEnvironment(context.Background(), e.ID, store.EnvironmentPatch{Settings: map[string]json.RawMessage{
		"action_log_retention": zero, "run_retention": zero, "compile_retention": zero, "order_retention": zero,
		"instance_log_retention": zero}})
	if err != nil {
		t.Fatal(err)
	}
	if p := prune(t, st, conn, e, other, 1); p.Total() != 0 {
		t.Errorf("pruned %v with every retention 0", p)
	}
	if n := count(t, conn, `select count(*) from resource_actions`); n != 3 {
		t.Errorf("%d action rows left, want 3", n)
	}
}

// TestPruneRequestsInChunks: expired idempotent responses go a chunk at
// a time until none is left; a fresh one stays.
func TestPruneRequestsInChunks(t *testing.T) {
	t.Parallel()
	st, conn, e, _ := retentionEnv(t)
	n := store.DefaultPruneChunk + 7
	exec(t, conn, `insert into lsm_requests (environment_id, scope, key, request_hash, status, response, created_at)
		select $1::uuid, 's', 'k'||g, '\x01', 200, '{}', now() - interval '25 hours' from generate_series(1, $2) g`, e.ID, n)
	exec(t, conn, `insert into lsm_requests (environment_id, scope, key, request_hash, status, response)
		values ($1::uuid, 's', 'fresh', '\x01', 200, '{}')`, e.ID)
	got, err := st.PruneRequests(context.Background())
	if err != nil || got != int64(n) {
		t.Errorf("PruneRequests = %d, %v; want %d", got, err, n)
	}
	if left := strs(t, conn, `select key from lsm_requests`); !slices.Equal(left, []string{"fresh"}) {
		t.Errorf("left %v, want only the fresh one", left)
	}
}

// TestPruneLockOneHolder: one session holds the prune lock at a time; it
// is free again after unlock.
func TestPruneLockOneHolder(t *testing.T) {
	t.Parallel()
	st, _, _ := open(t)
	ctx := context.Background()
	unlock, ok, err := st.TryPruneLock(ctx)
	if err != nil || !ok {
		t.Fatalf("first TryPruneLock = %v, %v", ok, err)
	}
	if _, ok, err := st.TryPruneLock(ctx); err != nil || ok {
		t.Errorf("second TryPruneLock while held = %v, %v; want not taken", ok, err)
	}
	unlock()
	unlock2, ok, err := st.TryPruneLock(ctx)
	if err != nil || !ok {
		t.Fatalf("TryPruneLock after unlock = %v, %v", ok, err)
	}
	unlock2()
}

// TestRetentionSettings: each retention takes 0 (keep everything) or a
// whole number of seconds from an hour to ten years; anything else is
// refused naming the key and the range, and changes nothing. A new
// environment has the documented defaults.
func TestRetentionSettings(t *testing.T) {
	t.Parallel()
	keys := []string{"action_log_retention", "run_retention", "compile_retention", "order_retention",
		"instance_log_retention", "notification_retention"}
	for _, key := range keys {
		for _, c := range []struct {
			value string
			ok    bool
			why   string
		}{
			{`0`, true, "keep everything"},
			{`3600`, true, "an hour"},
			{`3599`, false, "under an hour"},
			{`1`, false, "a second"},
			{`-1`, false, "negative"},
			{`316224000`, true, "ten years"},
			{`316224001`, false, "more than ten years"},
			{`1e300`, false, "not a whole number"},
			{`7200.5`, false, "a fraction"},
			{`"7d"`, false, "a string"},
			{`true`, false, "a boolean"},
		} {
			got, errs := store.ApplySettings(store.DefaultSettings(), map[string]json.RawMessage{key: json.RawMessage(c.value)})
			if (len(errs) == 0) != c.ok {
				t.Errorf("%s = %s (%s): errors %v, want ok=%v", key, c.value, c.why, errs, c.ok)
				continue
			}
			if !c.ok {
				if errs[0].Key != key || !strings.Contains(errs[0].Reason, "from 3600") {
					t.Errorf("%s = %s: error %+v, want one naming the key and the range", key, c.value, errs[0])
				}
				if got.Retention != store.DefaultRetention() {
					t.Errorf("%s = %s was refused but changed the retention to %+v", key, c.value, got.Retention)
				}
			}
		}
	}
	st, e := newStoreEnv(t)
	raw, err := json.Marshal(e.Settings)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]int{"action_log_retention": 604800, "run_retention": 2592000,
		"compile_retention": 604800, "order_retention": 2592000, "instance_log_retention": 7776000,
		"notification_retention": 2592000} {
		if !strings.Contains(string(raw), fmt.Sprintf(`"%s":%d`, key, want)) {
			t.Errorf("a new environment's settings %s lack %s = %d", raw, key, want)
		}
	}
	// A patch of one leaves the others as they were.
	e, err = st.UpdateEnvironment(context.Background(), e.ID, store.EnvironmentPatch{
		Settings: map[string]json.RawMessage{"run_retention": json.RawMessage(`86400`)}})
	if err != nil {
		t.Fatal(err)
	}
	want := store.DefaultRetention()
	want.RunRetention = 86400
	if e.Settings.Retention != want {
		t.Errorf("after setting run_retention: %+v, want %+v", e.Settings.Retention, want)
	}
}

// TestPruneAudit: audit rows older than the cutoff go, of every
// environment, a chunk at a time; newer ones stay.
func TestPruneAudit(t *testing.T) {
	eachChunk(t, func(t *testing.T, pr *pruneRun) {
		for i, at := range []string{old, old, old, recent, recent} {
			env := any(pr.e.ID)
			if i == 1 {
				env = nil // a global action
			}
			exec(t, pr.conn, `insert into audit_log (at, environment_id, actor_kind, actor, action, status)
				values (`+at+`, $1::uuid, 'token', 'admin', $2, 200)`, env, fmt.Sprint("a", i))
		}
		n, err := pr.st.PruneAudit(context.Background(), time.Now().Add(-time.Hour), pr.chunk)
		if err != nil || n != 3 {
			t.Errorf("PruneAudit = %d, %v; want 3", n, err)
		}
		if got := strs(t, pr.conn, `select action from audit_log`); !slices.Equal(got, []string{"a3", "a4"}) {
			t.Errorf("left %v, want the two recent rows", got)
		}
	})
}

// TestPruneCallbackEventsInChunks: delivered events past their retention
// and dead ones past theirs go, a chunk at a time until none is left;
// pending ones, and those within their retention, stay.
func TestPruneCallbackEventsInChunks(t *testing.T) {
	t.Parallel()
	st, conn, e, _ := retentionEnv(t)
	var cb string
	if err := conn.QueryRow(context.Background(), `insert into lsm_callbacks (environment_id, url, secret, created_by)
		values ($1::uuid, 'https://example.com/hook', 's', 'test') returning id::text`, e.ID).Scan(&cb); err != nil {
		t.Fatal(err)
	}
	n := store.DefaultPruneChunk + 5
	// Versions 1..n: delivered 2 hours ago. Then, by version: delivered a
	// minute ago, dead 2 hours ago (within a dead event's 4 hours), dead
	// 5 hours ago, and pending since 5 hours ago.
	exec(t, conn, `insert into lsm_callback_events (callback_id, instance_id, version, event_id, payload, status, done_at)
		select $1::uuid, '00000000-0000-4000-8000-000000000001', g, gen_random_uuid(), '{}', 'delivered',
		       now() - interval '2 hours' from generate_series(1, $2) g`, cb, n)
	for i, ev := range []struct{ status, done string }{
		{"delivered", recent}, {"dead", old}, {"dead", `now() - interval '5 hours'`}, {"pending", "null"},
	} {
		exec(t, conn, `insert into lsm_callback_events (callback_id, instance_id, version, event_id, payload, status,
			done_at, created_at) values ($1::uuid, '00000000-0000-4000-8000-000000000001', $2, gen_random_uuid(), '{}',
			$3, `+ev.done+`, now() - interval '5 hours')`, cb, n+1+i, ev.status)
	}
	got, err := st.PruneCallbackEvents(context.Background(), time.Hour, 4*time.Hour)
	if err != nil || got != int64(n+1) {
		t.Errorf("PruneCallbackEvents = %d, %v; want %d", got, err, n+1)
	}
	left := strs(t, conn, `select status || ' ' || (version - $1) from lsm_callback_events`, n)
	if want := []string{"dead 2", "delivered 1", "pending 4"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
}
