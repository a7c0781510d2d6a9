package workflows

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// queueFake scripts TakeCompile and records what the compile queue did.
type queueFake struct {
	mu      sync.Mutex
	respond func(n int) TakeCompileResult
	takes   int
	// started and ended record the compiles' children, with workflow time.
	started, ended []int64
	overlap        bool
	running        int
	finished       []FinishCompileInput
	runFor         time.Duration
	fail           map[int64]bool // children that fail
}

func (f *queueFake) env(t *testing.T) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(CompileQueue, workflow.RegisterOptions{Name: CompileQueueWorkflowName})
	TakeCompileActivity.Register(env, func(_ context.Context, in TakeCompileInput) (TakeCompileResult, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.takes++
		return f.respond(f.takes), nil
	})
	FinishCompileActivity.Register(env, func(_ context.Context, in FinishCompileInput) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.finished = append(f.finished, in)
		return nil
	})
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in CompileInput) (CompileResult, error) {
		if want := CompileWorkflowID("prod", in.ID); workflow.GetInfo(ctx).WorkflowExecution.ID != want {
			return CompileResult{}, errors.New("child id " + workflow.GetInfo(ctx).WorkflowExecution.ID + ", want " + want)
		}
		f.mu.Lock()
		f.started = append(f.started, in.ID)
		f.running++
		if f.running > 1 {
			f.overlap = true
		}
		f.mu.Unlock()
		err := workflow.Sleep(ctx, f.runFor)
		f.mu.Lock()
		f.running--
		f.ended = append(f.ended, in.ID)
		failing := f.fail[in.ID]
		f.mu.Unlock()
		if err == nil && failing {
			err = temporal.NewNonRetryableApplicationError("boom", "Test", nil)
		}
		return CompileResult{ID: in.ID, Status: CompileSucceeded}, err
	}, workflow.RegisterOptions{Name: CompileWorkflowName})
	return env
}

func (f *queueFake) snapshot() (takes int, started []int64, finished []FinishCompileInput) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.takes, append([]int64(nil), f.started...), append([]FinishCompileInput(nil), f.finished...)
}

// TestCompileQueueRunsInOrderThenEnds: compiles run one at a time, in the
// order taken; with nothing queued and no timer the queue ends.
func TestCompileQueueRunsInOrderThenEnds(t *testing.T) {
	t.Parallel()
	f := &queueFake{runFor: time.Minute, respond: func(n int) TakeCompileResult {
		if n <= 3 {
			return TakeCompileResult{ID: int64(10 + n), Reason: "api", Branch: "main"}
		}
		return TakeCompileResult{}
	}}
	env := f.env(t)
	env.ExecuteWorkflow(CompileQueueWorkflowName, CompileQueueInput{EnvironmentID: "e1", EnvironmentName: "prod"})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("completed=%v error=%v, want a clean end", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	takes, started, finished := f.snapshot()
	if takes != 4 || len(started) != 3 || started[0] != 11 || started[1] != 12 || started[2] != 13 {
		t.Errorf("takes=%d started=%v, want 4 takes and compiles 11, 12, 13", takes, started)
	}
	if f.overlap {
		t.Error("two compiles of one environment ran at once")
	}
	if len(finished) != 0 {
		t.Errorf("the queue finished compiles itself: %+v", finished)
	}
}

// TestCompileQueueLooksAgainAfterASignal: a request that arrives while a
// compile runs is taken right after it, not earlier (one at a time).
func TestCompileQueueLooksAgainAfterASignal(t *testing.T) {
	t.Parallel()
	f := &queueFake{runFor: time.Minute}
	f.respond = func(n int) TakeCompileResult {
		switch n {
		case 1:
			return TakeCompileResult{ID: 1}
		case 2:
			return TakeCompileResult{ID: 2}
		}
		return TakeCompileResult{}
	}
	env := f.env(t)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(CompileSignal, CompileWake{Reason: "compile requested"})
	}, 10*time.Second)
	env.RegisterDelayedCallback(func() {
		if takes, _, _ := f.snapshot(); takes != 1 {
			t.Errorf("%d takes while compile 1 runs, want 1: the signal must wait for it", takes)
		}
	}, 30*time.Second)
	env.ExecuteWorkflow(CompileQueueWorkflowName, CompileQueueInput{EnvironmentID: "e1", EnvironmentName: "prod"})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("completed=%v error=%v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	if takes, started, _ := f.snapshot(); takes != 3 || len(started) != 2 || f.overlap {
		t.Errorf("takes=%d started=%v overlap=%v, want 3 takes, 2 compiles one after the other", takes, started, f.overlap)
	}
}

