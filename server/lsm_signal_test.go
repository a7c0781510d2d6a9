package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/names"
	"github.com/intendhq/intend/internal/testenv/wait"
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
	ctx := context.Background()
	// The signal is sent after the run is recorded, which the instance
	// may see first by a poll: wait for it with a deadline.
	signalled, timerCancelled := false, false
	wait.For(t, "workflow "+wfID+" to get a "+workflows.DeployedSignal+" signal", 30*time.Second, func() error {
		signalled, timerCancelled = false, false
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
		return wait.Unless(signalled, "no signal in its history")
	})
	t.Logf("signalled; a poll timer cancelled after the signal: %v", timerCancelled)
}

// TestDeployedSignalReachesABurst: of instances created together, each is
// signalled by the run that deploys its resources, although that run was
// requested for an older version than the one that added them (a run's
// plan takes the resources' intent when it is planned, and its actions
// carry the version the run was requested for). Before, the signal's query matched the
// resources' membership at the run's version, found none, and such
// instances waited for their next poll: 5 s.
func TestDeployedSignalReachesABurst(t *testing.T) {
	c, s := startServer(t)
	env := newEnv(t, c, "lsmburst", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmFileModel(root)); err != nil {
		t.Fatal(err)
	}
	const n = 24
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := lsmTry(c, env, http.MethodPost, "/lsm/v1/service_inventory/vm", "",
				map[string]any{"attributes": map[string]any{"name": burstName(i), "memory": 2}})
			if err != nil || r.status != http.StatusCreated {
				t.Errorf("create %s: %v %d %s", burstName(i), err, r.status, r.body)
				return
			}
			var inst client.ServiceInstance
			if err := json.Unmarshal(r.body, &inst); err != nil {
				t.Error(err)
				return
			}
			ids[i] = inst.ID
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	ctx := context.Background()
	for _, id := range ids {
		waitState(t, c, env, id, "up", "rejected", "failed")
	}
	var unsignalled []string
	for i, id := range ids {
		signalled := false
		it := s.Temporal().GetWorkflowHistory(ctx, names.ServiceInstanceWorkflowID(env, "vm", id), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == workflows.DeployedSignal {
				signalled = true
			}
		}
		if !signalled {
			unsignalled = append(unsignalled, burstName(i))
		}
	}
	if len(unsignalled) > 0 {
		t.Fatalf("%d of %d instances got no %s signal (they waited for a poll): %v", len(unsignalled), n, workflows.DeployedSignal, unsignalled)
	}
}

// burstName is the i-th name of letters only (the entity's names are).
func burstName(i int) string { return "burst" + string(rune('a'+i/26)) + string(rune('a'+i%26)) }
