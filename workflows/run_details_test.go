package workflows

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/mock"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
)

// metadataQuery is the SDK's built-in query that answers a workflow's
// metadata, its current details among them (the SDK exports no name for
// it).
const metadataQuery = "__temporal_workflow_metadata"

// currentDetails is the workflow's current details, as the Temporal UI
// reads them (the built-in metadata query).
func currentDetails(t *testing.T, env *testsuite.TestWorkflowEnvironment) string {
	t.Helper()
	v, err := env.QueryWorkflow(metadataQuery)
	if err != nil {
		t.Fatal(err)
	}
	var md sdkpb.WorkflowMetadata
	if err := v.Get(&md); err != nil {
		t.Fatal(err)
	}
	return md.GetCurrentDetails()
}

// runDeployEnv runs a deploy run with f's activities, started with
// IntendRunKind kind unless "", and returns its environment to query.
func runDeployEnv(t *testing.T, f *fakeActivities, in DeployInput, kind string) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Deploy, workflowRegisterOptions())
	f.register(env)
	if kind != "" {
		if err := env.SetTypedSearchAttributesOnStart(RunSearchAttributes("prod", 7, kind)); err != nil {
			t.Fatal(err)
		}
	}
	env.ExecuteWorkflow(DeployWorkflowName, in)
	return env
}

// TestDeployShowsProgressAndFailures: a run's current details name its
// kind (its IntendRunKind), count its resources and list the first
// maxRunFailures not deployed with their error, cut to MaxFailureError
// bytes on a rune boundary, and a batch no executor took.
func TestDeployShowsProgressAndFailures(t *testing.T) {
	t.Parallel()
	f := newFake([]BatchRef{
		{Seq: 1, Agent: "a", Level: 0, Count: 15}, {Seq: 2, Agent: "b", Level: 0, Count: 15},
		{Seq: 3, Agent: "a", Level: 1, Count: 2},
	})
	long := strings.Repeat("é", MaxFailureError) // 2 bytes a rune
	f.outcome = func(in BatchInput) (BatchResult, error) {
		if in.Seq == 3 {
			return BatchResult{Deployed: 2}, nil
		}
		res := BatchResult{Deployed: 3, Failed: 12}
		for i := range 12 {
			res.Failures = append(res.Failures, ResourceFailure{
				ID: fmt.Sprintf("x::R[h,n=%d-%d]", in.Seq, i), Result: "failed", Error: long})
		}
		return res, nil
	}
	env := runDeployEnv(t, f, DeployInput{EnvironmentName: "prod", Run: 5, MaxInFlight: 1}, RunKindRepair)
	var res DeployResult
	if err := env.GetWorkflowResult(&res); err != nil || res.Failed != 24 {
		t.Fatalf("run = %+v, %v", res, err)
	}
	got := currentDetails(t, env)
	for _, want := range []string{
		"**repair run 5** of version 7 in `prod`: done",
		"| 32 | 32 | 8 | 24 | 0 | 0 |",
		"- `x::R[h,n=1-0]` failed: é",
		"- `x::R[h,n=2-7]` failed",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("details lack %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n- "); n != maxRunFailures {
		t.Errorf("details list %d failures, want the first %d:\n%s", n, maxRunFailures, got)
	}
	if strings.Contains(got, "n=2-8") {
		t.Errorf("details list a failure beyond the first %d", maxRunFailures)
	}
	if !utf8.ValidString(got) || len(got) > 32*1024 || !strings.Contains(got, "é…") {
		t.Errorf("details of %d bytes, errors not cut on a rune boundary with a mark", len(got))
	}
}

// TestDeployShowsUnavailableBatch: a batch no executor took is listed by
// its first resource, with the reason.
func TestDeployShowsUnavailableBatch(t *testing.T) {
	t.Parallel()
	f := newFake([]BatchRef{{Seq: 1, Agent: "gone", Level: 0, Count: 3, First: "x::R[h,n=a]"}})
	f.outcome = func(BatchInput) (BatchResult, error) {
		return BatchResult{}, fmt.Errorf("boom")
	}
	env := runDeployEnv(t, f, DeployInput{EnvironmentName: "prod", Run: 6}, "")
	got := currentDetails(t, env)
	if !strings.Contains(got, "**deploy run 6**") || !strings.Contains(got, "- `x::R[h,n=a] and 2 more` failed: executor gave up") {
		t.Errorf("details:\n%s", got)
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		n    int
		want string
		why  string
	}{
		{"short", 10, "short", "fits: unchanged"},
		{"abcdefghij", 10, "abcdefghij", "exactly n bytes: unchanged"},
		{"abcdefghijk", 10, "abcdefg…", "cut to n bytes with the mark"},
		{"ééééé", 6, "é…", "never in the middle of a rune"},
	} {
		if got := truncate(c.in, c.n); got != c.want || len(got) > c.n {
			t.Errorf("truncate(%q, %d) = %q, want %q (%s)", c.in, c.n, got, c.want, c.why)
		}
	}
}

func TestRunMemo(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env, kind string
		want      string
	}{
		{"prod", RunKindRepair, "/api/v1/environments/prod/runs/12"},
		{"prod", RunKindDeploy, "/api/v1/environments/prod/runs/12"},
		{"prod", RunKindDryrun, "/api/v1/environments/prod/dryrun/12"},
		{"a b", RunKindDeploy, "/api/v1/environments/a%20b/runs/12"},
	} {
		if got := RunMemo(c.env, c.kind, 12)["run"]; got != c.want {
			t.Errorf("RunMemo(%q, %q) run = %v, want %s", c.env, c.kind, got, c.want)
		}
	}
}