// TestCompileQueueTimer: with a recompile interval the queue stays,
// sleeps until the timer is due and takes again then.
func TestCompileQueueTimer(t *testing.T) {
	t.Parallel()
	var takenAt []time.Time
	f := &queueFake{runFor: time.Minute}
	var env *testsuite.TestWorkflowEnvironment
	f.respond = func(n int) TakeCompileResult {
		takenAt = append(takenAt, env.Now())
		if n == 2 {
			return TakeCompileResult{ID: 5, Reason: "schedule", NextScheduleSeconds: 600}
		}
		return TakeCompileResult{NextScheduleSeconds: 600}
	}
	env = f.env(t)
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, 25*time.Minute)
	start := env.Now()
	env.ExecuteWorkflow(CompileQueueWorkflowName, CompileQueueInput{EnvironmentID: "e1", EnvironmentName: "prod",
		PollSeconds: 3600})
	if err := env.GetWorkflowError(); err == nil || !temporal.IsCanceledError(err) {
		t.Fatalf("error = %v, want cancelled (the queue stays while the timer is on)", err)
	}
	_, started, _ := f.snapshot()
	if len(started) != 1 || started[0] != 5 {
		t.Errorf("started = %v, want the schedule compile 5", started)
	}
	// Takes: at start, when the timer is due (10 min), after compile 5
	// (11 min, re-arming the timer), and 10 minutes after that.
	want := []time.Duration{0, 10 * time.Minute, 11 * time.Minute, 21 * time.Minute}
	if len(takenAt) != len(want) {
		t.Fatalf("takes at %v, want %v after start", takenAt, want)
	}
	for i, w := range want {
		if got := takenAt[i].Sub(start); got < w || got > w+time.Second {
			t.Errorf("take %d at %v, want %v", i+1, got, w)
		}
	}
}

// TestCompileQueuePollsWhileTheTimerIsOn: a long timer does not hide a
// shorter interval set meanwhile: the queue takes every poll period.
func TestCompileQueuePollsWhileTheTimerIsOn(t *testing.T) {
	t.Parallel()
	var takenAt []time.Duration
	var env *testsuite.TestWorkflowEnvironment
	var start time.Time
	f := &queueFake{respond: func(n int) TakeCompileResult {
		takenAt = append(takenAt, env.Now().Sub(start).Round(time.Second))
		if n == 3 {
			return TakeCompileResult{} // recompile_interval set to 0
		}
		return TakeCompileResult{NextScheduleSeconds: 86400}
	}}
	env = f.env(t)
	start = env.Now()
	env.ExecuteWorkflow(CompileQueueWorkflowName, CompileQueueInput{EnvironmentID: "e1", EnvironmentName: "prod"})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("completed=%v error=%v, want the queue to end once the timer is off", env.IsWorkflowCompleted(),
			env.GetWorkflowError())
	}
	if len(takenAt) != 3 || takenAt[1] != time.Minute || takenAt[2] != 2*time.Minute {
		t.Errorf("takes at %v, want 0s, 1m0s, 2m0s (the default poll)", takenAt)
	}
}

// TestCompileQueueFinishesAFailedChild: a compile workflow that ends
// without recording its outcome is failed by the queue, which goes on.
func TestCompileQueueFinishesAFailedChild(t *testing.T) {
	t.Parallel()
	f := &queueFake{runFor: time.Second, fail: map[int64]bool{1: true}, respond: func(n int) TakeCompileResult {
		if n <= 2 {
			return TakeCompileResult{ID: int64(n)}
		}
		return TakeCompileResult{}
	}}
	env := f.env(t)
	env.ExecuteWorkflow(CompileQueueWorkflowName, CompileQueueInput{EnvironmentID: "e1", EnvironmentName: "prod"})
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	_, started, finished := f.snapshot()
	if len(started) != 2 {
		t.Errorf("started = %v, want 1 and 2", started)
	}
	if len(finished) != 1 || finished[0].ID != 1 || finished[0].Status != CompileFailed ||
		!strings.Contains(finished[0].Message, "boom") {
		t.Errorf("finished = %+v, want compile 1 failed with the child's error", finished)
	}
}

