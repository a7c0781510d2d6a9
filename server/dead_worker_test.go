package server_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	apiclient "github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
	"github.com/intendhq/intend/workflows"
)

// TestReleaseAfterDeadWorker is the late pickup of issue 15 (P9): a
// process died holding the scheduler's workflow task or its activity (an
// `intend deploy` killed just after it reported done), and the next
// process's release waited for Temporal's timeout before its run started:
// 10 s for a workflow task, a minute for the activity. The scheduler's
// task timeout is short now and its activities heartbeat, so the release
// after such a death starts its run within seconds.
func TestReleaseAfterDeadWorker(t *testing.T) {
	for _, tc := range []struct {
		name string
		hold func(t *testing.T, c client.Client, namespace, workflowID string)
		// limit bounds the release's deploy; Temporal's defaults took
		// 8-10 s (workflow task) and about 60 s (activity).
		limit time.Duration
	}{
		{"workflow task", holdWorkflowTask, workflows.SchedulerTaskTimeout + 3*time.Second},
		{"activity", holdActivity, workflows.OrchestrationHeartbeat + 4*time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			took := releaseAfterDeath(t, tc.hold)
			if took > tc.limit {
				t.Errorf("the release after a dead worker took %s to deploy, want at most %s", took.Round(time.Millisecond), tc.limit)
			}
			t.Logf("release after a dead worker deployed in %s", took.Round(time.Millisecond))
		})
	}
}

// releaseAfterDeath deploys with one server, stops it, lets hold take the
// scheduler's next step and die with it, then starts another server on
// the same database and returns how long its release of a change took
// to deploy.
func releaseAfterDeath(t *testing.T, hold func(*testing.T, client.Client, string, string)) time.Duration {
	t.Helper()
	tc, hostPort, namespace := testenv.Temporal(t)
	db := testenv.Database(t)
	ctx := context.Background()
	first, c := firstServer(t, hostPort, namespace, db)
	env := servertest.NewEnvironment(t, c, "dead", nil)
	path := filepath.Join(t.TempDir(), "f")
	deploy(t, c, env, body(t, file(path, "1\n", "0644")))
	if err := first.Quiesce(ctx, env, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	first.Shutdown(ctx)

	hold(t, tc, namespace, workflows.SchedulerWorkflowID(env))

	c, _, _ = startValidated(t, server.Config{DatabaseURL: db, EmbeddedExecutor: true})
	began := time.Now()
	run := deploy(t, c, env, body(t, file(path, "2\n", "0644")))
	took := time.Since(began)
	if run.Deployed != 1 {
		t.Fatalf("run = %+v, want 1 deployed", run)
	}
	return took
}

// holdWorkflowTask wakes the scheduler and takes its workflow task as a
// worker would, and never answers it.
func holdWorkflowTask(t *testing.T, c client.Client, namespace, workflowID string) {
	t.Helper()
	wake(t, c, workflowID)
	hold(t, workflowID, func(ctx context.Context) (*commonpb.WorkflowExecution, error) {
		resp, err := c.WorkflowService().PollWorkflowTaskQueue(ctx, &workflowservice.PollWorkflowTaskQueueRequest{
			Namespace: namespace, Identity: "a worker that dies", TaskQueue: intendQueue(),
		})
		return resp.GetWorkflowExecution(), err
	})
}

// holdActivity wakes the scheduler, lets a worker without activities run
// its workflow task, and takes the activity it schedules (TakeRequests)
// as a worker would, and never answers it.
func holdActivity(t *testing.T, c client.Client, namespace, workflowID string) {
	t.Helper()
	w := worker.New(c, workflows.TaskQueue, worker.Options{LocalActivityWorkerOnly: true})
	workflows.Register(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	wake(t, c, workflowID)
	hold(t, workflowID, func(ctx context.Context) (*commonpb.WorkflowExecution, error) {
		resp, err := c.WorkflowService().PollActivityTaskQueue(ctx, &workflowservice.PollActivityTaskQueueRequest{
			Namespace: namespace, Identity: "a worker that dies", TaskQueue: intendQueue(),
		})
		return resp.GetWorkflowExecution(), err
	})
}

// hold polls until it has a task of workflowID. Tasks of other workflows
// (left by earlier tests on the shared dev server) are held as well.
func hold(t *testing.T, workflowID string, poll func(context.Context) (*commonpb.WorkflowExecution, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		we, err := poll(ctx)
		if err != nil {
			t.Fatalf("poll a task of %s: %v", workflowID, err)
		}
		if we.GetWorkflowId() == workflowID {
			return
		}
	}
}

func wake(t *testing.T, c client.Client, workflowID string) {
	t.Helper()
	if err := c.SignalWorkflow(context.Background(), workflowID, "", workflows.WakeSignal,
		workflows.Wake{Reason: "test"}); err != nil {
		t.Fatal(err)
	}
}

func intendQueue() *taskqueuepb.TaskQueue {
	return &taskqueuepb.TaskQueue{Name: workflows.TaskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL}
}

// firstServer starts a server that the test shuts down itself (the
// process that dies or stops before the next one starts).
func firstServer(t *testing.T, hostPort, namespace, db string) (*server.Server, *apiclient.Client) {
	t.Helper()
	s, err := server.Start(context.Background(), server.Config{Listen: "127.0.0.1:0", DatabaseURL: db,
		TemporalAddress: hostPort, TemporalNamespace: namespace, EmbeddedExecutor: true, ExecutorUser: servertest.CurrentUser(t),
		BootstrapToken: servertest.AdminToken, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c := apiclient.New(s.URL())
	c.Token = servertest.AdminToken
	return s, c
}

// TestOldSchedulerRenewed: a scheduler started before its workflow task
// timeout was set (Temporal's 10 s) continues as new with the short one
// once a server starts.
func TestOldSchedulerRenewed(t *testing.T) {
	tc, hostPort, namespace := testenv.Temporal(t)
	db := testenv.Database(t)
	ctx := context.Background()
	first, c := firstServer(t, hostPort, namespace, db)
	env := servertest.NewEnvironment(t, c, "renew", nil)
	e, err := first.Store().GetEnvironment(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	first.Shutdown(ctx)
	id := workflows.SchedulerWorkflowID(env)
	_ = tc.TerminateWorkflow(ctx, id, "", "replaced by an old-style scheduler")
	if _, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue},
		workflows.SchedulerWorkflowName, workflows.SchedulerInput{EnvironmentID: e.ID, EnvironmentName: env}); err != nil {
		t.Fatal(err)
	}

	startValidated(t, server.Config{DatabaseURL: db, EmbeddedExecutor: true, ReconcileEvery: time.Second})
	wait.For(t, "the scheduler to run with its workflow task timeout", 20*time.Second, func() error {
		d, err := tc.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		got := d.GetExecutionConfig().GetDefaultWorkflowTaskTimeout().AsDuration()
		return wait.Unless(got == workflows.SchedulerTaskTimeout,
			"the scheduler's workflow task timeout is still %s, want %s", got, workflows.SchedulerTaskTimeout)
	})
}
