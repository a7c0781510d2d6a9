package server

import (
	"context"
	"time"

	"go.temporal.io/sdk/worker"

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
// hand (engine.Schedulers.Quiesce); `intend deploy` calls it before
// Shutdown.
func (s *Server) Quiesce(ctx context.Context, env string, max time.Duration) error {
	return s.sched.Quiesce(ctx, env, max)
}
