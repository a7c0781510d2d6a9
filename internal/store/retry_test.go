package store_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/store"
)

// TestPlanRetry: a retry batch holds exactly the resources whose attempt
// failed with a transient or throttled error or was skipped for a
// dependency, in the batch's order; planning it again changes nothing; and
// a re-plan of the run (after continue-as-new) neither counts nor re-runs
// it.
func TestPlanRetry(t *testing.T) {
	t.Parallel()
	st, _, _ := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	started := startRun(t, st, e.ID, files(t, 6, nil))
	run := started.Run
	p, err := st.PlanDeploy(ctx, e.ID, run, store.DefaultBatchLimits, store.Caller{})
	if err != nil || len(p.Batches) != 1 || p.NextSeq != 2 {
		t.Fatalf("plan = %+v, %v; want one batch and NextSeq 2", p, err)
	}
	b, err := st.LoadBatch(ctx, e.ID, run, p.Batches[0].Seq)
	if err != nil {
		t.Fatal(err)
	}
	outcome := []struct{ result, class string }{
		{"deployed", ""}, {"failed", "transient"}, {"failed", "permanent"},
		{"skipped_for_dependency", ""}, {"failed", "throttled"}, {"skipped", ""},
	}
	now := time.Now()
	var recs []store.ActionRecord
	for i, r := range b.Resources {
		recs = append(recs, store.ActionRecord{ResourceID: r.ID, Hash: r.Hash, Version: b.Version, Action: "deploy",
			Reason: "test", StartedAt: now, FinishedAt: now, Result: ledger.Result(outcome[i].result), ErrorClass: outcome[i].class,
			WorkflowID: started.WorkflowID, RunID: "r", Attempt: 1})
	}
	if err := st.RecordActions(ctx, e.ID, recs); err != nil {
		t.Fatal(err)
	}
	// The live counters, as the API reads them (the run's row and its
	// batches').
	counters := func() (failed, skipped int) {
		t.Helper()
		r, err := st.GetRun(ctx, e.ID, run)
		if err != nil {
			t.Fatal(err)
		}
		return r.Failed, r.Skipped
	}
	if f, s := counters(); f != 3 || s != 2 {
		t.Fatalf("live counters failed=%d skipped=%d before the retry, want 3 and 2", f, s)
	}

	rp, err := st.PlanRetry(ctx, e.ID, run, []int{p.Batches[0].Seq}, p.NextSeq)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{b.Resources[1].ID, b.Resources[3].ID, b.Resources[4].ID}
	if len(rp.Batches) != 1 || rp.Batches[0].Seq != 2 || rp.Batches[0].Count != 3 || rp.Failed != 2 || rp.Skipped != 1 {
		t.Fatalf("retry plan = %+v, want one batch 2 of 3 (2 failed, 1 skipped)", rp)
	}
	rb, err := st.LoadBatch(ctx, e.ID, run, 2)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rb.Resources {
		got = append(got, r.ID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("retry batch holds %v, want %v (transient, skipped, throttled; in order)", got, want)
	}
	if f, s := counters(); f != 1 || s != 1 {
		t.Fatalf("live counters failed=%d skipped=%d after planning the retry, want 1 and 1", f, s)
	}

	again, err := st.PlanRetry(ctx, e.ID, run, []int{p.Batches[0].Seq}, p.NextSeq)
	if err != nil || !reflect.DeepEqual(again.Batches, rp.Batches) || again.Failed != 2 {
		t.Fatalf("PlanRetry again = %+v, %v; want the same plan", again, err)
	}
	if f, s := counters(); f != 1 || s != 1 {
		t.Fatalf("a repeated PlanRetry moved the counters again: failed=%d skipped=%d", f, s)
	}

	re, err := st.PlanDeploy(ctx, e.ID, run, store.DefaultBatchLimits, store.Caller{})
	if err != nil || len(re.Batches) != 1 || re.Total != 6 || re.NextSeq != 3 {
		t.Fatalf("re-plan = %+v, %v; want the plan's one batch of 6 and NextSeq 3", re, err)
	}

	// Once the retry succeeded, there is nothing left to retry.
	recs = recs[:0]
	for _, r := range rb.Resources {
		recs = append(recs, store.ActionRecord{ResourceID: r.ID, Hash: r.Hash, Version: b.Version, Action: "deploy",
			Reason: "test", StartedAt: now, FinishedAt: now, Result: "deployed",
			WorkflowID: started.WorkflowID, RunID: "r", Attempt: 1})
	}
	if err := st.RecordActions(ctx, e.ID, recs); err != nil {
		t.Fatal(err)
	}
	none, err := st.PlanRetry(ctx, e.ID, run, []int{2}, 3)
	if err != nil || len(none.Batches) != 0 {
		t.Fatalf("PlanRetry after success = %+v, %v; want nothing", none, err)
	}
}

// TestPlanRetryTakesUnreachableTargets: a resource whose adapter could not
// reach its target (result and class unavailable) is retried in the run
// like a transient failure, and leaves the run's live unavailable counter
// while its retry runs.
func TestPlanRetryTakesUnreachableTargets(t *testing.T) {
	t.Parallel()
	st, _, _ := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	started := startRun(t, st, e.ID, files(t, 3, nil))
	run := started.Run
	p, err := st.PlanDeploy(ctx, e.ID, run, store.DefaultBatchLimits, store.Caller{})
	if err != nil || len(p.Batches) != 1 {
		t.Fatalf("plan = %+v, %v; want one batch", p, err)
	}
	b, err := st.LoadBatch(ctx, e.ID, run, p.Batches[0].Seq)
	if err != nil {
		t.Fatal(err)
	}
	outcome := []struct{ result, class string }{{"deployed", ""}, {"unavailable", "unavailable"}, {"failed", "permanent"}}
	now := time.Now()
	var recs []store.ActionRecord
	for i, r := range b.Resources {
		recs = append(recs, store.ActionRecord{ResourceID: r.ID, Hash: r.Hash, Version: b.Version, Action: "deploy",
			Reason: "test", StartedAt: now, FinishedAt: now, Result: ledger.Result(outcome[i].result), ErrorClass: outcome[i].class,
			Error: "unreachable", WorkflowID: started.WorkflowID, RunID: "r", Attempt: 1})
	}
	if err := st.RecordActions(ctx, e.ID, recs); err != nil {
		t.Fatal(err)
	}
	unavailable := func() int {
		t.Helper()
		r, err := st.GetRun(ctx, e.ID, run)
		if err != nil {
			t.Fatal(err)
		}
		return r.Unavailable
	}
	if n := unavailable(); n != 1 {
		t.Fatalf("live unavailable = %d before the retry, want 1", n)
	}
	rp, err := st.PlanRetry(ctx, e.ID, run, []int{p.Batches[0].Seq}, p.NextSeq)
	if err != nil {
		t.Fatal(err)
	}
	if len(rp.Batches) != 1 || rp.Batches[0].Count != 1 || rp.Batches[0].First != b.Resources[1].ID ||
		rp.Unavailable != 1 || rp.Failed != 0 {
		t.Fatalf("retry plan = %+v, want one batch of the unreachable resource", rp)
	}
	if n := unavailable(); n != 0 {
		t.Fatalf("live unavailable = %d after planning the retry, want 0", n)
	}
}

// TestPlanRetryTakesAdapterSkips: a resource its adapter skipped for now
// (result skipped, class skipped: adapters.Skipped) is retried in the run
// like a throttled failure, and so is what was skipped because of it; a
// report-only resource that differs (skipped, no class) is not.
func TestPlanRetryTakesAdapterSkips(t *testing.T) {
	t.Parallel()
	st, _, _ := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	started := startRun(t, st, e.ID, files(t, 4, nil))
	run := started.Run
	p, err := st.PlanDeploy(ctx, e.ID, run, store.DefaultBatchLimits, store.Caller{})
	if err != nil || len(p.Batches) != 1 {
		t.Fatalf("plan = %+v, %v; want one batch", p, err)
	}
	b, err := st.LoadBatch(ctx, e.ID, run, p.Batches[0].Seq)
	if err != nil {
		t.Fatal(err)
	}
	outcome := []struct{ result, class string }{{"deployed", ""}, {"skipped", "skipped"},
		{"skipped_for_dependency", ""}, {"skipped", ""}}
	now := time.Now()
	var recs []store.ActionRecord
	for i, r := range b.Resources {
		recs = append(recs, store.ActionRecord{ResourceID: r.ID, Hash: r.Hash, Version: b.Version, Action: "deploy",
			Reason: "test", StartedAt: now, FinishedAt: now, Result: ledger.Result(outcome[i].result), ErrorClass: outcome[i].class,
			Error: "in maintenance", WorkflowID: started.WorkflowID, RunID: "r", Attempt: 1})
	}
	if err := st.RecordActions(ctx, e.ID, recs); err != nil {
		t.Fatal(err)
	}
	rp, err := st.PlanRetry(ctx, e.ID, run, []int{p.Batches[0].Seq}, p.NextSeq)
	if err != nil {
		t.Fatal(err)
	}
	if len(rp.Batches) != 1 || rp.Batches[0].Count != 2 || rp.Batches[0].First != b.Resources[1].ID ||
		rp.Skipped != 2 || rp.Failed != 0 {
		t.Fatalf("retry plan = %+v, want one batch of the adapter's skip and its dependent", rp)
	}
}
