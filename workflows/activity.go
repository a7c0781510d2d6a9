package workflows

import (
	"context"
	"fmt"
	"slices"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"
)

// Activities are named through typed handles, never through strings: a
// handle is the name registered with Temporal together with the
// activity's input and output types. A workflow runs an activity through
// its handle (Run, RunLocal, Start) and the activities register under it
// (Register), so the compiler checks both sides against one signature: a
// workflow cannot pass the wrong input nor decode into the wrong output,
// and an activity registered under a handle has the handle's signature.
//
// Handles are declared next to their input and output types (contract.go
// and the lsm_*.go and compile.go contracts) with newActivity or
// newActivityNoResult, which list them for Activities. The names are part
// of intend's API (histories, the Temporal UI, other workers): a handle's
// name never changes.

// ActivityRegistry is what an activity registers with: a worker
// (worker.Worker, worker.ActivityRegistry) or a test environment.
type ActivityRegistry interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// Activity is the handle of an activity that takes In and returns Out.
type Activity[In, Out any] struct{ name string }

// ActivityNoResult is the handle of an activity that takes In and returns
// only an error (no result payload).
type ActivityNoResult[In any] struct{ name string }

// activityNames are the names of the handles declared, each once.
var activityNames = map[string]bool{}

func declare(name string) string {
	if name == "" || activityNames[name] {
		panic(fmt.Sprintf("workflows: activity %q declared twice or without a name", name))
	}
	activityNames[name] = true
	return name
}

func newActivity[In, Out any](name string) Activity[In, Out] {
	return Activity[In, Out]{name: declare(name)}
}

func newActivityNoResult[In any](name string) ActivityNoResult[In] {
	return ActivityNoResult[In]{name: declare(name)}
}

// Activities returns the names of every activity handle, sorted: each is
// registered by exactly one of the orchestration and agent workers'
// Register functions (activities.TestEveryActivityRegisteredOnce).
func Activities() []string {
	out := make([]string, 0, len(activityNames))
	for n := range activityNames {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Name is the name the activity is registered under.
func (a Activity[In, Out]) Name() string { return a.name }

// Start schedules the activity with ctx's activity options; its future
// gives the result.
func (a Activity[In, Out]) Start(ctx workflow.Context, in In) Future[Out] {
	return Future[Out]{workflow.ExecuteActivity(ctx, a.name, in)}
}

// StartLocal runs the activity as a local activity with ctx's local
// activity options; its future gives the result.
func (a Activity[In, Out]) StartLocal(ctx workflow.Context, in In) Future[Out] {
	return Future[Out]{workflow.ExecuteLocalActivity(ctx, a.name, in)}
}

// Run runs the activity with ctx's activity options and waits for its
// result.
func (a Activity[In, Out]) Run(ctx workflow.Context, in In) (Out, error) {
	return a.Start(ctx, in).Get(ctx)
}

// RunLocal runs the activity as a local activity with ctx's local activity
// options and waits for its result.
func (a Activity[In, Out]) RunLocal(ctx workflow.Context, in In) (Out, error) {
	return a.StartLocal(ctx, in).Get(ctx)
}

// Register registers fn as the activity on r, under the handle's name.
func (a Activity[In, Out]) Register(r ActivityRegistry, fn func(context.Context, In) (Out, error)) {
	r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: a.name})
}

// Name is the name the activity is registered under.
func (a ActivityNoResult[In]) Name() string { return a.name }

// Run runs the activity with ctx's activity options and waits for it to
// end.
func (a ActivityNoResult[In]) Run(ctx workflow.Context, in In) error {
	return workflow.ExecuteActivity(ctx, a.name, in).Get(ctx, nil)
}

// RunLocal runs the activity as a local activity with ctx's local activity
// options and waits for it to end.
func (a ActivityNoResult[In]) RunLocal(ctx workflow.Context, in In) error {
	return workflow.ExecuteLocalActivity(ctx, a.name, in).Get(ctx, nil)
}

// Register registers fn as the activity on r, under the handle's name.
func (a ActivityNoResult[In]) Register(r ActivityRegistry, fn func(context.Context, In) error) {
	r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: a.name})
}

// Future is the future of an activity's result. Its embedded
// workflow.Future is the SDK's, for a selector (AddFuture); Get decodes
// the result as Out.
type Future[Out any] struct{ workflow.Future }

// Get waits for the activity and returns its result.
func (f Future[Out]) Get(ctx workflow.Context) (Out, error) {
	var out Out
	err := f.Future.Get(ctx, &out)
	return out, err
}
