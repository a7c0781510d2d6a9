package childproc

import (
	"context"
	"os"
	"time"
)

// Stop ends p, a child whose exit closes exited: it sends sig (or kills p
// when the signal cannot be sent) and waits for the exit. When p has not
// exited after timeout, or once ctx is done, it kills p, waits for the
// exit, and returns false.
func Stop(ctx context.Context, p *os.Process, sig os.Signal, exited <-chan struct{}, timeout time.Duration) bool {
	if err := p.Signal(sig); err != nil {
		_ = p.Kill()
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-exited:
		return true
	case <-ctx.Done():
	case <-timer.C:
	}
	Kill(p, exited)
	return false
}

// Kill ends p at once (SIGKILL) and waits until exited is closed.
func Kill(p *os.Process, exited <-chan struct{}) {
	_ = p.Kill()
	<-exited
}
