package workflows

import (
	"testing"

	"go.temporal.io/sdk/worker"
)

// TestReplayCommittedHistories replays histories recorded from real runs
// (testdata/*.json, written by `temporal workflow show --output json`).
// A change to a workflow that would break running executions fails here;
// such a change needs workflow.GetVersion, not a new history.
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
	} {
		r := worker.NewWorkflowReplayer()
		Register(r)
		RegisterServiceInstance(r)
		RegisterOrders(r)
		if err := r.ReplayWorkflowHistoryFromJSONFile(nil, h.file); err != nil {
			t.Errorf("%s (%s): %v", h.file, h.why, err)
		}
	}
}