// TestAppendFailure: at most limit failures, each id and error bounded.
func TestAppendFailure(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 2*MaxFailureError)
	var fs []ResourceFailure
	for range 3 {
		fs = AppendFailure(fs, 2, ResourceFailure{ID: long, Result: "failed", Error: long})
	}
	if len(fs) != 2 || len(fs[0].ID) > MaxFailureError || len(fs[0].Error) > MaxFailureError {
		t.Errorf("%d failures, id of %d bytes, error of %d; want 2, each at most %d", len(fs), len(fs[0].ID),
			len(fs[0].Error), MaxFailureError)
	}
}

// retriedFailure is a run of two levels: x::R[h,n=a] fails (transiently)
// at level 0 and again at each of the run's two retries, with a new
// error each time; x::R[h,n=b] at level 1 requires it and is skipped.
func retriedFailure(gen int) (*fakeActivities, DeployInput) {
	f := newFake([]BatchRef{
		{Seq: 1, Agent: "a", Level: 0, Count: 1, First: "x::R[h,n=a]"},
		{Seq: 2, Agent: "b", Level: 1, Count: 1, First: "x::R[h,n=b]"},
	})
	f.outcome = func(in BatchInput) (BatchResult, error) {
		if in.Seq == 2 {
			return BatchResult{Skipped: 1}, nil
		}
		return BatchResult{Failed: 1, Retry: 1, Failures: []ResourceFailure{
			{ID: "x::R[h,n=a]", Result: "failed", Error: fmt.Sprintf("boom %d", in.Seq)}}}, nil
	}
	next := 3
	f.planRetry = func(in PlanRetryInput) (PlanRetryResult, error) {
		next++
		return PlanRetryResult{Batches: []BatchRef{{Seq: next, Agent: "a", Level: 0, Count: 1, First: "x::R[h,n=a]"}},
			Failed: 1}, nil
	}
	return f, DeployInput{EnvironmentName: "prod", Run: 8, RetryAttempts: 2, RetryBackoffSeconds: 1, Generation: gen}
}

