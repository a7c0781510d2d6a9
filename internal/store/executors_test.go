package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/store"
)

// TestExecutorRegistration: reports make an executor live and list its
// agents; a quiet one goes not live, a stopped one leaves its agents, a
// report revives it, and a long-gone one is forgotten.
func TestExecutorRegistration(t *testing.T) {
	t.Parallel()
	st, _, conn := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	rep := store.ExecutorReport{Name: "web-1", Hostname: "web", PID: 42, Version: "v1",
		Agents: []string{"a", "b"}, First: true}
	if err := st.ReportExecutor(ctx, e.Name, rep); err != nil {
		t.Fatal(err)
	}
	if err := st.ReportExecutor(ctx, "no-such-env", rep); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("report to an unknown environment: %v, want ErrNotFound", err)
	}
	list := func() []store.Executor {
		t.Helper()
		xs, err := st.ListExecutors(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		return xs
	}
	xs := list()
	if len(xs) != 1 || xs[0].Name != "web-1" || xs[0].Hostname != "web" || xs[0].PID != 42 || xs[0].Version != "v1" ||
		!slices.Equal(xs[0].Agents, []string{"a", "b"}) || !xs[0].Live || xs[0].StoppedAt != nil {
		t.Fatalf("executors = %+v", xs)
	}
	started := xs[0].StartedAt

	// A heartbeat keeps started_at and takes the new agents.
	rep.First, rep.Agents = false, []string{"b"}
	if err := st.ReportExecutor(ctx, e.Name, rep); err != nil {
		t.Fatal(err)
	}
	if xs = list(); !xs[0].StartedAt.Equal(started) || !slices.Equal(xs[0].Agents, []string{"b"}) {
		t.Errorf("after a heartbeat: %+v, want started_at %v and agents [b]", xs[0], started)
	}

	// A second executor of agent b, quiet for longer than three heartbeats.
	other := store.ExecutorReport{Name: "web-2", Hostname: "web2", PID: 7, Version: "v1", Agents: []string{"b"}, First: true}
	if err := st.ReportExecutor(ctx, e.Name, other); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `update executors set last_seen = now() - interval '31 seconds' where name = 'web-2'`); err != nil {
		t.Fatal(err)
	}
	by := store.AgentExecutors(list())
	if len(by["b"]) != 2 || by["b"][0].Name != "web-1" || !by["b"][0].Live || by["b"][1].Name != "web-2" || by["b"][1].Live {
		t.Errorf("executors of b = %+v, want web-1 live and web-2 not live", by["b"])
	}

	// A clean stop: listed as stopped, no longer serving.
	if err := st.StopExecutor(ctx, "web-1", []string{e.Name}); err != nil {
		t.Fatal(err)
	}
	xs = list()
	if xs[0].StoppedAt == nil || xs[0].Live {
		t.Errorf("after stop: %+v, want stopped and not live", xs[0])
	}
	if by := store.AgentExecutors(xs); len(by["b"]) != 1 || by["b"][0].Name != "web-2" {
		t.Errorf("executors of b after web-1 stopped = %+v, want web-2 only", by["b"])
	}

	// Reporting again revives it; a report forgets executors unseen for a day.
	if _, err := conn.Exec(ctx, `update executors set last_seen = now() - interval '25 hours' where name = 'web-2'`); err != nil {
		t.Fatal(err)
	}
	rep.First = true
	if err := st.ReportExecutor(ctx, e.Name, rep); err != nil {
		t.Fatal(err)
	}
	if xs = list(); len(xs) != 1 || xs[0].Name != "web-1" || !xs[0].Live || xs[0].StoppedAt != nil {
		t.Errorf("after a new start: %+v, want web-1 alone and live", xs)
	}
}

