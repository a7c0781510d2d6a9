package executor_test

import (
	"context"
	"sync"
	"testing"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/internal/executor"
	"github.com/intendhq/intend/internal/intent"
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
