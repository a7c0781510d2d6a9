package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/store"
)

func compileEnv(t *testing.T, st *store.Store, settings string) store.Environment {
	t.Helper()
	return updateSettings(t, st, newEnv(t, st), settings)
}

func TestCompileSettings(t *testing.T) {
	t.Parallel()
	def := store.DefaultSettings()
	if def.RepoURL != "" || def.RepoBranch != "main" || def.RecompileInterval != 0 {
		t.Errorf("defaults = %q %q %d, want \"\" main 0", def.RepoURL, def.RepoBranch, def.RecompileInterval)
	}
	for _, c := range []struct {
		key, value string
		ok         bool
		why        string
	}{
		{"repo_url", `"/srv/git/model.git"`, true, "a path"},
		{"repo_url", `"https://git.example.com/model.git"`, true, "a URL"},
		{"repo_url", `""`, true, "none"},
		{"repo_url", `"--upload-pack=touch /tmp/x"`, false, "an option, not a repository"},
		{"repo_url", `"a\nb"`, false, "a newline"},
		{"repo_url", `7`, false, "not a string"},
		{"repo_branch", `"release/2.x"`, true, "slashes and dots"},
		{"repo_branch", `"-f"`, false, "an option"},
		{"repo_branch", `"a..b"`, false, "git refuses '..'"},
		{"repo_branch", `"a b"`, false, "a space"},
		{"repo_branch", `"main:evil"`, false, "a refspec"},
		{"repo_branch", `""`, false, "empty"},
		{"recompile_interval", `3600`, true, "an hour"},
		{"recompile_interval", `-1`, false, "negative"},
	} {
		_, errs := store.ApplySettings(def, map[string]json.RawMessage{c.key: json.RawMessage(c.value)})
		if (len(errs) == 0) != c.ok {
			t.Errorf("%s = %s (%s): errors %v, want ok=%v", c.key, c.value, c.why, errs, c.ok)
		}
	}
}

