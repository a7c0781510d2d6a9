package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/store/storetest"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/workflows"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// thing is a fake adapter: it keeps resources in a map and misbehaves for
// the names it is told to.
type thing struct {
	mu      sync.Mutex
	state   map[string]string
	calls   map[string]int
	panicOn string
	failOn  string
	// unreachableOn names a resource whose target cannot be reached.
	unreachableOn string
	// skipOn names a resource the adapter skips for now (retry in 90 s).
	skipOn string
	// quietOn names a resource whose create reports it changed nothing.
	quietOn string
}

func (h *thing) Observe(_ context.Context, _ *adapters.Context, r adapters.Resource) (adapters.Observation, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls[r.ID.Value]++
	if r.ID.Value == h.panicOn {
		panic("boom")
	}
	if r.ID.Value == h.failOn {
		return adapters.Observation{}, adapters.Permanent(errors.New("target refuses"))
	}
	if r.ID.Value == h.unreachableOn {
		return adapters.Observation{}, adapters.Unavailable(errors.New("connect to 192.0.2.1:443: connection refused"))
	}
	if r.ID.Value == h.skipOn {
		return adapters.Observation{}, adapters.Skipped(errors.New("the target is in maintenance"), 90*time.Second)
	}
	v, ok := h.state[r.ID.Value]
	if !ok {
		return adapters.Observation{}, nil
	}
	return adapters.Observation{Exists: true, Attributes: map[string]any{"name": r.ID.Value, "v": v}}, nil
}

func (h *thing) Create(_ context.Context, hc *adapters.Context, r adapters.Resource) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.state[r.ID.Value] = r.Attributes["v"].(string)
	hc.Info("created", "name", r.ID.Value)
	if r.ID.Value == h.quietOn {
		hc.SetChanged(false)
	}
	return nil
}

func (h *thing) Update(ctx context.Context, hc *adapters.Context, r adapters.Resource, _ adapters.Diff) error {
	return h.Create(ctx, hc, r)
}

func (h *thing) Delete(_ context.Context, _ *adapters.Context, r adapters.Resource) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.state, r.ID.Value)
	return nil
}

func setup(t *testing.T, n int) (*store.Store, store.Environment, int64, store.Plan) {
	t.Helper()
	return storetest.Released(t, storetest.Things(n))
}

// executor returns an executor that records into st directly, as the
// embedded one does.
func executor(st *store.Store, reg *adapters.Registry, concurrency int) *Executor {
	return &Executor{Ledger: st.Ledger(), Adapters: reg, Concurrency: concurrency}
}

