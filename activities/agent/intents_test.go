package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/workflows"
)

// intentLedger is the store's ledger that also keeps the intents it
// recorded and counts its writes of them.
type intentLedger struct {
	ledger.Ledger
	mu       sync.Mutex
	intended map[string]string
	writes   int
}

func (l *intentLedger) RecordIntents(ctx context.Context, envID string, run int64, seq int, ins []ledger.Intent) error {
	if err := l.Ledger.RecordIntents(ctx, envID, run, seq, ins); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	for _, in := range ins {
		l.intended[in.ResourceID] = in.Operation
	}
	return nil
}

// intendedFirst fails a change whose intent the ledger has not recorded.
type intendedFirst struct {
	*thing
	l *intentLedger
}

func (h intendedFirst) Create(ctx context.Context, hc *adapters.Context, r adapters.Resource) error {
	h.l.mu.Lock()
	op := h.l.intended[r.ID.String()]
	h.l.mu.Unlock()
	if op != "create" {
		return adapters.Permanent(errors.New("created before its intent was recorded"))
	}
	return h.thing.Create(ctx, hc, r)
}

// TestExecuteBatchRecordsWhatADeadAttemptDid: attempt 1 of a batch of 250
// new resources recorded its first chunk, recorded its intent to create
// t100–t149 and created them, and died before recording them. Attempt 2
// finds them in place and records them as created (by the attempt that
// died), not as found in place; t150–t199, there before the run with no
// intent, stay "none"; t200–t249 it creates itself, each after its
// intent is recorded, the intents written a wave at a time.
func TestExecuteBatchRecordsWhatADeadAttemptDid(t *testing.T) {
	t.Parallel()
	st, e, run, plan := setup(t, 250)
	ctx := context.Background()
	seq := plan.Batches[0].Seq
	const wf = "default-test-workflow-id" // the test environment's workflow
	h := &thing{state: map[string]string{}, calls: map[string]int{}}
	for i := 100; i < 200; i++ {
		h.state[fmt.Sprintf("t%03d", i)] = "1"
	}
	l := &intentLedger{Ledger: st.Ledger(), intended: map[string]string{}}
	b, err := st.LoadBatch(ctx, e.ID, run, seq)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var earlier []store.ActionRecord
	var dead []ledger.Intent
	for i, r := range b.Resources[:150] {
		if i >= 100 {
			dead = append(dead, ledger.Intent{ResourceID: r.ID, Operation: "create", WorkflowID: wf, Attempt: 1})
			continue
		}
		earlier = append(earlier, store.ActionRecord{ResourceID: r.ID, Hash: r.Hash, Version: b.Version, Action: "deploy",
			Reason: b.Reason, StartedAt: now, FinishedAt: now, Result: "deployed", Operation: "create", Changed: true,
			WorkflowID: wf, RunID: "earlier", Attempt: 1})
	}
	// t000–t099 too had their intents recorded: recorded outcomes win.
	for _, r := range b.Resources[:100] {
		dead = append(dead, ledger.Intent{ResourceID: r.ID, Operation: "update", WorkflowID: wf, Attempt: 1})
	}
	if err := st.Ledger().RecordIntents(ctx, e.ID, run, seq, dead); err != nil {
		t.Fatal(err)
	}
	if err := st.Ledger().RecordActions(ctx, e.ID, run, seq, earlier, false); err != nil {
		t.Fatal(err)
	}

	reg := adapters.NewRegistry()
	reg.Register("test::Thing", intendedFirst{h, l})
	ex := &Executor{Ledger: l, Adapters: reg, Concurrency: 8}
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(ex.ExecuteBatch)
	env.SetHeartbeatDetails(batchProgress{Done: 100, Result: workflows.BatchResult{Deployed: 100}})
	val, err := env.ExecuteActivity(ex.ExecuteBatch, workflows.BatchInput{
		EnvironmentID: e.ID, EnvironmentName: e.Name, Run: run, Seq: seq, Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.BatchResult
	if err := val.Get(&res); err != nil {
		t.Fatal(err)
	}
	if res.Deployed != 250 || res.Changed != 200 {
		t.Errorf("result = %+v, want 250 deployed, 200 changed (all but t150–t199, there before)", res)
	}
	got, err := st.BatchRecorded(ctx, e.ID, wf, seq, b.Resources)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range b.Resources {
		if want := i < 150 || i >= 200; got[r.ID].Changed != want {
			t.Errorf("%s: recorded changed = %v, want %v", r.ID, got[r.ID].Changed, want)
		}
	}
	acts, err := st.ListActions(ctx, e.ID, store.ActionFilter{ResourceID: "test::Thing[a,name=t120]", Limit: 5})
	if err != nil || len(acts) != 1 || !strings.Contains(string(acts[0].Logs), "the attempt that died") ||
		!strings.Contains(string(acts[0].Logs), `"create"`) || acts[0].Attempt != 1 {
		// The test environment runs the activity as attempt 1.
		t.Errorf("t120's actions = %+v, %v; want one saying the attempt that died created it", acts, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.intended) != 50 || l.writes >= 50 {
		t.Errorf("%d intents in %d writes; want t200–t249's 50, in waves", len(l.intended), l.writes)
	}
	t.Logf("%d intents in %d writes", len(l.intended), l.writes)
}
