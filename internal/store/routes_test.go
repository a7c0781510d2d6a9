package store_test

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/names"
	"github.com/intendhq/intend/internal/store"
)

// TestAgentRoutes: where a run sends each agent's batches. A live
// external executor of the agent wins; then the embedded executors, for
// the first EmbeddedLimit agents (by name) their setting serves; then an
// external executor that is not live (it comes back to its queue); then
// the agent's own queue. Live says which a live executor polls.
func TestAgentRoutes(t *testing.T) {
	t.Parallel()
	st, _, conn := open(t)
	e := newEnv(t, st)
	ctx := context.Background()
	body := `{"resources":[`
	for i, a := range []string{"a", "b", "c", "d", "e", "g"} {
		if i > 0 {
			body += ","
		}
		body += fmt.Sprintf(`{"id":"fs::File[%s,path=/%s]","attributes":{"path":"/%s","content":"x"}}`, a, a, a)
	}
	v, err := intent.DecodeBytes([]byte(body + "]}"))
	if err != nil {
		t.Fatal(err)
	}
	startRun(t, st, e.ID, v)
	for _, r := range []store.ExecutorReport{
		{Name: "ext-live", Agents: []string{"d", "a"}, First: true},
		{Name: "ext-quiet", Agents: []string{"e"}, Pool: "p", First: true},
		{Name: "emb", Agents: []string{"a", "b", "c"}, Embedded: true, First: true},
	} {
		if err := st.ReportExecutor(ctx, e.Name, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, `update executors set last_seen = now() - interval '31 seconds' where name = 'ext-quiet'`); err != nil {
		t.Fatal(err)
	}
	agents := []string{"a", "b", "c", "d", "e", "f", "g"}
	pool := names.PoolTaskQueue(e.Name, names.DefaultPool([]string{"a", "d"}))
	emb := names.EmbeddedTaskQueue(e.Name)
	check := func(o store.RouteOptions, queues map[string]string, live map[string]bool) {
		t.Helper()
		got, err := st.AgentRoutes(ctx, e.ID, agents, o)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got.Queues, queues) {
			t.Errorf("%+v: queues %v, want %v", o, got.Queues, queues)
		}
		for a, l := range got.Live {
			if !l {
				delete(got.Live, a)
			}
		}
		if !maps.Equal(got.Live, live) {
			t.Errorf("%+v: live %v, want %v", o, got.Live, live)
		}
	}
	check(store.RouteOptions{Embedded: true, EmbeddedLimit: 3},
		map[string]string{"a": pool, "b": emb, "c": emb, "d": pool, "e": names.PoolTaskQueue(e.Name, "p"),
			"f": names.AgentTaskQueue(e.Name, "f"), "g": names.AgentTaskQueue(e.Name, "g")},
		map[string]bool{"a": true, "b": true, "c": true, "d": true})
	// The limit cuts the embedded executors' agents by name: g is the
	// sixth released agent, the registrations know nothing of it.
	// (e, whose external executor is not live, goes to the embedded
	// executors, which its setting lets serve it.)
	check(store.RouteOptions{Embedded: true, EmbeddedLimit: 6},
		map[string]string{"a": pool, "b": emb, "c": emb, "d": pool, "e": emb,
			"f": names.AgentTaskQueue(e.Name, "f"), "g": emb},
		map[string]bool{"a": true, "b": true, "c": true, "d": true})
	// A server without embedded executors (a replica configured so, or
	// during a rolling change) routes by registrations alone: those of
	// the other replicas' embedded executors too, or their agents' batches
	// would wait in queues nobody polls (TestLSMUpdateLostWithItsTask, a
	// second replica without one, planned a delete's purge so).
	check(store.RouteOptions{},
		map[string]string{"a": pool, "b": emb, "c": emb,
			"d": pool, "e": names.PoolTaskQueue(e.Name, "p"), "f": names.AgentTaskQueue(e.Name, "f"),
			"g": names.AgentTaskQueue(e.Name, "g")},
		map[string]bool{"a": true, "b": true, "c": true, "d": true})
	// An embedded registration that is not live still keeps its agents
	// in the embedded queue, after the external ones.
	if _, err := conn.Exec(ctx, `update executors set last_seen = now() - interval '31 seconds' where name = 'emb'`); err != nil {
		t.Fatal(err)
	}
	check(store.RouteOptions{},
		map[string]string{"a": pool, "b": emb, "c": emb,
			"d": pool, "e": names.PoolTaskQueue(e.Name, "p"), "f": names.AgentTaskQueue(e.Name, "f"),
			"g": names.AgentTaskQueue(e.Name, "g")},
		map[string]bool{"a": true, "d": true})
	// The registrations show the queue each executor polls.
	xs, err := st.ListExecutors(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"emb": emb, "ext-live": pool, "ext-quiet": names.PoolTaskQueue(e.Name, "p")}
	for _, x := range xs {
		if x.TaskQueue != want[x.Name] {
			t.Errorf("executor %s: task queue %q, want %q", x.Name, x.TaskQueue, want[x.Name])
		}
	}
	// A pool name that is not a name is refused.
	if err := st.ReportExecutor(ctx, e.Name, store.ExecutorReport{Name: "bad", Agents: []string{"a"}, Pool: "a/b"}); err == nil {
		t.Error("a registration with pool a/b was accepted")
	}
}
