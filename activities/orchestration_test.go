package activities

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.temporal.io/sdk/testsuite"

	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/store/storetest"
	"github.com/intendhq/intend/internal/telemetry"
	"github.com/intendhq/intend/workflows"
)

// TestFinishDeployObservesEachRunOnce: a retried FinishDeploy (its first
// answer lost) does not count the run twice in the duration histogram.
func TestFinishDeployObservesEachRunOnce(t *testing.T) {
	t.Parallel()
	st, e, run, _ := storetest.Released(t, storetest.Things(3))
	tel, err := telemetry.New()
	if err != nil {
		t.Fatal(err)
	}
	o := &Orchestration{Store: st, Metrics: tel}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(o.FinishDeploy)
	for i := 0; i < 2; i++ {
		if _, err := env.ExecuteActivity(o.FinishDeploy, workflows.FinishInput{
			EnvironmentID: e.ID, Run: run, Status: "done", Deployed: 3}); err != nil {
			t.Fatal(err)
		}
	}
	m := &dto.Metric{}
	h, err := tel.DeployRunDuration.GetMetricWithLabelValues(e.Name, "deploy", "done")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.(interface{ Write(*dto.Metric) error }).Write(m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetHistogram().GetSampleCount(); n != 1 {
		t.Errorf("run observed %d times, want once", n)
	}
	r, err := st.GetRun(t.Context(), e.ID, run)
	if err != nil || r.Status != "done" || r.Deployed != 3 {
		t.Errorf("run = %+v, %v", r, err)
	}
}

// TestMarkBatchKeepsWhatTheBatchRecorded: a batch given up on (its
// attempts ran out) after it recorded some resources is marked failed for
// the others only; a resource it changed is not reported failed.
func TestMarkBatchKeepsWhatTheBatchRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, e, run, plan := storetest.Released(t, storetest.Things(3))
	seq := plan.Batches[0].Seq
	b, err := st.LoadBatch(ctx, e.ID, run, seq)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var recs []store.ActionRecord
	for _, r := range b.Resources[:2] {
		recs = append(recs, store.ActionRecord{ResourceID: r.ID, Hash: r.Hash, Version: b.Version, Action: "deploy",
			StartedAt: now, FinishedAt: now, Result: "deployed", Operation: "create", Changed: true,
			WorkflowID: "default-test-workflow-id", RunID: "r", Attempt: 3})
	}
	if err := st.Ledger().RecordActions(ctx, e.ID, run, seq, recs, false); err != nil {
		t.Fatal(err)
	}
	o := &Orchestration{Store: st}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(o.MarkBatch)
	val, err := env.ExecuteActivity(o.MarkBatch, workflows.MarkBatchInput{EnvironmentID: e.ID, Run: run, Seq: seq,
		Result: "failed", Reason: "the batch's attempts ran out"})
	if err != nil {
		t.Fatal(err)
	}
	var out workflows.MarkBatchResult
	if err := val.Get(&out); err != nil {
		t.Fatal(err)
	}
	if out != (workflows.MarkBatchResult{Marked: 1, Deployed: 2}) {
		t.Errorf("MarkBatch = %+v, want 1 marked and the 2 recorded deployed", out)
	}
	acts, err := st.ListActions(ctx, e.ID, store.ActionFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]string{}
	for _, a := range acts {
		results[a.ResourceID] = a.Result
	}
	if len(acts) != 3 || results[b.Resources[0].ID] != "deployed" || results[b.Resources[1].ID] != "deployed" ||
		results[b.Resources[2].ID] != "failed" {
		t.Errorf("records = %v, want the two deployed kept and the third failed", results)
	}
}
