package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/ledger"
)

// TestBatchesInFlightRecordWithoutWaitingForEachOther: the records of a
// run's batches move their own batch's live counters, not the run's row
// (issue 28: every chunk of every batch in flight updated that row, so
// the chunks waited for each other's commits: the top statement by time
// over intend-bench's P1–P5). A chunk of one batch is recorded while
// another batch's chunk is still open; the run shows both as it runs,
// and its totals once finished.
func TestBatchesInFlightRecordWithoutWaitingForEachOther(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, e, _ := internalEnv(t, "e")
	var body strings.Builder
	body.WriteString(`{"resources":[`)
	for i := range 20 {
		if i > 0 {
			body.WriteString(",")
		}
		a := []string{"a", "b"}[i%2]
		fmt.Fprintf(&body, `{"id":"fs::File[%s,path=/f%d]","attributes":{"path":"/f%d","content":"x"}}`, a, i, i)
	}
	taken := releasedRun(t, st, e, body.String()+"]}")
	run := taken.Run
	p, err := st.PlanDeploy(ctx, e.ID, run, DefaultBatchLimits, Caller{})
	if err != nil || len(p.Batches) != 2 {
		t.Fatalf("plan = %+v, %v; want a batch of a and one of b", p.Batches, err)
	}
	recsOf := func(seq int, result ledger.Result) []ActionRecord {
		b, err := st.LoadBatch(ctx, e.ID, run, seq)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		var recs []ActionRecord
		for _, r := range b.Resources {
			recs = append(recs, ActionRecord{ResourceID: r.ID, Hash: r.Hash, Version: b.Version, Action: ledger.ActionDeploy,
				Reason: "test", StartedAt: now, FinishedAt: now, Result: result, WorkflowID: taken.WorkflowID,
				RunID: "r", Attempt: 1, Batch: seq})
		}
		return recs
	}
	first, second := recsOf(p.Batches[0].Seq, ledger.ResultDeployed), recsOf(p.Batches[1].Seq, ledger.ResultFailed)

	tx, err := st.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := recordActions(ctx, tx, e.ID, first, true); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := st.RecordActions(wctx, e.ID, second); err != nil {
		t.Fatalf("the second batch's chunk, while the first's is open: %v (it waited for it)", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := st.GetRun(ctx, e.ID, run)
	if err != nil || r.Status != "running" || r.Deployed != 10 || r.Failed != 10 {
		t.Fatalf("running run = %+v, %v; want 10 deployed and 10 failed so far", r, err)
	}
	if runs, err := st.ListRuns(ctx, e.ID, 10); err != nil || len(runs) != 1 || runs[0].Deployed != 10 || runs[0].Failed != 10 {
		t.Errorf("list of runs = %+v, %v; want the run's live counters", runs, err)
	}
	if err := st.FinishRun(ctx, e.ID, run, "done", RunCounts{Deployed: 10, Failed: 10}); err != nil {
		t.Fatal(err)
	}
	if r, err := st.GetRun(ctx, e.ID, run); err != nil || r.Deployed != 10 || r.Failed != 10 {
		t.Errorf("finished run = %+v, %v; want its totals", r, err)
	}
}
