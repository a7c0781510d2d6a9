package executor_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/internal/executor"
	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestSweepOnceExpiresFinishedVersions: a sweep expires (and closes) the
// values cached for a version no open run deploys, keeps those of a
// version being deployed, and leaves values not bound to a version alone.
func TestSweepOnceExpiresFinishedVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, testenv.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.CreateProject(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	env, err := st.CreateEnvironment(ctx, store.NewEnvironment{Project: "p", Name: "e"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := intent.DecodeBytes([]byte(`{"resources":[{"id":"fs::File[h,path=/f]","attributes":{"path":"/f","content":"x"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.ExportVersion(ctx, env.ID, v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReleaseVersion(ctx, env.ID, info.Version); err != nil {
		t.Fatal(err)
	}
	take, err := st.TakeRequests(ctx, env.ID, "t", nil, false)
	if err != nil || take.Run == nil {
		t.Fatalf("take = %+v, %v", take, err)
	}

	cache := adapters.NewCache()
	defer cache.Close()
	var mu sync.Mutex
	closed := map[string]bool{}
	fill := func(name string, version int64, forVersion bool) {
		t.Helper()
		hc := adapters.NewContext(adapters.WithCache(cache),
			adapters.WithScope(adapters.Scope{Environment: env.ID, Version: version}))
		defer hc.Close()
		_, err := adapters.Cached(hc, []any{name}, adapters.CacheOptions{ForVersion: forVersion,
			Close: func(any) { mu.Lock(); closed[name] = true; mu.Unlock() }},
			func() (string, error) { return name, nil })
		if err != nil {
			t.Fatal(err)
		}
	}
	fill("deploying", info.Version, true)  // the open run deploys it
	fill("finished", info.Version+1, true) // no run deploys it
	fill("plain", info.Version+1, false)   // expires by time only
	closedNow := func() map[string]bool {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]bool{}
		for k, v := range closed {
			out[k] = v
		}
		return out
	}

	if err := executor.SweepOnce(ctx, cache, st); err != nil {
		t.Fatal(err)
	}
	if c := closedNow(); !c["finished"] || c["deploying"] || c["plain"] || cache.Len() != 2 {
		t.Fatalf("after the first sweep: closed %v, %d values left; want only finished closed", c, cache.Len())
	}
	if err := st.FinishRun(ctx, env.ID, take.Run.Run, "done", store.RunCounts{}); err != nil {
		t.Fatal(err)
	}
	if err := executor.SweepOnce(ctx, cache, st); err != nil {
		t.Fatal(err)
	}
	if c := closedNow(); !c["deploying"] || c["plain"] || cache.Len() != 1 {
		t.Fatalf("after the run finished: closed %v, %d values left; want deploying closed, plain kept", c, cache.Len())
	}
}

// TestSweepCacheWakes: a wake runs a sweep at once, not at the next
// period, so the values of a version whose deploy is over (a device's
// NETCONF sessions, which hold one of its few session slots) are closed
// as soon as a batch of another version starts; wakes in a burst cost one
// sweep.
func TestSweepCacheWakes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := &countingRegistry{}
	cache := adapters.NewCache()
	defer cache.Close()
	closed := make(chan struct{})
	hc := adapters.NewContext(adapters.WithCache(cache), adapters.WithScope(adapters.Scope{Environment: "e", Version: 1}))
	if _, err := adapters.Cached(hc, []any{"session"}, adapters.CacheOptions{ForVersion: true, Close: func(any) { close(closed) }},
		func() (string, error) { return "session", nil }); err != nil {
		t.Fatal(err)
	}
	hc.Close()

	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		executor.SweepCache(ctx, cache, reg, time.Hour, nil, wake)
	}()
	for range 3 {
		executor.Wake(wake)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the value of a finished version is still open 10s after a wake (the next period is an hour away)")
	}
	cancel()
	<-done
	if n := reg.calls.Load(); n != 1 {
		t.Errorf("%d sweeps for a burst of 3 wakes, want 1", n)
	}
}

// countingRegistry says no run is open, and counts the questions.
type countingRegistry struct {
	ledger.Registry
	calls atomic.Int64
}

func (r *countingRegistry) OpenRunVersions(context.Context, []string) (map[string]map[int64]bool, error) {
	r.calls.Add(1)
	return map[string]map[int64]bool{}, nil
}