// TestDeployRecordsItsOutcomeInHistory: a run of generation 1 ends by
// upserting IntendRunResult and writing the resources it did not deploy
// to its memo, each once (the failed one with its last error and its
// three attempts, the one skipped for it with the reason), so the
// Temporal UI shows them from the history, with no worker to answer a
// query; the result carries IntendRunResult too.
func TestDeployRecordsItsOutcomeInHistory(t *testing.T) {
	t.Parallel()
	f, in := retriedFailure(DeployGeneration)
	outcome := RunOutcome{
		Failed:      []RunResource{{ID: "x::R[h,n=a]", Result: "failed", Error: "boom 6", Attempts: 3}},
		Skipped:     []RunResource{{ID: "x::R[h,n=b]", Result: "skipped_for_dependency", Error: "requires x::R[h,n=a], which is not deployed (failed)", Attempts: 1}},
		FailedCount: 1, SkippedCount: 25,
	}
	var asked []RunOutcomeInput
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Deploy, workflowRegisterOptions())
	f.register(env)
	RunOutcomeActivity.Register(env, func(_ context.Context, in RunOutcomeInput) (RunOutcome, error) {
		asked = append(asked, in)
		return outcome, nil
	})
	var memo map[string]any
	env.OnUpsertMemo(mock.Anything).Run(func(args mock.Arguments) { memo = args.Get(0).(map[string]any) }).Return(nil)
	var result []string
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		v, _ := sa.GetKeyword(temporal.NewSearchAttributeKeyKeyword(SearchAttrRunResult))
		result = append(result, v)
	}).Return(nil)
	env.ExecuteWorkflow(DeployWorkflowName, in)
	var res DeployResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Result != RunResultFailed || res.Failed != 1 || res.Skipped != 1 {
		t.Errorf("result = %+v, want failed: 1 failed, 1 skipped", res)
	}
	if len(result) != 1 || result[0] != RunResultFailed {
		t.Errorf("IntendRunResult upserts = %q, want [failed]", result)
	}
	if len(asked) != 1 || asked[0].Limit != maxRunFailures || asked[0].Run != 8 {
		t.Errorf("RunOutcome asked %+v, want once for run 8 with limit %d", asked, maxRunFailures)
	}
	want := map[string]any{
		"failed": []string{"x::R[h,n=a]: failed (3 attempts): boom 6"},
		"skipped": []string{"x::R[h,n=b]: skipped_for_dependency: requires x::R[h,n=a], which is not deployed (failed)",
			"and 24 more"},
	}
	if fmt.Sprint(memo) != fmt.Sprint(want) {
		t.Errorf("memo = %v\nwant   %v", memo, want)
	}
	got := currentDetails(t, env)
	if strings.Count(got, "x::R[h,n=a]") != 2 || !strings.Contains(got, "- `x::R[h,n=a]` failed (3 attempts): boom 6") ||
		!strings.Contains(got, "- `x::R[h,n=b]` skipped_for_dependency: requires") || !strings.Contains(got, "- and 24 more") {
		t.Errorf("details, want the failure once and the skipped one (and the reason naming the failure):\n%s", got)
	}
}

// TestDeployOfGenerationZeroReplaysAsBefore: a run started before
// generations (a history being replayed) neither asks for its outcome
// nor upserts anything; its current details list a resource retried
// within the run once, with its last error.
func TestDeployOfGenerationZeroReplaysAsBefore(t *testing.T) {
	t.Parallel()
	f, in := retriedFailure(0)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Deploy, workflowRegisterOptions())
	f.register(env)
	asked := 0
	RunOutcomeActivity.Register(env, func(_ context.Context, in RunOutcomeInput) (RunOutcome, error) {
		asked++
		return RunOutcome{}, nil
	})
	upserts := 0
	env.OnUpsertMemo(mock.Anything).Run(func(mock.Arguments) { upserts++ }).Return(nil)
	env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(mock.Arguments) { upserts++ }).Return(nil)
	env.ExecuteWorkflow(DeployWorkflowName, in)
	var res DeployResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Result != "" || asked != 0 || upserts != 0 {
		t.Errorf("generation 0: result %q, %d RunOutcome calls, %d upserts; want none", res.Result, asked, upserts)
	}
	got := currentDetails(t, env)
	if n := strings.Count(got, "x::R[h,n=a]"); n != 1 || !strings.Contains(got, "- `x::R[h,n=a]` failed: boom 5") {
		t.Errorf("details list x::R[h,n=a] %d times, want once with its last error:\n%s", n, got)
	}
}

func TestRunResultOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		res  DeployResult
		want string
		why  string
	}{
		{DeployResult{Total: 3, Deployed: 3}, RunResultOK, "all deployed"},
		{DeployResult{}, RunResultOK, "nothing to do"},
		{DeployResult{Deployed: 1, Failed: 1, Skipped: 1}, RunResultFailed, "a failure"},
		{DeployResult{Unavailable: 2}, RunResultFailed, "no executor took a batch"},
		{DeployResult{Failed: 1, Preempted: true}, RunResultFailed, "a failure wins over the preemption"},
		{DeployResult{Deployed: 1, Preempted: true}, RunResultPreempted, "preempted"},
		{DeployResult{Halted: true, Skipped: 2}, RunResultPreempted, "halted: nothing attempted"},
		{DeployResult{Deployed: 1, Skipped: 1}, RunResultSkipped, "an undefined or report-only resource"},
	} {
		if got := RunResultOf(c.res); got != c.want {
			t.Errorf("RunResultOf(%+v) = %q, want %q (%s)", c.res, got, c.want, c.why)
		}
	}
}
