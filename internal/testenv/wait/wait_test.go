package wait

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records a failure instead of ending the
// test, so that For's failure can be checked.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

// TestForReturnsOnceTheConditionHolds: For polls until cond returns nil,
// and no longer.
func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	polls := 0
	For(t, "the third poll", 10*time.Second, func() error {
		polls++
		if polls < 3 {
			return fmt.Errorf("poll %d", polls)
		}
		return nil
	})
	if polls != 3 {
		t.Errorf("%d polls, want 3", polls)
	}
}

// TestForFailsWithTheLastReason: on timeout the failure names what was
// waited for and the last reason the condition gave, not the first.
func TestForFailsWithTheLastReason(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	polls := 0
	start := time.Now()
	For(r, "the moon", 100*time.Millisecond, func() error {
		polls++
		return fmt.Errorf("reason %d", polls)
	})
	if took := time.Since(start); took < 100*time.Millisecond || took > 5*time.Second {
		t.Errorf("gave up after %v, want about 100ms", took)
	}
	if polls < 2 {
		t.Errorf("%d polls in 100ms", polls)
	}
	want := fmt.Sprintf("for the moon: reason %d", polls)
	if !strings.Contains(r.failed, want) || !strings.HasPrefix(r.failed, "waited ") {
		t.Errorf("failure %q, want it to contain %q", r.failed, want)
	}
}

// TestForBacksOff: the pauses grow, so a long wait polls a few hundred
// times, not thousands.
func TestForBacksOff(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	polls := 0
	For(r, "nothing", time.Second, func() error { polls++; return errors.New("no") })
	// 5+10+...+160 ms is 315 ms in 6 pauses, then 200 ms pauses: about 10.
	if polls < 5 || polls > 20 {
		t.Errorf("%d polls in a second, want about 10", polls)
	}
}

// TestForEveryDoesNotBackOff: ForEvery polls at its interval all along.
func TestForEveryDoesNotBackOff(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	polls := 0
	ForEvery(r, "nothing", 300*time.Millisecond, 5*time.Millisecond, func() error { polls++; return errors.New("no") })
	if polls < 20 {
		t.Errorf("%d polls in 300ms at 5ms, want dozens", polls)
	}
}

// deadliner is a recorder whose test binary ends soon.
type deadliner struct {
	recorder
	end time.Time
}

func (d *deadliner) Deadline() (time.Time, bool) { return d.end, true }

// TestForHonoursTheTestDeadline: a wait longer than the test binary has
// left fails before the binary's deadline, with its reason.
func TestForHonoursTheTestDeadline(t *testing.T) {
	t.Parallel()
	d := &deadliner{recorder: recorder{TB: t}, end: time.Now().Add(margin + 200*time.Millisecond)}
	start := time.Now()
	For(d, "the end", time.Hour, func() error { return errors.New("not yet") })
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("waited %v with the binary's deadline 200ms past the margin", took)
	}
	if !strings.Contains(d.failed, "for the end: not yet") {
		t.Errorf("failure %q", d.failed)
	}
}

// TestUnless: nil when ok, the described reason otherwise.
func TestUnless(t *testing.T) {
	t.Parallel()
	if err := Unless(true, "never %d", 1); err != nil {
		t.Errorf("Unless(true) = %v", err)
	}
	if err := Unless(false, "pending %d", 2); err == nil || err.Error() != "pending 2" {
		t.Errorf("Unless(false) = %v", err)
	}
}
