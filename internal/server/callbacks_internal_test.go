package server

import (
	"testing"
	"time"
)

// TestBackoff: the wait doubles from the minimum to the maximum, each
// between half and all of its step.
func TestBackoff(t *testing.T) {
	t.Parallel()
	for attempt, step := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second,
		9: 256 * time.Second, 10: 5 * time.Minute, 1000: 5 * time.Minute} {
		for range 100 {
			d := backoff(attempt, time.Second, 5*time.Minute)
			if d < step/2 || d > step {
				t.Fatalf("attempt %d: %s, want %s to %s", attempt, d, step/2, step)
			}
		}
	}
}
