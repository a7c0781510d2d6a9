// Package wait is the one way tests wait for something to become true:
// instead of a hand-written loop of sleeps against a deadline, a test
// names what it waits for and gives a condition that says why it does
// not hold yet:
//
//	wait.For(t, "order "+id+" to finish", time.Minute, func() error {
//		o = getOrder(t, c, env, id)
//		if o.FinishedAt == nil {
//			return fmt.Errorf("order is %s", o.State)
//		}
//		return nil
//	})
//
// On timeout the test fails naming what it waited for, how long, and the
// last reason the condition gave: a failure says what was still wrong.
//
// It imports the standard library only, so that every package's tests
// (internal/store's included) can use it.
package wait

import (
	"fmt"
	"testing"
	"time"
)

const (
	// firstPause is the first pause between polls; pauses double up to
	// maxPause.
	firstPause = 5 * time.Millisecond
	maxPause   = 200 * time.Millisecond
	// margin is kept before the test binary's deadline (go test
	// -timeout), so that a wait fails with its reason instead of the
	// binary panicking with every goroutine's stack.
	margin = 5 * time.Second
)

// For polls cond until it returns nil, pausing 5 ms after the first poll
// and twice as long after each next one, up to 200 ms. When within has
// passed (or the test binary's deadline is near) it fails t with what
// and cond's last error. cond runs on the test's goroutine: it may call
// t.Fatal itself, to end the wait at once when waiting cannot help (the
// instance reached a state of failure).
func For(t testing.TB, what string, within time.Duration, cond func() error) {
	t.Helper()
	poll(t, what, within, 0, cond)
}

// ForEvery is For polling every interval, with no backoff: for a test
// that must act at a moment (kill a server while requests are in flight)
// and would miss it by a backed-off pause.
func ForEvery(t testing.TB, what string, within, every time.Duration, cond func() error) {
	t.Helper()
	poll(t, what, within, every, cond)
}

// Unless is the reason a condition gives: nil when ok, else the error
// that format and args describe.
//
//	return wait.Unless(len(cbs) == 2, "callbacks %+v", cbs)
func Unless(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf(format, args...)
}

func poll(t testing.TB, what string, within, every time.Duration, cond func() error) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(within)
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, ok := d.Deadline(); ok && end.Add(-margin).Before(deadline) {
			deadline = end.Add(-margin)
		}
	}
	pause := firstPause
	if every > 0 {
		pause = every
	}
	for n := 1; ; n++ {
		err := cond()
		if err == nil {
			return
		}
		if !time.Now().Before(deadline) {
			t.Fatalf("waited %v (%d polls) for %s: %v", time.Since(start).Round(time.Millisecond), n, what, err)
			return
		}
		time.Sleep(min(pause, time.Until(deadline)))
		if every == 0 {
			pause = min(2*pause, maxPause)
		}
	}
}
