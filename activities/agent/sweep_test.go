package agent

import (
	"testing"

	"github.com/intendhq/intend/adapters"
)

// TestWakeSweep: a batch of a version the cache holds nothing of, while it
// holds values of another version of the batch's environment, wakes the
// sweep; a batch of a version it holds values of, or of another
// environment, does not.
func TestWakeSweep(t *testing.T) {
	t.Parallel()
	cache := adapters.NewCache()
	defer cache.Close()
	hc := adapters.NewContext(adapters.WithCache(cache), adapters.WithScope(adapters.Scope{Environment: "e", Version: 1}))
	if _, err := adapters.Cached(hc, []any{"session"}, adapters.CacheOptions{ForVersion: true},
		func() (string, error) { return "s", nil }); err != nil {
		t.Fatal(err)
	}
	hc.Close()
	wake := make(chan struct{}, 1)
	e := &Executor{Cache: cache, SweepWake: wake}
	for _, tc := range []struct {
		env     string
		version int64
		want    bool
		why     string
	}{
		{"e", 1, false, "the cache holds this version's values: its deploy is on"},
		{"f", 2, false, "the cache holds nothing of this environment"},
		{"e", 2, true, "a new version: version 1's deploy is likely over"},
		{"e", 2, true, "again, once the first wake was taken"},
	} {
		e.wakeSweep(tc.env, tc.version)
		select {
		case <-wake:
			if !tc.want {
				t.Errorf("%s %d woke the sweep: %s", tc.env, tc.version, tc.why)
			}
		default:
			if tc.want {
				t.Errorf("%s %d did not wake the sweep: %s", tc.env, tc.version, tc.why)
			}
		}
	}
	e.wakeSweep("e", 2)
	e.wakeSweep("e", 2) // does not block on a wake not yet taken
	(&Executor{Cache: cache}).wakeSweep("e", 2)
}
