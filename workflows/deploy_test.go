package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// fakeActivities records what the workflow asked for; the plan and the
// batch outcomes are set per test.
type fakeActivities struct {
	plan     PlanResult
	outcome  func(in BatchInput) (BatchResult, error)
	mu       sync.Mutex
	started  []int // batch seqs in dispatch order
	running  int
	maxSeen  int
	levelOf  map[int]int
	doneLvl  map[int]int // level -> batches finished
	marked   []MarkBatchInput
	finished *FinishInput
	orderErr error
	// planRetry answers PlanRetry (nil: no retry batches).
	planRetry func(in PlanRetryInput) (PlanRetryResult, error)
	retries   []PlanRetryInput
}

func (f *fakeActivities) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivityWithOptions(func(ctx context.Context, in PlanInput) (PlanResult, error) {
		return f.plan, nil
	}, activity.RegisterOptions{Name: PlanDeployActivity})
	env.RegisterActivityWithOptions(func(ctx context.Context, in BatchInput) (BatchResult, error) {
		f.mu.Lock()
		lvl := f.levelOf[in.Seq]
		for l := 0; l < lvl; l++ {
			if f.doneLvl[l] < f.countLevel(l) && f.orderErr == nil {
				f.orderErr = errors.New("a batch started before the level it depends on finished")
			}
		}
		f.started = append(f.started, in.Seq)
		f.running++
		f.maxSeen = max(f.maxSeen, f.running)
		f.mu.Unlock()
		time.Sleep(5 * time.Millisecond) // let concurrent batches overlap
		res, err := f.outcome(in)
		f.mu.Lock()
		f.running--
		f.doneLvl[lvl]++
		f.mu.Unlock()
		return res, err
	}, activity.RegisterOptions{Name: ExecuteBatchActivity})
	env.RegisterActivityWithOptions(func(ctx context.Context, in MarkBatchInput) error {
		f.mu.Lock()
		f.marked = append(f.marked, in)
		f.mu.Unlock()
		return nil
	}, activity.RegisterOptions{Name: MarkBatchActivity})
	env.RegisterActivityWithOptions(func(ctx context.Context, in PlanRetryInput) (PlanRetryResult, error) {
		f.mu.Lock()
		f.retries = append(f.retries, in)
		f.mu.Unlock()
		if f.planRetry == nil {
			return PlanRetryResult{}, nil
		}
		return f.planRetry(in)
	}, activity.RegisterOptions{Name: PlanRetryActivity})
	env.RegisterActivityWithOptions(func(ctx context.Context, in FinishInput) error {
		f.finished = &in
		return nil
	}, activity.RegisterOptions{Name: FinishDeployActivity})
}

func (f *fakeActivities) countLevel(l int) int {
	n := 0
	for _, b := range f.plan.Batches {
		if b.Level == l {
			n++
		}
	}
	return n
}

func newFake(batches []BatchRef) *fakeActivities {
	f := &fakeActivities{levelOf: map[int]int{}, doneLvl: map[int]int{}}
	total := 0
	for _, b := range batches {
		f.levelOf[b.Seq] = b.Level
		total += b.Count
	}
	f.plan = PlanResult{Version: 7, Action: "deploy", Total: total, Batches: batches}
	f.outcome = func(in BatchInput) (BatchResult, error) {
		for _, b := range batches {
			if b.Seq == in.Seq {
				return BatchResult{Deployed: b.Count, Changed: b.Count}, nil
			}
		}
		return BatchResult{}, errors.New("unknown batch")
	}
	return f
}

func run(t *testing.T, f *fakeActivities, in DeployInput) (DeployResult, error) {
	t.Helper()
	return runWith(t, f, in, nil)
}

// runWith is run with a hook to set listeners or delayed callbacks on the
// test environment before the workflow starts.
func runWith(t *testing.T, f *fakeActivities, in DeployInput, setup func(env *testsuite.TestWorkflowEnvironment)) (DeployResult, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Deploy, workflowRegisterOptions())
	f.register(env)
	if setup != nil {
		setup(env)
	}
	env.ExecuteWorkflow(DeployWorkflowName, in)
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	var res DeployResult
	err := env.GetWorkflowError()
	if err == nil {
		if gerr := env.GetWorkflowResult(&res); gerr != nil {
			t.Fatal(gerr)
		}
	}
	return res, err
}

func TestDeployRespectsLevelsAndConcurrency(t *testing.T) {
	t.Parallel()
	var batches []BatchRef
	seq := 1
	for level := 0; level < 3; level++ {
		for i := 0; i < 5; i++ {
			batches = append(batches, BatchRef{Seq: seq, Agent: "a", Level: level, Count: 10, First: "x"})
			seq++
		}
	}
	f := newFake(batches)
	res, err := run(t, f, DeployInput{EnvironmentID: "e", EnvironmentName: "env", Run: 3, Version: 7, MaxInFlight: 2})
	if err != nil {
		t.Fatal(err)
	}
	if f.orderErr != nil {
		t.Error(f.orderErr)
	}
	if f.maxSeen > 2 {
		t.Errorf("%d batches ran at once, MaxInFlight is 2", f.maxSeen)
	}
	if len(f.started) != 15 {
		t.Errorf("dispatched %d batches, want 15", len(f.started))
	}
	if res.Total != 150 || res.Deployed != 150 || res.Failed != 0 || res.Batches != 15 || res.Version != 7 {
		t.Errorf("result = %+v", res)
	}
	if f.finished == nil || f.finished.Status != "done" || f.finished.Deployed != 150 || f.finished.Run != 3 {
		t.Errorf("finish = %+v", f.finished)
	}
}

