package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
)

// keepAlive heartbeats the activity of ctx every third of its heartbeat
// timeout until stop is called (nothing when it has none, or outside an
// activity). With a short HeartbeatTimeout Temporal then tells a worker
// that died holding the activity (killed, crashed, its process gone) from
// one that is merely slow (waiting for a lock, a slow disk), and retries
// the first within seconds instead of after the StartToCloseTimeout.
func keepAlive(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	hb := activity.GetInfo(ctx).HeartbeatTimeout
	if hb <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(hb / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}
