package server_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/names"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/workflows"
)

// TestLSMUpdateLostWithItsTask: a lifecycle write whose workflow task the
// Temporal server failed (it aborts the update it carried: WorkflowNotReady,
// "Unable to perform workflow execution update due to unexpected workflow
// task failure") is sent again, same update id, within the request's wait,
// and answered as if nothing had happened; when the task keeps failing
// until the wait runs out, the answer is 503 with Retry-After, never 500.
// Under load (a task that timed out on a busy worker) this answered 500 to
// `intend lsm set-state … deleting` and `intend lsm delete`
// (TestExampleLSM, TestExampleLSMRelations); workflows.FailUpdateTasks
// makes the server fail the task that carries the update, every time.
func TestLSMUpdateLostWithItsTask(t *testing.T) {
	c, s, db := startServerDB(t)
	env := newEnv(t, c, "lsmlost", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmFileModel(root)); err != nil {
		t.Fatal(err)
	}
	const item = "/lsm/v1/service_inventory/vm/lost"
	// The create's task lost (the workflow's first, started with the
	// update): the update with start is sent again and joins the run.
	const id = "6f1c2a34-6b7d-4e8f-9a0b-1c2d3e4f5a6b"
	wfID := names.ServiceInstanceWorkflowID(env, "vm", id)
	clear := workflows.FailUpdateTasks(wfID, 1)
	r := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/service_inventory/vm", "",
		map[string]any{"service_instance_id": id, "attributes": map[string]any{"name": "lost", "memory": 2}})
	clear()
	if r.status != http.StatusCreated {
		t.Fatalf("create whose first task failed: %d %s", r.status, r.body)
	}
	failedTasks(t, s, wfID, 1)
	inst := waitState(t, c, env, "lost", "up", "rejected", "failed")

	// An update's task lost: the update is sent again and applied.
	clear = workflows.FailUpdateTasks(wfID, 1)
	r = lsmDo(t, c, env, http.MethodPatch, item, "",
		map[string]any{"current_version": inst.Version, "attributes": map[string]any{"memory": 3}})
	clear()
	if r.status != http.StatusOK {
		t.Fatalf("update whose first task failed: %d %s", r.status, r.body)
	}
	failedTasks(t, s, wfID, 2)
	inst = waitState(t, c, env, "lost", "up", "rejected", "failed")
	if got, _ := readFile(t, filepath.Join(root, "lost.conf")); got != "memory=3\n" {
		t.Errorf("lost.conf = %q", got)
	}

	// Every task lost until the wait runs out: 503 with Retry-After, on a
	// second replica that waits 3 s. The update may still be applied (the
	// server may hold the last one sent): the client repeats the request
	// with its Idempotency-Key, which is the update's id, and gets the
	// one outcome, whichever attempt it was.
	c2, _, _ := startValidated(t, server.Config{DatabaseURL: db, LSMWait: 3 * time.Second})
	del := item + "?current_version=" + strconv.FormatInt(inst.Version, 10)
	clear = workflows.FailUpdateTasks(wfID, 1<<20)
	r = lsmDo(t, c2, env, http.MethodDelete, del, "delete-lost", nil)
	clear()
	if p := r.problem(t); r.status != http.StatusServiceUnavailable || p.Type != api.TypeUnavailable ||
		r.header.Get("Retry-After") == "" {
		t.Fatalf("delete whose every task failed: %d (Retry-After %q) %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	failedTasks(t, s, wfID, 3)

	// The repeat, its first task lost too: applied once.
	clear = workflows.FailUpdateTasks(wfID, 1)
	r = lsmDo(t, c, env, http.MethodDelete, del, "delete-lost", nil)
	clear()
	if r.status != http.StatusOK || r.instance(t).State != "deleting" {
		t.Fatalf("delete repeated: %d %s", r.status, r.body)
	}
	waitState(t, c, env, inst.ID, "terminated", "delete_failed")
}

// failedTasks checks that the Temporal server failed at least n workflow
// tasks of workflow id for the fault's search attribute: the fault was
// there, so the test can tell a retried update from an untouched one.
func failedTasks(t *testing.T, s *server.Server, id string, n int) {
	t.Helper()
	hist := s.Temporal().GetWorkflowHistory(context.Background(), id, "", false,
		enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	got := 0
	for hist.HasNext() {
		ev, err := hist.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetWorkflowTaskFailedEventAttributes(); a != nil &&
			a.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_BAD_SEARCH_ATTRIBUTES {
			got++
		}
	}
	if got < n {
		t.Fatalf("workflow %s: %d tasks failed by the server, want at least %d: the fault did not happen", id, got, n)
	}
}
