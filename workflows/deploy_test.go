package workflows

import (
	"context"
	"errors"
	"strings"
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
	// queues are the task queues of the dispatches, per agent in order;
	// agentRunning and agentMax the batches of each agent running now and
	// at most.
	queues       map[string][]string
	agentRunning map[string]int
	agentMax     map[string]int
	// route answers RouteAgents (nil: every agent's own queue, none live).
	route  func(in RouteAgentsInput) RouteAgentsResult
	routed []RouteAgentsInput
	// localPlan, localFinish: the plan and the finish ran as local
	// activities.
	localPlan, localFinish bool
	// grouped: the plan was asked to group agents (PlanInput.Group).
	grouped bool
}

func (f *fakeActivities) register(env *testsuite.TestWorkflowEnvironment) {
	PlanDeployActivity.Register(env, func(ctx context.Context, in PlanInput) (PlanResult, error) {
		f.mu.Lock()
		f.localPlan = activity.GetInfo(ctx).IsLocalActivity
		f.grouped = in.Group
		f.mu.Unlock()
		return f.plan, nil
	})
	ExecuteBatchActivity.Register(env, func(ctx context.Context, in BatchInput) (BatchResult, error) {
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
		for _, a := range in.AgentsOf() {
			f.queues[a] = append(f.queues[a], activity.GetInfo(ctx).TaskQueue)
			f.agentRunning[a]++
			f.agentMax[a] = max(f.agentMax[a], f.agentRunning[a])
		}
		f.mu.Unlock()
		time.Sleep(5 * time.Millisecond) // let concurrent batches overlap
		res, err := f.outcome(in)
		f.mu.Lock()
		for _, a := range in.AgentsOf() {
			f.agentRunning[a]--
		}
		f.running--
		f.doneLvl[lvl]++
		f.mu.Unlock()
		return res, err
	})
	MarkBatchActivity.Register(env, func(ctx context.Context, in MarkBatchInput) (MarkBatchResult, error) {
		f.mu.Lock()
		f.marked = append(f.marked, in)
		f.mu.Unlock()
		return MarkBatchResult{}, nil // no counts: the whole batch was marked
	})
	PlanRetryActivity.Register(env, func(ctx context.Context, in PlanRetryInput) (PlanRetryResult, error) {
		f.mu.Lock()
		f.retries = append(f.retries, in)
		f.mu.Unlock()
		if f.planRetry == nil {
			return PlanRetryResult{}, nil
		}
		return f.planRetry(in)
	})
	FinishDeployActivity.Register(env, func(ctx context.Context, in FinishInput) error {
		f.finished = &in
		f.localFinish = activity.GetInfo(ctx).IsLocalActivity
		return nil
	})
	RouteAgentsActivity.Register(env, func(ctx context.Context, in RouteAgentsInput) (RouteAgentsResult, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.routed = append(f.routed, in)
		if f.route == nil {
			return RouteAgentsResult{}, nil
		}
		return f.route(in), nil
	})
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
	f := &fakeActivities{levelOf: map[int]int{}, doneLvl: map[int]int{}, queues: map[string][]string{},
		agentRunning: map[string]int{}, agentMax: map[string]int{}}
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

// TestDeployBoundsEachAgent: a run of DeployGeneration 2 sends one
// agent at most AgentMaxInFlight batches at once, and lets the batches of
// other agents go past those waiting for it, so that an agent with many
// batches never holds every slot of a queue it shares (the embedded
// executor serves every agent from one queue). Each batch goes to its
// agent's route.
func TestDeployBoundsEachAgent(t *testing.T) {
	t.Parallel()
	var batches []BatchRef
	for i := range 12 {
		batches = append(batches, BatchRef{Seq: i + 1, Agent: "big", Level: 0, Count: 10, First: "x"})
	}
	for i, a := range []string{"s1", "s2", "s3"} {
		batches = append(batches, BatchRef{Seq: 13 + i, Agent: a, Level: 0, Count: 1, First: "y"})
	}
	f := newFake(batches)
	f.plan.Routes = NewRoutes(map[string]string{"big": "executors/env/embedded", "s1": "executors/env/embedded",
		"s2": "executors/env/pool/p"})
	res, err := run(t, f, DeployInput{EnvironmentID: "e", EnvironmentName: "env", Run: 1, Generation: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deployed != 123 || len(f.started) != 15 {
		t.Fatalf("result %+v, started %v: want all 15 batches deployed", res, f.started)
	}
	if f.agentMax["big"] != defaultAgentMaxInFlight {
		t.Errorf("agent big ran %d batches at once, want %d (AgentMaxInFlight's default)", f.agentMax["big"], defaultAgentMaxInFlight)
	}
	// The small agents' batches came in the first wave, not after the
	// big agent's twelve.
	for i, seq := range f.started {
		if seq > 12 && i >= 4+3 {
			t.Errorf("batch %d of a small agent started %dth (order %v), want among the first 7", seq, i+1, f.started)
		}
	}
	want := map[string]string{"big": "executors/env/embedded", "s1": "executors/env/embedded",
		"s2": "executors/env/pool/p", "s3": "agent/env/s3"}
	for a, q := range want {
		for _, got := range f.queues[a] {
			if got != q {
				t.Errorf("a batch of agent %s went to %s, want %s", a, got, q)
			}
		}
	}

	if !f.localPlan || !f.localFinish {
		t.Errorf("generation 2: plan local %v, finish local %v; want both local activities", f.localPlan, f.localFinish)
	}

	// Before generation 2, one agent's batches take what the run allows,
	// and the orchestration activities are activities of their own.
	f1 := newFake(batches)
	if _, err := run(t, f1, DeployInput{EnvironmentID: "e", EnvironmentName: "env", Run: 1, Generation: 1}); err != nil {
		t.Fatal(err)
	}
	if f1.localPlan || f1.localFinish {
		t.Errorf("generation 1: plan local %v, finish local %v; want neither", f1.localPlan, f1.localFinish)
	}
	if f1.agentMax["big"] <= defaultAgentMaxInFlight || f1.maxSeen > gen1MaxInFlight {
		t.Errorf("generation 1: agent big ran %d at once, the run %d; want more than %d and at most %d",
			f1.agentMax["big"], f1.maxSeen, defaultAgentMaxInFlight, gen1MaxInFlight)
	}
}

// TestDeployRoutesAgainAfterAgentTimeout: a batch that waited its agent
// timeout in its queue is routed again (generation 2): to the queue an
// executor of its agent polls since; to the same queue while a live
// executor serves the agent (it waited behind other batches); and it is
// unavailable only when no live executor serves its agent.
func TestDeployRoutesAgainAfterAgentTimeout(t *testing.T) {
	t.Parallel()
	batches := []BatchRef{
		{Seq: 1, Agent: "moved", Level: 0, Count: 2, First: "m"},
		{Seq: 2, Agent: "busy", Level: 0, Count: 3, First: "b"},
		{Seq: 3, Agent: "gone", Level: 0, Count: 4, First: "g"},
	}
	setup := func() *fakeActivities {
		f := newFake(batches)
		attempts := map[string]int{}
		f.outcome = func(in BatchInput) (BatchResult, error) {
			f.mu.Lock()
			attempts[in.Agent]++
			n, q := attempts[in.Agent], f.queues[in.Agent][len(f.queues[in.Agent])-1]
			f.mu.Unlock()
			switch {
			case in.Agent == "moved" && q == "agent/env/moved",
				in.Agent == "busy" && n == 1,
				in.Agent == "gone":
				return BatchResult{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
			}
			for _, b := range batches {
				if b.Seq == in.Seq {
					return BatchResult{Deployed: b.Count}, nil
				}
			}
			return BatchResult{}, errors.New("unknown batch")
		}
		f.route = func(in RouteAgentsInput) RouteAgentsResult {
			out := RouteAgentsResult{Routes: NewRoutes(map[string]string{"moved": "executors/env/pool/new"})}
			for _, a := range in.Agents {
				if a != "gone" {
					out.Live = append(out.Live, a)
				}
			}
			return out
		}
		return f
	}
	f := setup()
	res, err := run(t, f, DeployInput{EnvironmentID: "e", EnvironmentName: "env", Run: 1, Generation: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deployed != 5 || res.Unavailable != 4 {
		t.Errorf("result %+v, want moved and busy deployed (5), gone unavailable (4)", res)
	}
	if q := f.queues["moved"]; len(q) != 2 || q[1] != "executors/env/pool/new" {
		t.Errorf("moved went to %v, want its own queue, then executors/env/pool/new", q)
	}
	if q := f.queues["busy"]; len(q) != 2 || q[0] != q[1] {
		t.Errorf("busy went to %v, want its queue twice", q)
	}
	if len(f.marked) != 1 || f.marked[0].Seq != 3 || f.marked[0].Result != "unavailable" {
		t.Errorf("marked %+v, want batch 3 (gone) unavailable", f.marked)
	}

	// Generation 1 marks every batch that waited unavailable at once.
	f1 := setup()
	res, err = run(t, f1, DeployInput{EnvironmentID: "e", EnvironmentName: "env", Run: 1, Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Unavailable != 9 || len(f1.routed) != 0 {
		t.Errorf("generation 1: result %+v, routed %v; want all 9 unavailable, never routed again", res, f1.routed)
	}
}

// TestDeployBatchesOfSeveralAgents: a run of DeployGeneration 3 asks for
// a plan whose agents that share a queue share batches; a batch of
// several agents goes to their queue with all of them named, counts
// against each agent's bound, and, when its agents go to different
// queues after it waited its agent timeout, is marked unavailable saying
// so (no one executor may run it whole).
func TestDeployBatchesOfSeveralAgents(t *testing.T) {
	t.Parallel()
	var batches []BatchRef
	for i := range 6 {
		batches = append(batches, BatchRef{Seq: i + 1, Agent: "p", Agents: []string{"p", "q"}, Count: 10, First: "x"})
	}
	batches = append(batches, BatchRef{Seq: 7, Agent: "q", Count: 1, First: "y"},
		BatchRef{Seq: 8, Agent: "r", Agents: []string{"r", "s"}, Count: 5, First: "z"})
	f := newFake(batches)
	f.plan.Routes = NewRoutes(map[string]string{"p": "executors/env/embedded", "q": "executors/env/embedded",
		"r": "executors/env/pool/old", "s": "executors/env/pool/old"})
	var seen [][]string
	f.outcome = func(in BatchInput) (BatchResult, error) {
		f.mu.Lock()
		seen = append(seen, in.AgentsOf())
		f.mu.Unlock()
		if in.Seq == 8 {
			return BatchResult{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
		}
		for _, b := range batches {
			if b.Seq == in.Seq {
				return BatchResult{Deployed: b.Count}, nil
			}
		}
		return BatchResult{}, errors.New("unknown batch")
	}
	f.route = func(in RouteAgentsInput) RouteAgentsResult {
		// r and s, both served by live executors, now apart.
		return RouteAgentsResult{Routes: NewRoutes(map[string]string{"r": "executors/env/pool/r", "s": "executors/env/pool/s"}),
			Live: in.Agents}
	}
	res, err := run(t, f, DeployInput{EnvironmentID: "e", EnvironmentName: "env", Run: 1, Generation: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !f.grouped {
		t.Error("generation 3 did not ask the plan to group agents")
	}
	if res.Deployed != 61 || res.Unavailable != 5 {
		t.Errorf("result %+v, want 61 deployed, batch 8's 5 unavailable", res)
	}
	if f.agentMax["p"] > defaultAgentMaxInFlight || f.agentMax["q"] > defaultAgentMaxInFlight || f.agentMax["q"] < 2 {
		t.Errorf("agents p and q ran %d and %d batches at once, want at most %d each (a shared batch counts for both)",
			f.agentMax["p"], f.agentMax["q"], defaultAgentMaxInFlight)
	}
	for _, q := range f.queues["q"] {
		if q != "executors/env/embedded" {
			t.Errorf("a batch of q went to %s, want executors/env/embedded", q)
		}
	}
	shared := 0
	for _, agents := range seen {
		if len(agents) == 2 && agents[0] == "p" && agents[1] == "q" {
			shared++
		}
	}
	if shared != 6 {
		t.Errorf("the executor saw the agents %v, want p and q named in 6 batches", seen)
	}
	if len(f.routed) != 1 || len(f.routed[0].Agents) != 2 {
		t.Errorf("routed %+v, want batch 8's two agents routed once", f.routed)
	}
	if len(f.marked) != 1 || f.marked[0].Seq != 8 || f.marked[0].Result != "unavailable" ||
		!strings.Contains(f.marked[0].Reason, "different queues") {
		t.Errorf("marked %+v, want batch 8 unavailable: its agents go to different queues", f.marked)
	}

	// Generation 2 plans each agent's batches apart.
	f2 := newFake(batches[6:7])
	if _, err := run(t, f2, DeployInput{EnvironmentID: "e", EnvironmentName: "env", Run: 1, Generation: 2}); err != nil {
		t.Fatal(err)
	}
	if f2.grouped {
		t.Error("generation 2 asked the plan to group agents")
	}
}