// TestCompileQueue: one queued compile per environment absorbs requests;
// a running one does not; a take is idempotent while one runs.
func TestCompileQueue(t *testing.T) {
	t.Parallel()
	st, _, _ := open(t)
	ctx := context.Background()
	e := newEnv(t, st)
	if _, _, err := st.RequestCompile(ctx, e.ID, "api"); !errors.Is(err, store.ErrNoRepository) {
		t.Fatalf("compile without repo_url: %v, want ErrNoRepository", err)
	}
	e = updateSettings(t, st, e, `{"repo_url": "/srv/a.git", "repo_branch": "dev"}`)
	c1, merged, err := st.RequestCompile(ctx, e.ID, "api")
	if err != nil || merged {
		t.Fatalf("first request: %+v merged=%v %v", c1, merged, err)
	}
	if c1.Status != store.CompileQueued || c1.RepoURL != "/srv/a.git" || c1.Branch != "dev" || c1.Success != nil ||
		c1.WorkflowID != store.CompileWorkflowID(e.Name, c1.ID) {
		t.Errorf("queued compile = %+v", c1)
	}
	again, merged, err := st.RequestCompile(ctx, e.ID, "api")
	if err != nil || !merged || again.ID != c1.ID || again.Merged != 1 {
		t.Fatalf("second request = %+v merged=%v %v, want merged into %d", again, merged, err, c1.ID)
	}

	// The branch changes before the compile starts: the take uses it.
	e = updateSettings(t, st, e, `{"repo_branch": "main"}`)
	take, err := st.TakeCompile(ctx, e.ID)
	if err != nil || take.Compile == nil || take.Compile.ID != c1.ID || take.Compile.Status != store.CompileRunning ||
		take.Compile.Branch != "main" || take.Compile.StartedAt == nil || take.NextSchedule != 0 {
		t.Fatalf("take = %+v %v", take, err)
	}
	c2, merged, err := st.RequestCompile(ctx, e.ID, "api")
	if err != nil || merged || c2.ID == c1.ID {
		t.Fatalf("request while one runs = %+v merged=%v %v, want a new queued compile", c2, merged, err)
	}
	if take, err := st.TakeCompile(ctx, e.ID); err != nil || take.Compile == nil || take.Compile.ID != c1.ID {
		t.Fatalf("take while %d runs = %+v %v, want %d again", c1.ID, take, err, c1.ID)
	}

	sha := strings.Repeat("ab", 20)
	if err := st.RecordCompileCommit(ctx, e.ID, c1.ID, sha); err != nil {
		t.Fatal(err)
	}
	v := files(t, 3, nil)
	got, err := st.ExportCompile(ctx, e.ID, c1.ID, v, "")
	if err != nil || got.Version == nil || *got.Version != 1 || !*got.Exported || *got.ResourceCount != 3 ||
		got.Commit != sha {
		t.Fatalf("export = %+v %v", got, err)
	}
	// A retried export finds the version recorded and writes nothing.
	if got, err := st.ExportCompile(ctx, e.ID, c1.ID, files(t, 4, nil), ""); err != nil || *got.Version != 1 {
		t.Fatalf("export again = %+v %v", got, err)
	}
	released := true
	done, err := st.FinishCompile(ctx, e.ID, c1.ID, store.CompileSucceeded, nil, &released)
	if err != nil || done.Status != store.CompileSucceeded || done.Success == nil || !*done.Success ||
		done.FinishedAt == nil || !*done.Released {
		t.Fatalf("finish = %+v %v", done, err)
	}
	if again, err := st.FinishCompile(ctx, e.ID, c1.ID, store.CompileFailed, store.CompileMessage("late"), nil); err != nil ||
		again.Status != store.CompileSucceeded || again.Errors != nil {
		t.Fatalf("finish a finished compile = %+v %v, want it unchanged", again, err)
	}
	if _, err := st.ExportCompile(ctx, e.ID, c1.ID, v, ""); !errors.Is(err, store.ErrConflict) {
		t.Errorf("export of a finished compile without a version: %v, want ErrConflict", err)
	}

	// The next compile produces the same resources: no new version.
	take, err = st.TakeCompile(ctx, e.ID)
	if err != nil || take.Compile == nil || take.Compile.ID != c2.ID {
		t.Fatalf("take = %+v %v, want %d", take, err, c2.ID)
	}
	got, err = st.ExportCompile(ctx, e.ID, c2.ID, files(t, 3, nil), "")
	if err != nil || *got.Version != 1 || *got.Exported {
		t.Fatalf("unchanged export = %+v %v, want version 1 not exported", got, err)
	}
	if vs, err := st.ListVersions(ctx, e.ID, 10); err != nil || len(vs) != 1 {
		t.Fatalf("versions = %+v %v, want 1", vs, err)
	}
	if _, err := st.FinishCompile(ctx, e.ID, c2.ID, store.CompileFailed, store.CompileMessage("boom"), nil); err != nil {
		t.Fatal(err)
	}
	failed, err := st.GetCompile(ctx, e.ID, c2.ID)
	if err != nil || failed.Success == nil || *failed.Success || !strings.Contains(string(failed.Errors), `"boom"`) {
		t.Fatalf("failed compile = %+v %v", failed, err)
	}
	if take, err := st.TakeCompile(ctx, e.ID); err != nil || take.Compile != nil {
		t.Fatalf("take of an empty queue = %+v %v", take, err)
	}

	list, err := st.ListCompiles(ctx, e.ID, 0, 1)
	if err != nil || len(list) != 1 || list[0].ID != c2.ID {
		t.Fatalf("newest compile = %+v %v", list, err)
	}
	list, err = st.ListCompiles(ctx, e.ID, c2.ID, 10)
	if err != nil || len(list) != 1 || list[0].ID != c1.ID {
		t.Fatalf("compiles before %d = %+v %v", c2.ID, list, err)
	}
	if _, err := st.GetCompile(ctx, e.ID, c2.ID+100); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown compile: %v", err)
	}
}

