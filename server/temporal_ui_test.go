package server_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/intendhq/intend/internal/names"
	"github.com/intendhq/intend/internal/testenv/wait"
)

// findWorkflows lists the workflows a visibility query finds, waiting up
// to 30 s for one with id want (visibility lags behind the workflows).
func findWorkflows(t *testing.T, tc client.Client, query, want string) *workflow.WorkflowExecutionInfo {
	t.Helper()
	var found *workflow.WorkflowExecutionInfo
	wait.For(t, fmt.Sprintf("%s to find %s", query, want), 30*time.Second, func() error {
		resp, err := tc.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err != nil {
			t.Fatalf("list %s: %v", query, err)
		}
		var ids []string
		for _, e := range resp.GetExecutions() {
			if e.GetExecution().GetWorkflowId() == want {
				found = e
				return nil
			}
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		return fmt.Errorf("found %v, not %s", ids, want)
	})
	return found
}

// memo decodes one field of a workflow's memo.
func memo(t *testing.T, e *workflow.WorkflowExecutionInfo, field string) string {
	t.Helper()
	var s string
	p := e.GetMemo().GetFields()[field]
	if p == nil {
		t.Fatalf("%s: no memo field %q (memo %v)", e.GetExecution().GetWorkflowId(), field, e.GetMemo())
	}
	if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// workflowDetails is a workflow's current details, as the Temporal UI
// reads them: the built-in metadata query (a closed workflow answers it
// by a replay of its history).
func workflowDetails(t *testing.T, tc client.Client, id string) string {
	t.Helper()
	v, err := tc.QueryWorkflow(context.Background(), id, "", "__temporal_workflow_metadata")
	if err != nil {
		t.Fatalf("query %s: %v", id, err)
	}
	var md sdkpb.WorkflowMetadata
	if err := v.Get(&md); err != nil {
		t.Fatal(err)
	}
	return md.GetCurrentDetails()
}

// TestTemporalUIFindsRunsAndInstances: what an operator finds in the
// Temporal UI. A user repair is found by IntendRunKind="repair" (the
// deploy before it by "deploy", a dry-run by "dryrun"), with its REST
// path in the memo and its counts and failed resource, with its error,
// in its current details; a service instance is found by
// IntendInstanceState="up" once up, with its REST path in the memo and
// its state in its current details.
func TestTemporalUIFindsRunsAndInstances(t *testing.T) {
	c, srv := startServer(t)
	tc := srv.Temporal()
	ctx := context.Background()
	env := newEnv(t, c, "ui", nil)
	dir := t.TempDir()
	blocker := filepath.Join(dir, "blocker")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := file(filepath.Join(blocker, "bad.txt"), "bad\n", "0644")
	first := deploy(t, c, env, body(t, file(filepath.Join(dir, "ok.txt"), "ok\n", "0644"), bad))
	req, err := c.Deploy(ctx, env, "full")
	if err != nil {
		t.Fatal(err)
	}
	repair, err := c.WaitRequest(ctx, env, req.ID, 60*time.Second, nil)
	if err != nil || repair.Action != "repair" || repair.Failed != 1 {
		t.Fatalf("repair run = %+v, %v", repair, err)
	}
	var dry struct {
		Run int64 `json:"run"`
	}
	if err := c.Do(ctx, http.MethodPost, "/api/v1/environments/"+env+"/dryrun", map[string]any{}, &dry); err != nil {
		t.Fatal(err)
	}

	inEnv := fmt.Sprintf("IntendEnvironment=%q AND ", env)
	repairID := names.DeployWorkflowID(env, repair.Run)
	e := findWorkflows(t, tc, inEnv+`IntendRunKind="repair"`, repairID)
	if got, want := memo(t, e, "run"), fmt.Sprintf("/api/v1/environments/%s/runs/%d", env, repair.Run); got != want {
		t.Errorf("repair's memo run = %q, want %q", got, want)
	}
	findWorkflows(t, tc, inEnv+`IntendRunKind="deploy"`, names.DeployWorkflowID(env, first.Run))
	e = findWorkflows(t, tc, inEnv+`IntendRunKind="dryrun"`, names.DryrunWorkflowID(env, dry.Run))
	if got, want := memo(t, e, "run"), fmt.Sprintf("/api/v1/environments/%s/dryrun/%d", env, dry.Run); got != want {
		t.Errorf("dry-run's memo run = %q, want %q", got, want)
	}
	details := workflowDetails(t, tc, repairID)
	for _, want := range []string{
		fmt.Sprintf("**repair run %d**", repair.Run), "| 2 | 2 | 1 | 1 | 0 | 0 |", "- `" + bad.ID + "` failed: ",
	} {
		if !strings.Contains(details, want) {
			t.Errorf("repair's details lack %q:\n%s", want, details)
		}
	}

	// A service instance, up.
	root := t.TempDir()
	if err := uploadModel(t, c, env, lsmFileModel(root)); err != nil {
		t.Fatal(err)
	}
	r := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/service_inventory/vm", "",
		map[string]any{"attributes": map[string]any{"name": "web", "memory": 2}})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	inst := waitState(t, c, env, r.instance(t).ID, "up", "rejected", "failed")
	instID := names.ServiceInstanceWorkflowID(env, "vm", inst.ID)
	e = findWorkflows(t, tc, inEnv+`IntendInstanceState="up"`, instID)
	if got, want := memo(t, e, "instance"), "/lsm/v1/service_inventory/vm/"+inst.ID; got != want {
		t.Errorf("instance's memo = %q, want %q", got, want)
	}
	if d := workflowDetails(t, tc, instID); !strings.Contains(d, fmt.Sprintf("state **up**, version %d", inst.Version)) {
		t.Errorf("instance's details:\n%s", d)
	}
}
