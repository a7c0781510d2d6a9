package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// schedFake scripts TakeRequests and records what the scheduler did.
type schedFake struct {
	mu       sync.Mutex
	takes    []TakeInput
	respond  func(n int, in TakeInput) TakeResult
	runs     []int64
	preempts []int64
	finished []FinishInput
	// runFor is how long a fake deploy run takes (workflow time).
	runFor time.Duration
}

func (f *schedFake) env(t *testing.T) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Scheduler, workflow.RegisterOptions{Name: SchedulerWorkflowName})
	TakeRequestsActivity.Register(env, func(_ context.Context, in TakeInput) (TakeResult, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.takes = append(f.takes, in)
		return f.respond(len(f.takes), in), nil
	})
	FinishDeployActivity.Register(env, func(_ context.Context, in FinishInput) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.finished = append(f.finished, in)
		return nil
	})
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in DeployInput) (DeployResult, error) {
		f.mu.Lock()
		f.runs = append(f.runs, in.Run)
		f.mu.Unlock()
		res := DeployResult{Run: in.Run}
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(workflow.GetSignalChannel(ctx, PreemptSignal), func(c workflow.ReceiveChannel, _ bool) {
			var reason string
			c.Receive(ctx, &reason)
			f.mu.Lock()
			f.preempts = append(f.preempts, in.Run)
			f.mu.Unlock()
			res.Preempted = true
		})
		sel.AddFuture(workflow.NewTimer(ctx, f.runFor), func(workflow.Future) {})
		sel.Select(ctx)
		return res, nil
	}, workflow.RegisterOptions{Name: DeployWorkflowName})
	t.Cleanup(func() { env.AssertExpectations(t) })
	return env
}

func (f *schedFake) snapshot() ([]TakeInput, []int64, []int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]TakeInput(nil), f.takes...), append([]int64(nil), f.runs...), append([]int64(nil), f.preempts...)
}

func TestSchedulerAdoptsThenTakesAfterEachRun(t *testing.T) {
	t.Parallel()
	f := &schedFake{runFor: time.Minute, respond: func(n int, in TakeInput) TakeResult {
		if n <= 2 {
			return TakeResult{Run: int64(n), Kinds: []string{"deploy"}}
		}
		return TakeResult{}
	}}
	env := f.env(t)
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, 10*time.Minute)
	env.ExecuteWorkflow(SchedulerWorkflowName, SchedulerInput{EnvironmentID: "e", EnvironmentName: "env"})
	takes, runs, _ := f.snapshot()
	if len(takes) < 3 || !takes[0].Adopt || takes[1].Adopt || takes[0].Token == takes[1].Token {
		t.Fatalf("takes = %+v: the first adopts, later ones do not, tokens differ", takes)
	}
	if len(runs) != 2 || runs[0] != 1 || runs[1] != 2 {
		t.Errorf("runs = %v, want 1 then 2, one at a time", runs)
	}
}

func TestSchedulerTimers(t *testing.T) {
	t.Parallel()
	f := &schedFake{runFor: time.Second, respond: func(n int, in TakeInput) TakeResult {
		return TakeResult{DeployInterval: 600, RepairInterval: 3600}
	}}
	env := f.env(t)
	start := env.Now()
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, 2*time.Hour+time.Minute)
	env.ExecuteWorkflow(SchedulerWorkflowName, SchedulerInput{EnvironmentID: "e", EnvironmentName: "env", PollSeconds: 3600 * 24})
	takes, _, _ := f.snapshot()
	var retries, repairs int
	for _, tk := range takes {
		for _, tr := range tk.Timers {
			switch tr.Reason {
			case "retry interval":
				retries++
				if tr.Kind != "deploy" {
					t.Errorf("retry timer kind %q", tr.Kind)
				}
			case "repair interval":
				repairs++
				// Fired at start+1h and start+2h, each repairs what was
				// not attempted in the hour before.
				want := start.Add(time.Duration(repairs-1) * time.Hour)
				if tr.Kind != "repair" || !tr.StaleBefore.Equal(want) {
					t.Errorf("repair %d = %+v, want kind repair, stale before %v", repairs, tr, want)
				}
			}
		}
	}
	// 2 hours: 12 retries (every 10 minutes), 2 repairs (every hour).
	if retries != 12 || repairs != 2 {
		t.Errorf("%d retries and %d repairs in 2 hours, want 12 and 2 (takes: %d)", retries, repairs, len(takes))
	}
}

