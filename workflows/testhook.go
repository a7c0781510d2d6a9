package workflows

import (
	"sync"
	"testing"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// The fault a test injects into the service-instance workflow: the
// Temporal server fails the workflow task that carries an update, as it
// does on a busy machine (see FailUpdateTasks). Nothing outside a test
// binary can set it: FailUpdateTasks panics there, so in production
// failUpdateTask only reads an empty map.
var (
	hookMu           sync.Mutex
	failUpdateTasksN map[string]int // workflow id → tasks still to fail
)

// undefinedSearchAttr is a search attribute no namespace registers: a
// workflow task that upserts it is failed by the Temporal server
// (BadSearchAttributes), not by the worker.
const undefinedSearchAttr = "IntendTestHookUndefined"

// FailUpdateTasks makes the next n workflow tasks of workflow id that
// carry a lifecycle update fail on the Temporal server: the server aborts
// the update it had sent with that task, and its caller gets
// serviceerror.WorkflowNotReady ("Unable to perform workflow execution
// update due to unexpected workflow task failure") with nothing accepted.
// That is what a task lost on a busy worker does to an update in flight;
// a panic in the workflow would not do it (the worker's own failure keeps
// the update, which Temporal delivers again). It returns the function
// that clears the fault. It panics outside a test binary.
func FailUpdateTasks(id string, n int) (clear func()) {
	if !testing.Testing() {
		panic("workflows.FailUpdateTasks is for tests only")
	}
	hookMu.Lock()
	defer hookMu.Unlock()
	if failUpdateTasksN == nil {
		failUpdateTasksN = map[string]int{}
	}
	failUpdateTasksN[id] = n
	return func() {
		hookMu.Lock()
		defer hookMu.Unlock()
		delete(failUpdateTasksN, id)
	}
}

// failUpdateTask is called first by every update handler: when a test
// asked for it (FailUpdateTasks), it adds a command the Temporal server
// refuses to the task, which the server then fails. Never on replay: an
// accepted update replays as it ran.
func failUpdateTask(ctx workflow.Context) {
	if workflow.IsReplaying(ctx) {
		return
	}
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	hookMu.Lock()
	n := failUpdateTasksN[id]
	if n > 0 {
		failUpdateTasksN[id] = n - 1
	}
	hookMu.Unlock()
	if n > 0 {
		_ = workflow.UpsertTypedSearchAttributes(ctx,
			temporal.NewSearchAttributeKeyKeyword(undefinedSearchAttr).ValueSet("fail this task"))
	}
}
