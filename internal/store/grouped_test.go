package store_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/store"
)

// TestPlanDeployGroupedStoresAgents: the agents of one group share a
// batch (issue 28), which names them all wherever a batch is read: the
// plan, a repeat of it, the batch an executor loads, its head (what the
// executor API checks the token against), and its retry batch.
func TestPlanDeployGroupedStoresAgents(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	var body strings.Builder
	body.WriteString(`{"resources":[`)
	for i, a := range []string{"b", "a", "c", "b", "a", "c"} {
		if i > 0 {
			body.WriteString(",")
		}
		fmt.Fprintf(&body, `{"id":"fs::File[%s,path=/f%d]","attributes":{"path":"/f%d","content":"x"}}`, a, i, i)
	}
	v, err := intent.DecodeBytes([]byte(body.String() + "]}"))
	if err != nil {
		t.Fatal(err)
	}
	run := startRun(t, st, e.ID, v)
	var asked []string
	group := func(_ context.Context, agents []string) (map[string]string, error) {
		asked = slices.Sorted(slices.Values(agents))
		return map[string]string{"a": "executors/e/embedded", "b": "executors/e/embedded"}, nil // c: its own
	}
	p, err := st.PlanDeployGrouped(ctx, e.ID, run.Run, store.DefaultBatchLimits, store.Caller{}, group)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(asked, []string{"a", "b", "c"}) {
		t.Errorf("the grouper was asked about %v, want a, b and c", asked)
	}
	var shared store.BatchRef
	for _, b := range p.Batches {
		if len(b.Agents) > 0 {
			shared = b
		}
	}
	if len(p.Batches) != 2 || shared.Count != 4 || shared.Agent != "a" || !slices.Equal(shared.Agents, []string{"a", "b"}) {
		t.Fatalf("batches = %+v, want one of agents a and b (4 files) and one of c", p.Batches)
	}
	again, err := st.PlanDeployGrouped(ctx, e.ID, run.Run, store.DefaultBatchLimits, store.Caller{}, nil)
	if err != nil || !reflect.DeepEqual(again.Batches, p.Batches) {
		t.Errorf("repeated plan = %+v, %v; want %+v", again.Batches, err, p.Batches)
	}
	b, err := st.LoadBatch(ctx, e.ID, run.Run, shared.Seq)
	if err != nil || !slices.Equal(b.AgentsOf(), []string{"a", "b"}) || len(b.Resources) != 4 {
		t.Fatalf("loaded batch of agents %v, %d resources, %v; want a and b, 4", b.AgentsOf(), len(b.Resources), err)
	}
	h, err := st.BatchHead(ctx, e.ID, run.Run, shared.Seq, nil)
	if err != nil || !slices.Equal(h.AgentsOf(), []string{"a", "b"}) {
		t.Errorf("head of agents %v, %v; want a and b", h.AgentsOf(), err)
	}

	// A transient failure of b's file: its retry batch is the batch's
	// agents' (the route they were planned to).
	now := time.Now()
	var recs []store.ActionRecord
	for _, r := range b.Resources {
		rec := store.ActionRecord{ResourceID: r.ID, Hash: r.Hash, Version: b.Version, Action: "deploy", Reason: "test",
			StartedAt: now, FinishedAt: now, Result: ledger.ResultDeployed, WorkflowID: run.WorkflowID, RunID: "r", Attempt: 1}
		if strings.HasPrefix(r.ID, "fs::File[b,") {
			rec.Result, rec.ErrorClass = ledger.ResultFailed, "transient"
		}
		recs = append(recs, rec)
	}
	if err := st.RecordActions(ctx, e.ID, recs); err != nil {
		t.Fatal(err)
	}
	rp, err := st.PlanRetry(ctx, e.ID, run.Run, []int{shared.Seq}, p.NextSeq)
	if err != nil || len(rp.Batches) != 1 || rp.Batches[0].Count != 2 || !slices.Equal(rp.Batches[0].Agents, []string{"a", "b"}) {
		t.Fatalf("retry plan = %+v, %v; want one batch of b's 2 files, of agents a and b", rp, err)
	}
	rb, err := st.LoadBatch(ctx, e.ID, run.Run, rp.Batches[0].Seq)
	if err != nil || !slices.Equal(rb.Agents, []string{"a", "b"}) {
		t.Errorf("retry batch of agents %v, %v; want a and b", rb.Agents, err)
	}
}
