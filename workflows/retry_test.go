package workflows

import (
	"slices"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
)

// retryFake: level 0 has batch 0 (3 resources) whose first attempt leaves
// 2 failed with a retryable error; level 1 has batch 1. Retry batches are
// numbered from 2 and deploy everything.
func retryFake(firstRetryAfter int) *fakeActivities {
	f := newFake([]BatchRef{{Seq: 0, Agent: "a", Level: 0, Count: 3}, {Seq: 1, Agent: "a", Level: 1, Count: 1}})
	f.outcome = func(in BatchInput) (BatchResult, error) {
		switch in.Seq {
		case 0:
			return BatchResult{Deployed: 1, Failed: 2, Retry: 2, RetryAfterSeconds: firstRetryAfter}, nil
		case 1:
			return BatchResult{Deployed: 1}, nil
		default: // a retry batch
			return BatchResult{Deployed: 2, Changed: 2}, nil
		}
	}
	f.planRetry = func(in PlanRetryInput) (PlanRetryResult, error) {
		f.levelOf[in.NextSeq] = 0
		return PlanRetryResult{Batches: []BatchRef{{Seq: in.NextSeq, Agent: "a", Level: 0, Count: 2}}, Failed: 2}, nil
	}
	return f
}

func timers(durations *[]time.Duration) func(env *testsuite.TestWorkflowEnvironment) {
	return func(env *testsuite.TestWorkflowEnvironment) {
		env.SetOnTimerScheduledListener(func(_ string, d time.Duration) { *durations = append(*durations, d) })
	}
}

func TestDeployRetriesALevelBeforeTheNext(t *testing.T) {
	t.Parallel()
	f := retryFake(0)
	var waits []time.Duration
	res, err := runWith(t, f, DeployInput{EnvironmentID: "e", EnvironmentName: "env", Run: 1,
		RetryAttempts: 2, RetryBackoffSeconds: 5}, timers(&waits))
	if err != nil {
		t.Fatal(err)
	}
	if f.orderErr != nil {
		t.Fatal(f.orderErr)
	}
	if !slices.Equal(f.started, []int{0, 2, 1}) {
		t.Fatalf("batches ran in order %v, want the retry batch 2 before level 1's batch 1", f.started)
	}
	if len(f.retries) != 1 || !slices.Equal(f.retries[0].Seqs, []int{0}) || f.retries[0].NextSeq != 2 {
		t.Fatalf("PlanRetry calls %+v, want one for batch 0 numbering from 2", f.retries)
	}
	if !slices.Equal(waits, []time.Duration{5 * time.Second}) {
		t.Fatalf("timers %v, want one 5s backoff", waits)
	}
	if res.Deployed != 4 || res.Failed != 0 || res.Batches != 3 {
		t.Fatalf("result %+v, want 4 deployed, 0 failed (the retried 2 counted once), 3 batches", res)
	}
	if f.finished == nil || f.finished.Deployed != 4 || f.finished.Failed != 0 {
		t.Fatalf("finish recorded %+v", f.finished)
	}
}

func TestDeployRetryBacksOffAndStops(t *testing.T) {
	t.Parallel()
	f := retryFake(0)
	f.outcome = func(in BatchInput) (BatchResult, error) {
		if in.Seq == 1 {
			return BatchResult{Deployed: 1}, nil
		}
		return BatchResult{Deployed: 0, Failed: 2, Retry: 2}, nil // keeps failing
	}
	f.plan.Batches[0].Count = 2
	var waits []time.Duration
	res, err := runWith(t, f, DeployInput{EnvironmentID: "e", EnvironmentName: "env", Run: 1,
		RetryAttempts: 3, RetryBackoffSeconds: 5}, timers(&waits))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(waits, []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second}) {
		t.Fatalf("timers %v, want 5s, 10s, 20s", waits)
	}
	if len(f.retries) != 3 || f.retries[2].NextSeq != 4 {
		t.Fatalf("PlanRetry calls %+v, want 3 numbering 2, 3, 4", f.retries)
	}
	if res.Failed != 2 || res.Deployed != 1 {
		t.Fatalf("result %+v, want the 2 still failed counted once and level 1 deployed", res)
	}
}

func TestDeployRetryHonoursThrottleDelay(t *testing.T) {
	t.Parallel()
	f := retryFake(90)
	var waits []time.Duration
	if _, err := runWith(t, f, DeployInput{EnvironmentID: "e", EnvironmentName: "env", Run: 1,
		RetryAttempts: 1, RetryBackoffSeconds: 5}, timers(&waits)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(waits, []time.Duration{90 * time.Second}) {
		t.Fatalf("timers %v, want the 90s the target asked for", waits)
	}

	f = retryFake(7200) // capped
	waits = nil
	if _, err := runWith(t, f, DeployInput{EnvironmentID: "e", EnvironmentName: "env", Run: 1,
		RetryAttempts: 1, RetryBackoffSeconds: 5}, timers(&waits)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(waits, []time.Duration{maxRetryDelay}) {
		t.Fatalf("timers %v, want the cap %s", waits, maxRetryDelay)
	}
}

func TestDeployWithoutRetryAttemptsNeverRetries(t *testing.T) {
	t.Parallel()
	f := retryFake(0)
	res, err := run(t, f, DeployInput{EnvironmentID: "e", EnvironmentName: "env", Run: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.retries) != 0 || res.Failed != 2 {
		t.Fatalf("retries %+v, result %+v; want none and 2 failed", f.retries, res)
	}
}

func TestDeployPreemptedWhileWaitingToRetry(t *testing.T) {
	t.Parallel()
	f := retryFake(0)
	res, err := runWith(t, f, DeployInput{EnvironmentID: "e", EnvironmentName: "env", Run: 1,
		RetryAttempts: 2, RetryBackoffSeconds: 60}, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(PreemptSignal, "new intent") }, 30*time.Second)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.retries) != 0 || !res.Preempted || slices.Contains(f.started, 1) {
		t.Fatalf("retries %+v, started %v, result %+v; want a preempted run that neither retried nor went on",
			f.retries, f.started, res)
	}
	if f.finished == nil || f.finished.Status != "preempted" {
		t.Fatalf("finish %+v, want preempted", f.finished)
	}
}
