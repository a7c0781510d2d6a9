package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/intendhq/intend/internal/names"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/workflows"
)

// TestRunResultInTemporalWithoutServer: a run that left resources
// undeployed is told from a clean one in the Temporal UI's workflow list
// (IntendRunResult "failed", "ok"), and its page names each failed and
// skipped resource once with its error, read from the history with no
// intend server running: a command that fails at each of its three
// attempts in the run (retry_attempts 2) is listed once, with its
// attempts, and the file that requires it as skipped for it (issue 27).
func TestRunResultInTemporalWithoutServer(t *testing.T) {
	c, srv := startServer(t)
	ctx := context.Background()
	env := newEnv(t, c, "result", map[string]any{"deploy_interval": 0, "repair_interval": 0,
		"retry_attempts": 2, "retry_backoff": 1})
	dir := t.TempDir()
	ok := file(filepath.Join(dir, "ok.txt"), "ok\n", "0644")
	clean := deploy(t, c, env, body(t, ok))
	if clean.Status != "done" || clean.Deployed != 1 {
		t.Fatalf("clean run = %+v", clean)
	}
	broken := res{ID: "exec::Command[other,name=broken]", Attributes: map[string]any{
		"name": "broken", "command": "echo broken-on-purpose >&2; exit 3", "cwd": dir,
		"creates": filepath.Join(dir, "never"),
	}}
	after := file(filepath.Join(dir, "after.txt"), "after\n", "0644", broken.ID)
	run := deploy(t, c, env, body(t, ok, broken, after))
	if run.Failed != 1 || run.Skipped != 1 {
		t.Fatalf("run = %+v, want 1 failed, 1 skipped", run)
	}

	// The run's workflow ends a moment after PostgreSQL says it is done.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var res workflows.DeployResult
	if err := srv.Temporal().GetWorkflow(wctx, names.DeployWorkflowID(env, run.Run), "").Get(wctx, &res); err != nil {
		t.Fatal(err)
	}

	// No intend server runs any more: what is left is Temporal's.
	if envs, err := srv.Store().ListEnvironments(ctx, ""); err == nil {
		for _, e := range envs {
			_ = srv.Schedulers().Stop(ctx, e)
		}
	}
	srv.Shutdown(ctx)
	tc, _, _ := testenv.Temporal(t)

	inEnv := fmt.Sprintf("IntendEnvironment=%q AND ", env)
	runID := names.DeployWorkflowID(env, run.Run)
	findWorkflows(t, tc, inEnv+`IntendRunResult = 'failed'`, runID)
	findWorkflows(t, tc, inEnv+`IntendRunResult = 'ok'`, names.DeployWorkflowID(env, clean.Run))

	d, err := tc.DescribeWorkflowExecution(ctx, runID, "")
	if err != nil {
		t.Fatal(err)
	}
	lines := func(field string) []string {
		t.Helper()
		var out []string
		p := d.GetWorkflowExecutionInfo().GetMemo().GetFields()[field]
		if p == nil {
			t.Fatalf("no memo field %q: %v", field, d.GetWorkflowExecutionInfo().GetMemo())
		}
		if err := converter.GetDefaultDataConverter().FromPayload(p, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	failed, skipped := lines("failed"), lines("skipped")
	if len(failed) != 1 || !strings.HasPrefix(failed[0], broken.ID+": failed (3 attempts): ") ||
		!strings.Contains(failed[0], "exited with status 3") {
		t.Errorf("memo failed = %q, want %s once, failed after 3 attempts with its error", failed, broken.ID)
	}
	want := after.ID + ": skipped_for_dependency: requires " + broken.ID + ", which is not deployed (failed)"
	if !slices.Equal(skipped, []string{want}) {
		t.Errorf("memo skipped = %q, want [%q]", skipped, want)
	}
	if res.Result != workflows.RunResultFailed {
		t.Errorf("result = %+v; want IntendRunResult failed in it", res)
	}
	var resp *workflowservice.CountWorkflowExecutionsResponse
	if resp, err = tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Query: inEnv + `IntendRunResult = 'failed'`}); err != nil || resp.GetCount() != 1 {
		t.Errorf("count of failed runs = %d, %v; want 1", resp.GetCount(), err)
	}
}
