package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Names of the autonomous compile (docs/architecture.md, "Autonomous
// compiles"), registered explicitly as the others in contract.go.
const (
	CompileQueueWorkflowName = "intend.CompileQueue"
	CompileWorkflowName      = "intend.Compile"

	// CompileSignal tells a compile queue to look at its queue now
	// (payload CompileWake).
	CompileSignal = "intend.compile"
)

// Activities of the autonomous compile (activity.go).
var (
	TakeCompileActivity    = newActivity[TakeCompileInput, TakeCompileResult]("intend.TakeCompile")
	FetchCompileActivity   = newActivity[CompileInput, FetchCompileResult]("intend.FetchCompile")
	BuildCompileActivity   = newActivity[BuildCompileInput, BuildCompileResult]("intend.BuildCompile")
	ReleaseCompileActivity = newActivity[ReleaseCompileInput, ReleaseCompileResult]("intend.ReleaseCompile")
	FinishCompileActivity  = newActivityNoResult[FinishCompileInput]("intend.FinishCompile")
)

// Compile statuses, as the store records them.
const (
	CompileSucceeded = "succeeded"
	CompileFailed    = "failed"
)

// CompileQueueWorkflowID is the id of an environment's compile queue.
func CompileQueueWorkflowID(env string) string { return "env/" + env + "/compiler" }

// CompileWorkflowID is the id of one compile's workflow.
func CompileWorkflowID(env string, id int64) string { return fmt.Sprintf("env/%s/compile/%d", env, id) }

// RegisterCompile registers the compile workflows under their names.
func RegisterCompile(w interface {
	RegisterWorkflowWithOptions(w interface{}, options workflow.RegisterOptions)
}) {
	w.RegisterWorkflowWithOptions(CompileQueue, workflow.RegisterOptions{Name: CompileQueueWorkflowName})
	w.RegisterWorkflowWithOptions(Compile, workflow.RegisterOptions{Name: CompileWorkflowName})
}

// CompileWake is the payload of CompileSignal.
type CompileWake struct {
	Reason string
}

// CompileQueueInput starts (or continues) an environment's compile queue.
type CompileQueueInput struct {
	EnvironmentID   string
	EnvironmentName string
	// PollSeconds is how often a queue whose timer is on takes without
	// being woken (default 60), so that a changed recompile_interval or a
	// lost wake-up is seen soon.
	PollSeconds int
	// MaxHistory is the history length after which an idle queue
	// continues as new (default 2000).
	MaxHistory int
}

// TakeCompileInput asks for the environment's next compile.
type TakeCompileInput struct {
	EnvironmentID string
}

// TakeCompileResult is the compile to run (ID > 0), or nothing.
type TakeCompileResult struct {
	ID     int64
	Reason string
	Branch string
	// NextScheduleSeconds is when the recompile_interval timer is due, in
	// seconds from now (0: off).
	NextScheduleSeconds int
	// Gone: the environment was deleted.
	Gone bool
}

// CompileInput names one compile; everything else is in PostgreSQL.
type CompileInput struct {
	EnvironmentID   string
	EnvironmentName string
	ID              int64
}

// FetchCompileResult is the commit fetched, or Failed when git could not
// fetch the branch (recorded on the compile by the activity).
type FetchCompileResult struct {
	Commit string
	Failed bool
}

// BuildCompileInput asks to compile one commit and export the version.
type BuildCompileInput struct {
	EnvironmentID string
	ID            int64
	Commit        string
}

// BuildCompileResult is the version holding the compiled resources, or
// Failed when the model did not compile (the errors are recorded on the
// compile by the activity, never carried here).
type BuildCompileResult struct {
	Version       int64
	Exported      bool
	ResourceCount int
	Failed        bool
}

// ReleaseCompileInput asks to release a compile's version.
type ReleaseCompileInput struct {
	EnvironmentID string
	ID            int64
	Version       int64
}

// ReleaseCompileResult says whether the version is released now (false:
// a newer one was released meanwhile) and the deploy request the release
// queued, if any.
type ReleaseCompileResult struct {
	Released      bool
	DeployRequest int64
}

// FinishCompileInput ends a compile. Message is the one error of a
// compile that failed for a reason other than its model or its fetch
// (those the activities record themselves).
type FinishCompileInput struct {
	EnvironmentID string
	ID            int64
	Status        string
	Message       string
	Released      *bool
}

// CompileResult is how a compile ended.
type CompileResult struct {
	ID      int64
	Status  string
	Version int64
}

// CompileQueue is an environment's compile queue (env/<env>/compiler).
// PostgreSQL holds the queue (compiles with status queued, at most one per
// environment, which requests merge into); the workflow runs one compile
// at a time as a child workflow env/<env>/compile/<id>, in order, and
// arms the recompile_interval timer. TakeCompile returns the compile that
// is still running, if any, so a new queue (after a crash or a lost
// Temporal store) finishes it before anything else. With nothing queued or
// running and no timer, the workflow ends; the next request starts it
// again (SignalWithStart), and the server's reconciler starts it for every
// environment with open compiles or a timer.
func CompileQueue(ctx workflow.Context, in CompileQueueInput) error {
	log := workflow.GetLogger(ctx)
	maxHistory := in.MaxHistory
	if maxHistory <= 0 {
		maxHistory = defaultMaxHistory
	}
	poll := time.Duration(in.PollSeconds) * time.Second
	if poll <= 0 {
		poll = defaultPollSeconds * time.Second
	}
	local := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           TaskQueue,
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
	wakeCh := workflow.GetSignalChannel(ctx, CompileSignal)
	drain := func() bool {
		got := false
		for {
			var w CompileWake
			if !wakeCh.ReceiveAsync(&w) {
				return got
			}
			got = true
		}
	}

	look := true
	// next is when the recompile timer is due (zero: off); while it is
	// on, the queue also takes at nextPoll.
	var next, nextPoll time.Time
	var child workflow.ChildWorkflowFuture
	var running TakeCompileResult
	for {
		now := workflow.Now(ctx)
		if child == nil && (look || (!next.IsZero() && (!now.Before(next) || !now.Before(nextPoll)))) {
			look = false
			drain() // what they asked for, this take sees
			take, err := TakeCompileActivity.Run(local, TakeCompileInput{EnvironmentID: in.EnvironmentID})
			if err != nil {
				return fmt.Errorf("take compile: %w", err)
			}
			if take.Gone {
				log.Info("environment deleted; compile queue ends")
				return nil
			}
			next, nextPoll = time.Time{}, workflow.Now(ctx).Add(poll)
			if take.NextScheduleSeconds > 0 {
				next = workflow.Now(ctx).Add(time.Duration(take.NextScheduleSeconds) * time.Second)
			}
			if take.ID > 0 {
				running = take
				child = startCompile(ctx, in, take)
				log.Info("compile started", "compile", take.ID, "reason", take.Reason)
			}
		}
		if child == nil {
			if drain() {
				look = true
				continue
			}
			if next.IsZero() {
				return nil // idle and no timer: the next request starts a new run
			}
			if cur := workflow.GetInfo(ctx); cur.GetCurrentHistoryLength() >= maxHistory || cur.GetContinueAsNewSuggested() {
				return workflow.NewContinueAsNewError(ctx, CompileQueueWorkflowName, in)
			}
		}

		sel := workflow.NewSelector(ctx)
		sel.AddReceive(wakeCh, func(c workflow.ReceiveChannel, _ bool) {
			var w CompileWake
			c.Receive(ctx, &w)
			look = true
		})
		if child != nil {
			sel.AddFuture(child, func(f workflow.Future) {
				if err := f.Get(ctx, nil); err != nil {
					// The compile's own workflow records every outcome;
					// this only catches one that ended without (terminated,
					// failed to start), so the compile is never left running.
					log.Error("compile workflow failed", "compile", running.ID, "error", err)
					_ = FinishCompileActivity.Run(local, FinishCompileInput{
						EnvironmentID: in.EnvironmentID, ID: running.ID, Status: CompileFailed,
						Message: "the compile workflow ended without finishing: " + cause(err),
					})
				}
				child = nil
				look = true
			})
		}
		tctx, cancel := workflow.WithCancel(ctx)
		if child == nil {
			until := next
			if nextPoll.Before(until) {
				until = nextPoll
			}
			wait := until.Sub(workflow.Now(ctx))
			if wait < time.Millisecond {
				wait = time.Millisecond
			}
			sel.AddFuture(workflow.NewTimer(tctx, wait), func(workflow.Future) {})
		}
		sel.Select(ctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// startCompile starts a compile as a child workflow.
func startCompile(ctx workflow.Context, in CompileQueueInput, take TakeCompileResult) workflow.ChildWorkflowFuture {
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID: CompileWorkflowID(in.EnvironmentName, take.ID),
		TaskQueue:  TaskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(SearchAttrEnvironment).ValueSet(in.EnvironmentName)),
		StaticSummary: fmt.Sprintf("compile %d of branch %s (%s)", take.ID, take.Branch, take.Reason),
	})
	return workflow.ExecuteChildWorkflow(cctx, CompileWorkflowName, CompileInput{
		EnvironmentID: in.EnvironmentID, EnvironmentName: in.EnvironmentName, ID: take.ID,
	})
}

// Compile runs one compile (env/<env>/compile/<id>): fetch the branch,
// compile the commit and export the version, release it, finish. Each
// step is an idempotent activity that records its outcome in PostgreSQL;
// a fetch or model failure is an outcome (recorded, Failed), not an
// activity error. An activity that fails for good (retries exhausted)
// fails the compile with its error as the message, so no compile stays
// running.
func Compile(ctx workflow.Context, in CompileInput) (CompileResult, error) {
	out := CompileResult{ID: in.ID, Status: CompileFailed}
	quick := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           TaskQueue,
		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second,
			MaximumAttempts: 10},
	})
	// Fetching and compiling take long; heartbeats show they are alive,
	// and a killed server's activity is retried after the heartbeat
	// timeout rather than the start-to-close one.
	long := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           TaskQueue,
		StartToCloseTimeout: 20 * time.Minute,
		HeartbeatTimeout:    20 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second,
			MaximumAttempts: 5},
	})
	finish := func(status, message string, released *bool) error {
		return FinishCompileActivity.Run(quick, FinishCompileInput{
			EnvironmentID: in.EnvironmentID, ID: in.ID, Status: status, Message: message, Released: released,
		})
	}
	fail := func(step string, err error) (CompileResult, error) {
		if ferr := finish(CompileFailed, step+": "+cause(err), nil); ferr != nil {
			return out, fmt.Errorf("%s failed (%w), and recording it too: %w", step, err, ferr)
		}
		return out, nil
	}

	f, err := FetchCompileActivity.Run(long, in)
	if err != nil {
		return fail("fetch", err)
	}
	if f.Failed {
		return out, nil
	}
	b, err := BuildCompileActivity.Run(long, BuildCompileInput{
		EnvironmentID: in.EnvironmentID, ID: in.ID, Commit: f.Commit,
	})
	if err != nil {
		return fail("compile", err)
	}
	if b.Failed {
		return out, nil
	}
	out.Version = b.Version
	r, err := ReleaseCompileActivity.Run(quick, ReleaseCompileInput{
		EnvironmentID: in.EnvironmentID, ID: in.ID, Version: b.Version,
	})
	if err != nil {
		return fail("release", err)
	}
	if err := finish(CompileSucceeded, "", &r.Released); err != nil {
		return out, fmt.Errorf("record the compile's success: %w", err)
	}
	out.Status = CompileSucceeded
	return out, nil
}

// cause is the innermost message of a Temporal error (an activity's
// application error, a timeout), without the wrappers' event ids.
func cause(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	var to *temporal.TimeoutError
	if errors.As(err, &to) {
		return "timed out (" + to.TimeoutType().String() + ")"
	}
	var te *temporal.TerminatedError
	if errors.As(err, &te) {
		return "terminated"
	}
	var ce *temporal.CanceledError
	if errors.As(err, &ce) {
		return "cancelled"
	}
	return err.Error()
}