func TestDeployMarksBatchesWithoutExecutorUnavailable(t *testing.T) {
	t.Parallel()
	f := newFake([]BatchRef{
		{Seq: 1, Agent: "up", Level: 0, Count: 4, First: "r1"},
		{Seq: 2, Agent: "down", Level: 0, Count: 3, First: "r2"},
		{Seq: 3, Agent: "broken", Level: 0, Count: 2, First: "r3"},
	})
	f.outcome = func(in BatchInput) (BatchResult, error) {
		switch in.Agent {
		case "down":
			return BatchResult{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
		case "broken":
			return BatchResult{}, temporal.NewNonRetryableApplicationError("database gone", "Infra", nil)
		}
		return BatchResult{Deployed: 4}, nil
	}
	res, err := run(t, f, DeployInput{EnvironmentID: "e", EnvironmentName: "env", Run: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deployed != 4 || res.Unavailable != 3 || res.Failed != 2 {
		t.Errorf("result = %+v, want 4 deployed, 3 unavailable, 2 failed", res)
	}
	got := map[int]string{}
	for _, m := range f.marked {
		got[m.Seq] = m.Result
	}
	if got[2] != "unavailable" || got[3] != "failed" || len(got) != 2 {
		t.Errorf("marked = %+v", f.marked)
	}
}

func TestDeployOnHaltedEnvironmentEndsPreempted(t *testing.T) {
	t.Parallel()
	f := newFake(nil)
	f.plan = PlanResult{Halted: true}
	res, err := run(t, f, DeployInput{EnvironmentID: "e", EnvironmentName: "env", Run: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Halted || f.finished == nil || f.finished.Status != "preempted" || len(f.started) != 0 {
		t.Errorf("halted run: result %+v, finished %+v, started %v; want it preempted (requests re-queued), nothing run",
			res, f.finished, f.started)
	}
}

func TestBatchSummary(t *testing.T) {
	t.Parallel()
	cases := []struct {
		b    BatchRef
		want string
		why  string
	}{
		{BatchRef{First: "fs::File[h,path=/a]", Count: 1}, "fs::File[h,path=/a]", "one resource is named alone"},
		{BatchRef{First: "fs::File[h,path=/a]", Count: 42}, "fs::File[h,path=/a] and 41 more", "a batch names its first and counts the rest"},
	}
	for _, c := range cases {
		if got := batchSummary(c.b); got != c.want {
			t.Errorf("%s: got %q, want %q", c.why, got, c.want)
		}
	}
}

// TestDeployContinuesAsNewBetweenLevels: a run whose history grows long
// continues as new at a level boundary, carrying its counts and the level
// to resume from; the resumed run skips the levels already done.
func TestDeployContinuesAsNewBetweenLevels(t *testing.T) {
	t.Parallel()
	var batches []BatchRef
	for level := 0; level < 4; level++ {
		batches = append(batches, BatchRef{Seq: level + 1, Agent: "a", Level: level, Count: 10, First: "x"})
	}
	f := newFake(batches)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Deploy, workflowRegisterOptions())
	f.register(env)
	env.SetCurrentHistoryLength(5000)
	env.ExecuteWorkflow(DeployWorkflowName, DeployInput{EnvironmentID: "e", EnvironmentName: "env", Run: 1, MaxHistory: 100})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("want continue-as-new after the first level, got %v", err)
	}
	if len(f.started) != 1 || f.started[0] != 1 || f.finished != nil {
		t.Fatalf("started %v (want only level 0), finished %+v", f.started, f.finished)
	}
	var next DeployInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.FromLevel != 1 || next.Carry == nil || next.Carry.Deployed != 10 {
		t.Fatalf("continued with %+v, want from level 1 carrying 10 deployed", next)
	}

	// The continued run does levels 1–3 only and finishes with all 40.
	f2 := newFake(batches)
	env2 := s.NewTestWorkflowEnvironment()
	env2.RegisterWorkflowWithOptions(Deploy, workflowRegisterOptions())
	f2.register(env2)
	env2.ExecuteWorkflow(DeployWorkflowName, next)
	var res DeployResult
	if err := env2.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if len(f2.started) != 3 || res.Deployed != 40 || f2.finished == nil || f2.finished.Deployed != 40 {
		t.Errorf("resumed: started %v, result %+v, finish %+v", f2.started, res, f2.finished)
	}
}
