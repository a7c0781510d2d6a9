package agent

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/interceptor"
)

// stopGrace bounds how long Stop waits for the activities it cancelled to
// return and be reported.
const stopGrace = 10 * time.Second

// drain lets Stop hand batches over at once: it cancels the running
// activities first, so that each returns (its last chunk unrecorded) and
// the SDK reports it failed while the worker still runs; Temporal then
// retries it on another executor of the agent right away, instead of
// after the heartbeat timeout. A worker stopped on its own cancels its
// activities only as it stops, and their reports are lost when the
// process exits.
type drain struct {
	interceptor.WorkerInterceptorBase

	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
}

func newDrain() *drain {
	d := &drain{}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	return d
}

// stopping cancels the running activities, and those that start later.
func (d *drain) stopping() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cancel()
}

// reset lets activities run again (after a Stop, for a later Serve).
func (d *drain) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ctx, d.cancel = context.WithCancel(context.Background())
}

func (d *drain) done() context.Context {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ctx
}

// InterceptActivity implements interceptor.WorkerInterceptor.
func (d *drain) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &drainActivity{drain: d}
	a.Next = next
	return a
}

type drainActivity struct {
	interceptor.ActivityInboundInterceptorBase
	drain *drain
}

// ExecuteActivity runs the activity with a context that Stop cancels.
func (a *drainActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(a.drain.done(), cancel)()
	return a.Next.ExecuteActivity(ctx, in)
}