func TestSchedulerPreemptsRepairForNewIntent(t *testing.T) {
	t.Parallel()
	cases := []struct {
		why     string
		kinds   []string
		wake    Wake
		preempt bool
	}{
		{"new intent preempts a repair-only run", []string{"repair"}, Wake{Release: true}, true},
		{"new intent does not preempt a run that deploys changes", []string{"deploy", "repair"}, Wake{Release: true}, false},
		{"a halt preempts any run", []string{"deploy"}, Wake{Halt: true}, true},
		{"a user request merges into the next run", []string{"repair"}, Wake{Reason: "user deploy"}, false},
	}
	for _, c := range cases {
		f := &schedFake{runFor: time.Hour, respond: func(n int, in TakeInput) TakeResult {
			if n == 1 {
				return TakeResult{Run: 7, Kinds: c.kinds}
			}
			return TakeResult{}
		}}
		env := f.env(t)
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(WakeSignal, c.wake)
		}, time.Minute)
		env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, 2*time.Hour)
		env.ExecuteWorkflow(SchedulerWorkflowName, SchedulerInput{EnvironmentID: "e", EnvironmentName: "env"})
		_, _, preempts := f.snapshot()
		if got := len(preempts) == 1; got != c.preempt {
			t.Errorf("%s: preempted = %v", c.why, preempts)
		}
	}
}

func TestSchedulerContinuesAsNewWhenIdle(t *testing.T) {
	t.Parallel()
	f := &schedFake{runFor: time.Second, respond: func(n int, in TakeInput) TakeResult { return TakeResult{} }}
	env := f.env(t)
	env.RegisterDelayedCallback(func() { env.SetCurrentHistoryLength(150) }, time.Hour)
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, 3*time.Hour)
	env.ExecuteWorkflow(SchedulerWorkflowName, SchedulerInput{EnvironmentID: "e", EnvironmentName: "env",
		PollSeconds: 60, MaxHistory: 100, Seq: 41, Continued: true})
	err := env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("want continue-as-new, got %v", err)
	}
	takes, _, _ := f.snapshot()
	if len(takes) == 0 || takes[0].Adopt {
		t.Errorf("a continued scheduler must not adopt: %+v", takes)
	}
}

// TestSchedulerRenews: a wake with Renew makes an idle scheduler continue
// as new, with the scheduler's short workflow task timeout.
func TestSchedulerRenews(t *testing.T) {
	t.Parallel()
	f := &schedFake{runFor: time.Second, respond: func(n int, in TakeInput) TakeResult { return TakeResult{} }}
	env := f.env(t)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(WakeSignal, Wake{Reason: "renew", Renew: true}) }, time.Minute/2)
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, time.Hour)
	env.ExecuteWorkflow(SchedulerWorkflowName, SchedulerInput{EnvironmentID: "e", EnvironmentName: "env", PollSeconds: 60})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("want continue-as-new, got %v", err)
	}
	if can.WorkflowTaskTimeout != SchedulerTaskTimeout {
		t.Errorf("continued with a workflow task timeout of %s, want %s", can.WorkflowTaskTimeout, SchedulerTaskTimeout)
	}
	if takes, _, _ := f.snapshot(); len(takes) != 2 {
		t.Errorf("took %d times, want 2 (at start, at the wake)", len(takes))
	}
}