func updateSettings(t *testing.T, st *store.Store, e store.Environment, settings string) store.Environment {
	t.Helper()
	var patch map[string]json.RawMessage
	if err := json.Unmarshal([]byte(settings), &patch); err != nil {
		t.Fatal(err)
	}
	e, err := st.UpdateEnvironment(context.Background(), e.ID, store.EnvironmentPatch{Settings: patch})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestCompileSchedule: the take queues a schedule compile when the
// recompile_interval passed since the last request, and says when the
// next is due.
func TestCompileSchedule(t *testing.T) {
	t.Parallel()
	st, _, conn := open(t)
	ctx := context.Background()
	e := compileEnv(t, st, `{"repo_url": "/srv/a.git", "recompile_interval": 3600}`)

	qs, err := st.CompileQueues(ctx)
	if err != nil || len(qs) != 1 || qs[0].Environment.ID != e.ID || qs[0].Waiting {
		t.Fatalf("compile queues = %+v %v, want %s (not waiting)", qs, err, e.Name)
	}
	take, err := st.TakeCompile(ctx, e.ID)
	if err != nil || take.Compile == nil || take.Compile.Reason != "schedule" {
		t.Fatalf("first take = %+v %v, want a schedule compile", take, err)
	}
	if take.NextSchedule != time.Hour {
		t.Errorf("next schedule in %v, want 1h", take.NextSchedule)
	}
	if _, err := st.FinishCompile(ctx, e.ID, take.Compile.ID, store.CompileFailed, nil, nil); err != nil {
		t.Fatal(err)
	}
	take, err = st.TakeCompile(ctx, e.ID)
	if err != nil || take.Compile != nil || take.NextSchedule <= 59*time.Minute || take.NextSchedule > time.Hour {
		t.Fatalf("take within the interval = %+v %v, want nothing, next in about 1h", take, err)
	}
	// An hour later (the request moved back in time), the timer is due.
	if _, err := conn.Exec(ctx, `update compiles set requested_at = requested_at - interval '61 minutes'`); err != nil {
		t.Fatal(err)
	}
	take, err = st.TakeCompile(ctx, e.ID)
	if err != nil || take.Compile == nil || take.Compile.Reason != "schedule" {
		t.Fatalf("take after the interval = %+v %v, want a schedule compile", take, err)
	}

	// A compile queued and none running: the reconciler should wake the
	// queue.
	if _, err := st.FinishCompile(ctx, e.ID, take.Compile.ID, store.CompileFailed, nil, nil); err != nil {
		t.Fatal(err)
	}
	e = updateSettings(t, st, e, `{"recompile_interval": 0}`)
	if qs, err := st.CompileQueues(ctx); err != nil || len(qs) != 0 {
		t.Fatalf("compile queues without timer or compiles = %+v %v", qs, err)
	}
	if _, _, err := st.RequestCompile(ctx, e.ID, "api"); err != nil {
		t.Fatal(err)
	}
	if qs, err := st.CompileQueues(ctx); err != nil || len(qs) != 1 || !qs[0].Waiting {
		t.Fatalf("compile queues = %+v %v, want one waiting", qs, err)
	}

	// repo_url emptied after the request: the take fails the compile.
	updateSettings(t, st, e, `{"repo_url": ""}`)
	take, err = st.TakeCompile(ctx, e.ID)
	if err != nil || take.Compile != nil {
		t.Fatalf("take without repo_url = %+v %v, want nothing", take, err)
	}
	list, err := st.ListCompiles(ctx, e.ID, 0, 1)
	if err != nil || len(list) != 1 || list[0].Status != store.CompileFailed ||
		!strings.Contains(string(list[0].Errors), "repo_url") {
		t.Fatalf("compile after repo_url was emptied = %+v %v", list, err)
	}
}
