package server

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/worker"

	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/workflows"
)

// orchestrationWorkerOptions are the options of the worker on intend's
// task queue. They keep work from being stranded on a process that is
// gone, which a restarted `intend deploy` or a surviving replica would
// otherwise wait for until a timeout (docs/benchmarks.md, P9):
//
//   - WorkerStopTimeout: Stop lets the tasks in hand finish and report
//     (by default it abandons them at once, and Temporal waits for their
//     timeouts: 10 s for a workflow task, the StartToCloseTimeout for an
//     activity).
//   - DisableEagerActivities: an activity handed back with a completed
//     workflow task is recorded as started by this worker at once; handed
//     to a worker that is stopping (or dies next), it waited for its
//     timeout. Polled from the queue, it waits for whoever polls next.
//   - StickyScheduleToStartTimeout: how long a workflow task waits on the
//     sticky queue of a replica that died without saying so (Stop tells
//     Temporal to drop it) before it goes to the shared queue (5 s by
//     default).
func orchestrationWorkerOptions() worker.Options {
	return worker.Options{
		WorkerStopTimeout:            orchestrationStopGrace,
		DisableEagerActivities:       true,
		StickyScheduleToStartTimeout: workflows.SchedulerTaskTimeout,
	}
}

// orchestrationStopGrace bounds how long Shutdown waits for the
// orchestration worker's tasks in hand: the scheduler's and the runs'
// take milliseconds; a long activity (a compile, an order's items) is
// cancelled after it, and retried after its heartbeat timeout, as before.
const orchestrationStopGrace = 3 * time.Second

// Quiesce waits, at most max, until the scheduler of env has nothing in
// hand: no workflow task, activity or deploy run pending. Called before
// Shutdown by a process that drove the scheduler itself (`intend
// deploy`), it keeps the scheduler's last steps (the look at the queue
// after a run) from being handed to a worker that is stopping, which
// Temporal then only notices at the task's timeout.
func (s *Server) Quiesce(ctx context.Context, env string, max time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, max)
	defer cancel()
	const every = 10 * time.Millisecond
	for {
		d, err := s.temporal.DescribeWorkflowExecution(ctx, workflows.SchedulerWorkflowID(env), "")
		if err != nil {
			return fmt.Errorf("describe scheduler of %s: %w", env, err)
		}
		if idle(d) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("scheduler of %s still busy after %s", env, max)
		case <-time.After(every):
		}
	}
}

// idle reports whether a workflow has no task, activity or child pending.
func idle(d *workflowservice.DescribeWorkflowExecutionResponse) bool {
	return d.GetPendingWorkflowTask() == nil && len(d.GetPendingActivities()) == 0 &&
		len(d.GetPendingChildren()) == 0
}

// renew asks the scheduler of env, once per process, to continue as new
// when it runs with another workflow task timeout than
// workflows.SchedulerTaskTimeout: one started before that was set keeps
// Temporal's 10 s until it continues as new (after some 70 deploys).
func (s *Server) renew(ctx context.Context, env store.Environment) {
	if _, done := s.renewed.LoadOrStore(env.ID, true); done {
		return
	}
	id := workflows.SchedulerWorkflowID(env.Name)
	d, err := s.temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		s.renewed.Delete(env.ID) // the next reconcile tries again
		return
	}
	if d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING ||
		d.GetExecutionConfig().GetDefaultWorkflowTaskTimeout().AsDuration() == workflows.SchedulerTaskTimeout {
		return
	}
	if err := s.temporal.SignalWorkflow(ctx, id, "", workflows.WakeSignal,
		workflows.Wake{Reason: "renew: shorter workflow task timeout", Renew: true}); err != nil {
		s.renewed.Delete(env.ID)
		s.log.Warn("renew the scheduler", "environment", env.Name, "error", err)
	}
}
