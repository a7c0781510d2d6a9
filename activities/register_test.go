package activities_test

import (
	"slices"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/intendhq/intend/activities"
	"github.com/intendhq/intend/activities/agent"
	"github.com/intendhq/intend/workflows"
)

// registrations counts the names registered, and passes each activity on
// to a test environment (which refuses a function Temporal cannot run).
type registrations struct {
	count map[string]int
	env   *testsuite.TestActivityEnvironment
}

func (r *registrations) RegisterActivityWithOptions(a any, o activity.RegisterOptions) {
	r.count[o.Name]++
	r.env.RegisterActivityWithOptions(a, o)
}

// TestEveryActivityRegisteredOnce: every activity handle the workflows
// declare (workflows.Activities) is registered exactly once by the
// Register functions the orchestration worker (Orchestration, LSM,
// LSMOrders, Compiler) and the executors (agent.Executor) call, and they
// register nothing else: a new activity cannot be forgotten, nor
// registered under a name no workflow runs.
func TestEveryActivityRegisteredOnce(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	r := &registrations{count: map[string]int{}, env: s.NewTestActivityEnvironment()}
	(&activities.Orchestration{}).Register(r)
	(&activities.LSM{}).Register(r)
	(&activities.LSMOrders{}).Register(r)
	(&activities.Compiler{}).Register(r)
	(&agent.Executor{}).Register(r)

	all := workflows.Activities()
	if len(all) == 0 {
		t.Fatal("workflows.Activities() lists no activity")
	}
	for _, name := range all {
		if n := r.count[name]; n != 1 {
			t.Errorf("activity %s is registered %d times, want once", name, n)
		}
	}
	for name := range r.count {
		if !slices.Contains(all, name) {
			t.Errorf("%s is registered, but no workflows handle has that name", name)
		}
	}
}