func TestExecuteBatchRecordsEveryOutcome(t *testing.T) {
	t.Parallel()
	st, e, run, plan := setup(t, 250)
	h := &thing{state: map[string]string{}, calls: map[string]int{}, panicOn: "t007", failOn: "t042"}
	reg := adapters.NewRegistry()
	reg.Register("test::Thing", h)
	var logBuf bytes.Buffer // the JSON handler serialises its writes
	ex := &Executor{Ledger: st.Ledger(), Adapters: reg, Concurrency: 8, Log: slog.New(slog.NewJSONHandler(&logBuf, nil))}

	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(ex.ExecuteBatch)
	val, err := env.ExecuteActivity(ex.ExecuteBatch, workflows.BatchInput{
		EnvironmentID: e.ID, EnvironmentName: e.Name, Run: run, Seq: plan.Batches[0].Seq, Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.BatchResult
	if err := val.Get(&res); err != nil {
		t.Fatal(err)
	}
	if res.Deployed != 248 || res.Failed != 2 || res.Changed != 248 || res.Retry != 0 {
		t.Errorf("result = %+v, want 248 deployed (changed), 2 failed, none worth a retry (both permanent)", res)
	}
	// The failures travel with the result, with their error, for the
	// run's current details in the Temporal UI.
	failed := map[string]string{}
	for _, f := range res.Failures {
		failed[f.ID] = f.Result + ": " + f.Error
	}
	if len(res.Failures) != 2 || !strings.Contains(failed["test::Thing[a,name=t007]"], "boom") ||
		!strings.Contains(failed["test::Thing[a,name=t042]"], "target refuses") {
		t.Errorf("failures = %+v, want t007 and t042 failed with their errors", res.Failures)
	}
	// The adapters' log lines are in the executor's log too, with the
	// resource they are about; a panic's stack is there as well.
	executorLog := logBuf.String()
	for _, want := range []string{
		`"msg":"created","resource_id":"test::Thing[a,name=t100]","name":"t100"`,
		`"msg":"attempt failed","resource_id":"test::Thing[a,name=t042]","class":"permanent"`,
		`"msg":"adapter panicked","resource_id":"test::Thing[a,name=t007]"`,
	} {
		if !strings.Contains(executorLog, want) {
			t.Errorf("the executor's log lacks %s", want)
		}
	}
	ctx := context.Background()
	for id, want := range map[string]string{"t007": "adapter panicked: boom", "t042": "target refuses"} {
		rid := "test::Thing[a,name=" + id + "]"
		stt, err := st.GetResource(ctx, e.ID, rid)
		if err != nil {
			t.Fatal(err)
		}
		acts, err := st.ListActions(ctx, e.ID, store.ActionFilter{ResourceID: rid, Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		if stt.LastResult != "failed" || stt.Compliance != "non_compliant" || len(acts) != 1 ||
			acts[0].Error == nil || !strings.Contains(*acts[0].Error, want) ||
			acts[0].ErrorClass == nil || *acts[0].ErrorClass != "permanent" {
			t.Errorf("%s: state %+v, actions %+v; want failed with %q", id, stt, acts, want)
		}
	}
	ok, err := st.GetResource(ctx, e.ID, "test::Thing[a,name=t100]")
	if err != nil || ok.LastResult != "deployed" || ok.Compliance != "compliant" {
		t.Errorf("t100 = %+v, %v", ok, err)
	}
}

// TestExecuteBatchRecordsAnUnreachableTargetUnavailable: a resource whose
// adapter cannot reach its target is unavailable, not failed, in the
// batch's result, its state and its action, and worth a retry in the run.
func TestExecuteBatchRecordsAnUnreachableTargetUnavailable(t *testing.T) {
	t.Parallel()
	st, e, run, plan := setup(t, 10)
	h := &thing{state: map[string]string{}, calls: map[string]int{}, unreachableOn: "t003"}
	reg := adapters.NewRegistry()
	reg.Register("test::Thing", h)
	ex := executor(st, reg, 4)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(ex.ExecuteBatch)
	val, err := env.ExecuteActivity(ex.ExecuteBatch, workflows.BatchInput{
		EnvironmentID: e.ID, EnvironmentName: e.Name, Run: run, Seq: plan.Batches[0].Seq, Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.BatchResult
	if err := val.Get(&res); err != nil {
		t.Fatal(err)
	}
	if res.Deployed != 9 || res.Failed != 0 || res.Unavailable != 1 || res.Retry != 1 ||
		len(res.Failures) != 1 || res.Failures[0].Result != "unavailable" {
		t.Errorf("result = %+v, want 9 deployed, 1 unavailable (not failed) and worth a retry", res)
	}
	ctx := context.Background()
	rid := "test::Thing[a,name=t003]"
	stt, err := st.GetResource(ctx, e.ID, rid)
	if err != nil {
		t.Fatal(err)
	}
	acts, err := st.ListActions(ctx, e.ID, store.ActionFilter{ResourceID: rid, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if stt.LastResult != "unavailable" || len(acts) != 1 || acts[0].Result != "unavailable" ||
		acts[0].ErrorClass == nil || *acts[0].ErrorClass != "unavailable" ||
		acts[0].Error == nil || !strings.Contains(*acts[0].Error, "connection refused") {
		t.Errorf("state %+v, actions %+v; want unavailable, class unavailable, with the error", stt, acts)
	}
}

func TestExecuteBatchResumesAfterRecordedChunks(t *testing.T) {
	t.Parallel()
	st, e, run, plan := setup(t, 250)
	h := &thing{state: map[string]string{}, calls: map[string]int{}}
	reg := adapters.NewRegistry()
	reg.Register("test::Thing", h)
	ex := executor(st, reg, 4)

	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(ex.ExecuteBatch)
	// A previous attempt recorded two chunks (one failed resource among
	// them) before it died, and Temporal heard of the first only (the
	// heartbeat after the second was lost, in an outage): what the batch
	// recorded counts, not the heartbeat.
	seq := plan.Batches[0].Seq
	b, err := st.LoadBatch(context.Background(), e.ID, run, seq)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var earlier []store.ActionRecord
	for i, r := range b.Resources[:200] {
		rec := store.ActionRecord{ResourceID: r.ID, Hash: r.Hash, Version: b.Version, Action: "deploy", Reason: b.Reason,
			StartedAt: now, FinishedAt: now, Result: "deployed", Operation: "create", Changed: true,
			WorkflowID: "default-test-workflow-id", RunID: "earlier", Attempt: 1}
		if i == 150 {
			rec.Result, rec.ErrorClass, rec.Operation, rec.Changed = "failed", "permanent", "", false
		}
		earlier = append(earlier, rec)
	}
	if err := st.Ledger().RecordActions(context.Background(), e.ID, run, seq, earlier, false); err != nil {
		t.Fatal(err)
	}
	env.SetHeartbeatDetails(batchProgress{Done: 100, Result: workflows.BatchResult{Deployed: 100}})
	val, err := env.ExecuteActivity(ex.ExecuteBatch, workflows.BatchInput{
		EnvironmentID: e.ID, EnvironmentName: e.Name, Run: run, Seq: plan.Batches[0].Seq, Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.BatchResult
	if err := val.Get(&res); err != nil {
		t.Fatal(err)
	}
	if len(h.calls) != 50 || h.calls["t199"] != 0 || h.calls["t200"] != 1 {
		t.Errorf("adapter ran %d resources (t199: %d, t200: %d), want only the 50 after the recorded chunks",
			len(h.calls), h.calls["t199"], h.calls["t200"])
	}
	if res.Deployed != 249 || res.Failed != 1 || res.Changed != 249 {
		t.Errorf("result = %+v, want the 200 recorded (one failed) plus 50 deployed", res)
	}
	// Each resource has one record: none doubled.
	acts, err := st.ListActions(context.Background(), e.ID, store.ActionFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != 250 {
		t.Errorf("%d records, want 250", len(acts))
	}
}

// setupChain: t000 ← t001 ← … (each requires the previous one), plus
// the extra resources given.
func setupChain(t *testing.T, n int, extra ...string) (*store.Store, store.Environment, int64, store.Plan) {
	t.Helper()
	rs := make([]string, 0, n+len(extra))
	for i := 0; i < n; i++ {
		req := ""
		if i > 0 {
			req = fmt.Sprintf(`,"requires":["test::Thing[a,name=t%03d]"]`, i-1)
		}
		rs = append(rs, fmt.Sprintf(`{"id":"test::Thing[a,name=t%03d]","attributes":{"name":"t%03d","v":"1"}%s}`, i, i, req))
	}
	return storetest.Released(t, append(rs, extra...))
}

// TestExecuteBatchRunsChainsInOrderAndSkipsAfterAFailure: a chain of 250
// on one agent is one batch (three chunks); it runs in order, and when
// t120 fails, every later link is skipped_for_dependency without its
// adapter being called, across chunk boundaries.
func TestExecuteBatchRunsChainsInOrderAndSkipsAfterAFailure(t *testing.T) {
	t.Parallel()
	st, e, run, plan := setupChain(t, 250, `{"id":"test::Thing[a,name=free]","attributes":{"name":"free","v":"1"}}`)
	if len(plan.Batches) != 1 {
		t.Fatalf("a chain on one agent should be one batch: %+v", plan.Batches)
	}
	h := &thing{state: map[string]string{}, calls: map[string]int{}, failOn: "t120"}
	var order []string
	var mu sync.Mutex
	reg := adapters.NewRegistry()
	reg.Register("test::Thing", recordOrder{h, &mu, &order})
	ex := executor(st, reg, 8)

	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(ex.ExecuteBatch)
	val, err := env.ExecuteActivity(ex.ExecuteBatch, workflows.BatchInput{
		EnvironmentID: e.ID, EnvironmentName: e.Name, Run: run, Seq: 1, Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.BatchResult
	if err := val.Get(&res); err != nil {
		t.Fatal(err)
	}
	if res.Deployed != 121 || res.Failed != 1 || res.Skipped != 129 {
		t.Errorf("result = %+v, want 121 deployed (t000–t119, free), 1 failed (t120), 129 skipped", res)
	}
	last := -1
	for _, name := range order {
		if name == "free" {
			continue
		}
		var i int
		fmt.Sscanf(name, "t%03d", &i)
		if i <= last {
			t.Fatalf("t%03d ran after t%03d", i, last)
		}
		last = i
	}
	if h.calls["t121"] != 0 || h.calls["t249"] != 0 {
		t.Errorf("skipped resources reached the adapter: %v", h.calls)
	}
	ctx := context.Background()
	st249, err := st.GetResource(ctx, e.ID, "test::Thing[a,name=t249]")
	if err != nil || st249.LastResult != "skipped_for_dependency" || st249.Compliance != "non_compliant" {
		t.Errorf("t249 = %+v, %v", st249, err)
	}
	acts, _ := st.ListActions(ctx, e.ID, store.ActionFilter{ResourceID: "test::Thing[a,name=t121]", Limit: 1})
	if len(acts) != 1 || acts[0].Error == nil || !strings.Contains(*acts[0].Error, "t120") {
		t.Errorf("t121's action should name t120: %+v", acts)
	}
}

// recordOrder wraps an adapter and records the order of Create calls.
type recordOrder struct {
	*thing
	mu    *sync.Mutex
	order *[]string
}

func (r recordOrder) Create(ctx context.Context, hc *adapters.Context, res adapters.Resource) error {
	r.mu.Lock()
	*r.order = append(*r.order, res.ID.Value)
	r.mu.Unlock()
	return r.thing.Create(ctx, hc, res)
}

// gate is a fake adapter whose first resource (t000) waits, in Observe,
// until a resource of the batch's second hundred has started.
type gate struct {
	thing
	later chan struct{}
	once  sync.Once
}

func (g *gate) Observe(ctx context.Context, hc *adapters.Context, r adapters.Resource) (adapters.Observation, error) {
	if r.ID.Value >= "t100" {
		g.once.Do(func() { close(g.later) })
	}
	if r.ID.Value == "t000" {
		select {
		case <-g.later:
		case <-time.After(20 * time.Second):
			return adapters.Observation{}, adapters.Permanent(errors.New("no resource after the first hundred started"))
		case <-ctx.Done():
			return adapters.Observation{}, ctx.Err()
		}
	}
	return g.thing.Observe(ctx, hc, r)
}

// TestExecuteBatchRunsPastASlowResource: a batch runs its resources with
// no pause between chunks of records (issue 28): one slow resource holds
// its slot, not the resources after the first hundred (before, each
// chunk of 100 had to finish, and be recorded, before the next started).
func TestExecuteBatchRunsPastASlowResource(t *testing.T) {
	t.Parallel()
	st, e, run, plan := setup(t, 250)
	g := &gate{thing: thing{state: map[string]string{}, calls: map[string]int{}}, later: make(chan struct{})}
	reg := adapters.NewRegistry()
	reg.Register("test::Thing", g)
	ex := executor(st, reg, 8)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(ex.ExecuteBatch)
	val, err := env.ExecuteActivity(ex.ExecuteBatch, workflows.BatchInput{
		EnvironmentID: e.ID, EnvironmentName: e.Name, Run: run, Seq: plan.Batches[0].Seq, Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.BatchResult
	if err := val.Get(&res); err != nil {
		t.Fatal(err)
	}
	if res.Deployed != 250 || res.Failed != 0 {
		t.Errorf("result = %+v, want all 250 deployed (t000 waited for a resource past the first hundred)", res)
	}
	if st := res.Stages; st.Execute <= 0 || st.Record < 0 {
		t.Errorf("stages = %+v, want the run's time and the wait for its last records", st)
	}
}

// counting is an adapter that counts the resources of each agent in
// flight at once (each Observe waits a little) and the most of them.
type counting struct {
	thing
	cmu         sync.Mutex
	now, most   map[string]int
	total, peak int
}

func (c *counting) Observe(ctx context.Context, hc *adapters.Context, r adapters.Resource) (adapters.Observation, error) {
	c.cmu.Lock()
	c.now[r.ID.Agent]++
	c.total++
	c.most[r.ID.Agent] = max(c.most[r.ID.Agent], c.now[r.ID.Agent])
	c.peak = max(c.peak, c.total)
	c.cmu.Unlock()
	time.Sleep(20 * time.Millisecond)
	c.cmu.Lock()
	c.now[r.ID.Agent]--
	c.total--
	c.cmu.Unlock()
	return c.thing.Observe(ctx, hc, r)
}

// TestBatchOfSeveralAgentsBoundsEachAgent: the agents that one executor
// serves share batches (issue 28), and in a batch of several each agent
// runs at most Concurrency resources at once, as in a batch of its own:
// neither one agent past its bound, nor the agents held to one bound.
func TestBatchOfSeveralAgentsBoundsEachAgent(t *testing.T) {
	t.Parallel()
	var rs []string
	for _, a := range []string{"a", "b"} {
		for i := range 30 {
			rs = append(rs, fmt.Sprintf(`{"id":"test::Thing[%s,name=%s%03d]","attributes":{"name":"%s%03d","v":"1"}}`, a, a, i, a, i))
		}
	}
	st, e, run, plan := storetest.ReleasedGrouped(t, rs, func(_ context.Context, agents []string) (map[string]string, error) {
		g := map[string]string{}
		for _, a := range agents {
			g[a] = "executors/shared"
		}
		return g, nil
	})
	if len(plan.Batches) != 1 || !slices.Equal(plan.Batches[0].Agents, []string{"a", "b"}) || plan.Batches[0].Agent != "a" {
		t.Fatalf("batches = %+v, want one of agents a and b", plan.Batches)
	}
	c := &counting{thing: thing{state: map[string]string{}, calls: map[string]int{}}, now: map[string]int{}, most: map[string]int{}}
	reg := adapters.NewRegistry()
	reg.Register("test::Thing", c)
	ex := executor(st, reg, 4)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(ex.ExecuteBatch)
	b := plan.Batches[0]
	val, err := env.ExecuteActivity(ex.ExecuteBatch, workflows.BatchInput{
		EnvironmentID: e.ID, EnvironmentName: e.Name, Run: run, Seq: b.Seq, Agent: b.Agent, Agents: b.Agents})
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.BatchResult
	if err := val.Get(&res); err != nil {
		t.Fatal(err)
	}
	if res.Deployed != 60 {
		t.Errorf("result = %+v, want all 60 deployed", res)
	}
	c.cmu.Lock()
	defer c.cmu.Unlock()
	if c.most["a"] > 4 || c.most["b"] > 4 || c.peak <= 4 {
		t.Errorf("at most %v of one agent and %d in all at once, want at most 4 of each agent, more than 4 in all",
			c.most, c.peak)
	}
}

// TestExecuteBatchRecordsAnAdapterSkipSkipped: a resource whose adapter
// says "skipped, retry later" (adapters.Skipped) is skipped, not failed,
// with its error kept in the action log and class skipped; what requires
// it is skipped for the dependency; the batch asks the run to retry it
// after the delay the adapter asked for (the retry itself:
// store.TestPlanRetryTakesAdapterSkips).
func TestExecuteBatchRecordsAnAdapterSkipSkipped(t *testing.T) {
	t.Parallel()
	st, e, run, plan := storetest.Released(t, []string{
		`{"id":"test::Thing[a,name=t000]","attributes":{"name":"t000","v":"1"}}`,
		`{"id":"test::Thing[a,name=t001]","attributes":{"name":"t001","v":"1"},"requires":["test::Thing[a,name=t000]"]}`,
		`{"id":"test::Thing[a,name=t002]","attributes":{"name":"t002","v":"1"}}`,
	})
	h := &thing{state: map[string]string{}, calls: map[string]int{}, skipOn: "t000"}
	reg := adapters.NewRegistry()
	reg.Register("test::Thing", h)
	ex := executor(st, reg, 4)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(ex.ExecuteBatch)
	val, err := env.ExecuteActivity(ex.ExecuteBatch, workflows.BatchInput{
		EnvironmentID: e.ID, EnvironmentName: e.Name, Run: run, Seq: plan.Batches[0].Seq, Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.BatchResult
	if err := val.Get(&res); err != nil {
		t.Fatal(err)
	}
	if res.Deployed != 1 || res.Failed != 0 || res.Skipped != 2 || res.Retry != 1 || res.RetryAfterSeconds != 90 {
		t.Errorf("result = %+v, want 1 deployed, 2 skipped, none failed, one retry after 90 s", res)
	}
	ctx := context.Background()
	for rid, want := range map[string]string{"test::Thing[a,name=t000]": "skipped", "test::Thing[a,name=t001]": "skipped_for_dependency"} {
		stt, err := st.GetResource(ctx, e.ID, rid)
		if err != nil {
			t.Fatal(err)
		}
		acts, err := st.ListActions(ctx, e.ID, store.ActionFilter{ResourceID: rid, Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		if stt.LastResult != want || len(acts) != 1 || acts[0].Result != want {
			t.Errorf("%s: state %+v, actions %+v; want %s", rid, stt, acts, want)
			continue
		}
		if want == "skipped" && (acts[0].ErrorClass == nil || *acts[0].ErrorClass != "skipped" ||
			acts[0].Error == nil || !strings.Contains(*acts[0].Error, "the target is in maintenance")) {
			t.Errorf("%s: action %+v; want class skipped with the adapter's message", rid, acts[0])
		}
	}
}

// TestExecuteBatchHonoursAnAdapterUnchanged: an adapter that created a
// resource and reported it changed nothing (SetChanged(false)) is
// recorded deployed and unchanged: the batch counts no change, the
// action says so, and no event goes to dependents.
func TestExecuteBatchHonoursAnAdapterUnchanged(t *testing.T) {
	t.Parallel()
	st, e, run, plan := setup(t, 3)
	h := &thing{state: map[string]string{}, calls: map[string]int{}, quietOn: "t001"}
	reg := adapters.NewRegistry()
	reg.Register("test::Thing", h)
	ex := executor(st, reg, 4)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(ex.ExecuteBatch)
	val, err := env.ExecuteActivity(ex.ExecuteBatch, workflows.BatchInput{
		EnvironmentID: e.ID, EnvironmentName: e.Name, Run: run, Seq: plan.Batches[0].Seq, Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.BatchResult
	if err := val.Get(&res); err != nil {
		t.Fatal(err)
	}
	if res.Deployed != 3 || res.Changed != 2 {
		t.Errorf("result = %+v, want 3 deployed, 2 changed", res)
	}
	for name, want := range map[string]bool{"t000": true, "t001": false} {
		stt, err := st.GetResource(context.Background(), e.ID, "test::Thing[a,name="+name+"]")
		if err != nil {
			t.Fatal(err)
		}
		if stt.LastResult != "deployed" || stt.LastProducedChange != want {
			t.Errorf("%s: state %+v; want deployed, produced a change %v", name, stt, want)
		}
	}
}

// TestExecuteBatchLeavesUnmanagedResourcesAlone: a resource the model
// left unmanaged (unmanaged: true) never reaches its adapter (no observe,
// no change, no delete even when purged: the adapter here fails any call
// on them); it is recorded unmanaged in the action log and its state,
// compliant, counted with the deployed, and what requires it deploys. A
// dry-run reports it unmanaged, not a diff.
func TestExecuteBatchLeavesUnmanagedResourcesAlone(t *testing.T) {
	t.Parallel()
	st, e, run, plan := storetest.Released(t, []string{
		`{"id":"test::Thing[a,name=t000]","attributes":{"name":"t000","v":"1"},"unmanaged":true}`,
		`{"id":"test::Thing[a,name=t001]","attributes":{"name":"t001","v":"1"},"requires":["test::Thing[a,name=t000]"]}`,
		`{"id":"test::Thing[a,name=t002]","attributes":{"name":"t002","v":"1"},"unmanaged":true,"purged":true}`,
	})
	h := &thing{state: map[string]string{"t002": "1"}, calls: map[string]int{}, failOn: "t000"}
	reg := adapters.NewRegistry()
	reg.Register("test::Thing", h)
	ex := executor(st, reg, 4)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(ex.ExecuteBatch)
	val, err := env.ExecuteActivity(ex.ExecuteBatch, workflows.BatchInput{
		EnvironmentID: e.ID, EnvironmentName: e.Name, Run: run, Seq: plan.Batches[0].Seq, Agent: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var res workflows.BatchResult
	if err := val.Get(&res); err != nil {
		t.Fatal(err)
	}
	if res.Deployed != 3 || res.Failed != 0 || res.Skipped != 0 || res.Changed != 1 {
		t.Errorf("result = %+v, want 3 deployed (2 of them unmanaged), one change", res)
	}
	if h.calls["t000"] != 0 || h.calls["t002"] != 0 || h.state["t002"] != "1" || h.state["t001"] != "1" {
		t.Errorf("adapter calls %v, target %v; want the unmanaged ones untouched (t002 not deleted), t001 created", h.calls, h.state)
	}
	ctx := context.Background()
	for rid, want := range map[string]string{"test::Thing[a,name=t000]": "unmanaged", "test::Thing[a,name=t001]": "deployed",
		"test::Thing[a,name=t002]": "unmanaged"} {
		stt, err := st.GetResource(ctx, e.ID, rid)
		if err != nil {
			t.Fatal(err)
		}
		acts, err := st.ListActions(ctx, e.ID, store.ActionFilter{ResourceID: rid, Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		if stt.LastResult != want || stt.Compliance != "compliant" || len(acts) != 1 || acts[0].Result != want {
			t.Errorf("%s: state %+v, actions %+v; want %s and compliant", rid, stt, acts, want)
		}
	}

	dr, err := st.CreateDryrun(ctx, e.ID, plan.Version, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dplan, err := st.PlanDeploy(ctx, e.ID, dr.Run, store.BatchLimits{MaxResources: 1000}, store.Caller{})
	if err != nil {
		t.Fatal(err)
	}
	runBatches(t, ex, e, dr.Run, dplan)
	// The test activity environment records every attempt under its own
	// workflow id; the dry-run's are the newest.
	results, err := st.DryrunResults(ctx, e.ID, "default-test-workflow-id", "", 10, store.ShowOutputs)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range results {
		got[r.ResourceID] = r.Status
	}
	if got["test::Thing[a,name=t000]"] != "unmanaged" || got["test::Thing[a,name=t002]"] != "unmanaged" ||
		got["test::Thing[a,name=t001]"] != "unmodified" {
		t.Errorf("dry-run statuses %v; want the unmanaged ones unmanaged", got)
	}
	if h.calls["t000"] != 0 || h.calls["t002"] != 0 {
		t.Errorf("the dry-run called the adapter on unmanaged resources: %v", h.calls)
	}
}
