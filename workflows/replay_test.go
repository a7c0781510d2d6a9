package workflows

import (
	"testing"

	"go.temporal.io/sdk/worker"
)

// TestReplayCommittedHistories replays histories recorded from real runs
// (testdata/*.json, written by `temporal workflow show --output json`, or
// by the server tests that record them: each replays its own history and,
// with its INTEND_RECORD_*_HISTORY variable set to a file, writes it).
// A change to a workflow that would break running executions fails here;
// such a change needs workflow.GetVersion, not a new history.
//
// The scheduler's and the compile workflows' histories are recorded by
// server/replay_record_test.go; from the repository's root:
//
//	d=$PWD/workflows/testdata
//	INTEND_RECORD_SCHEDULER_HISTORY=$d/scheduler_lifecycle.json \
//	INTEND_RECORD_SCHEDULER_CONTINUED_HISTORY=$d/scheduler_continued.json \
//	INTEND_RECORD_COMPILE_QUEUE_HISTORY=$d/compile_queue.json \
//	INTEND_RECORD_COMPILE_HISTORY=$d/compile_released.json \
//	INTEND_RECORD_COMPILE_FAILED_HISTORY=$d/compile_failed.json \
//	INTEND_RECORD_COMPILE_FETCH_FAILED_HISTORY=$d/compile_fetch_failed.json \
//	  CI=1 go test -count=1 -run 'TestSchedulerHistory|TestCompileHistories' ./server/
//
// The others: INTEND_RECORD_DEPLOY_HISTORY (TestOneTaskQueueForManyAgents,
// deploy_gen3_shared.json), INTEND_RECORD_ORDER_HISTORY and
// INTEND_RECORD_INSTANCE_HISTORY (server/lsm_orders_test.go's callers of
// replayHistory). Record a history anew only for a change that running
// executions need not replay (one behind workflow.GetVersion or a
// generation in the input), and keep the old one.
func TestReplayCommittedHistories(t *testing.T) {
	t.Parallel()
	for _, h := range []struct{ file, why string }{
		{"testdata/deploy_quickstart.json", "the quick start: 4 resources in 3 requires levels, one purged"},
		{"testdata/deploy_outcome_gen1.json", "TestRunResultInTemporalWithoutServer, generation 1: a command failing at " +
			"its 3 attempts (2 retries within the run), a file skipped for it; RunOutcome, the memo and IntendRunResult upserted"},
		{"testdata/deploy_gen3_shared.json", "TestOneTaskQueueForManyAgents, generation 3: one batch of 120 agents " +
			"on the embedded queue; two agents' batches that waited their agent_timeout in their own queues, routed " +
			"again (local activities) to the pool an executor started since"},
		{"testdata/lsm_site_lifecycle.json", "examples/lsm: a site created, updated, an update rejected by validation, deleted: terminated"},
		{"testdata/lsm_order_compensated.json", "an all_or_nothing order of TestOrders: an update and two creates, " +
			"one rejected by validation, a delete held back and skipped, all compensated"},
		{"testdata/lsm_auto_off_expert.json", "auto transfers off: a create taken to acknowledged and creating by set-state, " +
			"an update waiting in update_start until auto transfers are turned back on (signal), two expert transfers " +
			"(to failed; to up with another active set, exported), deleted: terminated"},
		{"testdata/lsm_instance_timers.json", "TestServiceInventoryWrites after the waits cancel their timers " +
			"(load-lost-create version 2): its creates, updates, a rejected update and its delete"},
		{"testdata/lsm_instance_gen1.json", "the same, started as generation 1 (ServiceInstanceInput.Generation): " +
			"no GetVersion marker, no search attribute upsert"},
		{"testdata/lsm_instance_gen2.json", "generation 2: IntendInstanceState upserted where the instance settles " +
			"(create: creating, up; an update: updating, up; an update rejected by validation: none; delete: deleting, " +
			"terminated), no GetVersion marker"},
		{"testdata/scheduler_lifecycle.json", "TestSchedulerHistory: a scheduler from its first take (adopt): releases " +
			"(wake), a failure deployed again by the retry timer, a repair by the repair timer, a user repair, a repair-only " +
			"run preempted by a release (signal to the child), a halt and a resume, then continued as new (Renew)"},
		{"testdata/scheduler_continued.json", "the same scheduler's continued run (Continued, not Woken): idle " +
			"until a release wakes it, one run deployed, terminated when the environment stops"},
		{"testdata/compile_queue.json", "TestCompileHistories: a compile queue through the recompile_interval timer " +
			"(two schedule compiles, the timer fired), requests (signals) while its timer sleeps, the timer turned off: ended"},
		{"testdata/compile_released.json", "a compile that fetched, compiled, exported and released a version"},
		{"testdata/compile_failed.json", "a compile whose model did not compile (BuildCompile Failed): nothing exported"},
		{"testdata/compile_fetch_failed.json", "a compile of a repository that does not exist (FetchCompile Failed)"},
	} {
		r := worker.NewWorkflowReplayer()
		Register(r)
		RegisterServiceInstance(r)
		RegisterOrders(r)
		RegisterCompile(r)
		if err := r.ReplayWorkflowHistoryFromJSONFile(nil, h.file); err != nil {
			t.Errorf("%s (%s): %v", h.file, h.why, err)
		}
	}
}