func TestCompileQueueEndsWhenTheEnvironmentIsGone(t *testing.T) {
	t.Parallel()
	f := &queueFake{respond: func(int) TakeCompileResult { return TakeCompileResult{Gone: true, NextScheduleSeconds: 60} }}
	env := f.env(t)
	env.ExecuteWorkflow(CompileQueueWorkflowName, CompileQueueInput{EnvironmentID: "e1", EnvironmentName: "prod"})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("completed=%v error=%v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
}

// compileFake scripts the compile workflow's activities.
type compileFake struct {
	mu       sync.Mutex
	calls    []string
	fetch    func() (FetchCompileResult, error)
	build    func() (BuildCompileResult, error)
	release  func() (ReleaseCompileResult, error)
	finished []FinishCompileInput
}

func (f *compileFake) record(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name)
}

func (f *compileFake) env() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Compile, workflow.RegisterOptions{Name: CompileWorkflowName})
	FetchCompileActivity.Register(env, func(_ context.Context, in CompileInput) (FetchCompileResult, error) {
		f.record("fetch")
		return f.fetch()
	})
	BuildCompileActivity.Register(env, func(_ context.Context, in BuildCompileInput) (BuildCompileResult, error) {
		f.record("build " + in.Commit)
		return f.build()
	})
	ReleaseCompileActivity.Register(env, func(_ context.Context, in ReleaseCompileInput) (ReleaseCompileResult, error) {
		f.record("release")
		return f.release()
	})
	FinishCompileActivity.Register(env, func(_ context.Context, in FinishCompileInput) error {
		f.record("finish " + in.Status)
		f.mu.Lock()
		defer f.mu.Unlock()
		f.finished = append(f.finished, in)
		return nil
	})
	return env
}

func TestCompileWorkflow(t *testing.T) {
	t.Parallel()
	ok := func() (FetchCompileResult, error) { return FetchCompileResult{Commit: "abc"}, nil }
	built := func() (BuildCompileResult, error) { return BuildCompileResult{Version: 3, Exported: true}, nil }
	released := func() (ReleaseCompileResult, error) { return ReleaseCompileResult{Released: true}, nil }
	permanent := func(msg string) error { return temporal.NewNonRetryableApplicationError(msg, "Test", nil) }
	for _, c := range []struct {
		name    string
		f       *compileFake
		calls   string
		status  string
		message string // in the finish's message
	}{
		{"success", &compileFake{fetch: ok, build: built, release: released},
			"fetch|build abc|release|finish succeeded", CompileSucceeded, ""},
		{"git refused the fetch: recorded by the activity, nothing more",
			&compileFake{fetch: func() (FetchCompileResult, error) { return FetchCompileResult{Failed: true}, nil }},
			"fetch", CompileFailed, ""},
		{"the model has errors: recorded by the activity, nothing released",
			&compileFake{fetch: ok, build: func() (BuildCompileResult, error) { return BuildCompileResult{Failed: true}, nil }},
			"fetch|build abc", CompileFailed, ""},
		{"the fetch activity fails for good: the compile fails with its error",
			&compileFake{fetch: func() (FetchCompileResult, error) { return FetchCompileResult{}, permanent("disk full") }},
			"fetch|finish failed", CompileFailed, "fetch: disk full"},
		{"the release fails for good",
			&compileFake{fetch: ok, build: built,
				release: func() (ReleaseCompileResult, error) { return ReleaseCompileResult{}, permanent("no database") }},
			"fetch|build abc|release|finish failed", CompileFailed, "release: no database"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := c.f
			env := f.env()
			env.ExecuteWorkflow(CompileWorkflowName, CompileInput{EnvironmentID: "e1", EnvironmentName: "prod", ID: 7})
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var res CompileResult
			if err := env.GetWorkflowResult(&res); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(f.calls, "|"); got != c.calls {
				t.Errorf("calls %s, want %s", got, c.calls)
			}
			if res.Status != c.status || res.ID != 7 {
				t.Errorf("result %+v, want status %s", res, c.status)
			}
			if c.message != "" && (len(f.finished) != 1 || f.finished[0].Message != c.message) {
				t.Errorf("finished %+v, want message %q", f.finished, c.message)
			}
			if c.status == CompileSucceeded && (len(f.finished) != 1 || f.finished[0].Released == nil || !*f.finished[0].Released) {
				t.Errorf("finished %+v, want released recorded", f.finished)
			}
		})
	}
}
