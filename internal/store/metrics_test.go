package store_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/intendhq/intend/internal/store"
)

// TestStateCounts: released resources are counted by environment,
// compliance and result, orphans are not, and every environment reports
// its queue depth, zero included.
func TestStateCounts(t *testing.T) {
	t.Parallel()
	st, _, conn := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	if _, err := st.CreateEnvironment(ctx, store.NewEnvironment{Project: "p", Name: "idle"}); err != nil {
		t.Fatal(err)
	}
	counts := func() store.StateCounts {
		t.Helper()
		c, err := st.StateCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	if c := counts(); len(c.Resources) != 0 || !reflect.DeepEqual(c.Queued, map[string]int{"e": 0, "idle": 0}) {
		t.Errorf("before any release: %+v, want no resources and two empty queues", c)
	}

	// Exported, not released: nothing to count.
	v1, err := st.ExportVersion(ctx, e.ID, files(t, 4, nil))
	if err != nil {
		t.Fatal(err)
	}
	if c := counts(); len(c.Resources) != 0 {
		t.Errorf("an exported version counted before its release: %+v", c.Resources)
	}
	if _, err := st.ReleaseVersion(ctx, e.ID, v1.Version); err != nil {
		t.Fatal(err)
	}
	c := counts()
	if want := []store.StateCount{{Environment: "e", Compliance: "has_update", Result: "new", Count: 4}}; !reflect.DeepEqual(c.Resources, want) {
		t.Errorf("after release: resources %+v, want %+v", c.Resources, want)
	}
	if want := map[string]int{"e": 1, "idle": 0}; !reflect.DeepEqual(c.Queued, want) {
		t.Errorf("after release: queued %v, want %v (auto_deploy queued one request)", c.Queued, want)
	}

	// The scheduler takes the request; one resource fails, the rest deploy.
	take, err := st.TakeRequests(ctx, e.ID, "t", nil, false)
	if err != nil || take.Run == nil {
		t.Fatalf("take = %+v, %v", take, err)
	}
	if _, err := conn.Exec(ctx, `update resource_state set deployed_hash = intent_hash, last_result = 'deployed',
		compliance = 'compliant' where resource_id <> 'fs::File[h,path=/f0]'`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `update resource_state set last_result = 'failed', compliance = 'non_compliant'
		where resource_id = 'fs::File[h,path=/f0]'`); err != nil {
		t.Fatal(err)
	}
	// v2 drops f3: it stays in resource_state as an orphan, uncounted.
	v2, err := st.ExportVersion(ctx, e.ID, files(t, 3, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReleaseVersion(ctx, e.ID, v2.Version); err != nil {
		t.Fatal(err)
	}
	c = counts()
	want := []store.StateCount{
		{Environment: "e", Compliance: "compliant", Result: "deployed", Count: 2},
		{Environment: "e", Compliance: "non_compliant", Result: "failed", Count: 1},
	}
	if !reflect.DeepEqual(c.Resources, want) {
		t.Errorf("after v2: resources %+v, want %+v (the orphan f3 left out)", c.Resources, want)
	}
	if n := count(t, conn, `select count(*) from resource_state where intent_hash is null`); n != 1 {
		t.Errorf("%d orphans, want 1: the test no longer checks that orphans are left out", n)
	}
	if want := map[string]int{"e": 1, "idle": 0}; !reflect.DeepEqual(c.Queued, want) {
		t.Errorf("after v2: queued %v, want %v (the taken request gone, v2's queued)", c.Queued, want)
	}
}

// TestRunTiming: a run's timing names its environment and has a duration
// once it is finished.
func TestRunTiming(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	started := startRun(t, st, e.ID, files(t, 1, nil))
	run := started.Run

	before, err := st.RunTiming(ctx, e.ID, run)
	if err != nil {
		t.Fatal(err)
	}
	if before.EnvironmentName != "e" || before.Action != "deploy" || before.Status != "pending" ||
		before.FinishedAt != nil || before.Duration() != 0 || before.RequestedAt.IsZero() {
		t.Errorf("open run timing = %+v, want e/deploy/pending, unfinished", before)
	}
	if err := st.FinishRun(ctx, e.ID, run, "done", store.RunCounts{Deployed: 1}); err != nil {
		t.Fatal(err)
	}
	done, err := st.RunTiming(ctx, e.ID, run)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != "done" || done.FinishedAt == nil || done.Duration() < 0 || !done.RequestedAt.Equal(before.RequestedAt) {
		t.Errorf("finished run timing = %+v, want done with finished_at after requested_at", done)
	}

	if _, err := st.RunTiming(ctx, e.ID, run+100); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("timing of a missing run: %v, want ErrNotFound", err)
	}
}
