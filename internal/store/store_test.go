package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func open(t *testing.T) (*store.Store, string, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	st, url := openStore(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return st, url, conn
}

// openStore opens a store on a database of tb's own (closed when tb
// ends) and returns it with the database's URL.
func openStore(tb testing.TB) (*store.Store, string) {
	tb.Helper()
	url := testenv.Database(tb)
	st, err := store.Open(context.Background(), url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(st.Close)
	return st, url
}

// newEnv creates project p and its environment e.
func newEnv(tb testing.TB, st *store.Store) store.Environment {
	tb.Helper()
	ctx := context.Background()
	if _, err := st.CreateProject(ctx, "p"); err != nil {
		tb.Fatal(err)
	}
	e, err := st.CreateEnvironment(ctx, store.NewEnvironment{Project: "p", Name: "e"})
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// newStoreEnv opens a store (see open) with an environment (see newEnv).
func newStoreEnv(t *testing.T) (*store.Store, store.Environment) {
	t.Helper()
	st, _, _ := open(t)
	return st, newEnv(t, st)
}

// files builds a version of n files; content overrides the content of some.
func files(t *testing.T, n int, content map[int]string) intent.Version {
	t.Helper()
	body := `{"resources":[`
	for i := 0; i < n; i++ {
		if i > 0 {
			body += ","
		}
		c := "x"
		if v, ok := content[i]; ok {
			c = v
		}
		body += fmt.Sprintf(`{"id":"fs::File[h,path=/f%d]","attributes":{"path":"/f%d","content":%q}}`, i, i, c)
	}
	v, err := intent.DecodeBytes([]byte(body + "]}"))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// startRun exports v, releases it and takes its deploy request into a
// run, as the scheduler does.
func startRun(t *testing.T, st *store.Store, envID string, v intent.Version) store.DeployRun {
	t.Helper()
	ctx := context.Background()
	info, err := st.ExportVersion(ctx, envID, v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReleaseVersion(ctx, envID, info.Version); err != nil {
		t.Fatal(err)
	}
	take, err := st.TakeRequests(ctx, envID, "t", nil, false)
	if err != nil || take.Run == nil {
		t.Fatalf("take = %+v, %v", take, err)
	}
	return *take.Run
}

func count(t *testing.T, conn *pgx.Conn, q string, args ...any) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// TestVersionsShareUnchangedResources: a new version writes rows only for
// what changed, and releasing it touches only the deploy state of those.
func TestVersionsShareUnchangedResources(t *testing.T) {
	t.Parallel()
	st, _, conn := open(t)
	e := newEnv(t, st)
	ctx := context.Background()

	v1, err := st.ExportVersion(ctx, e.ID, files(t, 1000, nil))
	if err != nil {
		t.Fatal(err)
	}
	if v1.ChangedCount != 1000 {
		t.Errorf("v1 changed = %d", v1.ChangedCount)
	}
	if _, err := st.ReleaseVersion(ctx, e.ID, v1.Version); err != nil {
		t.Fatal(err)
	}
	// Pretend everything was deployed.
	if _, err := conn.Exec(ctx, `update resource_state set deployed_hash = intent_hash, last_result = 'deployed',
		compliance = 'compliant'`); err != nil {
		t.Fatal(err)
	}

	// v2: one content change and one resource removed (999 resources).
	v2, err := st.ExportVersion(ctx, e.ID, files(t, 999, map[int]string{7: "changed"}))
	if err != nil {
		t.Fatal(err)
	}
	if v2.ChangedCount != 2 || v2.ResourceCount != 999 {
		t.Errorf("v2 = %+v, want 2 changed of 999", v2)
	}
	if n := count(t, conn, `select count(*) from version_resources`); n != 1001 {
		t.Errorf("version_resources has %d rows, want 1001 (1000 + 1 changed)", n)
	}
	if n := count(t, conn, `select count(*) from resource_contents`); n != 1001 {
		t.Errorf("resource_contents has %d rows, want 1001", n)
	}
	rel, err := st.ReleaseVersion(ctx, e.ID, v2.Version)
	if err != nil {
		t.Fatal(err)
	}
	if rel.Changed != 2 || rel.Request == nil || rel.Request.Reason != "new version 2" {
		t.Errorf("release v2 = %+v, want 2 changed and a deploy request", rel)
	}
	// Both releases queued a request; one take merges them into one run.
	take, err := st.TakeRequests(ctx, e.ID, "t", nil, false)
	if err != nil || take.Run == nil || take.Run.Reason != "new version 1; new version 2" || take.Run.Action != "deploy" {
		t.Fatalf("take = %+v, %v", take, err)
	}
	if n := count(t, conn, `select count(*) from resource_state where compliance = 'has_update'`); n != 1 {
		t.Errorf("%d resources need an update, want 1 (f7)", n)
	}
	if n := count(t, conn, `select count(*) from resource_state where intent_hash is null and resource_id = 'fs::File[h,path=/f999]'`); n != 1 {
		t.Errorf("removed resource f999 is not an orphan")
	}
	// Each version still reads back whole.
	for v, want := range map[int64]int{1: 1000, 2: 999} {
		rs, err := st.VersionResources(ctx, e.ID, v, "", 5000)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != want {
			t.Errorf("version %d has %d resources, want %d", v, len(rs), want)
		}
	}

	// Planning the run deploys only f7.
	p, err := st.PlanDeploy(ctx, e.ID, take.Run.Run, store.DefaultBatchLimits, store.Caller{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != 1 || len(p.Batches) != 1 || p.Batches[0].First != "fs::File[h,path=/f7]" {
		t.Errorf("plan = %+v", p)
	}
	// Planning again returns the same batches.
	again, err := st.PlanDeploy(ctx, e.ID, take.Run.Run, store.DefaultBatchLimits, store.Caller{})
	if err != nil || again.Total != 1 || len(again.Batches) != 1 {
		t.Errorf("re-plan = %+v, %v", again, err)
	}
}

func TestPlanCutsBatchesByLevelAgentAndSize(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	body := `{"resources":[`
	for i := 0; i < 25; i++ {
		if i > 0 {
			body += ","
		}
		agent := "a"
		if i%2 == 1 {
			agent = "b"
		}
		req := ""
		if i >= 20 {
			req = `,"requires":["fs::File[a,path=/f0]"]`
		}
		body += fmt.Sprintf(`{"id":"fs::File[%s,path=/f%d]","attributes":{"path":"/f%d","content":"x"}%s}`, agent, i, i, req)
	}
	v, err := intent.DecodeBytes([]byte(body + "]}"))
	if err != nil {
		t.Fatal(err)
	}
	run := startRun(t, st, e.ID, v)
	p, err := st.PlanDeploy(ctx, e.ID, run.Run, store.BatchLimits{MaxResources: 4, MaxBytes: 1 << 20}, store.Caller{})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	lastLevel := 0
	for _, b := range p.Batches {
		total += b.Count
		if b.Count > 4 {
			t.Errorf("batch %d has %d resources, limit 4", b.Seq, b.Count)
		}
		if b.Level < lastLevel {
			t.Errorf("batch %d of level %d after level %d", b.Seq, b.Level, lastLevel)
		}
		lastLevel = b.Level
	}
	// level 0: 10 of a (f0..f18 even) + 10 of b = 3+3 batches; level 1: 5 (f20..f24, mixed agents)
	if total != 25 || p.Batches[len(p.Batches)-1].Level != 1 {
		t.Errorf("plan = %+v", p)
	}
	b, err := st.LoadBatch(ctx, e.ID, run.Run, p.Batches[0].Seq)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Resources) != p.Batches[0].Count || b.Agent != p.Batches[0].Agent || string(b.Resources[0].Attributes) == "" {
		t.Errorf("batch = %+v", b)
	}
}

// TestMigrationsUpDownUp runs every migration down and up again on a
// database holding data.
func TestMigrationsUpDownUp(t *testing.T) {
	t.Parallel()
	st, url, conn := open(t)
	newEnv(t, st)
	st.Close()
	ctx := context.Background()
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if from, to, err := migrations.Apply(ctx, url, 0); err != nil || from != latest || to != 0 {
		t.Fatalf("down: %d→%d %v", from, to, err)
	}
	if n := count(t, conn, `select count(*) from information_schema.tables where table_name = 'environments'`); n != 0 {
		t.Errorf("environments survived migrating down")
	}
	if from, to, err := migrations.Apply(ctx, url, -1); err != nil || from != 0 || to != latest {
		t.Fatalf("up: %d→%d %v", from, to, err)
	}
	if _, _, err := migrations.Apply(ctx, url, latest+1); err == nil {
		t.Error("migrating to a version that does not exist succeeded")
	}
}

// TestMigrationsLeaveANewerSchema: a server of the previous release that
// (re)starts during a rolling upgrade finds the schema one migration ahead
// of its own; migrating "to the newest" leaves it as it is instead of
// undoing the migration the new servers rely on.
func TestMigrationsLeaveANewerSchema(t *testing.T) {
	t.Parallel()
	st, url, conn := open(t)
	e := newEnv(t, st)
	st.Close()
	ctx := context.Background()
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	// As if the next release's migration latest+1 had run.
	if _, err := conn.Exec(ctx, `update `+migrations.VersionTable+` set version = $1`, latest+1); err != nil {
		t.Fatal(err)
	}
	from, to, err := migrations.Apply(ctx, url, -1)
	if err != nil || from != latest+1 || to != latest+1 {
		t.Fatalf("Apply(newest) on schema %d = %d→%d, %v; want it left at %d", latest+1, from, to, err, latest+1)
	}
	if n := count(t, conn, `select count(*) from environments where id = '`+e.ID+`'`); n != 1 {
		t.Errorf("the environment is gone after starting on a newer schema")
	}
}