// TestActionRecordsNameTheExecutor: the executor column is stored and
// listed; records without one keep it empty.
func TestActionRecordsNameTheExecutor(t *testing.T) {
	t.Parallel()
	st, _, conn := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	now := time.Now().UTC()
	rec := func(rid, executor string) store.ActionRecord {
		return store.ActionRecord{ResourceID: rid, Hash: []byte("h"), Version: 1, Action: "deploy", Reason: "test",
			StartedAt: now, FinishedAt: now, Result: "deployed", WorkflowID: "wf", RunID: "run", Attempt: 1,
			Executor: executor}
	}
	if err := st.RecordActions(ctx, e.ID, []store.ActionRecord{rec("fs::File[a,path=/a]", "web-1"),
		rec("fs::File[a,path=/b]", "")}); err != nil {
		t.Fatal(err)
	}
	acts, err := st.ListActions(ctx, e.ID, store.ActionFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range acts {
		got[a.ResourceID] = a.Executor
	}
	if got["fs::File[a,path=/a]"] != "web-1" || got["fs::File[a,path=/b]"] != "" || len(got) != 2 {
		t.Errorf("executors of the records = %v", got)
	}
	if n := count(t, conn, `select count(*) from resource_actions where executor is null`); n != 1 {
		t.Errorf("%d records with a null executor, want 1 (an empty name is stored as null)", n)
	}
}

// TestOpenRunVersions: a version is deployed while a run of it is pending
// or running, and no more once the run is done.
func TestOpenRunVersions(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	started := startRun(t, st, e.ID, files(t, 2, nil))
	versions, err := st.OpenRunVersions(ctx, []string{e.ID, "not-a-uuid"})
	if err != nil {
		t.Fatal(err)
	}
	if !versions[e.ID][started.Version] || len(versions) != 1 {
		t.Fatalf("open = %v, want version %d of %s", versions, started.Version, e.ID)
	}
	if err := st.FinishRun(ctx, e.ID, started.Run, "done", store.RunCounts{}); err != nil {
		t.Fatal(err)
	}
	if versions, err = st.OpenRunVersions(ctx, []string{e.ID}); err != nil || len(versions) != 0 {
		t.Errorf("after the run finished: %v, %v; want nothing open", versions, err)
	}
}

// TestExecutorBoundHoldsUnderConcurrency: registrations of one owner sent
// at once are counted one after the other, so no more than
// MaxExecutorsPerOwner of them pass, and the rest are ExecutorLimitErrors.
func TestExecutorBoundHoldsUnderConcurrency(t *testing.T) {
	t.Parallel()
	st, _, _ := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	by := store.Registrant{Owner: store.TokenOwner("00000000-0000-4000-8000-000000000001")}
	const n = store.MaxExecutorsPerOwner + 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = st.RegisterExecutor(ctx, e.Name, store.ExecutorReport{Name: fmt.Sprintf("x-%d", i), Agents: []string{"a"}}, by)
		})
	}
	wg.Wait()
	ok, limited := 0, 0
	for _, err := range errs {
		var le *store.ExecutorLimitError
		switch {
		case err == nil:
			ok++
		case errors.As(err, &le):
			limited++
		default:
			t.Errorf("registration: %v", err)
		}
	}
	xs, err := st.ListExecutors(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ok != store.MaxExecutorsPerOwner || limited != n-ok || len(xs) != store.MaxExecutorsPerOwner {
		t.Errorf("%d registered, %d refused, %d listed; want %d, %d, %d", ok, limited, len(xs),
			store.MaxExecutorsPerOwner, n-store.MaxExecutorsPerOwner, store.MaxExecutorsPerOwner)
	}
}

// TestPruneForgetsExecutors: the periodic prune forgets registrations
// stopped or unseen for ExecutorForgetAfter, also in an environment that
// no executor reports to any more (a report forgets them only in its
// own), and keeps the others.
func TestPruneForgetsExecutors(t *testing.T) {
	t.Parallel()
	st, _, conn := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	for _, name := range []string{"old-stopped", "old-killed", "recent"} {
		if err := st.ReportExecutor(ctx, e.Name, store.ExecutorReport{Name: name, Agents: []string{"a"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.StopExecutor(ctx, "old-stopped", []string{e.Name}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `update executors set last_seen = now() - interval '25 hours' where name like 'old-%'`); err != nil {
		t.Fatal(err)
	}
	env, err := st.GetEnvironment(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.PruneEnvironment(ctx, env, store.PruneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	xs, err := st.ListExecutors(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if p[store.TableExecutors] != 2 || len(xs) != 1 || xs[0].Name != "recent" {
		t.Errorf("pruned %v, left %+v; want 2 executors pruned and recent left", p, xs)
	}
}
