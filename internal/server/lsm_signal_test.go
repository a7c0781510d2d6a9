package server_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/intendhq/intend/internal/names"
	"github.com/intendhq/intend/workflows"
)

// TestDeployedSignalReachesInstance: the deploy run that deploys an
// instance's resources signals the instance's workflow when it finishes
// (intend.lsm.deployed), so its deploy wait ends then rather than at its
// next poll. The signal is read from the workflow's history, which keeps
// it whichever of the signal and a poll saw the deploy first.
func TestDeployedSignalReachesInstance(t *testing.T) {
	c, s := startServer(t)
	env := newEnv(t, c, "lsmsig", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmFileModel(root)); err != nil {
		t.Fatal(err)
	}
	r := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/service_inventory/vm", "",
		map[string]any{"attributes": map[string]any{"name": "sig", "memory": 3}})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	id := r.instance(t).ID
	start := time.Now()
	waitState(t, c, env, id, "up", "rejected", "failed")
	t.Logf("create -> up in %v", time.Since(start))
	if got, _ := readFile(t, filepath.Join(root, "sig.conf")); got != "memory=3\n" {
		t.Errorf("sig.conf = %q", got)
	}

	wfID := names.ServiceInstanceWorkflowID(env, "vm", id)
	deadline := time.Now().Add(30 * time.Second)
	ctx := context.Background()
	// The signal is sent after the run is recorded, which the instance
	// may see first by a poll: wait for it with a deadline.
	for {
		signalled, timerCancelled := false, false
		it := s.Temporal().GetWorkflowHistory(ctx, wfID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
				if ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == workflows.DeployedSignal {
					signalled = true
				}
			case enumspb.EVENT_TYPE_TIMER_CANCELED:
				timerCancelled = timerCancelled || signalled
			}
		}
		if signalled {
			t.Logf("signalled; a poll timer cancelled after the signal: %v", timerCancelled)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %s got no %s signal", wfID, workflows.DeployedSignal)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
