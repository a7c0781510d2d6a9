package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/store"
)

// TestSetDeployWaitsForTheRun: a failure of a set's resource is the
// set's verdict only once the deploy run that recorded it has ended: the
// run may retry a transient failure and deploy it (issue 14, A.3, where
// an instance went to failed, or rolled back a good update, on a failure
// its own run then repaired).
func TestSetDeployWaitsForTheRun(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	v, err := intent.DecodeBytes([]byte(`{"resources": [{"id": "fs::File[h,path=/a]", "attributes": {"path": "/a"},
		"resource_set": "vm/i1"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.ExportPartial(ctx, e.ID, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReleaseVersion(ctx, e.ID, info.Version); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Minute)
	take, err := st.TakeRequests(ctx, e.ID, "setdeploy-"+e.Name, nil, false)
	if err != nil || take.Run == nil {
		t.Fatalf("take: %+v %v", take, err)
	}
	plan, err := st.PlanDeploy(ctx, e.ID, take.Run.Run, store.BatchLimits{MaxResources: 100}, store.Caller{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.LoadBatch(ctx, e.ID, take.Run.Run, plan.Batches[0].Seq)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	r := b.Resources[0]
	if err := st.RecordActions(ctx, e.ID, []store.ActionRecord{{ResourceID: r.ID, Hash: r.Hash, Version: b.Version,
		Action: "deploy", Reason: b.Reason, StartedAt: now, FinishedAt: now, Result: "failed", Error: "connection reset",
		ErrorClass: "transient", WorkflowID: take.Run.WorkflowID, RunID: "r", Attempt: 1}}); err != nil {
		t.Fatal(err)
	}
	sd, err := st.ResourceSetDeploy(ctx, e.ID, "vm/i1", since)
	if err != nil || sd.Total != 1 || sd.Failed != 0 || sd.Deployed != 0 {
		t.Errorf("while the run may retry: %+v %v, want pending (not failed)", sd, err)
	}
	if err := st.FinishRun(ctx, e.ID, take.Run.Run, "done", store.RunCounts{Failed: 1}); err != nil {
		t.Fatal(err)
	}
	if sd, err := st.ResourceSetDeploy(ctx, e.ID, "vm/i1", since); err != nil || sd.Failed != 1 {
		t.Errorf("once the run ended: %+v %v, want failed", sd, err)
	}
}
